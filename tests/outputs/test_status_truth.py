"""What mxgitops tells people is true (issue 9): what this sync did, why a job waits
or failed, and that a finished job holds nothing.

End to end over HTTP against the `kubeapi` fixture (the API double, and the real
control plane where the test can run there), with Git remotes where a note is read.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mxgitops import __version__
from mxgitops.cli import main
from mxgitops.commands.sync import sync
from mxgitops.kube import cluster
from mxgitops.outputs import report
from tests.gitrepos.fixtures import GitRemote
from tests.helpers import corpus
from tests.helpers.corpus import Corpus, Shape
from tests.helpers.sync import (
    INSTANCE,
    NS,
    Syncer,
    batch_job,
    files,
    git_config,
    job_objects,
    mxjob,
    read_shard,
    remove,
    summary_of,
    write,
    writes,
)
from tests.kubeapi.clients import raw
from tests.kubeapi.harness import KubeAPI


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- 1. what this sync did, not what the note says ------------------------------------


def test_a_second_sync_and_a_dry_run_of_a_synced_commit_say_what_this_run_did(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote(
        "jobs", files=files(mxjob("a", servers=0), mxjob("b", servers=0), mxjob("c", servers=0))
    )
    config = git_config(remote, kubeapi, tmp_path)
    first = sync(config)
    assert first.summary.counts() == {"create": 3} and first.note_written
    kubeapi.clear_log()

    again = sync(config)
    assert again.summary.counts() == {"unchanged": 3}
    assert report.render_plan(again.summary).splitlines()[0].endswith(": 3 unchanged")
    assert not writes(kubeapi)
    # The note still tells of the sync that created them.
    note = report.parse_note(remote.note(remote.rev()) or "")
    assert note is not None and note.counts() == {"create": 3}

    dry = sync(git_config(remote, kubeapi, tmp_path, dry_run=True))
    assert dry.summary.counts() == {"unchanged": 3}
    assert "to create" not in report.render_plan(dry.summary)


# -- 2. Pending with the scheduler's reason, Deleting, the live runtime ------------------


def test_a_job_whose_pod_cannot_be_scheduled_is_pending_with_the_schedulers_reason(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    greedy = {"limits": {"nvidia.com/gpu": 64}}  # the real backend's node has 8
    doc = mxjob("gpu", servers=0)
    doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = (
        greedy
    )
    write(repo, doc)
    created = run()
    assert summary_of(created, "gpu").state == "Pending"
    kubeapi.run_job_controller(NS)
    (pod,) = [p for p in kubeapi.objects("pods", NS) if p["metadata"]["name"].startswith("gpu-")]
    if kubeapi.backend == "double":  # no scheduler: say what kube-scheduler says
        unschedulable(kubeapi, pod["metadata"]["name"])
    else:  # kube-scheduler tries, and writes why it cannot
        from tests.controlplane.harness import wait_for

        wait_for(
            "for kube-scheduler to find no node",
            lambda: "Insufficient" in json.dumps(kubeapi.get("pods", pod["metadata"]["name"], NS)),
        )
    outcome = run()
    job = summary_of(outcome, "gpu")
    assert job.state == "Pending"
    assert "Insufficient nvidia.com/gpu" in job.state_reason
    assert "Insufficient nvidia.com/gpu" in report.render_plan(outcome.summary, verbose=True)
    assert job.runtime_id and job.runtime_id in pod["metadata"]["name"]


def unschedulable(api: KubeAPI, pod: str) -> None:
    obj = api.get("pods", pod, NS)
    assert obj is not None
    obj["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. "
                "preemption: 0/4 nodes are available: 4 No preemption victims found.",
            }
        ],
    }
    status, _, body = raw(api, "PUT", f"/api/v1/namespaces/{NS}/pods/{pod}/status", obj)
    assert status == 200, body


def test_a_pruned_job_is_deleting_and_a_replaced_one_shows_its_new_runtime(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, mxjob("a", servers=0), mxjob("b", servers=0), mxjob("c", servers=0))
    run()
    kubeapi.run_job_controller(NS)
    for name in ("a", "b"):
        kubeapi.kubelet(job=batch_job(kubeapi, name, "worker"), namespace=NS, phase="Running")
    remove(repo, "a")
    write(repo, mxjob("b", servers=0, args=["train.py", "--lr", "0.1"]))
    outcome = run()
    pruned, replaced = summary_of(outcome, "a"), summary_of(outcome, "b")
    assert (pruned.action, pruned.state) == ("delete", "Deleting")
    assert (replaced.action, replaced.state) == ("replace", "Pending")
    assert "replace under way" in replaced.reason
    (new,) = job_objects(kubeapi, "b")
    assert replaced.runtime_id == new["metadata"]["labels"]["runtime_id"]
    assert [(r.type, r.state) for r in replaced.replicas] == [("WORKER", "Pending")]


# -- 3. why a job failed, kept after cleanPodPolicy -------------------------------------

LOG = "".join(f"step {n}: loss 0.{n:02d}\n" for n in range(1, 31)) + "CUDA out of memory\n"


def test_an_oom_killed_workers_exit_code_reason_and_log_tail_survive_clean_pod_policy(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    doc = mxjob("oom", servers=0, restart="Never", cleanPodPolicy="All", backoffLimit=0)
    remote = make_git_remote("jobs", files=files(doc))
    config = git_config(remote, kubeapi, tmp_path)
    sync(config)
    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "oom", "worker")
    kubeapi.container_log(job=worker, namespace=NS, text=LOG)
    kubeapi.kubelet(
        job=worker, namespace=NS, phase="Failed", exit_code=137, reason="OOMKilled", message=""
    )
    kubeapi.clear_log()
    failed = sync(config)
    job = summary_of(failed, "oom")
    assert (job.state, job.action) == ("Failed", "clean")
    assert job.failure is not None
    assert (job.failure["exit_code"], job.failure["replica"]) == (137, "WORKER 0")
    assert "OOMKilled" in job.failure["reason"]
    tail = job.failure["log"].splitlines()
    assert len(tail) == 20 and tail[-1] == "CUDA out of memory" and tail[0] == "step 12: loss 0.12"
    # The failure's tail (tailLines), read once before the clean deleted the pod; beside
    # it the training record's last read (test_record_sync.py).
    logs = [e for e in kubeapi.request_log if "tailLines" in e.get("query", {})]
    assert len(logs) == 1  # read once, before the clean deleted the pod
    assert not job_objects(kubeapi, "oom") and not kubeapi.objects("pods", NS)

    kubeapi.clear_log()
    remote.commit({"README": "touch\n"}, "another commit")
    later = sync(config)
    assert not [e for e in kubeapi.request_log if e["path"].endswith("/log")]
    assert summary_of(later, "oom").failure == job.failure  # from the ledger
    result = cli(
        "status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache"), "-o", "json"
    )
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.output)["jobs"]
    assert shown["failure"]["exit_code"] == 137 and "OOMKilled" in shown["failure"]["reason"]
    assert shown["failure"]["log"].endswith("CUDA out of memory\n")  # as the container wrote it
    text = cli("status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache"))
    assert "ml/oom: failed: WORKER 0 exited 137 (OOMKilled" in text.output
    assert "  | CUDA out of memory" in text.output
    markdown = cli(
        "status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache"), "-o", "markdown"
    )
    assert "CUDA out of memory" in markdown.output and "exited 137" in markdown.output
    entry = read_shard(kubeapi.get("ConfigMap", f"mxgitops-ledger-{INSTANCE}", NS))
    assert "CUDA out of memory" in entry.entries[(NS, "oom")].failure


def test_failure_log_lines_0_reads_no_log_and_an_unreadable_log_fails_nothing(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, mxjob("quiet", servers=0, restart="Never"), mxjob("loud", servers=0))
    run()
    kubeapi.run_job_controller(NS)
    for name in ("quiet", "loud"):
        kubeapi.kubelet(
            job=batch_job(kubeapi, name, "worker"),
            namespace=NS,
            phase="Failed",
            exit_code=2,
            message="bad flag --lr",
        )
    kubeapi.clear_log()
    outcome = run(failure_log_lines=0, training_log_reads=0)
    assert outcome.ok
    assert not [e for e in kubeapi.request_log if e["path"].endswith("/log")]
    quiet = summary_of(outcome, "quiet")
    assert quiet.failure is not None and quiet.failure["message"] == "bad flag --lr"
    assert quiet.failure["exit_code"] == 2 and quiet.failure["log"] == ""


def test_a_log_that_cannot_be_read_is_said_so_and_the_sync_goes_on(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, mxjob("gone", servers=0, restart="Never"))
    run()
    kubeapi.run_job_controller(NS)
    worker = batch_job(kubeapi, "gone", "worker")
    kubeapi.kubelet(job=worker, namespace=NS, phase="Failed", exit_code=1, message="boom")
    kubeapi.faults("get/pods:500=1")  # the only GET of pods a sync makes: the log
    outcome = run()
    kubeapi.faults("")
    assert outcome.ok
    failure = summary_of(outcome, "gone").failure
    assert failure is not None and failure["log"].startswith("log unavailable: ")


# -- 4. a finished job holds nothing ---------------------------------------------------


def test_a_failed_on_failure_seed_job_keeps_no_active_batch_job(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, mxjob("crashy", runPolicy={"backoffLimit": 2}))  # OnFailure, job-wide
    run()
    kubeapi.run_job_controller(NS)
    for index in (0, 1):  # one restart each: the job's two, each batch Job's one of two
        worker = batch_job(kubeapi, "crashy", "worker", index)
        kubeapi.kubelet(job=worker, namespace=NS, phase="Running")
        # Restarted in place (CrashLoopBackOff): the batch Job stays active.
        how = {"exit_code": 1, "message": "bad config"}
        kubeapi.kubelet(job=worker, namespace=NS, phase="Failed", **how)
    outcome = run()
    job = summary_of(outcome, "crashy")
    assert (job.state, job.action) == ("Failed", "stop")
    assert "a finished job holds nothing" in job.reason
    assert job.failure is not None and "bad config" in job.failure["message"]
    assert "BackoffLimitExceeded" in job.failure["reason"]
    kubeapi.settle()
    active = [
        o for o in job_objects(kubeapi, "crashy") if not (o.get("status") or {}).get("conditions")
    ]
    assert not active
    kubeapi.clear_log()
    again = run()
    assert summary_of(again, "crashy").state == "Failed"
    assert not writes(kubeapi)


# -- 7. a note that cannot be pushed never hides what was applied -----------------------


def test_a_rejected_notes_push_is_reported_on_its_own_line_after_the_summary(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do case $ref in refs/notes/*) "
        'echo "notes are read-only here" >&2; exit 1;; esac; done\n'
    )
    hook.chmod(0o755)
    args = ["sync", "--repo", remote.url, "--path", "jobs", "--namespace", NS]
    args += ["--instance", INSTANCE, "--cache-dir", str(tmp_path / "cache")]
    args += ["--kubeconfig", str(kubeapi.kubeconfig)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith("Sync of ")
    assert "1 created" in result.stdout and "+ create    ml/a: new job" in result.stdout
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert error.startswith("Error: the status note was not pushed: ")
    # One line, naming the refusal in git's and the hook's words, not git's push report.
    assert "[remote rejected]" in error and "notes are read-only here" in error, error
    assert not any(
        line.startswith(("To ", "error: failed to push")) for line in result.stderr.splitlines()
    )
    assert job_objects(kubeapi, "a")


# -- notes carry their time, version and warnings; status says their age ----------------


@pytest.mark.parametrize("examples", corpus.params())
def test_the_note_carries_time_version_and_warnings_and_status_prints_its_age(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path, examples: Corpus
) -> None:
    older = examples.path(Shape.SEED_DIST).read_text()  # read with a warning
    remote = make_git_remote("jobs", files={"jobs/old.yaml": older})
    outcome = sync(git_config(remote, kubeapi, tmp_path))
    assert outcome.summary.warnings and "warning" in outcome.summary.warnings[0]
    note = report.parse_note(remote.note(remote.rev()) or "")
    assert note is not None
    assert note.version == __version__ and note.synced_at.endswith("Z")
    assert note.warnings == outcome.summary.warnings
    result = cli("status", "--repo", remote.url, "--cache-dir", str(tmp_path / "cache"))
    assert result.exit_code == 0
    assert f"synced {note.synced_at} by mxgitops {__version__}" in result.output
    assert "note written " in result.output and " ago" in result.output


def test_status_in_a_checkout_without_notes_prints_the_fetch_command(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    sync(git_config(remote, kubeapi, tmp_path))
    checkout = tmp_path / "checkout"
    subprocess.run(
        ["git", "clone", "--quiet", remote.url, str(checkout)], check=True, capture_output=True
    )
    result = CliRunner().invoke(
        main, ["status", "--repo", str(checkout), "--cache-dir", str(tmp_path / "c2")]
    )
    assert result.exit_code == 1
    assert "git -C" in result.stderr
    assert "fetch origin refs/notes/mxgitops:refs/notes/mxgitops" in result.stderr


@pytest.mark.parametrize("remote_name", ["upstream", None])
def test_the_fetch_command_names_the_checkouts_own_remote(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path, remote_name: str | None
) -> None:
    """No `origin`: the command names the remote the checkout has, and with none at
    all, says to ask the repository's URL instead."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    checkout = tmp_path / "checkout"
    subprocess.run(
        ["git", "clone", "--quiet", remote.url, str(checkout)], check=True, capture_output=True
    )
    if remote_name:
        subprocess.run(["git", "-C", str(checkout), "remote", "rename", "origin", remote_name])
    else:
        subprocess.run(["git", "-C", str(checkout), "remote", "remove", "origin"], check=True)
    result = CliRunner().invoke(
        main, ["status", "--repo", str(checkout), "--cache-dir", str(tmp_path / "c2")]
    )
    assert result.exit_code == 1
    assert "origin" not in result.stderr
    if remote_name:
        assert f"fetch {remote_name} refs/notes/mxgitops:refs/notes/mxgitops" in result.stderr
    else:
        assert "it has no remote to fetch notes from: ask the repository's URL" in result.stderr


