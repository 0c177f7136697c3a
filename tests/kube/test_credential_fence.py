"""A credential refresh never lets a write out past the Lease, and never hangs a sync.

The exec credential plugin these tests write is a small script that the tests drive
through files: it gives a token that is always expired (so the official client's
hook runs it before every request) and, while `stall` exists, it stalls once the API
double has logged a create, until `release` appears; while `hang` exists, it never
answers. The double's request log says which writes went out and when.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.errors import ClusterError
from mxgitops.kube import cluster, lease
from mxgitops.objects import Kind, ObjectRef
from tests.helpers.sync import INSTANCE, NS, mxjob, sync_args, write
from tests.kubeapi.harness import KubeAPI

PLUGIN = """\
#!{python}
import json, os, pathlib, sys, time, urllib.request

flags, api = pathlib.Path(sys.argv[1]), sys.argv[2]
(flags / "pid").write_text(str(os.getpid()))


def created():
    with urllib.request.urlopen(api + "/_kubeapi/requests", timeout=10) as answer:
        return any(e["verb"] == "create" and e["resource"] != "leases" for e in json.load(answer))


def wait_for(name):
    deadline = time.monotonic() + 120
    while not (flags / name).exists() and time.monotonic() < deadline:
        time.sleep(0.01)


if (flags / "hang").exists():
    wait_for("never")
if (flags / "stall").exists() and created():
    (flags / "stalled").touch()
    wait_for("release")
credential = {{"token": "from-the-plugin", "expirationTimestamp": "2000-01-01T00:00:00Z"}}
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": credential,
}}))
"""

WRITES = {"POST", "PUT", "PATCH", "DELETE"}
TIMEOUT = 3  # seconds: --request-timeout where a plugin hangs


def exec_kubeconfig(api: KubeAPI, tmp_path: Path) -> tuple[Path, Path]:
    """A kubeconfig whose user is the plugin, and the directory of its flag files."""
    flags = tmp_path / "flags"
    flags.mkdir()
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(PLUGIN.format(python=sys.executable))
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    config = yaml.safe_load(api.kubeconfig.read_text())
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "args": [str(flags), api.url],
            "interactiveMode": "Never",
        }
    }
    path = tmp_path / "exec-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path, flags


def wait_for_file(path: Path, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def wait_until_free(api: KubeAPI, timeout: float = 60) -> None:
    """Until the Lease has expired, as the next sync will judge it."""
    deadline = time.monotonic() + timeout
    while True:
        found = api.get("Lease", f"mxgitops-{INSTANCE}", NS)
        if found is not None and lease.is_free(found, datetime.now(UTC)):
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.05)


@pytest.mark.double_only("the plugin reads the double's request log to stall at a create")
def test_a_sync_stalled_in_a_credential_refresh_sends_no_write_after_its_lease_is_taken(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """Its writer gets its credentials only after another sync took the Lease over: the
    write that waited for them is not sent, nor any other; the sync exits 4."""
    repo = write(tmp_path / "repo", mxjob("a"), mxjob("b"), mxjob("c"))
    kubeconfig, flags = exec_kubeconfig(kubeapi, tmp_path)
    (flags / "stall").touch()
    args = sync_args(kubeapi, repo, "--parallelism", "1")
    args[args.index("--kubeconfig") + 1] = str(kubeconfig)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXGITOPS_")}
    env["MXGITOPS_CACHE_DIR"] = str(tmp_path / "cache")
    short_lease = (
        "from mxgitops.kube import lease; lease.DEFAULT_DURATION_SECONDS = 10; "
        "from mxgitops.cli import main; main()"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", short_lease, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for_file(flags / "stalled", first)
        wait_until_free(kubeapi)
        second = CliRunner().invoke(main, sync_args(kubeapi, repo))
        assert second.exit_code == 0, second.output
        taken_over = len(kubeapi.request_log)
        (flags / "stall").unlink()
        (flags / "release").touch()
        _, stderr = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    after = [
        (e["method"], e["resource"], e["status"])
        for e in kubeapi.request_log[taken_over:]
        if e["method"] in WRITES
    ]
    # Only the release of its Lease, refused: another sync's since.
    assert after == [("PUT", "leases", 409)], after
    assert first.returncode == 4, stderr
    assert "lost the Lease" in stderr, stderr
    print(f"\nstalled refresh: writes after the take-over {after}")


def test_a_credential_plugin_that_never_answers_is_stopped_at_the_request_timeout(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """When connecting and when refreshing: one line naming the plugin, the plugin's
    process gone."""
    kubeconfig, flags = exec_kubeconfig(kubeapi, tmp_path)
    # 3 s, not 1: the plugin's first, answering run is a Python start, which a loaded
    # machine has taken more than a second for.
    api = cluster.connect(kubeconfig=kubeconfig, request_timeout=TIMEOUT)
    (flags / "hang").touch()
    started = time.monotonic()
    with pytest.raises(ClusterError) as refreshing:
        api.get(ObjectRef(Kind.LEASE, NS, "x"))
    assert time.monotonic() - started < TIMEOUT + 2
    said = str(refreshing.value)
    assert "credential-plugin" in said and f"within {TIMEOUT} s (--request-timeout)" in said, said
    assert "\n" not in said
    pid = int((flags / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    started = time.monotonic()
    with pytest.raises(ClusterError, match=rf"credential-plugin.* within {TIMEOUT} s"):
        cluster.connect(kubeconfig=kubeconfig, request_timeout=TIMEOUT)
    assert time.monotonic() - started < TIMEOUT + 2
    assert not [e for e in kubeapi.request_log if e["method"] != "GET"]


def test_sync_with_a_hung_credential_plugin_exits_4_with_one_line(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    repo = write(tmp_path / "repo", mxjob("a"))
    kubeconfig, flags = exec_kubeconfig(kubeapi, tmp_path)
    (flags / "hang").touch()
    args = sync_args(kubeapi, repo, "--request-timeout", "1")
    args[args.index("--kubeconfig") + 1] = str(kubeconfig)
    started = time.monotonic()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 4, result.output
    assert time.monotonic() - started < 1 + 3
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "credential-plugin" in lines[0], result.output
    assert json.dumps(kubeapi.request_log) == "[]"
