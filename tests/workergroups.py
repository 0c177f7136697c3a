"""Which tests must run on one pytest-xdist worker, in their order.

The suite runs on two workers (``-n 2 --dist loadgroup`` in ``pyproject.toml``); each
worker is a pytest session of its own, with its own session-scoped fixtures. Most
servers are cheap to have twice (a control plane starts in about 5 s, on free ports),
so their tests spread over both workers. A few are not:

* the real node (``real_node``): a second control plane, a node network, containerd
  and the CronJob installed by the session's first test and checked by its last
  (``tests/sessionorder.py``): one per run, and its tests in the session's order;
* JobSet and Kueue (``ecosystem_session``): a control plane with two controllers and
  their webhooks, 15 s to start and more to settle;
* Kubeflow's training operator (``training_operator``) and the module-scoped servers
  (Gitea, the Pushgateway): started once for their tests, not once a worker.

A test that uses one of these fixtures gets the ``xdist_group`` of the first that
applies; xdist's ``loadgroup`` sends a group to one worker as one unit, in the order
the tests were collected (``--no-loadscope-reorder``: the node's group, holding the
session's first test, is handed out first).

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

# fixture -> group, in order of precedence (a test on the real node with JobSet and
# Kueue is the node's)
GROUPS: dict[str, str] = {
    "real_node": "node",
    "ecosystem_session": "ecosystem",
    "training_operator": "kubeflow",
    "gitea": "gitea",
    "gateway": "pushgateway",
}


def group_of(fixturenames: Iterable[str]) -> str | None:
    """The worker group of a test that uses ``fixturenames`` (its whole closure), or
    None when it may run on any worker."""
    used = set(fixturenames)
    return next((group for fixture, group in GROUPS.items() if fixture in used), None)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Marked as each test is collected, before any ``pytest_collection_modifyitems``
    (xdist's reads the marks there: its hook runs before a conftest's ``tryfirst``)."""
    group = group_of(getattr(item, "fixturenames", ()))
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))
