"""The troubleshooting pages start from what mxgitops prints: these tests print it.

Each test makes the situation of one page of docs/guides/troubleshooting/ on the
`kubeapi` fixture (the API double and the real control plane), runs `mxgitops sync`
as a user would, and checks that what it printed is the message the page quotes,
byte for byte but for what differs per run (a temporary path, a commit id), which
both sides write as the page does. A changed message fails here until the page says
the new one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner, Result

from mxgitops.cli import main
from mxgitops.objects import ownership_labels
from mxgitops.state import ledgerstore
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import INSTANCE, NS, ROW, mxjob, write
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI

PAGES = Path(__file__).resolve().parents[2] / "docs" / "guides" / "troubleshooting"

# What the pages write for what differs per run.
REMOTE = "file:///srv/git/jobs.git"
COMMIT = "1a2b3c4d5e6f"


def quoted(page: str) -> str:
    """The message a troubleshooting page starts from: its first text block."""
    text = (PAGES / page).read_text(encoding="utf-8")
    found = re.search(r"```text\n(.*?)\n```", text, re.DOTALL)
    assert found, f"{page} quotes no message"
    return found.group(1)


def lines(text: str) -> str:
    """Lines without the trailing blanks git pads its `remote:` lines with."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def sync(repo: str, api: KubeAPI, tmp_path: Path, *extra: str) -> Result:
    args = ["sync", "--repo", repo, "--kubeconfig", str(api.kubeconfig), "--namespace", NS]
    args += ["--instance", INSTANCE, "--cache-dir", str(tmp_path / "cache"), *extra]
    return CliRunner().invoke(main, args, prog_name="mxgitops")


def test_a_sync_meeting_a_held_lease_prints_what_exit_5_quotes(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"mxgitops-{INSTANCE}", "namespace": NS},
        "spec": {
            "holderIdentity": "mxgitops-prod-29384756-x7k2p",
            "acquireTime": "2026-12-01T19:30:00.000000Z",
            "renewTime": now,
            "leaseDurationSeconds": 600,
        },
    }
    kubeapi.create(lease, namespace=NS)
    repo = write(tmp_path / "repo", mxjob("a", servers=0))
    result = sync(str(repo), kubeapi, tmp_path, "--no-notes")
    assert result.exit_code == 5, result.output
    assert lines(result.stderr) == quoted("exit-5.md")
    assert kubeapi.objects("jobs", NS) == []


def test_a_sync_reading_a_damaged_ledger_prints_what_ledger_damaged_quotes(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    name = f"mxgitops-ledger-{INSTANCE}"
    broken = json.dumps([{**ROW, "colour": "red"}])  # an unknown field: hand-edited
    kubeapi.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": ownership_labels(INSTANCE)},
            "data": {ledgerstore.DATA_KEY: broken},
        },
        NS,
    )
    repo = write(tmp_path / "repo", mxjob("a", servers=0))
    result = sync(str(repo), kubeapi, tmp_path, "--no-notes")
    assert result.exit_code == 6, result.output
    assert lines(result.stderr) == quoted("ledger-damaged.md")
    assert kubeapi.objects("jobs", NS) == []


def test_a_sync_whose_note_is_refused_prints_what_note_not_pushed_quotes(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    job = json.dumps(mxjob("a", servers=0))  # JSON is YAML
    remote = make_git_remote("jobs", files={"a.yaml": job})
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do case $ref in refs/notes/*) "
        'echo "notes are read-only here" >&2; exit 1;; esac; done\n'
    )
    hook.chmod(0o755)
    result = sync(remote.url, kubeapi, tmp_path, "--log-format", "json")
    assert result.exit_code == 3, result.output
    printed = result.stdout + "\n".join(
        line for line in result.stderr.splitlines() if not line.startswith("{")
    )
    printed = printed.replace(remote.url, REMOTE).replace(remote.rev()[:12], COMMIT)
    assert lines(printed) == quoted("note-not-pushed.md")


# What kube-scheduler writes on a pod no node can take (the real backend's one node has
# 8 GPUs); the double, which has no scheduler, is given the same words.
UNSCHEDULABLE = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)


def test_a_job_no_node_can_take_prints_what_pending_quotes(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    doc = mxjob("gpu", servers=0)
    template = doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]
    template["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 64}}
    repo = write(tmp_path / "repo", doc)
    first = sync(str(repo), kubeapi, tmp_path)
    assert first.exit_code == 0, first.output
    kubeapi.run_job_controller(NS)
    (pod,) = [p for p in kubeapi.objects("pods", NS) if p["metadata"]["name"].startswith("gpu-")]
    name = pod["metadata"]["name"]
    if kubeapi.backend == "double":
        unschedulable(kubeapi, name)
    else:
        from tests.controlplane.harness import wait_for

        wait_for(
            "kube-scheduler to find no node",
            lambda: "Insufficient" in json.dumps(kubeapi.get("pods", name, NS)),
        )
    kubeapi.settle()
    again = sync(str(repo), kubeapi, tmp_path, "-v")
    assert again.exit_code == 0, again.output
    assert lines(again.stdout) == quoted("pending.md")


def unschedulable(api: KubeAPI, pod: str) -> None:
    obj = api.get("pods", pod, NS)
    assert obj is not None
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": UNSCHEDULABLE,
    }
    obj["status"] = {"phase": "Pending", "conditions": [condition]}
    status, _, body = raw(api, "PUT", f"/api/v1/namespaces/{NS}/pods/{pod}/status", obj)
    assert status == 200, body