# -- 6. diff knows on-change: wait ---------------------------------------------------------

WAIT = {"mxgitops.io/on-change": "wait"}


def test_diff_says_a_waiting_job_is_replaced_or_removed_when_it_finishes(
    make_git_remote: Callable[..., GitRemote],
) -> None:
    jobs = [mxjob(n, servers=0, annotations=WAIT) for n in ("patient", "gone", "hasty")]
    remote = make_git_remote("jobs", files=files(*jobs))
    base = remote.rev()
    hasty = mxjob("hasty", servers=0, args=["train.py", "--fast"])  # wait dropped with the change
    remote.commit(
        {
            **files(mxjob("patient", servers=0, args=["train.py", "--lr=1"], annotations=WAIT)),
            **files(hasty),
            "jobs/gone.yaml": None,
        },
        "change",
    )
    args = ["diff", base, "HEAD", "--repo", str(remote.work), "--path", "jobs", "-n", NS]
    text = cli(*args)
    assert text.exit_code == 0, text.output
    lines = {line.split()[1]: line for line in text.output.splitlines()[1:]}
    assert "replaced when the running job finishes" in lines["ml/patient"]
    assert "removed when it finishes" in lines["ml/gone"]
    assert "finishes" not in lines["ml/hasty"]  # on-change: replace in the same change: at once
    markdown = cli(*args, "-o", "markdown").output
    assert "replaced when the running job finishes" in markdown
    changed = {j["name"]: j for j in json.loads(cli(*args, "-o", "json").output)["changed"]}
    assert changed["patient"]["effect"].startswith("replaced when the running job finishes")
    assert "effect" not in changed["hasty"]


