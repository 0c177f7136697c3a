"""webhook.py: each forge's signature verified by a constant-time comparison, forged and
missing ones refused, a push to the tracked branch told from everything else, replays
known by their delivery id or their body, in bounded memory."""

from __future__ import annotations

import hmac
import json

import pytest

from mxgitops.receiver import webhook
from mxgitops.receiver.webhook import Deliveries, Forge, Refusal, lowered, push_of, verify
from tests.forges.webhooks import SECRET, push_body, signed

FORGES = ["github", "gitlab", "gitea"]


def headers(forge: str, body: bytes, **kwargs: str) -> dict[str, str]:
    return lowered(signed(forge, body, **kwargs).items())


@pytest.mark.parametrize("forge", FORGES)
def test_each_forges_signature_is_verified(forge: str) -> None:
    body = push_body()
    assert verify(headers(forge, body), body, SECRET) is Forge(forge)


@pytest.mark.parametrize("forge", FORGES)
def test_a_signature_made_with_another_secret_is_refused(forge: str) -> None:
    body = push_body()
    with pytest.raises(Refusal) as refused:
        verify(headers(forge, body, secret=b"guessed"), body, SECRET)
    assert refused.value.status == 401
    assert "does not match the secret" in refused.value.reason


@pytest.mark.parametrize("forge", ["github", "gitea"])
def test_a_body_changed_after_signing_is_refused(forge: str) -> None:
    signed_headers = headers(forge, push_body(branch="main"))
    with pytest.raises(Refusal) as refused:
        verify(signed_headers, push_body(branch="main", commit="b" * 40), SECRET)
    assert refused.value.status == 401


def test_no_signature_is_refused_naming_the_headers_looked_for() -> None:
    with pytest.raises(Refusal) as refused:
        verify(lowered([("X-GitHub-Event", "push")]), push_body(), SECRET)
    assert refused.value.status == 401
    for header in ("X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature"):
        assert header in refused.value.reason


def test_a_github_signature_without_its_prefix_is_refused() -> None:
    body = push_body()
    bare = headers("gitea", body)["x-gitea-signature"]
    with pytest.raises(Refusal):
        verify({"x-hub-signature-256": bare}, body, SECRET)


