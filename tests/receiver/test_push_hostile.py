"""A signed push whose fields are hostile (a sender who has the secret, or a forge's
bug): its ref, event, delivery and commit are bounded and on one line in the answer,
the log and the Job's annotation, whatever their size."""

from __future__ import annotations

import json

import pytest

from mxgitops.receiver.webhook import Forge, Refusal, push_of

HUGE = 200_000
EVIL = "main\n\x1b[31mforged log line\u202e"


def body(**fields: object) -> bytes:
    return json.dumps({"ref": "refs/heads/main", "after": "a" * 40, **fields}).encode()


def headers(event: str = "push", delivery: str = "d-1") -> dict[str, str]:
    return {"x-github-event": event, "x-github-delivery": delivery}


@pytest.mark.parametrize("ref", ["refs/heads/" + "x" * HUGE, "refs/heads/" + EVIL])
def test_a_push_to_a_hostile_ref_is_refused_in_a_bounded_line(ref: str) -> None:
    with pytest.raises(Refusal) as refused:
        push_of(Forge.GITHUB, headers(), body(ref=ref), "main")
    assert refused.value.status == 202
    assert len(refused.value.reason) <= 400
    assert refused.value.reason.isprintable()


def test_a_hostile_event_header_is_answered_in_a_bounded_line() -> None:
    with pytest.raises(Refusal) as refused:
        push_of(Forge.GITHUB, headers(event="e" * HUGE + EVIL), body(), "main")
    assert len(refused.value.reason) <= 400 and refused.value.reason.isprintable()


@pytest.mark.parametrize("after", ["f" * HUGE, EVIL, "not-a-commit"])
def test_a_commit_that_is_no_commit_id_is_not_kept(after: str) -> None:
    push = push_of(Forge.GITHUB, headers(), body(after=after), "main")
    assert push.commit == ""


def test_a_hostile_delivery_id_is_bounded_and_on_one_line() -> None:
    push = push_of(Forge.GITHUB, headers(delivery=EVIL * 100), body(), "main")
    assert len(push.delivery) <= 128 and push.delivery.isprintable()


def test_a_hostile_default_branch_is_refused_in_a_bounded_line() -> None:
    payload = body(ref="refs/heads/x", repository={"default_branch": "b" * HUGE + EVIL})
    with pytest.raises(Refusal) as refused:
        push_of(Forge.GITHUB, headers(), payload, "")
    assert len(refused.value.reason) <= 400 and refused.value.reason.isprintable()
