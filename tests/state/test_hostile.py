"""What a sync reads back and can be lied to about (issue 37): a LIST of JobSets that
answers 404 once, a status note blob hundreds of MB large, ill-typed fields inside a
live Job's or pod's status. None of them may make a job run twice, read without bound,
or end a sync with exit 70."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mxgitops.cli import ExitCode, main
from mxgitops.commands.sync import sync
from mxgitops.errors import ClusterClientError
from mxgitops.kube import cluster as kube
from mxgitops.manifests import spec
from mxgitops.objects import Kind
from mxgitops.outputs import report, summary
from mxgitops.planning.changes import PlanOptions
from mxgitops.planning.ledger import Ledger
from mxgitops.planning.plan import plan
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.jobset.kinds import JOBSET
from mxgitops.source.gitcommand import Runner
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import REF, status
from tests.helpers.jobs import job
from tests.helpers.sync import files, git_config, mxjob, write
from tests.kubeapi.harness import KubeAPI, StubHandler, stub_api

BOTH = frozenset({"batch", "jobset"})
CTX = PlanOptions(instance="t1").render_context()
FORGED_NOTE_SIZE = 40 << 20  # bytes: past the bound, a few hundred KB once packed


def test_a_jobsets_list_answering_404_keeps_jobset_in_the_ledger(
    kubeapi: KubeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger says this instance has JobSets; one LIST of them answers 404 (the CRD
    being reinstalled, a proxy gone wrong). Nothing proves none exists: were `jobset`
    dropped, no later sync would list them, and a JobSet left of a job moved to batch
    Jobs would run beside them forever."""
    api = kube.connect(kubeconfig=kubeapi.kubeconfig)
    listed = api.list_all

    def list_all(kind: Kind, selector: str, *args: Any, **kwargs: Any) -> Any:
        if kind is JOBSET:
            raise ClusterClientError("404 Not Found", status=404)
        return listed(kind, selector, *args, **kwargs)

    monkeypatch.setattr(api, "list_all", list_all)
    live = api.list_live("a=b")
    done = plan([job("a")], live, Ledger(runtimes=BOTH), PlanOptions(instance="t1"))
    assert done.ledger.runtimes == BOTH
    assert not done.ledger_changed


def test_a_note_blob_past_the_bound_is_set_aside_unread(
    make_git_remote: Callable[..., GitRemote],
    kubeapi: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A note hundreds of MB large packs into a few hundred KB of zeros: anyone who can
    push can write one. Its size is asked of git before it is read; one past the bound
    is as good as none, said, and written anew by the sync of its commit."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    sha = remote.rev()
    forged = report.render_note(summary.Summary(commit=sha, instance="x"))
    padding = "\n" * (FORGED_NOTE_SIZE - len(forged))
    note_file = tmp_path / "note"
    note_file.write_text("forged" + padding + forged)
    blob = remote.git("hash-object", "-w", str(note_file))  # -C: verbatim, no clean-up
    remote.git("notes", f"--ref={REF}", "add", "--force", "-C", blob, sha)
    remote.git("push", "--quiet", "--force", "origin", REF)
    read: list[tuple[str, ...]] = []
    raw = Runner.raw

    def counted(self: Runner, *args: str, stdin: bytes | None = None) -> bytes:
        read.append(args)
        return raw(self, *args, stdin=stdin)

    monkeypatch.setattr(Runner, "raw", counted)
    result = status(remote, tmp_path)
    assert "too large" in result.stderr and REF in result.stderr, (result.output, result.exception)
    assert "No mxgitops status note" in result.stderr
    outcome = sync(git_config(remote, kubeapi, tmp_path))
    assert outcome.ok and outcome.note_written
    assert any("too large" in n for n in outcome.notices), outcome.notices
    assert not any(args[:2] == ("cat-file", "blob") for args in read), read
    note = report.parse_note(remote.note(sha) or "")
    assert note is not None and note.counts() == {"create": 1}


def owned_job(doc: dict[str, Any]) -> dict[str, Any]:
    """The batch Job a sync renders for a local job `doc` (namespace ml, instance t1)."""
    [job] = [o for o in render_job(spec.from_manifest(doc), CTX) if o["kind"] == "Job"]
    job["metadata"].update(uid="u-1", resourceVersion="1", creationTimestamp="2026-01-01T00:00:00Z")
    return job


def owned_pod(job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    template = job["spec"]["template"]
    metadata = {**template["metadata"], "name": job["metadata"]["name"] + "-abcde",
                "namespace": "ml", "uid": "p-1", "resourceVersion": "1",
                "creationTimestamp": "2026-01-01T00:00:00Z"}  # fmt: skip
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": template["spec"],
            "status": status}  # fmt: skip


ILL_TYPED_STATUS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "a Job's succeeded a string": (
        "status.succeeded",
        lambda job: {"jobs": [{**job, "status": {"succeeded": "x"}}]},
    ),
    "a Job's conditions a number": (
        "status.conditions",
        lambda job: {"jobs": [{**job, "status": {"conditions": 5}}]},
    ),
    "a Job's condition a string": (
        "status.conditions[0]",
        lambda job: {"jobs": [{**job, "status": {"conditions": ["x"]}}]},
    ),
    "a pod's exit code a string": (
        "status.containerStatuses[0].state.terminated.exitCode",
        lambda job: {
            "jobs": [job],
            "pods": [
                owned_pod(
                    job,
                    {
                        "phase": "Failed",
                        "containerStatuses": [
                            {"name": "mxnet", "state": {"terminated": {"exitCode": "x"}}}
                        ],
                    },
                )
            ],
        },
    ),
    "a pod's containerStatuses a mapping": (
        "status.containerStatuses",
        lambda job: {"jobs": [job], "pods": [owned_pod(job, {"containerStatuses": {"a": 1}})]},
    ),
}


@pytest.mark.parametrize("case", sorted(ILL_TYPED_STATUS))
def test_an_ill_typed_field_in_a_live_status_is_a_cluster_error_not_exit_70(
    tmp_path: Path, case: str
) -> None:
    """kube-apiserver never stores these; an API server gone wrong, or a proxy, may
    answer them. The item is refused like one whose status is no object: a one-line
    cluster error naming the field, before anything is written."""
    doc = mxjob("a", servers=0)
    doc["metadata"]["namespace"] = "ml"
    field, lists = ILL_TYPED_STATUS[case]
    answers = lists(owned_job(doc))
    writes: list[str] = []

    class Handler(StubHandler):
        def do_GET(self) -> None:
            kind = self.path.split("?")[0].rsplit("/", 1)[-1]
            self.answer(200, {"kind": "List", "apiVersion": "v1", "metadata": {},
                              "items": answers.get(kind, [])})  # fmt: skip

        def do_POST(self) -> None:
            writes.append(self.path)
            self.answer(500, {})

        do_PUT = do_PATCH = do_DELETE = do_POST

    repo = write(tmp_path / "repo", doc)
    with stub_api(Handler, tmp_path / "kubeconfig") as kubeconfig:
        result = CliRunner().invoke(main, [
            "sync", "--repo", str(repo), "--kubeconfig", str(kubeconfig), "--namespace", "ml",
            "--instance", "t1", "--no-notes", "--no-events"])  # fmt: skip
    assert result.exit_code == ExitCode.CLUSTER, (result.output, result.exception)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and field in line, line
    assert writes == []
