"""A forge's push webhook, judged: is it signed with our secret, is it a push to the
tracked branch, has it been seen before. Pure: no sockets, no cluster.

The three forges sign differently, each verified by a constant-time comparison
(`hmac.compare_digest`) of what the forge sent with what the secret makes:

- GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`;
- GitLab: `X-Gitlab-Token: <the secret itself>` (GitLab signs nothing: the token
  proves the sender knows the secret, and TLS keeps it from others);
- Gitea: `X-Gitea-Signature: <hex HMAC-SHA256 of the body>` (Gitea also sends
  GitHub's headers; its own are read first).

The signature is checked before the body is parsed: nothing of an unverified body is
read. Only then the event (`push`, `Push Hook`), the branch (`ref:
refs/heads/<branch>`) and the delivery: a request is a replay when its delivery id,
or its body, was seen before. A body is its own identity too because a forge's
delivery header is not covered by the signature: a captured request sent again
under a new id is still the same push.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qs

from mxgitops.kube.clustertext import said

MAX_BODY = 1 << 20  # bytes: a push of hundreds of commits is far less
MAX_SHOWN = 200  # characters of a ref or event name repeated in an answer or the log
MAX_DELIVERY = 128  # characters kept of a delivery id (forges send a UUID)
REMEMBERED_DELIVERIES = 10_000  # ids and body digests kept to refuse replays (~1 MiB)
_BRANCHES = "refs/heads/"
_NO_COMMIT = re.compile(r"0{40}|0{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class Forge(StrEnum):
    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"


# forge -> (the header that signs, the header naming the event, the delivery id's header)
HEADERS: dict[Forge, tuple[str, str, str]] = {
    Forge.GITEA: ("X-Gitea-Signature", "X-Gitea-Event", "X-Gitea-Delivery"),
    Forge.GITHUB: ("X-Hub-Signature-256", "X-GitHub-Event", "X-GitHub-Delivery"),
    Forge.GITLAB: ("X-Gitlab-Token", "X-Gitlab-Event", "X-Gitlab-Event-UUID"),
}
PUSH_EVENTS = {Forge.GITHUB: "push", Forge.GITLAB: "Push Hook", Forge.GITEA: "push"}


class Refusal(Exception):
    """A request answered with `status` and `reason`, starting nothing."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Push:
    """A verified push to the tracked branch."""

    forge: Forge
    delivery: str  # the forge's delivery id, else the body's digest
    digest: str  # SHA-256 of the body
    branch: str
    commit: str  # the branch's new tip ("after")


def lowered(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A request's headers by their names in lower case (what `verify` and `push_of`
    read): HTTP's names are case-insensitive."""
    return {name.lower(): value for name, value in headers}


def verify(headers: Mapping[str, str], body: bytes, secret: bytes) -> Forge:
    """The forge whose signature on `body` is right; a 401 `Refusal` for none."""
    for forge, (header, _, _) in HEADERS.items():
        sent = headers.get(header.lower())
        if sent is None:
            continue
        if not hmac.compare_digest(sent.strip().encode(), _expected(forge, body, secret)):
            raise Refusal(401, f"the {header} header does not match the secret")
        return forge
    names = ", ".join(header for header, _, _ in HEADERS.values())
    raise Refusal(401, f"no signature: none of {names}")


def _expected(forge: Forge, body: bytes, secret: bytes) -> bytes:
    if forge is Forge.GITLAB:
        return secret
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    return b"sha256=" + digest if forge is Forge.GITHUB else digest


