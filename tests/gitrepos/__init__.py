"""Git repositories for the tests: bare remotes, servers, fixtures."""
