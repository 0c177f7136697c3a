"""Status notes are written to `refs/notes/*`, which anyone who can push to the jobs
repository can write too (issue 24). A note of the wrong shape is treated as absent,
with a warning naming it: never an exit 70, for a sync of that commit or for `status`.
A forged note's actions and reasons are not carried forward into the next genuine note
as if mxgitops had done them: only what the cluster confirms is; `status` marks a note
it cannot vouch for."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mxgitops.cli import ExitCode
from mxgitops.commands.sync import sync
from mxgitops.outputs import report
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import REF, status
from tests.helpers.sync import files, git_config, mxjob
from tests.kubeapi.harness import KubeAPI


def forge(remote: GitRemote, sha: str, text: str) -> None:
    """Write `text` as the note on `sha` and push it, as anyone with push rights can."""
    remote.git("fetch", "--quiet", "origin", f"+{REF}:{REF}") if remote.note(sha) else None
    remote.git("notes", f"--ref={REF}", "add", "--force", "-m", text, sha)
    remote.git("push", "--quiet", "--force", "origin", REF)


def machine(data: dict[str, Any]) -> str:
    return f"forged\n\n{report.NOTE_MARKER}\n{json.dumps(data)}"


JOB = {"namespace": "ml", "name": "a", "action": "create", "reason": "new job"}
ILL_TYPED = {
    "namespace a number": {"jobs": [{**JOB, "namespace": 5}]},
    "jobs a mapping": {"jobs": {"a": 1}},
    "replicas a string": {"jobs": [{**JOB, "replicas": "x"}]},
    "a replica's states a list": {
        "jobs": [{**JOB, "replicas": [{"type": "WORKER", "state": "Running", "replicas": 1,
                                       "states": [1]}]}]
    },
    "failure a string": {"jobs": [{**JOB, "failure": "boom"}]},
    "problems a number": {"problems": 5},
    "errors strings of numbers": {"jobs": [{**JOB, "errors": [1, 2]}]},
    "synced_at a list": {"synced_at": ["now"]},
    "an unknown action": {"jobs": [{**JOB, "action": "obliterate"}]},
    "not an object": [1, 2, 3],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(ILL_TYPED))
def test_an_ill_typed_note_is_absent_to_status_with_a_warning(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path, case: str
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    forge(remote, remote.rev(), machine(ILL_TYPED[case]))  # type: ignore[arg-type]
    for output in ("text", "json", "markdown"):
        result = status(remote, tmp_path, "-o", output)
        assert result.exit_code == ExitCode.FAILED, (output, result.output)
        lines = result.stderr.strip().splitlines()
        assert any(
            line.startswith("warning: ") and REF in line and "ill-typed" in line for line in lines
        ), lines
        assert "No mxgitops status note" in result.stderr


def test_a_sync_of_a_commit_with_an_ill_typed_note_writes_a_good_one(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    sha = remote.rev()
    forge(remote, sha, machine({"jobs": [{**JOB, "namespace": 5, "replicas": "x"}]}))
    outcome = sync(git_config(remote, kubeapi, tmp_path))
    assert outcome.ok and outcome.note_written
    assert any(REF in n and "ill-typed" in n and "jobs[0]" in n for n in outcome.notices), (
        outcome.notices
    )
    note = report.parse_note(remote.note(sha) or "")
    assert note is not None and note.counts() == {"create": 1}


def test_a_forged_notes_actions_and_reasons_are_not_carried_forward(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0), mxjob("b", servers=0)))
    sha = remote.rev()
    config = git_config(remote, kubeapi, tmp_path)
    first = sync(config)
    assert first.summary.counts() == {"create": 2}
    genuine = report.parse_note(remote.note(sha) or "")
    assert genuine is not None
    by_name = {j.name: j for j in genuine.jobs}
    forged = genuine.to_dict()
    for job in forged["jobs"]:
        if job["name"] == "a":  # the cluster has this runtime; the reason is made up
            job["reason"] = "approved by @org/security; safe to merge anything"
        else:  # a runtime that never ran, objects that are not its
            job.update(action="replace", reason="spec changed; replace under way",
                       runtime_id="fffff", objects=["+job/evil-worker-fffff-0"])  # fmt: skip
    forge(remote, sha, machine(forged))
    again = sync(config)
    assert again.summary.counts() == {"unchanged": 2}  # what this run did
    note = report.parse_note(remote.note(sha) or "")
    assert note is not None
    jobs = {j.name: j for j in note.jobs}
    for name in ("a", "b"):
        assert (jobs[name].action, jobs[name].reason) == ("unchanged", "in sync"), jobs[name]
        assert jobs[name].runtime_id == by_name[name].runtime_id
    assert "approved" not in (remote.note(sha) or "")
    assert "evil" not in (remote.note(sha) or "")


def test_the_genuine_note_is_still_carried_forward(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """What this instance did, the cluster confirms: the note stays as it was."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    config = git_config(remote, kubeapi, tmp_path)
    assert sync(config).note_written
    before = remote.note(remote.rev())
    again = sync(config)
    assert not again.note_written and remote.note(remote.rev()) == before


def test_status_marks_a_note_it_cannot_vouch_for(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    sha = remote.rev()
    config = git_config(remote, kubeapi, tmp_path)
    sync(config)
    genuine = status(remote, tmp_path, "--instance", config.instance)
    assert genuine.exit_code == 0 and "cannot vouch" not in genuine.output, genuine.output
    forged = report.parse_note(remote.note(sha) or "")
    assert forged is not None
    data = forged.to_dict()
    data["jobs"][0]["reason"] = "approved by @org/security"
    forge(remote, sha, machine(data))
    result = status(remote, tmp_path, "--instance", config.instance)
    assert result.exit_code == 0, result.output
    (mark,) = [line for line in result.stderr.splitlines() if "cannot vouch" in line]
    assert mark.startswith("warning: ") and "ml/a" in mark and REF in mark
    other = status(remote, tmp_path, "--instance", "someone-else")
    assert any("written by instance" in line for line in other.stderr.splitlines()), other.stderr
