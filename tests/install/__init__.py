"""Tests of mxgitops/install/: install and uninstall, the packaged base, the release image."""
