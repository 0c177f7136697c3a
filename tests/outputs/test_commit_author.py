"""Who to tell (issue 48): a sync names the author of each job's commit in its summary
(one git call, cleaned and bounded: a name is anyone's to set), every notification
provider shows it inert, and the dashboard's job and commit pages show it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mxgitops.commands.sync import sync
from mxgitops.outputs import report
from mxgitops.outputs.notify import sink, transitions, webhook
from mxgitops.outputs.notify.notice import Notice
from mxgitops.outputs.notify.settings import Destination, Notifications, read_file
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.runtimes.shared.failure import Failure
from mxgitops.source.githistory import MAX_NAMED_AUTHOR
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.chatserver import ChatServer, chat_server, notifications_file, texts
from tests.helpers.dashboard import page, serving
from tests.helpers.history import NS as DASHBOARD_NS
from tests.helpers.history import add_note, manifest
from tests.helpers.sync import files, git_config, mxjob, summary_of
from tests.kubeapi.harness import KubeAPI

PROVIDERS = ("slack", "msteams", "discord", "googlechat", "mattermost", "generic", "generic-hmac")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
HOSTILE_AUTHOR = "Mallory @channel <!here> <@U123> @everyone *bold* [link](https://evil.example)"
MARKDOWN = ("msteams", "discord", "mattermost")
MENTIONS = ("@channel", "@here", "@everyone", "<!here>", "<@U123>")


def test_a_sync_names_the_author_of_each_job_s_commit_cleaned_and_bounded(
    make_git_remote: Callable[..., GitRemote],
    kubeapi: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # git keeps an escape sequence and a bell in a name; the summary keeps neither.
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ada \x1b[31mLovelace\x07 " + "x" * 300)
    remote = make_git_remote("jobs", files=files(mxjob("fit", servers=0)))
    asked = remote.rev()
    outcome = sync(git_config(remote, kubeapi, tmp_path))
    author = summary_of(outcome, "fit").author
    assert author.startswith("Ada [31mLovelace xxx")
    assert len(author) == MAX_NAMED_AUTHOR
    kept = report.parse_note(remote.note(asked) or "")
    assert kept is not None
    assert next(j for j in kept.jobs if j.name == "fit").author == author


def failed(author: str) -> JobSummary:
    failure = Failure("WORKER 0", exit_code=3, reason="Error", message="boom", pod="t-w-0")
    return JobSummary(
        namespace="ml",
        name="train",
        action="stop",
        reason="finished",
        state="Failed",
        commit=COMMIT,
        author=author,
        failure=failure.__dict__,
    )


def notices(job: JobSummary) -> list[Notice]:
    settings = Notifications((Destination("all", "slack", events=("failed",)),), "")
    queued, _ = transitions.decide(
        Summary(commit=COMMIT, instance="prod", jobs=(job,)),
        [(job.namespace, job.name)],
        settings,
        transitions.Book(),
        datetime(2026, 12, 7, tzinfo=UTC),
        "",
    )
    return queued["all"]


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with chat_server() as server:
        yield server


def received(chat: ChatServer, tmp_path: Path, job: JobSummary) -> dict[str, str]:
    """Each provider's request body, by provider."""
    settings = read_file(notifications_file(tmp_path, chat.url, *PROVIDERS))
    for destination in settings.destinations:
        body, headers = sink.request(destination, notices(job), "prod")
        webhook.post(destination.address, body, headers=headers, timeout=10, what=destination.name)
    return {r.path.lstrip("/"): r.body.decode() for r in chat.requests}


def test_every_provider_names_the_commit_s_author(chat: ChatServer, tmp_path: Path) -> None:
    got = received(chat, tmp_path, failed("Ada Lovelace"))
    assert sorted(got) == sorted(PROVIDERS)
    for provider, body in got.items():
        assert any("Ada Lovelace" in text for text in texts(json.loads(body))), provider
    (told,) = json.loads(got["generic"])["notifications"]
    assert told["author"] == "Ada Lovelace"


def test_a_hostile_author_stays_inert_in_every_provider(chat: ChatServer, tmp_path: Path) -> None:
    got = received(chat, tmp_path, failed(HOSTILE_AUTHOR))
    for generic in ("generic", "generic-hmac"):  # data, not markup: as the commit has it
        (told,) = json.loads(got.pop(generic))["notifications"]
        assert told["author"] == HOSTILE_AUTHOR
    for provider, body in got.items():
        shown = list(texts(json.loads(body)))
        assert any("Mallory" in text for text in shown), provider
        for text in shown:
            for mention in MENTIONS:
                assert mention not in text, (provider, mention, text)
            if provider in MARKDOWN:  # Slack's mrkdwn has no such link; the others' words
                assert "[link](https://evil.example)" not in text, (provider, text)


def test_the_dashboard_shows_the_author_the_sync_named(
    make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    remote = make_git_remote("jobs")
    synced = remote.commit({"jobs/mnist.yaml": manifest("mnist", "0.1")}, "mnist")
    # The job's objects name a commit of another branch: only the note knows its author.
    elsewhere = "f" * 40
    job = JobSummary(
        DASHBOARD_NS, "mnist", "unchanged", "", state="Running", commit=elsewhere,
        author="Grace <b>Hopper</b>",
    )  # fmt: skip
    add_note(remote, synced, report.render_note(Summary(commit=synced, jobs=(job,))))
    with serving(remote, tmp_path / "cache") as (server, _):
        for path in (f"/jobs/{DASHBOARD_NS}/mnist", f"/commits/{synced}"):
            body = page(server, path)
            assert "Grace &lt;b&gt;Hopper&lt;/b&gt;" in body, path
            assert "<b>Hopper" not in body, path
