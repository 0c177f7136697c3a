"""Commit statuses: what each commit should show (pure), and posting it to loopback
servers that keep GitHub's and GitLab's documented rules (tests/forges/servers.py)."""

from __future__ import annotations

import time

import pytest

from mxgitops.errors import ConfigError, OutputError
from mxgitops.outputs.forge.post import StatusSettings, post, repository_of, settings_for
from mxgitops.outputs.forge.wanted import MAX_DESCRIPTION, StatusState, wanted
from mxgitops.outputs.summary import JobSummary, Summary
from tests.forges import servers as forgeservers

SYNCED = "a" * 40
EARLIER = "b" * 40


def job(
    name: str, state: str, action: str = "unchanged", reason: str = "", **extra: object
) -> JobSummary:
    return JobSummary("ml", name, action, reason, state=state, **extra)  # type: ignore[arg-type]


def summary(*jobs: JobSummary, problems: tuple[str, ...] = ()) -> Summary:
    return Summary(commit=SYNCED, instance="prod", jobs=jobs, problems=problems)


class Clock:
    """A clock that moves only when the code under test sleeps: no test waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


# -- what each commit should show ------------------------------------------------------


def test_the_description_names_what_to_act_on_first() -> None:
    failed = job(
        "bert-gpu",
        "Failed",
        failure={"replica": "WORKER 1", "reason": "OOMKilled", "exit_code": 137},
    )
    jobs = (job("a", "Running"), job("b", "Running"), job("c", "Queued"), failed)
    [status] = wanted(summary(*jobs), limit=10)
    assert status.state is StatusState.FAILURE
    assert status.description == "2 running, 1 queued; failed: ml/bert-gpu WORKER 1 OOMKilled"


def test_a_job_not_finished_is_pending_and_unknown_states_count_as_not_finished() -> None:
    [status] = wanted(summary(job("a", "Succeeded"), job("b", "Preempted")), limit=10)
    assert status.state is StatusState.PENDING
    assert status.description == "1 succeeded, 1 preempted"
    [done] = wanted(summary(job("a", "Succeeded")), limit=10)
    assert (done.state, done.description) == (StatusState.SUCCESS, "1 succeeded")


@pytest.mark.parametrize(
    ("row", "said"),
    [
        (
            job("x", "", "hold", reason="not created: the policy forbids it (hostNetwork)"),
            "refused by policy: ml/x",
        ),
        (
            job("x", "Running", "hold", reason="its manifest is invalid; the live job is left"),
            "invalid: ml/x",
        ),
        (job("x", "Pending", "create", errors=("jobs is forbidden: RBAC",)), "not written: ml/x"),
    ],
)
def test_refused_and_unwritten_jobs_are_failures(row: JobSummary, said: str) -> None:
    [status] = wanted(summary(row), limit=10)
    assert (status.state, status.description) == (StatusState.FAILURE, said)


def test_an_invalid_manifest_fails_the_synced_commit_only() -> None:
    jobs = (job("old", "Running", commit=EARLIER),)
    synced, earlier = wanted(summary(*jobs, problems=("jobs/bad.yaml:3: bad",)), limit=10)
    assert (synced.state, synced.description) == (
        StatusState.FAILURE,
        "1 running; invalid: jobs/bad.yaml",
    )
    assert (earlier.commit, earlier.state, earlier.description) == (
        EARLIER,
        StatusState.PENDING,
        "1 running",
    )


def test_the_description_fits_140_characters_however_many_fail() -> None:
    failures = [job(f"a-rather-long-job-name-{n}", "Failed") for n in range(20)]
    [status] = wanted(summary(*failures), limit=10)
    assert len(status.description) <= MAX_DESCRIPTION
    assert status.description.startswith("failed: ml/a-rather-long-job-name-0, ")
    assert status.description.endswith(" more)")


def test_a_working_tree_wants_no_status() -> None:
    # A dry run has no statuses sink at all: tests/outputs/test_outputs.py, sinks_for.
    assert wanted(Summary(commit=""), limit=10) == []


# -- settings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/org/jobs.git", "org/jobs"),
        ("https://x-access-token:t@github.com/org/jobs", "org/jobs"),
        ("git@gitlab.com:group/sub/jobs.git", "group/sub/jobs"),
        ("ssh://git@host:2222/org/jobs.git", "org/jobs"),
        ("/srv/jobs.git", None),
    ],
)
def test_the_repository_on_the_forge_comes_from_the_repo_url(url: str, name: str | None) -> None:
    assert repository_of(url) == name


def test_settings_are_checked_before_the_sync() -> None:
    common = {"api_url": None, "url_template": "", "timeout": 10.0}
    with pytest.raises(ConfigError, match="needs a token"):
        settings_for(provider="github", repository=None, repo="https://h/o/n", token=None, **common)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--status-repository"):
        settings_for(provider="github", repository=None, repo="/srv/jobs", token="t", **common)  # type: ignore[arg-type]
    gitea = settings_for(
        provider="gitea", repository=None, repo="http://127.0.0.1:3000/o/n.git", token="t", **common
    )  # type: ignore[arg-type]
    assert (gitea.api_url, gitea.repository) == ("http://127.0.0.1:3000/api/v1", "o/n")


# -- GitHub ---------------------------------------------------------------------------


def github(forge: forgeservers.Forge, timeout: float = 120.0) -> StatusSettings:
    return StatusSettings("github", forge.base, "org/jobs", forge.token, "", timeout)


def test_github_posts_once_and_a_sync_that_changed_nothing_posts_nothing() -> None:
    running = summary(job("a", "Running", commit=EARLIER))
    with forgeservers.serving("github") as forge:
        assert post(running, github(forge)).posted == 2
        again = post(running, github(forge))
        assert (again.posted, again.unchanged) == (0, 2)
        assert len(forge.posts()) == 2
        done = post(summary(job("a", "Succeeded", commit=EARLIER)), github(forge))
        assert done.posted == 2
        latest = forge.latest("org/jobs", EARLIER, "mxgitops/prod")
        assert latest is not None
        assert (latest["state"], latest["description"]) == ("success", "1 succeeded")


def test_github_cap_of_1000_statuses_is_final_not_retried() -> None:
    """G1: the 422 of the 1,001st status is reported once; nothing asks again."""
    with forgeservers.serving("github") as forge:
        forge.statuses[("org/jobs", SYNCED, "mxgitops/prod")] = [
            {
                "id": n,
                "context": "mxgitops/prod",
                "state": "pending",
                "description": str(n),
                "target_url": None,
            }
            for n in range(forgeservers.GITHUB_MAX_STATUSES)
        ]
        with pytest.raises(OutputError, match="maximum number of statuses"):
            post(summary(job("a", "Running")), github(forge))
        assert len(forge.posts()) == 1


def test_github_secondary_rate_limit_is_waited_out_as_retry_after_says() -> None:
    """G4: 403 with Retry-After: the client waits that long, then the status is posted."""
    clock = Clock()
    with forgeservers.serving("github") as forge:
        forge.limit = forgeservers.Limit(requests=2, status=403, retry_after="7")
        posting = post(summary(job("a", "Running")), github(forge), clock=clock, sleep=clock.sleep)
        assert posting.posted == 1
        assert clock.slept == [7.0, 7.0]


def test_github_rate_limit_beyond_the_deadline_is_reported_not_waited() -> None:
    """G4 without Retry-After: a minute, longer than the 30 s this sync may spend."""
    clock = Clock()
    with forgeservers.serving("github") as forge:
        forge.limit = forgeservers.Limit(requests=1, status=429, retry_after=None)
        with pytest.raises(OutputError, match=r"rate limited.*would pass the deadline"):
            post(
                summary(job("a", "Running")),
                github(forge, timeout=30),
                clock=clock,
                sleep=clock.sleep,
            )
        assert clock.slept == []
        assert forge.posts() == []


def test_github_primary_rate_limit_waits_until_its_reset() -> None:
    """G6: 403, x-ratelimit-remaining 0, x-ratelimit-reset in 20 s: waited, then posted."""
    clock = Clock()
    reset = int(time.time()) + 20
    with forgeservers.serving("github") as forge:
        forge.limit = forgeservers.Limit(
            requests=1,
            retry_after=None,
            message="API rate limit exceeded for user ID 1.",
            headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        )
        assert (
            post(summary(job("a", "Running")), github(forge), clock=clock, sleep=clock.sleep).posted
            == 1
        )
        [waited] = clock.slept
        assert 15 < waited <= 20


def test_github_takes_the_description_of_twenty_failures() -> None:
    """G2: cut to 140 characters, the status is accepted."""
    failures = [job(f"a-rather-long-job-name-{n}", "Failed") for n in range(20)]
    with forgeservers.serving("github") as forge:
        assert post(summary(*failures), github(forge)).posted == 1
        latest = forge.latest("org/jobs", SYNCED, "mxgitops/prod")
        assert latest is not None and latest["state"] == "failure"


def test_github_bad_token_is_reported() -> None:
    """G5."""
    with forgeservers.serving("github") as forge:
        settings = StatusSettings("github", forge.base, "org/jobs", "wrong", "", 10)
        with pytest.raises(OutputError, match="401 Requires authentication"):
            post(summary(job("a", "Running")), settings)


def test_github_gets_the_link_of_the_status_url_template() -> None:
    with forgeservers.serving("github") as forge:
        settings = StatusSettings(
            "github",
            forge.base,
            "org/jobs",
            forge.token,
            "https://grafana/d/mx?var-commit={commit}&i={instance}",
            10,
        )
        post(summary(job("a", "Running")), settings)
        latest = forge.latest("org/jobs", SYNCED, "mxgitops/prod")
        assert latest is not None
        assert latest["target_url"] == f"https://grafana/d/mx?var-commit={SYNCED}&i=prod"


# -- GitLab ---------------------------------------------------------------------------


def gitlab(forge: forgeservers.Forge) -> StatusSettings:
    return StatusSettings("gitlab", forge.base, "group/sub/jobs", forge.token, "", 60)


def test_gitlab_follows_its_state_machine() -> None:
    """L1-L3: pending, then running, then a running status whose description changed
    (GitLab refuses to move it to where it is: nothing to do), then success."""
    with forgeservers.serving("gitlab") as forge:
        assert post(summary(job("a", "Pending")), gitlab(forge)).posted == 1
        assert post(summary(job("a", "Running")), gitlab(forge)).posted == 1
        more = summary(job("a", "Running"), job("b", "Running"))
        assert post(more, gitlab(forge)).posted == 1  # refused with 400: the status stands
        latest = forge.latest("group/sub/jobs", SYNCED, "mxgitops/prod")
        assert latest is not None
        assert (latest["status"], latest["description"]) == ("running", "1 running")
        post(summary(job("a", "Succeeded"), job("b", "Failed")), gitlab(forge))
        latest = forge.latest("group/sub/jobs", SYNCED, "mxgitops/prod")
        assert latest is not None
        assert (latest["status"], latest["description"]) == (
            "failed",
            "1 succeeded; failed: ml/b",
        )
        # A finished status is followed by a new one (L2): a job restarted is pending again.
        post(summary(job("a", "Pending", "replace")), gitlab(forge))
        assert len(forge.statuses[("group/sub/jobs", SYNCED, "mxgitops/prod")]) == 2


def test_gitlab_unchanged_sync_posts_nothing() -> None:
    with forgeservers.serving("gitlab") as forge:
        post(summary(job("a", "Succeeded")), gitlab(forge))
        post(summary(job("a", "Succeeded")), gitlab(forge))
        assert len(forge.posts()) == 1


def test_a_submitting_commit_gone_from_the_forge_is_no_error() -> None:
    """After a force-push, a live job's commit may be unknown to the forge (404): the
    synced commit's status is still posted, and nothing is reported."""
    with forgeservers.serving("github") as forge:
        forge.unknown = {EARLIER}
        assert post(summary(job("a", "Running", commit=EARLIER)), github(forge)).posted == 1


def test_an_answer_that_is_not_json_is_reported() -> None:
    """The forge's answers are untrusted input: a 200 with HTML is an error, no crash."""
    import http.server
    import threading

    class Html(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"<html>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(OutputError, match="but no JSON"):
            post(summary(job("a", "Running")), StatusSettings("github", base, "o/n", "t", "", 5))
    finally:
        server.shutdown()
        server.server_close()
