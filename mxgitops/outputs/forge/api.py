"""HTTP calls to a forge's REST API, rate limits waited out within a deadline.

Every forge limits how fast a token may write. GitHub answers 403 or 429 with
`Retry-After` (a secondary rate limit), or with `x-ratelimit-remaining: 0` and
`x-ratelimit-reset` (the primary one), and asks a client that gets neither header
to wait a minute; GitLab answers 429 with `Retry-After`. A wait that ends before
the deadline is waited; one that would not is an `OutputError` naming it, as is any
other 4xx (a token without the permission, GitHub's 422 for a commit with 1,000
statuses): those do not get better by asking again. A 5xx or a dropped connection
is retried, briefly. Each call is bounded as a whole by what is left before the
deadline (`deadline.within`): a forge that drips its answer a byte at a time never
lets a socket read time out, and would hold the sync as long as it liked.
"""

from __future__ import annotations

import functools
import http.client
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3

from mxgitops.errors import OutputError
from mxgitops.outputs.deadline import within

SECONDARY_LIMIT_WAIT = 60.0  # GitHub: "wait for at least one minute" without a header
RETRIES = 4  # of a 5xx or a dropped connection
MAX_BODY = 1 << 20  # bytes of an answer read: a status list is small


class Refused(OutputError):
    """The forge answered with an error that asking again does not fix."""

    def __init__(self, message: str, *, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass
class Api:
    base: str  # https://api.github.com, https://gitlab.example/api/v4, …/api/v1
    headers: Mapping[str, str]
    deadline: float  # on `clock`: no wait or call may end after it
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time  # for x-ratelimit-reset, an epoch time
    pool: urllib3.PoolManager = field(
        default_factory=lambda: urllib3.PoolManager(retries=False, num_pools=2)
    )

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """The decoded JSON answer of `method base+path`."""
        url = self.base.rstrip("/") + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "User-Agent": "mxgitops", **self.headers}
        if data is not None:
            headers["Content-Type"] = "application/json"
        failures = 0
        while True:
            left = self.deadline - self.clock()
            if left <= 0:
                raise OutputError(f"{method} {url}: no time left before the deadline")
            try:
                status, answer_headers, text = within(
                    left,
                    functools.partial(self._send, method, url, data, headers, left),
                    f"{method} {url}",
                )
            except (ValueError, TypeError, http.client.HTTPException) as exc:
                # http.client's words for a header it cannot send quote the header, and
                # the token in it: its kind is said, not its words.
                raise OutputError(
                    f"{method} {url}: the request could not be sent ({type(exc).__name__})"
                ) from None
            except urllib3.exceptions.HTTPError as exc:
                failures += 1
                if failures > RETRIES:
                    raise OutputError(f"{method} {url}: {exc}") from exc
                self._wait(min(2.0**failures, 8.0), f"{method} {url}: {exc}")
                continue
            if status < 300:
                try:
                    return json.loads(text) if text.strip() else None
                except ValueError as exc:  # an answer is untrusted input, like any
                    raise OutputError(f"{method} {url}: {status} but no JSON: {exc}") from exc
            wait = self._rate_limited(status, answer_headers, text)
            if wait is not None:
                self._wait(wait, f"{method} {url}: rate limited ({status})")
                continue
            if status >= 500 and failures < RETRIES:
                failures += 1
                self._wait(min(2.0**failures, 8.0), f"{method} {url}: {status}")
                continue
            raise Refused(f"{method} {url}: {status} {_message(text)}", status=status, body=text)

    def _send(
        self, method: str, url: str, data: bytes | None, headers: Mapping[str, str], left: float
    ) -> tuple[int, Any, str]:
        """One request: its status, headers and body (at most MAX_BODY bytes)."""
        answer = self.pool.request(
            method,
            url,
            body=data,
            headers=headers,
            timeout=urllib3.Timeout(total=left),
            preload_content=False,
            redirect=False,
        )
        text = answer.read(MAX_BODY).decode("utf-8", "replace")
        answer.release_conn()
        return answer.status, answer.headers, text

    def _rate_limited(self, status: int, headers: Any, text: str) -> float | None:
        """How long to wait before asking again, if this answer is a rate limit."""
        if status not in (403, 429):
            return None
        after = headers.get("Retry-After")
        if after is not None:
            try:
                return max(0.0, float(after))
            except ValueError:
                return SECONDARY_LIMIT_WAIT
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
            try:
                return max(0.0, float(headers["x-ratelimit-reset"]) - self.now())
            except ValueError:
                return SECONDARY_LIMIT_WAIT
        if status == 429 or "rate limit" in text.lower():
            return SECONDARY_LIMIT_WAIT
        return None  # a 403 that is no rate limit: the token may not do this

    def _wait(self, seconds: float, why: str) -> None:
        if self.clock() + seconds >= self.deadline:
            raise OutputError(f"{why}; waiting {seconds:g} s would pass the deadline")
        self.sleep(seconds)


def _message(text: str) -> str:
    """The forge's own message from an error body, on one line."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        said = data.get("message") or data.get("error") or text
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            first = errors[0]
            said = f"{said} ({first.get('message', first) if isinstance(first, dict) else first})"
        text = str(said)
    return " ".join(text.split())[:300]