def push_of(forge: Forge, headers: Mapping[str, str], body: bytes, branch: str) -> Push:
    """The push a verified request announces; a 400 `Refusal` for a body that is not a
    JSON object, a 202 one (nothing to do) for another event or branch. With `branch`
    empty, the tracked branch is the repository's default one, as the payload says."""
    _, event_header, delivery_header = HEADERS[forge]
    event = headers.get(event_header.lower(), "")
    if event != PUSH_EVENTS[forge]:
        raise Refusal(202, f"ignored: the event is {shown(event) or 'not named'!r}, not a push")
    payload = _payload(headers.get("content-type", ""), body)
    if not isinstance(payload, dict) or not isinstance(payload.get("ref"), str):
        raise Refusal(400, "the body is not a push event: no ref")
    tracked = branch or _default_branch(payload)
    if not tracked:
        raise Refusal(400, "no --branch, and the push names no default branch")
    ref = payload["ref"]
    if ref != f"refs/heads/{tracked}":
        raise Refusal(202, f"ignored: a push to {shown(ref)}, not to refs/heads/{shown(tracked)}")
    after = payload.get("after") or payload.get("checkout_sha") or ""
    # GitLab says a deleted branch only by an `after` of zeros (SHA-1 or SHA-256 wide).
    if payload.get("deleted") is True or (isinstance(after, str) and _NO_COMMIT.fullmatch(after)):
        raise Refusal(202, f"ignored: the push deleted {shown(ref)}")
    digest = hashlib.sha256(body).hexdigest()
    delivery = headers.get(delivery_header.lower(), "").strip()
    return Push(
        forge=forge,
        delivery=shown(delivery, MAX_DELIVERY) or digest,
        digest=digest,
        branch=tracked,
        # Only a commit id: it goes into the log, the answer and the Job's annotation.
        commit=after if isinstance(after, str) and _COMMIT.fullmatch(after) else "",
    )


def shown(value: str, limit: int = MAX_SHOWN) -> str:
    """What a request says (a ref, an event's or a delivery's name), fit to repeat in
    the answer, the log and an annotation: one line, hidden characters escaped, bounded."""
    return said(value, limit)


def tracked_branch(given: str) -> str:
    """The branch name `--branch` (the sync's MXGITOPS_REF) names: `main` or
    `refs/heads/main`, which `sync --ref` takes too; "" for none. A ValueError for a
    ref that is no branch (a tag, HEAD, a commit): no push would ever match it."""
    branch = given.removeprefix(_BRANCHES) if given.startswith(_BRANCHES) else given
    if given.startswith(_BRANCHES) and not branch:
        raise ValueError(f"{given!r} is not a branch: no name after {_BRANCHES}")
    if branch.startswith("refs/") or branch == "HEAD" or _COMMIT.fullmatch(branch):
        raise ValueError(f"{given!r} is not a branch: pushes to a branch start a sync")
    return branch


def _payload(content_type: str, body: bytes) -> Any:
    """The JSON of the body, or of its `payload` field when a forge sends a form
    (GitHub's and Gitea's `application/x-www-form-urlencoded` content type)."""
    try:
        if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
            fields = parse_qs(body.decode(), strict_parsing=True, max_num_fields=16)
            body = fields.get("payload", [""])[0].encode()
        return json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is one
        raise Refusal(400, f"the body is not JSON: {exc}") from exc


def _default_branch(payload: Mapping[str, Any]) -> str:
    # GitHub and Gitea: repository.default_branch; GitLab: project.default_branch.
    for owner in ("repository", "project"):
        section = payload.get(owner)
        if isinstance(section, dict) and isinstance(section.get("default_branch"), str):
            return str(section["default_branch"])
    return ""


class Deliveries:
    """The last `REMEMBERED_DELIVERIES` pushes' ids and body digests: a push whose id or
    body was seen is a replay. Bounded: the oldest are forgotten first."""

    def __init__(self, size: int = REMEMBERED_DELIVERIES) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def first_time(self, push: Push) -> bool:
        """Whether `push` is new; it is remembered either way."""
        keys = (f"id:{push.forge}:{push.delivery}", f"body:{push.digest}")
        new = not any(key in self._seen for key in keys)
        for key in keys:
            self._seen[key] = None
            self._seen.move_to_end(key)
        while len(self._seen) > 2 * self._size:
            self._seen.popitem(last=False)
        return new

    def __len__(self) -> int:
        return len(self._seen)
