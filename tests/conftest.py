pytest_plugins = [
    "tests.kubeapi.fixtures",
    "tests.gitfixtures",
    "tests.serverbuilds",
    "tests.controlplane.fixtures",
]
