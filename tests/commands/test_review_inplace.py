"""`mxgitops diff` shows every in-place update (issue 24): a pull request that sets
`suspend` or `activeDeadlineSeconds` on a running job changes what runs without a new
runtime, so the spec hash stays; the plan must still show each field before -> after,
as the sync would patch it, in text, json and markdown."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.commands.sync import sync
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.sync import NS, files, git_config, mxjob
from tests.kubeapi.harness import KubeAPI

WAIT = {"mxgitops.io/on-change": "wait"}


def diff(remote: GitRemote, base: str, *extra: str, env: dict[str, str] | None = None) -> str:
    args = ["diff", base, "HEAD", "--repo", str(remote.work), "--path", "jobs", "-n", NS]
    result = CliRunner(env=env).invoke(main, [*args, *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_in_place_changes_show_in_every_diff_output(
    make_git_remote: Callable[..., GitRemote],
) -> None:
    remote = make_git_remote(
        "jobs", files=files(mxjob("victim", servers=0), mxjob("paused", servers=0), mxjob("same"))
    )
    base = remote.rev()
    remote.commit(
        files(
            mxjob("victim", servers=0, runPolicy={"activeDeadlineSeconds": 1}, annotations=WAIT),
            mxjob("paused", servers=0, runPolicy={"suspend": True, "backoffLimit": 0}),
        ),
        "hide a kill in place",
    )
    text = diff(remote, base)
    assert text.splitlines()[0].startswith(
        "0 added, 0 changed (replaced on sync), 2 updated in place"
    )
    lines = {line.split()[1]: line for line in text.splitlines()[1:]}
    assert "spec.activeDeadlineSeconds unset -> 1" in lines["ml/victim"]
    assert "mxgitops.io/on-change replace -> wait" in lines["ml/victim"]
    assert "spec.suspend false -> true" in lines["ml/paused"]
    assert "spec.backoffLimit 2147483647 -> 0" in lines["ml/paused"]
    assert "ml/same" not in lines

    markdown = diff(remote, base, "-o", "markdown")
    assert "No job is added, changed or removed" not in markdown
    assert "| updated | `ml/victim` |" in markdown
    assert "spec.activeDeadlineSeconds unset → 1" in markdown
    assert "spec.suspend false → true" in markdown

    updated = {j["name"]: j for j in json.loads(diff(remote, base, "-o", "json"))["updated"]}
    assert updated["victim"]["fields"] == [
        {"field": "spec.activeDeadlineSeconds", "before": None, "after": 1},
        {"field": "mxgitops.io/on-change", "before": "replace", "after": "wait"},
    ]
    assert {"field": "spec.suspend", "before": False, "after": True} in updated["paused"]["fields"]


def test_diff_shows_the_fields_the_sync_then_patches(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """What diff says a merge does is what the sync of that merge reports doing."""
    remote = make_git_remote("jobs", files=files(mxjob("victim", servers=0)))
    config = git_config(remote, kubeapi, tmp_path)
    base = remote.rev()
    sync(config)
    remote.commit(
        files(mxjob("victim", servers=0, runPolicy={"suspend": True, "activeDeadlineSeconds": 5})),
        "in place",
    )
    shown = json.loads(diff(remote, base, "-o", "json"))["updated"][0]["fields"]
    outcome = sync(config)
    (job,) = [j for j in outcome.summary.jobs if j.name == "victim"]
    assert job.action == "update", job
    for field in shown:
        before, after = (
            json.dumps(field[k]) if field[k] is not None else "unset" for k in ("before", "after")
        )
        assert f"{field['field']} {before} -> {after}" in job.reason, (field, job.reason)


def test_diff_plans_each_job_on_the_runtime_the_sync_runs_it_on(
    make_git_remote: Callable[..., GitRemote],
) -> None:
    """A deadline is patched onto a live batch Job, but lands in a JobSet's immutable
    replicatedJobs: with --default-runtime jobset, as the operator's sync may run dist
    jobs, the same change is a replace. A queued job runs on JobSet whatever the default,
    and its suspend stops it through its Kueue Workload."""
    queued = {"schedulingPolicy": {"queue": "team"}}
    remote = make_git_remote(
        "jobs", files=files(mxjob("deadline"), mxjob("ttl"), mxjob("queued", runPolicy=queued))
    )
    base = remote.rev()
    remote.commit(
        files(
            mxjob("deadline", runPolicy={"activeDeadlineSeconds": 600}),
            mxjob("ttl", runPolicy={"ttlSecondsAfterFinished": 60}),
            mxjob("queued", runPolicy={**queued, "suspend": True}),
        ),
        "deadline, ttl, suspend",
    )

    def planned(*extra: str) -> dict[str, dict[str, object]]:
        shown = json.loads(diff(remote, base, "-o", "json", *extra))
        return {
            j["name"]: {"as": kind, **j} for kind in ("changed", "updated") for j in shown[kind]
        }

    on_batch = planned()
    assert on_batch["deadline"]["as"] == "updated"
    assert on_batch["deadline"]["fields"] == [
        {"field": "spec.activeDeadlineSeconds", "before": None, "after": 600}
    ]
    on_jobset = planned("--default-runtime", "jobset")
    assert on_jobset["deadline"]["as"] == "changed"  # replaced: a new JobSet
    for plan in (on_batch, on_jobset):
        assert "ttl" not in plan  # job-wide, by mxgitops once it finished: no live field
        assert plan["queued"]["as"] == "updated"
        assert plan["queued"]["fields"] == [
            {"field": "spec.active", "before": True, "after": False}
        ]
    text = diff(remote, base, "--default-runtime", "jobset")
    assert text.splitlines()[0].startswith("0 added, 1 changed (replaced on sync), 1 updated")
    # the sync's own variable, set in a pull request's workflow, plans the same
    assert diff(remote, base, env={"MXGITOPS_DEFAULT_RUNTIME": "jobset"}) == text


def test_one_problem_is_counted_in_the_singular() -> None:
    """ "1 new problem", "**1 problem**", "1 policy violation": never "1 problems"."""
    from mxgitops.commands.review import Review, render_markdown, render_text
    from mxgitops.manifests.files import Problem

    broken = Problem("jobs/a.yaml", 3, "a", "spec", "policy: hostPID is not allowed")
    result = Review(broken=[broken])
    first = render_text(result).splitlines()[0]
    assert first.endswith(", 1 new problem, 1 of them a policy violation")
    markdown = render_markdown(result)
    assert "**This change adds 1 policy violation**" in markdown
    assert "problems" not in render_markdown(Review(still_broken=[broken]))
