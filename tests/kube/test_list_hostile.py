"""An API server that misbehaves on a LIST (issue 24): a body that never ends, items
that never end, a `continue` token given again and again, 410 on every continued page,
an item nested 2,000 levels deep, an item without metadata. Each ends the call within
its bounds as a one-line cluster error (exit 4), before anything is written.

The faults are the API double's own (tests/kubeapi/faults.py), written alike by the
double and by the real control plane's proxy, so each test runs on both backends.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.errors import ClusterError, ClusterUnreachable
from mxgitops.kube import cluster, listing
from tests.helpers.sync import mxjob, sync_args, write
from tests.kubeapi.harness import KubeAPI

TIMEOUT = 2.0


def lists(api: KubeAPI, resource: str = "jobs") -> list[dict[str, object]]:
    """The LISTs of `resource` (those of Services and pods are made at the same time)."""
    return [e for e in api.request_log if e["verb"] == "list" and e["resource"] == resource]


def test_a_list_body_that_never_ends_is_read_no_longer_than_the_timeout(
    kubeapi: KubeAPI,
) -> None:
    """A space now and then: no socket read ever waits long, the call must still end."""
    kubeapi.faults("list/jobs:trickle=1")
    api = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=TIMEOUT)
    started = time.monotonic()
    with pytest.raises(
        ClusterUnreachable, match=r"did not answer GET /apis/batch/v1/jobs within 2 s"
    ):
        api.list_live("a=b")
    assert time.monotonic() - started < TIMEOUT + 1.5


def test_items_that_never_end_are_not_kept_without_bound(kubeapi: KubeAPI) -> None:
    """A page holds at most the items asked for (`limit`): more is the server's fault."""
    kubeapi.faults("list/jobs:endless=1")
    api = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=30)
    api.page_size = 500
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"more than the 500 items asked for"):
        api.list_live("a=b")
    assert time.monotonic() - started < 10


def test_a_continue_token_given_again_ends_the_list(kubeapi: KubeAPI) -> None:
    kubeapi.faults("list/jobs:loop=1")
    api = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=TIMEOUT)
    with pytest.raises(ClusterError, match=r"the same continue token again"):
        api.list_live("a=b")
    assert len(lists(kubeapi)) == 2


def test_a_continuation_expiring_every_time_is_given_up(kubeapi: KubeAPI) -> None:
    kubeapi.faults("list/jobs:expire=1")
    api = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=TIMEOUT)
    with pytest.raises(ClusterError, match=r"expired .* times"):
        api.list_live("a=b")
    assert len(lists(kubeapi)) == 2 * (listing.LIST_RESTARTS + 1)


@pytest.mark.parametrize(
    ("fault", "said"),
    [("deep", "nested deeper than"), ("nometa", "without metadata")],
)
def test_a_list_item_the_server_got_wrong_is_a_cluster_error_before_any_write(
    kubeapi: KubeAPI, tmp_path: Path, fault: str, said: str
) -> None:
    repo = write(tmp_path / "repo", mxjob("a", servers=0))
    kubeapi.faults(f"list/jobs:{fault}=1")
    result = CliRunner().invoke(main, sync_args(kubeapi, repo, "--request-timeout", "10"))
    assert result.exit_code == ExitCode.CLUSTER, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and said in line, line
    assert "/apis/batch/v1/jobs" in line
    writes = [e for e in kubeapi.request_log if e["method"] not in ("GET",)]
    assert not writes, writes
