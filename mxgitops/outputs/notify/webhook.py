"""The generic webhooks' bodies, the HMAC signature, and the one POST every provider's
message is sent with.

`generic` posts JSON of its own (`generic_body`: the notices, as fields, no markup);
`generic-hmac` posts the same body with `X-Signature: sha256=<hex>`, the HMAC-SHA256
of the body's bytes keyed with the secret, as Flux's notification-controller signs
it (and its `generic-hmac` receiver verifies it). A POST is bounded as a whole by a
deadline (`deadline.within`); the address is a credential (Slack's, Discord's and
Teams' URLs carry their token), so no message says it, nor any part of an answer
but its status.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

import urllib3

from mxgitops.errors import OutputError
from mxgitops.outputs.deadline import within
from mxgitops.outputs.notify.notice import Notice

MAX_GENERIC_JOBS = 50
FORMAT_VERSION = 1


def generic_body(notices: Sequence[Notice], instance: str) -> dict[str, Any]:
    shown = notices[:MAX_GENERIC_JOBS]
    return {
        "version": FORMAT_VERSION,
        "source": "mxgitops",
        "instance": instance,
        "count": len(notices),
        "omitted": len(notices) - len(shown),
        "notifications": [
            {
                "event": n.event,
                "namespace": n.namespace,
                "name": n.name,
                "state": n.state,
                "reason": n.reason,
                "commit": n.commit,
                "exitCode": n.exit_code,
                "log": n.log,
                "training": n.training,
                "commitURL": n.commit_url,
                "dashboardURL": n.dashboard_url,
            }
            for n in shown
        ],
    }


def signature(body: bytes, secret: bytes) -> str:
    """The X-Signature header's value: `sha256=` and the body's HMAC-SHA256 in hex."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def post(
    address: str,
    body: bytes,
    *,
    headers: Mapping[str, str],
    timeout: float,
    what: str,
    pool: urllib3.PoolManager | None = None,
) -> None:
    """POST `body` to `address` within `timeout` seconds, the whole call; an OutputError
    naming `what` (never the address) unless the answer is a 2xx."""
    manager = pool or urllib3.PoolManager(retries=False, num_pools=1)

    def posting() -> int:
        answer = manager.request(
            "POST",
            address,
            body=body,
            headers={"Content-Type": "application/json", "User-Agent": "mxgitops", **headers},
            timeout=urllib3.Timeout(total=timeout),
            redirect=False,
            preload_content=False,
        )
        try:
            answer.read(64 * 1024)  # drained, bounded, never shown
        finally:
            answer.release_conn()
        return int(answer.status)

    try:
        status = within(timeout, posting, what)
    except urllib3.exceptions.TimeoutError:  # the socket's own timeout, at the deadline too
        raise OutputError(f"{what}: no answer within {timeout:g} s") from None
    except urllib3.exceptions.HTTPError as exc:  # its words may quote the URL
        raise OutputError(f"{what}: not delivered ({type(exc).__name__})") from None
    except OSError as exc:
        raise OutputError(f"{what}: not delivered ({exc.strerror or type(exc).__name__})") from None
    if not 200 <= status < 300:
        raise OutputError(f"{what}: not delivered (HTTP {status})")