# -- 5. changes without restarts -------------------------------------------------------


def test_suspend_and_resume_patch_the_live_batch_jobs_in_place(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, mxjob("pausable", workers=2))
    run()
    before = {o["metadata"]["name"]: o["metadata"]["uid"] for o in job_objects(kubeapi, "pausable")}
    for suspend, state in ((True, "Suspended"), (False, "Pending")):
        write(repo, mxjob("pausable", workers=2, runPolicy={"suspend": suspend}))
        kubeapi.clear_log()
        outcome = run()
        job = summary_of(outcome, "pausable")
        assert job.action == "update", job
        assert f"spec.suspend {json.dumps(not suspend)} -> {json.dumps(suspend)}" in job.reason
        done = [e for e in writes(kubeapi) if e["resource"] in ("jobs", "services")]
        assert {e["method"] for e in done} == {"PATCH"}, done
        assert len(done) == 4  # the four batch Jobs; the Service has nothing to change
        after = {
            o["metadata"]["name"]: o["metadata"]["uid"] for o in job_objects(kubeapi, "pausable")
        }
        assert after == before  # the same objects: same runtime, nothing restarted
        assert {o["spec"].get("suspend", False) for o in job_objects(kubeapi, "pausable")} == {
            suspend
        }
        kubeapi.clear_log()
        again = run()
        assert summary_of(again, "pausable").state == state
        assert not writes(kubeapi)


