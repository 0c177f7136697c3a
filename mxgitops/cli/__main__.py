"""`python -m mxgitops.cli`: the console script without installing it."""

from mxgitops.cli import main

main(prog_name="mxgitops")
