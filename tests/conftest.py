pytest_plugins = ["tests.kubeapi.fixtures", "tests.gitfixtures", "tests.controlplane.fixtures"]
