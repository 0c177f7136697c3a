"""No request hangs the sync: timeouts on every API call, and SIGTERM honoured at once.

The API double's `hang` fault accepts a request and never answers it (until the
double stops). A sync against it must end with exit 4 within its
--request-timeout, and a SIGTERM while writes hang must stop the process within
a few seconds, with the Lease released. The SIGTERM tests run the real CLI in a
subprocess, as a CronJob's pod would. On the real control plane the same faults
come from its proxy; either backend's request log says when a request hangs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mxgitops import errors as mxgitops_errors
from mxgitops import objects
from mxgitops.cli import main
from mxgitops.errors import ClusterError, ClusterUnreachable, LeaseLostError
from mxgitops.kube import calls as kubecalls
from mxgitops.kube import cluster, lease
from mxgitops.objects import Create, KubeObject
from tests.helpers.sync import INSTANCE, NS, mxjob, sync_args, write
from tests.kubeapi.harness import KubeAPI

TIMEOUT = 0.3


def wait_for_a_hang(api: KubeAPI, timeout: float = 60) -> None:
    """Until a request is hanging, as the request log of either backend tells."""
    deadline = time.monotonic() + timeout
    while not any(e["fault"] == "hang" for e in api.request_log):
        assert time.monotonic() < deadline, "no request reached the hang fault"
        time.sleep(0.01)


def test_a_call_to_an_api_server_that_never_answers_fails_within_the_timeout(
    kubeapi: KubeAPI,
) -> None:
    kubeapi.faults("*:hang=1")
    api = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=TIMEOUT)
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=r"did not answer GET .* within 0.3 s"):
        api.list_live("a=b")
    assert time.monotonic() - started < TIMEOUT + 1.5
    # The batch Jobs' LIST, and those of Services and pods made at once: each hangs once.
    hung = [(e["resource"], e["fault"]) for e in kubeapi.request_log]
    assert ("jobs", "hang") in hung and {f for _, f in hung} == {"hang"} and len(hung) <= 3


def test_retries_stop_at_the_deadline(kubeapi: KubeAPI) -> None:
    """A server that keeps failing is given up on when the next retry would start too
    late, however many attempts the policy allows."""
    kubeapi.faults("*:503=1")
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    api = cluster.connect(
        kubeconfig=kubeapi.kubeconfig,
        retry=kubecalls.RetryPolicy(attempts=100, base_delay=1, max_delay=1),
        sleep=sleep,
        request_timeout=5,
    )
    api.clock = lambda: now[0]
    with pytest.raises(mxgitops_errors.ClusterServerError):
        api.get(objects.ObjectRef(objects.Kind.LEASE, NS, "x"))
    assert sum(sleeps) < 5
    assert len(kubeapi.request_log) == len(sleeps) + 1 == 5


def test_sync_against_a_hung_api_server_exits_4_within_the_timeout(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    repo = write(tmp_path / "repo", mxjob("resnet"))
    kubeapi.faults("*:hang=1")
    started = time.monotonic()
    result = CliRunner().invoke(main, sync_args(kubeapi, repo, "--request-timeout", str(TIMEOUT)))
    elapsed = time.monotonic() - started
    assert result.exit_code == 4, result.output
    assert "did not answer" in result.output and "--request-timeout" in result.output
    assert elapsed < TIMEOUT + 2
    print(f"\nhung API: sync exited 4 after {elapsed:.2f} s (--request-timeout {TIMEOUT})")


@pytest.mark.parametrize("value", ["0", "-1", "3601", "soon"])
def test_a_request_timeout_out_of_bounds_is_a_usage_error(
    kubeapi: KubeAPI, tmp_path: Path, value: str
) -> None:
    repo = write(tmp_path / "repo", mxjob("resnet"))
    result = CliRunner().invoke(main, sync_args(kubeapi, repo, "--request-timeout", value))
    assert result.exit_code == 2, result.output
    assert "--request-timeout" in result.output


@pytest.mark.parametrize(
    ("fault", "parallelism", "lease_held"),
    [
        ("create/jobs:hang=1", 1, True),  # a write in flight on the main thread
        ("create/jobs:hang=1", 4, True),  # writes in flight on the writer threads
        ("create/leases:hang=1", 4, False),  # taking the Lease
        ("list/configmaps:hang=1", 4, False),  # reading the cluster
    ],
)
def test_sigterm_stops_at_once_whatever_is_in_flight_and_releases_the_lease(
    kubeapi: KubeAPI, tmp_path: Path, fault: str, parallelism: int, lease_held: bool
) -> None:
    repo = write(tmp_path / "repo", mxjob("resnet", servers=2, workers=3))
    kubeapi.faults(fault)
    args = sync_args(kubeapi, repo, "--parallelism", str(parallelism))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXGITOPS_")}
    env["MXGITOPS_CACHE_DIR"] = str(tmp_path / "cache")
    process = subprocess.Popen(
        [sys.executable, "-c", "from mxgitops.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for_a_hang(kubeapi)
        held = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
        assert (held is not None and bool(held["spec"].get("holderIdentity"))) is lease_held
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
        elapsed = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert elapsed < 5
    assert "interrupted by SIGTERM" in stderr
    if lease_held:  # stopped in the apply: how far it got
        assert re.search(r"lease released, \d+ of \d+ writes done; the next sync", stderr)
    assert len([line for line in stderr.splitlines() if line.strip()]) == 1, stderr
    stored = kubeapi.get("Lease", f"mxgitops-{INSTANCE}", NS)
    assert stored is None or not stored["spec"].get("holderIdentity")
    # Stopped in its apply, the sync says its writes are not recorded: the next reads again.
    marked = stored is not None and lease.UNRECORDED in stored["metadata"].get("annotations", {})
    assert marked is lease_held
    print(f"\nSIGTERM ({fault}, parallelism {parallelism}): exit in {elapsed:.2f} s")


def test_a_sigterm_while_taking_the_lease_gives_it_back() -> None:
    """The server made the Lease ours, then SIGTERM came before its answer did."""
    from tests.helpers.lease import REF, FakeLeases

    class Interrupted(FakeLeases):
        def create_strict(self, obj: KubeObject) -> KubeObject:
            super().create_strict(obj)
            raise SystemExit(128 + signal.SIGTERM)

    api = Interrupted()
    with (
        pytest.raises(SystemExit),
        lease.held(api, instance="t1", namespace="ml", holder="me/1"),
    ):
        pytest.fail("the body runs only under a Lease known to be ours")
    stored = api.get(REF)
    assert stored is not None and stored["spec"]["holderIdentity"] is None


def test_hung_requests_are_released_when_the_faults_change(kubeapi: KubeAPI) -> None:
    """The `hang` fault itself: configure() lets hung requests go, unanswered."""
    kubeapi.faults("get:hang=1")
    api = cluster.connect(
        kubeconfig=kubeapi.kubeconfig,
        retry=kubecalls.RetryPolicy(attempts=1),
        request_timeout=60,
    )
    errors: list[Exception] = []

    def call() -> None:
        try:
            api.get(objects.ObjectRef(objects.Kind.LEASE, NS, "x"))
        except Exception as exc:  # the unanswered request's error, checked below
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    wait_for_a_hang(kubeapi)
    kubeapi.faults("")
    caller.join(timeout=30)
    assert not caller.is_alive()
    assert [type(e) for e in errors] == [ClusterUnreachable]
    assert [(e["fault"], e["dropped"]) for e in kubeapi.request_log] == [("hang", True)]


def test_writes_end_at_the_leases_renew_deadline_whatever_the_request_timeout(
    kubeapi: KubeAPI,
) -> None:
    """A sync whose Lease was not renewed by its renew deadline (etcd gone: every write
    hangs) gives up the write in flight then, not after --request-timeout, and sends no
    other: another sync may hold the Lease next. Reads go on."""
    kubeapi.faults("create:hang=1")
    api = cluster.connect(kubeconfig=kubeapi.kubeconfig, request_timeout=60, parallelism=1)
    api.fence.hold(api.fence.clock(), 0.5, "the Lease ml/mxgitops-x")
    started = time.monotonic()
    (hung, after) = api.write([Create(config_map("a")), Create(config_map("b"))])
    assert time.monotonic() - started < 0.5 + 1.5
    assert isinstance(hung.error, LeaseLostError) and isinstance(after.error, ClusterError)
    said = "lost the Lease ml/mxgitops-x: not renewed within 0.5 s (no answer to POST /api/v1/"
    assert str(hung.error).startswith(said), hung.error
    kubeapi.faults("")
    assert api.get(objects.ObjectRef(objects.Kind.CONFIG_MAP, NS, "a")) is None
    assert [(e["method"], e["fault"]) for e in kubeapi.request_log] == [
        ("POST", "hang"),
        ("GET", None),
    ]


def config_map(name: str) -> KubeObject:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}}