def test_a_hand_edited_backoff_limit_is_set_back_and_named_in_the_note(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("tuned", servers=0, backoffLimit=2)))
    config = git_config(remote, kubeapi, tmp_path)
    sync(config)
    (worker,) = job_objects(kubeapi, "tuned")
    name = worker["metadata"]["name"]
    status, _, body = raw(
        kubeapi,
        "PATCH",
        f"/apis/batch/v1/namespaces/{NS}/jobs/{name}",
        {"spec": {"backoffLimit": 9}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body
    kubeapi.clear_log()
    remote.commit({"README": "touch\n"}, "another commit")
    outcome = sync(config)
    job = summary_of(outcome, "tuned")
    assert job.action == "repair"
    assert "spec.backoffLimit 9 -> 2 (set back)" in job.reason
    assert [e["method"] for e in writes(kubeapi) if e["resource"] == "jobs"] == ["PATCH"]
    patched = kubeapi.get("jobs", name, NS)
    assert patched is not None and patched["spec"]["backoffLimit"] == 2
    note = remote.note(remote.rev()) or ""
    assert "spec.backoffLimit 9 -> 2" in note


# -- 8. errors on one line ------------------------------------------------------------------


def sync_once(repo: Path, kubeconfig: Path, tmp_path: Path) -> Any:
    args = ["sync", "--repo", str(repo), "--kubeconfig", str(kubeconfig), "--namespace", NS]
    return CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cache")])


def test_a_closed_api_port_is_one_line_saying_connection_refused(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.kubeapi.harness import write_kubeconfig

    write(repo, mxjob("a", servers=0))
    defaults = dict(cluster.connect.__kwdefaults__ or {})
    monkeypatch.setattr(cluster.connect, "__kwdefaults__", {**defaults, "sleep": lambda _: None})
    result = sync_once(repo, write_kubeconfig(tmp_path / "k", "http://127.0.0.1:1"), tmp_path)
    assert result.exit_code == 4
    assert result.stderr.splitlines() == [
        "Error: cannot reach the Kubernetes API at http://127.0.0.1:1: connection refused"
    ]


@pytest.mark.double_only("a plain-HTTP server to fail a TLS handshake with")
def test_a_tls_failure_is_one_line_and_not_retried(
    kubeapi: KubeAPI, repo: Path, tmp_path: Path
) -> None:
    from tests.kubeapi.harness import write_kubeconfig

    write(repo, mxjob("a", servers=0))
    https = kubeapi.url.replace("http://", "https://")
    result = sync_once(repo, write_kubeconfig(tmp_path / "k", https), tmp_path)
    assert result.exit_code == 4
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: cannot reach the Kubernetes API at {https}: TLS: ")
    assert "HTTPSConnectionPool" not in line and len(line) < 200


def test_a_git_fetch_failure_is_gits_meaningful_line_with_secrets_redacted(
    tmp_path: Path, git_isolation: None
) -> None:
    missing = tmp_path / "no-such-repo.git"
    for url, said in (
        (missing.as_uri(), "does not appear to be a git repository"),
        ("http://someone:s3cret@127.0.0.1:1/jobs.git", "127.0.0.1"),
    ):
        args = ["sync", "--repo", url, "--dry-run", "--cache-dir", str(tmp_path / "cache")]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 3, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith("Error: ") and said in line, line
        assert "s3cret" not in line and "Please make sure" not in line


def test_one_change_removes_a_waiting_job_at_once_through_the_cancel_list(
    kubeapi: KubeAPI, repo: Path
) -> None:
    run = Syncer(kubeapi, repo)
    write(repo, *(mxjob(n, servers=0, annotations=WAIT) for n in ("keep", "drop", "stay")))
    run()
    kubeapi.run_job_controller(NS)
    for name in ("keep", "drop", "stay"):
        kubeapi.kubelet(job=batch_job(kubeapi, name, "worker"), namespace=NS, phase="Running")
    remove(repo, "drop")
    remove(repo, "stay")
    (repo / ".mxgitops.yaml").write_text("cancel:\n  - ml/drop\n")
    outcome = run()
    dropped, stays = summary_of(outcome, "drop"), summary_of(outcome, "stay")
    assert (dropped.action, dropped.state) == ("delete", "Deleting")
    assert "wait cancelled" in dropped.reason
    assert (stays.action, stays.state) == ("hold", "Waiting")
    assert not job_objects(kubeapi, "drop") and job_objects(kubeapi, "stay")


def test_diff_knows_the_cancel_list(make_git_remote: Callable[..., GitRemote]) -> None:
    remote = make_git_remote("jobs", files=files(mxjob("gone", servers=0, annotations=WAIT)))
    base = remote.rev()
    remote.commit({"jobs/gone.yaml": None, ".mxgitops.yaml": "cancel: [ml/gone]\n"}, "cancel")
    args = ["diff", base, "HEAD", "--repo", str(remote.work), "--path", "jobs", "-n", NS]
    text = cli(*args).output
    assert "removed at once" in text and "when it finishes" not in text


def test_validate_sync_and_diff_name_a_file_alike(
    make_git_remote: Callable[..., GitRemote], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = mxjob("broken", servers=0)
    broken["spec"]["mxReplicaSpecs"]["Worker"]["replica"] = 2
    remote = make_git_remote("jobs", files={".mxgitops.yaml": "path: jobs\n"})
    base = remote.rev()
    remote.commit({"jobs/team/broken.yaml": yaml.safe_dump(broken)}, "break")
    monkeypatch.chdir(remote.work)
    said = "jobs/team/broken.yaml:"
    assert said in cli("validate").output
    assert f"Invalid: {said}" in cli("sync", "--dry-run", "--repo", ".", "-n", NS).output
    assert f"! {said}" in cli("diff", base, "HEAD", "-n", NS).output
