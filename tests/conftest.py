import pytest

# The helpers test modules share (tests/helpers/) assert as test modules do.
pytest.register_assert_rewrite("tests.helpers")

from tests.session.order import MARKERS, session_order  # noqa: E402

pytest_plugins = [
    "tests.builds.hostsetup",  # first: the machine is set up before any build
    "tests.session.checkoutguard",  # a test that reads outside the checkout fails
    "tests.helpers.corpus",  # where the example manifests are; says if the external are not
    "tests.kubeapi.fixtures",
    "tests.gitrepos.fixtures",
    "tests.builds.servers",
    "tests.ecosystem.fixtures",
    "tests.gitea.fixtures",
    "tests.controlplane.fixtures",
    "tests.helpers.recordedrun",  # the real node's recorded training, shared
    "tests.session.workergroups",
    "tests.session.timeline",  # MXGITOPS_TEST_TIMELINE=FILE: where the wall time goes
    "tests.helpers.browser",  # the dashboard's browser: a real headless Chromium
]


def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    # The tests make and hash jobs without the CLI, whose group installs the runtimes'
    # hash shapes: this session is their entry point.
    from mxgitops.runtimes.registry import install_hash_shapes

    install_hash_shapes()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """After the plugins' deselections: the session's order (``tests/session/order.py``)."""
    items[:] = session_order(items)
