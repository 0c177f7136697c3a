"""Each provider's request, as a loopback server receives it, against the provider's
documented shape: field names and types, length limits (Slack's 150-character header
and 3,000-character text blocks, Discord's 2,000-character content and embed limits),
escaping of its markup and no mention left alive; generic-hmac's signature verified
as its receiver does."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mxgitops.outputs.notify import sink, transitions, webhook
from mxgitops.outputs.notify.notice import Notice
from mxgitops.outputs.notify.settings import Destination, Notifications, read_file
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.record.reading import TrainingLog
from mxgitops.record.resources import ResourceUse
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.runtimes.shared.failure import Failure
from tests.helpers.chatserver import ChatServer, chat_server, notifications_file

PROVIDERS = ("slack", "msteams", "discord", "googlechat", "mattermost", "generic", "generic-hmac")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
HOSTILE = (
    "@channel @here @everyone <!here> <!channel> <@U123> <users/all> <at>boss</at> "
    "<script>x</script> *bold* _it_ ``` [link](https://evil.example) & &amp;"
)
MENTIONS = (
    "@channel",
    "@here",
    "@everyone",
    "<!here>",
    "<!channel>",
    "<@U123>",
    "<users/all>",
    "<at>",
)


def failed_job(name: str, log: str = HOSTILE, message: str = HOSTILE) -> JobSummary:
    failure = Failure(
        "WORKER 0", exit_code=3, reason="Error", message=message, pod=f"{name}-w-0", log=log
    )
    record = TrainingRecord(
        log=TrainingLog(epoch=10, finished=True, epochs=10, latest={"accuracy": 0.9312}),
        resources=ResourceUse(
            gpu_hours=3.25,
            cpu_core_hours=1.0,
            pods=2,
            estimate=False,
            started="2026-12-07T01:00:00Z",
            finished="2026-12-07T02:05:00Z",
        ),
    )
    return JobSummary(
        namespace="ml",
        name=name,
        action="stop",
        reason="finished",
        state="Failed",
        runtime_id="abc12",
        commit=COMMIT,
        failure=failure.__dict__,
        record=record,
    )


def notices_for(jobs: list[JobSummary], dashboard: str = "https://mx.example") -> list[Notice]:
    destination = Destination("all", "slack", events=("failed",))
    settings = Notifications((destination,), dashboard)
    summary = Summary(commit=COMMIT, instance="prod", jobs=tuple(jobs))
    queued, _ = transitions.decide(
        summary,
        [(j.namespace, j.name) for j in jobs],
        settings,
        transitions.Book(),
        datetime(2026, 12, 7, tzinfo=UTC),
        "https://token:XXTOKENXX@git.example/org/jobs.git",
    )
    return queued["all"]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def sent(server: ChatServer, tmp_path: Path, notices: list[Notice]) -> dict[str, Any]:
    """What each provider's destination received for `notices`, by provider."""
    settings = read_file(notifications_file(tmp_path, server.url, *PROVIDERS))
    for destination in settings.destinations:
        body, headers = sink.request(destination, notices, "prod")
        webhook.post(destination.address, body, headers=headers, timeout=10, what=destination.name)
    assert len(server.requests) == len(PROVIDERS)
    return {r.path.lstrip("/"): r for r in server.requests}


def texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


def assert_inert(payload: Any) -> None:
    for text in texts(payload):
        for mention in MENTIONS:
            assert mention not in text, (mention, text)