@pytest.mark.parametrize("forge", FORGES)
def test_every_comparison_is_constant_time(forge: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    constant_time = hmac.compare_digest

    def compare(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr(webhook.hmac, "compare_digest", compare)
    body = push_body()
    verify(headers(forge, body), body, SECRET)
    with pytest.raises(Refusal):
        verify(headers(forge, body, secret=b"other"), body, SECRET)
    assert len(compared) == 2


def test_gitea_is_judged_by_its_own_header_when_it_sends_githubs_too() -> None:
    body = push_body()
    both = {**headers("github", body), **headers("gitea", body)}
    assert verify(both, body, SECRET) is Forge.GITEA


@pytest.mark.parametrize("forge", FORGES)
def test_a_push_to_the_tracked_branch(forge: str) -> None:
    body = push_body(commit="c" * 40)
    push = push_of(Forge(forge), headers(forge, body, delivery="abc"), body, "main")
    assert (push.branch, push.commit, push.delivery) == ("main", "c" * 40, "abc")


@pytest.mark.parametrize(
    ("body", "event", "status", "said"),
    [
        (push_body(branch="dev"), "", 202, "a push to refs/heads/dev, not to refs/heads/main"),
        (json.dumps({"ref": "refs/tags/v1"}).encode(), "", 202, "refs/tags/v1"),
        (push_body(), "ping", 202, "the event is 'ping', not a push"),
        (push_body(deleted=True), "", 202, "the push deleted refs/heads/main"),
        (push_body(commit="0" * 40), "", 202, "the push deleted refs/heads/main"),
        (push_body(commit="0" * 64), "", 202, "the push deleted refs/heads/main"),
        (b"{not json", "", 400, "the body is not JSON"),
        (b"\xff\xfe", "", 400, "the body is not JSON"),
        (b"[1, 2]", "", 400, "not a push event"),
        (json.dumps({"ref": 3}).encode(), "", 400, "not a push event"),
    ],
)
def test_everything_else_is_answered_with_its_reason(
    body: bytes, event: str, status: int, said: str
) -> None:
    with pytest.raises(Refusal) as refused:
        push_of(Forge.GITHUB, headers("github", body, event=event), body, "main")
    assert refused.value.status == status
    assert said in refused.value.reason


def test_without_a_branch_the_repositorys_default_branch_is_tracked() -> None:
    body = push_body(branch="main")
    assert push_of(Forge.GITHUB, headers("github", body), body, "").branch == "main"
    gitlab = json.dumps({"ref": "refs/heads/trunk", "project": {"default_branch": "trunk"}})
    gitlab_headers = headers("gitlab", gitlab.encode())
    assert push_of(Forge.GITLAB, gitlab_headers, gitlab.encode(), "").branch == "trunk"


def test_a_push_without_a_delivery_id_is_known_by_its_body() -> None:
    body = push_body()
    bare = {k: v for k, v in headers("github", body).items() if k != "x-github-delivery"}
    push = push_of(Forge.GITHUB, bare, body, "main")
    assert push.delivery == push.digest


def test_a_replay_is_known_by_its_delivery_id_or_its_body() -> None:
    deliveries = Deliveries()

    def push(body: bytes, delivery: str) -> webhook.Push:
        return push_of(Forge.GITHUB, headers("github", body, delivery=delivery), body, "main")

    assert deliveries.first_time(push(push_body(commit="1" * 40), "d-1"))
    assert not deliveries.first_time(push(push_body(commit="1" * 40), "d-1"))  # sent again
    assert not deliveries.first_time(push(push_body(commit="1" * 40), "d-2"))  # same body
    assert not deliveries.first_time(push(push_body(commit="2" * 40), "d-1"))  # same id
    assert deliveries.first_time(push(push_body(commit="3" * 40), "d-3"))


def test_the_deliveries_remembered_are_bounded() -> None:
    deliveries = Deliveries(size=100)
    for n in range(1_000):
        body = push_body(commit=f"{n + 1:040d}")  # not zeros: a deleted branch
        push = push_of(Forge.GITEA, headers("gitea", body, delivery=str(n)), body, "main")
        assert deliveries.first_time(push)
    assert len(deliveries) == 200  # an id and a digest for each of the last 100


def test_a_push_sent_as_a_form_is_read_from_its_payload_field() -> None:
    from urllib.parse import urlencode

    form = urlencode({"payload": push_body(commit="f" * 40).decode()}).encode()
    sent = {**headers("github", form), "content-type": "application/x-www-form-urlencoded"}
    assert verify(sent, form, SECRET) is Forge.GITHUB  # the signature covers the form
    assert push_of(Forge.GITHUB, sent, form, "main").commit == "f" * 40
    with pytest.raises(Refusal) as refused:
        push_of(Forge.GITHUB, sent, b"payload=%7Bnope", "main")
    assert refused.value.status == 400


def test_a_gitlab_push_that_deletes_the_branch_starts_nothing() -> None:
    """GitLab says a deleted branch only by `after` (and `checkout_sha`: null), with no
    `deleted` field: such a push started a sync."""
    payload = {
        "object_kind": "push",
        "ref": "refs/heads/main",
        "before": "c" * 40,
        "after": "0" * 40,
        "checkout_sha": None,
        "project": {"default_branch": "main"},
    }
    body = json.dumps(payload).encode()
    with pytest.raises(Refusal) as refused:
        push_of(Forge.GITLAB, headers("gitlab", body), body, "main")
    assert (refused.value.status, refused.value.reason) == (
        202,
        "ignored: the push deleted refs/heads/main",
    )


@pytest.mark.parametrize(
    ("given", "branch"),
    [("main", "main"), ("refs/heads/main", "main"), ("refs/heads/team/a", "team/a"), ("", "")],
)
def test_the_tracked_branch_is_named_once_however_it_is_given(given: str, branch: str) -> None:
    assert webhook.tracked_branch(given) == branch


@pytest.mark.parametrize("given", ["refs/tags/v1", "refs/heads/", "HEAD", "a" * 40])
def test_what_is_no_branch_is_refused_as_the_tracked_one(given: str) -> None:
    with pytest.raises(ValueError, match="is not a branch"):
        webhook.tracked_branch(given)
