"""Seeded fault injection and the request log.

Fault spec syntax (``--faults`` and ``KubeAPI.faults(spec)``): a comma
separated list of ``VERBS[/RESOURCES]:ACTION=VALUE`` rules.

* ``VERBS``: get, list, watch, create, update, patch, delete,
  deletecollection, ``write`` (create, update, patch, delete,
  deletecollection), ``read`` (get, list, watch) or ``*``; several joined
  with ``+`` (``get+list``).
* ``RESOURCES`` (optional): plural resource names joined with ``+``
  (``jobs+services``) or ``*``.
* ``ACTION=VALUE``: ``500=P``, ``503=P``, ``429=P`` (with ``Retry-After``),
  ``drop=P`` (the connection is closed without a response, before the server
  acts), ``lose=P`` (the server acts, then the connection is closed without its
  response: a response lost on the way back), ``hang=P`` (the request is read
  and never answered until the server stops or :meth:`Faults.configure` is
  called again; :attr:`Faults.hanging` is set when one hangs) where ``P`` is a
  probability in [0, 1]; ``delay=Nms`` (always) or ``delay=Nms@P``.
* A LIST answered by a server gone wrong, instead of the real page (``list`` rules;
  ``=P`` as above): ``endless`` (a 200 whose items never end), ``trickle`` (a 200
  whose body never ends, a space now and then: no read ever times out), ``loop``
  (an empty page whose ``continue`` token is always the same), ``expire`` (a page
  with a ``continue`` token, and 410 Expired for every continued page), ``deep``
  (an item nested 2,000 levels deep), ``nometa`` (an item without ``metadata``).
  Both backends write the same bodies (:func:`list_body`).
* A watch ended by a server gone wrong (``watch`` rules): ``ended`` (a 200 whose
  stream ends at once, without an event: a server that ends every watch so).

An error action's ``P`` may end in ``xN``: the rule fires at most N times
(``create/configmaps:lose=1x1``: the first create's answer is lost, its retry's
is not).

Example: ``write:500=0.05,write:503=0.05,write/jobs:429=0.05,write:drop=0.05,*:delay=5ms``.

Every request to the Kubernetes API (not to ``/_kubeapi/``) draws, for each
rule that matches it in spec order, one number from a ``random.Random(seed)``
under a lock, so a given seed and request sequence always injects the same
faults.  The first error rule that fires wins; delays add up.  Status bodies
are the ones kube-apiserver sends (InternalError, ServiceUnavailable,
TooManyRequests with ``details.retryAfterSeconds``).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ApiError

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = frozenset({"get", "list", "watch"})
ALL_VERBS = WRITE_VERBS | READ_VERBS
LIST_BODIES = ("endless", "trickle", "loop", "expire", "deep", "nometa")
ACTIONS = ("500", "503", "429", "drop", "lose", "hang", "delay", "ended", *LIST_BODIES)


@dataclass(frozen=True)
class FaultRule:
    verbs: frozenset[str]
    resources: frozenset[str] | None  # None = every resource
    action: str
    probability: float
    delay_ms: float = 0.0
    limit: int | None = None  # fires at most this many times

    def matches(self, verb: str, resource: str) -> bool:
        return verb in self.verbs and (self.resources is None or resource in self.resources)


def _verbs(text: str) -> frozenset[str]:
    verbs: set[str] = set()
    for word in text.split("+"):
        if word == "*":
            verbs |= ALL_VERBS
        elif word == "write":
            verbs |= WRITE_VERBS
        elif word == "read":
            verbs |= READ_VERBS
        elif word in ALL_VERBS:
            verbs.add(word)
        else:
            raise ValueError(f"unknown verb {word!r} in fault spec")
    return frozenset(verbs)


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"probability {text!r} is not in [0, 1]")
    return value


def parse_spec(spec: str) -> list[FaultRule]:
    rules: list[FaultRule] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        try:
            selector, action_value = item.split(":", 1)
            action, value = action_value.split("=", 1)
        except ValueError:
            raise ValueError(f"fault rule {item!r} is not VERBS[/RESOURCES]:ACTION=VALUE") from None
        verbs_text, _, resources_text = selector.partition("/")
        resources = None if resources_text in ("", "*") else frozenset(resources_text.split("+"))
        if action not in ACTIONS:
            raise ValueError(f"unknown fault action {action!r}; use one of {', '.join(ACTIONS)}")
        if action == "delay":
            amount, _, chance = value.partition("@")
            if not amount.endswith("ms"):
                raise ValueError(f"delay {value!r} must be in milliseconds, e.g. 5ms")
            rules.append(
                FaultRule(
                    _verbs(verbs_text),
                    resources,
                    action,
                    _probability(chance) if chance else 1.0,
                    float(amount[:-2]),
                )
            )
        else:
            chance, _, limit = value.partition("x")
            rules.append(
                FaultRule(
                    _verbs(verbs_text),
                    resources,
                    action,
                    _probability(chance),
                    limit=int(limit) if limit else None,
                )
            )
    return rules


@dataclass
class Decision:
    delay_ms: float = 0.0
    error: ApiError | None = None
    drop: bool = False
    lose: bool = False
    hang: bool = False
    list_body: str = ""  # one of LIST_BODIES: the answer is that body, not the real one
    ended: bool = False  # a watch answered 200 whose stream ends at once


def fault_error(action: str, retry_after: int) -> ApiError:
    if action == "500":
        return ApiError(
            500,
            "InternalError",
            "Internal error occurred: injected fault",
            {"causes": [{"message": "injected fault"}]},
        )
    if action == "503":
        return ApiError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request", {}
        )
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


class Faults:
    """The active rules and their seeded random source."""

    def __init__(self, spec: str = "", seed: int = 0, retry_after: int = 1) -> None:
        self._lock = threading.Lock()
        self.hanging = threading.Event()  # set once a request hangs
        self._release = threading.Event()
        self.configure(spec, seed, retry_after)

    def configure(self, spec: str = "", seed: int = 0, retry_after: int = 1) -> None:
        rules = parse_spec(spec)
        self.release_hung()
        with self._lock:
            self.spec, self.seed, self.retry_after = spec, seed, retry_after
            self.rules = rules
            self._fired = [0] * len(rules)
            self._random = random.Random(seed)

    def release_hung(self) -> None:
        """Let every hanging request go (its connection is then closed unanswered)."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self.hanging.clear()

    def released(self) -> threading.Event:
        """Set when hanging requests are let go (new rules, the server stopping): an
        endless LIST body ends then too."""
        with self._lock:
            return self._release

    def hang(self) -> None:
        """Called by a request that hangs: block until released."""
        with self._lock:
            release = self._release
            self.hanging.set()
        release.wait()

    def decide(self, verb: str, resource: str) -> Decision:
        decision = Decision()
        with self._lock:
            for index, rule in enumerate(self.rules):
                if not rule.matches(verb, resource):
                    continue
                fired = self._random.random() < rule.probability
                if not fired or (rule.limit is not None and self._fired[index] >= rule.limit):
                    continue
                self._fired[index] += 1
                if rule.action == "delay":
                    decision.delay_ms += rule.delay_ms
                elif decision.error is None and not (decision.drop or decision.lose):
                    if rule.action in LIST_BODIES:
                        decision.list_body = decision.list_body or rule.action
                    elif rule.action == "ended":
                        decision.ended = True
                    elif rule.action in ("drop", "lose", "hang"):
                        setattr(decision, rule.action, True)
                    else:
                        decision.error = fault_error(rule.action, self.retry_after)
        return decision


