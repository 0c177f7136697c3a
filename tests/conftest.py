pytest_plugins = [
    "tests.kubeapi.fixtures",
    "tests.gitfixtures",
    "tests.serverbuilds",
    "tests.ecosystem.fixtures",
    "tests.controlplane.fixtures",
]
