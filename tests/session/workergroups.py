"""Which tests must run on one pytest-xdist worker, in their order.

The suite runs on three workers (``-n 3 --dist loadgroup`` in ``pyproject.toml``); each
worker is a pytest session of its own, with its own session-scoped fixtures. Most
servers are cheap to have twice (a control plane starts in about 5 s, on free ports),
so their tests spread over the workers. A few are not:

* the real node (``real_node``): a second control plane, a node network, containerd
  and the CronJob installed by the session's first test and checked by its last
  (``tests/session/order.py``): one per run, and its tests in the session's order;
* JobSet and Kueue (``ecosystem_session``): a control plane with two controllers and
  their webhooks, 15 s to start and more to settle;
* the MultiKueue manager and its workers (``multikueue_clusters``; ``multikueue_node``
  with a real node, a group of its own): three (two) control planes with their
  controllers, started once for the tests of one module; the two groups may run at
  once, on two workers, instead of one module after the other on one;
* Kubeflow's training operator (``training_operator``) and the module-scoped servers
  (Gitea, the Pushgateway): started once for their tests, not once a worker.

A test that uses one of these fixtures gets the ``xdist_group`` of the first that
applies; xdist's ``loadgroup`` sends a group to one worker as one unit. The node's
group (holding the session's first test) and the longest groups are handed out first
(``FIRST_GROUPS``), the other units in the order the tests were collected
(``--no-loadscope-reorder``).

The session's last test (``last_in_session``: the CronJob's runs, due up to ten
minutes after the first test installed it) is a unit of its own, ``<group>.last``:
:class:`LastUnitScheduling` hands it to the worker that ran its group, once every
other unit is handed out, so that the worker runs other tests while the CronJob's
runs come instead of waiting for them.

A group's session-scoped servers that nothing after the group needs
(``STOPPED_AFTER_GROUP``) are stopped as soon as the worker's next test does not use
them, not at the end of the worker's session: idle beside the rest of the suite, a
control plane with its controllers and node still takes CPU the other tests wait for
(the real node stays: the session's last test checks it).

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

from tests.session.order import LAST

LAST_UNIT = ".last"
# fixture -> group, in order of precedence (a test on the real node with JobSet and
# Kueue is the node's)
GROUPS: dict[str, str] = {
    "real_node": "node",
    "fault_node": "faults",  # its own node, broken on purpose (tests/faults/)
    "faults_plane": "faults",  # a control plane of its own, killed on purpose (tests/faults/)
    "ecosystem_session": "ecosystem",
    "multikueue_clusters": "multikueue",
    "multikueue_node": "multikueue-node",
    "training_operator": "kubeflow",
    "gitea": "gitea",
    "gateway": "pushgateway",
    "browser": "browser",  # one Chromium for the dashboard's browser tests
}


# Session-scoped fixtures of one group each, stopped after the worker's last test that
# uses one (see the module docstring); a later test that needs one again starts it anew.
STOPPED_AFTER_GROUP = ("fault_node", "ecosystem_session", "training_operator")


def group_of(fixturenames: Iterable[str]) -> str | None:
    """The worker group of a test that uses ``fixturenames`` (its whole closure), or
    None when it may run on any worker."""
    used = set(fixturenames)
    return next((group for fixture, group in GROUPS.items() if fixture in used), None)


def unit_of(item: pytest.Item) -> str | None:
    """The xdist group of a collected test: its group, ``<group>.last`` for the
    session's last test."""
    group = group_of(getattr(item, "fixturenames", ()))
    if group is not None and item.get_closest_marker(LAST) is not None:
        return group + LAST_UNIT
    return group


def pytest_itemcollected(item: pytest.Item) -> None:
    """Marked as each test is collected, before any ``pytest_collection_modifyitems``
    (xdist's reads the marks there: its hook runs before a conftest's ``tryfirst``)."""
    unit = unit_of(item)
    if unit is not None:
        item.add_marker(pytest.mark.xdist_group(unit))


# The groups handed out before any other unit, in this order: the node's first (its
# first test installs the CronJob whose runs the session's last test checks), then the
# longest (on CI about 190 s for the MultiKueue module, 300 s for the fault suite,
# 140 s for JobSet and Kueue, 110 s for the real node's MultiKueue, 100 s for the
# training operator; MXGITOPS_TEST_TIMELINE shows them): a long group handed out late
# ends the run alone on its worker while the others have nothing left to do.
FIRST_GROUPS = ("node", "multikueue", "faults", "ecosystem", "multikueue-node", "kubeflow")


def _rank(scope: str) -> int:
    return FIRST_GROUPS.index(scope) if scope in FIRST_GROUPS else len(FIRST_GROUPS)


class LastUnitScheduling(LoadGroupScheduling):
    """``loadgroup``, but the ``FIRST_GROUPS`` first, in their order, and a
    ``<group>.last`` unit to the worker that ran ``<group>``, once it is all that is
    left to hand out."""

    def _assign_work_unit(self, node: WorkerController) -> None:
        takeable = [s for s in self.workqueue if self._may_take(node, s)]
        scope = min(takeable, key=_rank, default=None)  # the first of the lowest rank
        if scope is None:  # what is left is another worker's
            node.shutdown()
            return
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _may_take(self, node: WorkerController, scope: str) -> bool:
        if not scope.endswith(LAST_UNIT):
            return True
        if any(not s.endswith(LAST_UNIT) for s in self.workqueue):
            return False
        group = scope.removesuffix(LAST_UNIT)
        owners = [n for n, scopes in self.assigned_work.items() if group in scopes]
        return not owners or node in owners


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LastUnitScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return LastUnitScheduling(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """After ``item``'s own teardown: its group's servers the next test does not use."""
    yield
    if nextitem is None or not isinstance(item, pytest.Function):
        return  # the session's end stops everything anyway
    needed = set(nextitem.fixturenames if isinstance(nextitem, pytest.Function) else ())
    # pytest keeps a session fixture's definition, and how to finish it, on the item
    # (private, but what pytest itself calls at a scope's end; pytest is pinned).
    for name in STOPPED_AFTER_GROUP:
        if name not in needed:
            for definition in item._fixtureinfo.name2fixturedefs.get(name, ()):
                # (finish reads only the request's node)
                definition.finish(item._request)  # type: ignore[arg-type]