@dataclass
class RequestLog:
    """Requests to the Kubernetes API, in arrival order; optionally appended to a file.

    Each entry: ``method``, ``path``, ``query`` (dict, last value wins),
    ``verb``, ``resource``, ``status`` (0 for a dropped connection), ``fault``
    (the injected action or None), ``dropped`` (bool).
    """

    path: Path | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def append(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.entries.append(entry)
            if self.path is not None:
                with self.path.open("a") as fh:
                    fh.write(json.dumps(entry) + "\n")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.entries)

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            if self.path is not None:
                self.path.write_text("")


def expired() -> ApiError:
    return ApiError(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result.",
        {},
    )


def list_status(action: str, query: dict[str, str]) -> int:
    """The status a LIST gone wrong is answered with: 410 for `expire`'s continued pages."""
    return 410 if action == "expire" and "continue" in query else 200


def list_body(action: str, stop: threading.Event) -> Iterator[bytes]:
    """The chunks of a LIST answer gone wrong (`action`, one of LIST_BODIES; `expire`'s
    first page). An endless body ends when `stop` is set or the client goes away."""
    head = b'{"kind":"List","apiVersion":"v1","metadata":{%s},"items":['
    if action in ("loop", "expire"):
        yield head % b'"continue":"mxgitops-test-again"' + b"]}"
    elif action == "deep":
        depth = 2000
        item = b'{"metadata":{"name":"deep","namespace":"ml"},"spec":'
        yield head % b"" + item + b'{"a":' * depth + b"1" + b"}" * depth + b"}]}"
    elif action == "nometa":
        yield head % b"" + b'{"kind":"Job","apiVersion":"batch/v1","spec":{}}]}'
    elif action == "trickle":
        yield head % b""
        while not stop.wait(0.05):  # the server's pace, not a test waiting
            yield b" "
    else:  # endless
        yield head % b""
        number = 0
        while not stop.is_set():
            batch = b"".join(
                b'{"metadata":{"name":"stream-%d","namespace":"ml"}},' % (number + n)
                for n in range(200)
            )
            number += 200
            yield batch
