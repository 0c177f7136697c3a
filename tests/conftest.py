import pytest

# The helpers test modules share (tests/helpers/) assert as test modules do.
pytest.register_assert_rewrite("tests.helpers")

from tests.sessionorder import MARKERS, session_order  # noqa: E402

pytest_plugins = [
    "tests.hostsetup",  # first: the machine is set up before any build
    "tests.checkoutguard",  # a test that reads outside the checkout fails
    "tests.helpers.corpus",  # where the example manifests are; says if the external are not
    "tests.kubeapi.fixtures",
    "tests.gitfixtures",
    "tests.serverbuilds",
    "tests.ecosystem.fixtures",
    "tests.gitea.fixtures",
    "tests.controlplane.fixtures",
    "tests.workergroups",
]


def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """After the plugins' deselections: the session's order (``tests/sessionorder.py``)."""
    items[:] = session_order(items)