def test_each_provider_gets_its_documented_shape(server: ChatServer, tmp_path: Path) -> None:
    got = sent(server, tmp_path, notices_for([failed_job("train")]))
    for path, request in got.items():
        assert request.headers["Content-Type"] == "application/json", path
        assert "XXTOKENXX" not in request.body.decode(), path

    slack = got["slack"].json
    assert isinstance(slack["text"], str) and len(slack["text"]) <= 3000
    header, facts, log, context = slack["blocks"]
    assert header["type"] == "header" and header["text"]["type"] == "plain_text"
    assert len(header["text"]["text"]) <= 150
    assert header["text"]["text"] == "ml/train failed"
    for section in (facts, log):
        assert section["type"] == "section" and section["text"]["type"] == "mrkdwn"
        assert len(section["text"]["text"]) <= 3000
    assert "*Exit code:* 3" in facts["text"]["text"]
    assert "epochs 10/10, accuracy 0.9312, 1 h 5 min, 3.25 GPU-hours" in facts["text"]["text"]
    assert log["text"]["text"].startswith("```\n")
    assert context["type"] == "context"
    assert context["elements"][0]["text"] == (
        f"<https://git.example/org/jobs/commit/{COMMIT}|Commit> · "
        "<https://mx.example/jobs/ml/train|Dashboard>"
    )
    assert_inert(slack)
    assert "&lt;!here&gt;" in facts["text"]["text"]

    teams = got["msteams"].json
    assert teams["type"] == "message"
    (attachment,) = teams["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    kinds = [b["type"] for b in card["body"]]
    assert kinds == ["TextBlock", "FactSet", "TextBlock"]
    assert {"title": "Exit code", "value": "3"} in card["body"][1]["facts"]
    assert [a["type"] for a in card["actions"]] == ["Action.OpenUrl", "Action.OpenUrl"]
    assert_inert(teams)

    discord = got["discord"].json
    assert len(discord["content"]) <= 2000
    assert discord["allowed_mentions"] == {"parse": []}
    (embed,) = discord["embeds"]
    assert len(embed["title"]) <= 256 and len(embed["description"]) <= 4096
    assert isinstance(embed["color"], int)
    assert len(embed["fields"]) <= 25
    assert all(len(f["name"]) <= 256 and len(f["value"]) <= 1024 for f in embed["fields"])
    assert embed_total(embed) <= 6000
    assert {"name": "Exit code", "value": "3", "inline": True} in embed["fields"]
    assert_inert(discord)

    chat = got["googlechat"].json
    (card2,) = chat["cardsV2"]
    assert card2["cardId"].startswith("mxgitops-")
    assert card2["card"]["header"]["title"] == "ml/train failed"
    widgets = card2["card"]["sections"][0]["widgets"]
    assert {"decoratedText": {"topLabel": "Exit code", "text": "3", "wrapText": True}} in widgets
    buttons = widgets[-1]["buttonList"]["buttons"]
    assert buttons[1] == {
        "text": "Dashboard",
        "onClick": {"openLink": {"url": "https://mx.example/jobs/ml/train"}},
    }
    assert_inert(chat)
    assert not any("<script>" in t for t in texts(chat))

    mattermost = got["mattermost"].json
    assert isinstance(mattermost["text"], str) and len(mattermost["text"]) <= 4000
    assert "**Exit code:** 3" in mattermost["text"]
    assert_inert(mattermost)

    generic = got["generic"].json
    assert generic["count"] == 1 and generic["omitted"] == 0
    (told,) = generic["notifications"]
    assert told["event"] == "failed" and told["exitCode"] == 3
    assert told["namespace"] == "ml" and told["name"] == "train"
    assert told["log"] == HOSTILE  # JSON needs no markup escaping: what the log said
    assert told["dashboardURL"] == "https://mx.example/jobs/ml/train"


def embed_total(embed: dict[str, Any]) -> int:
    fields = sum(len(f["name"]) + len(f["value"]) for f in embed.get("fields", ()))
    return len(embed.get("title", "")) + len(embed.get("description", "")) + fields


def test_generic_hmac_is_signed_as_its_receiver_verifies(
    server: ChatServer, tmp_path: Path
) -> None:
    got = sent(server, tmp_path, notices_for([failed_job("train")]))
    request = got["generic-hmac"]
    algorithm, _, digest = request.headers["X-Signature"].partition("=")
    assert algorithm == "sha256"
    expected = hmac.new(b"s3cret", request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(digest, expected)
    assert request.json == got["generic"].json
    tampered = request.body.replace(b'"train"', b'"other"')
    assert not hmac.compare_digest(
        digest, hmac.new(b"s3cret", tampered, hashlib.sha256).hexdigest()
    )


def test_long_and_markup_heavy_text_stays_within_every_limit(
    server: ChatServer, tmp_path: Path
) -> None:
    """Every character a markup escapes (& becomes &amp;) in a long log and message: the
    escaped text is what must fit, and it does, without half an entity at the cut."""
    heavy = "\n".join(("&<>*_`@here " * 40) for _ in range(200))
    got = sent(server, tmp_path, notices_for([failed_job("train", log=heavy, message=heavy)]))
    slack = got["slack"].json
    assert all(len(b["text"]["text"]) <= 3000 for b in slack["blocks"] if b["type"] == "section")
    for block in slack["blocks"][1:3]:
        assert (
            not block["text"]["text"]
            .rstrip("…\n`")
            .endswith(("&", "&a", "&am", "&amp", "&l", "&lt"))
        )
    discord = got["discord"].json
    assert len(discord["content"]) <= 2000 and embed_total(discord["embeds"][0]) <= 6000
    assert all(len(f["value"]) <= 1024 for f in discord["embeds"][0]["fields"])
    assert len(got["mattermost"].json["text"]) <= 4000
    for request in got.values():
        assert len(request.body) < 28 * 1024  # Teams' limit, the smallest of them
        assert_inert(
            request.json
        ) if request.path != "/generic" and request.path != "/generic-hmac" else None


def test_a_burst_is_one_message_per_destination_with_the_count_and_the_first_jobs(
    server: ChatServer, tmp_path: Path
) -> None:
    jobs = [failed_job(f"train-{n:02}") for n in range(12)]
    got = sent(server, tmp_path, notices_for(jobs))
    slack = got["slack"].json
    assert slack["blocks"][0]["text"]["text"] == "12 jobs need a look: 12 failed"
    listed = slack["blocks"][1]["text"]["text"]
    assert [line.split()[1] for line in listed.splitlines()[:5]] == [
        f"ml/train-{n:02}" for n in range(5)
    ]
    assert listed.splitlines()[-1] == "and 7 more"
    assert "train-05" not in listed
    assert got["discord"].json["content"] == "12 jobs need a look: 12 failed"
    assert "and 7 more" in got["mattermost"].json["text"]
    assert got["generic"].json["count"] == 12
    assert len(got["generic"].json["notifications"]) == 12
    assert json.dumps(got["msteams"].json).count("ml/train-") == 5
