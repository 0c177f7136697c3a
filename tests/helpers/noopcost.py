"""A no-op sync's input, fixed: dist jobs as a LIST brings their objects back (the
bodies the API server sends, read through the one page reader), for tests that count
what the no-op does per listed object and per job (`test_noop_cost.py`)."""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from mxgitops import model
from mxgitops.kube.listing import page_reader
from mxgitops.objects import Kind, KubeObject, LiveObjects
from mxgitops.runtimes.batch.render import render_job
from tests.helpers.jobs import CTX, job

# A running replica's batch Job as the Job controller keeps it.
RUNNING = {"active": 1, "ready": 1, "startTime": "2026-01-02T03:00:00Z", "terminating": 0}


def dist_jobs(count: int) -> list[model.MxJob]:
    """`count` dist jobs of 1 scheduler, 2 servers and 4 workers (8 objects each), read
    afresh: nothing of them (their spec hash) computed yet."""
    return [job(f"job-{i:05d}", workers=4, servers=2) for i in range(count)]


def list_bodies(jobs: list[model.MxJob]) -> dict[Kind, bytes]:
    """The bodies of the LISTs of `jobs`' batch Jobs (running) and Services (metadata
    alone, as mxgitops asks for them), as the API server writes them."""
    objects = [o for j in jobs for o in render_job(j, CTX)]
    batch, services = [], []
    for number, obj in enumerate(objects):
        metadata = {
            **obj["metadata"],
            "uid": f"00000000-0000-0000-0000-{number:012d}",
            "resourceVersion": str(1000 + number),
            "creationTimestamp": "2026-01-02T03:00:00Z",
            "managedFields": [{"manager": "mxgitops", "operation": "Update"}],
        }
        if obj["kind"] == "Job":
            batch.append({**obj, "metadata": metadata, "status": RUNNING})
        else:
            services.append({"kind": "PartialObjectMetadata", "metadata": metadata})
    return {Kind.JOB: _body("JobList", batch), Kind.SERVICE: _body("List", services)}


def _body(kind: str, items: list[KubeObject]) -> bytes:
    page = {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}
    return json.dumps({**page, "items": items}).encode()


def read_lists(bodies: dict[Kind, bytes]) -> LiveObjects:
    """The live objects a sync reads from `bodies`, through the page reader it uses."""
    found = {}
    for kind, body in bodies.items():
        metadata_only = kind is Kind.SERVICE
        read = page_reader(kind, 100_000, kind.unread, metadata_only, kind.api_version)
        found[kind], more = read(io.BytesIO(body))  # type: ignore[arg-type]  # a body read
        assert not more
    return LiveObjects(jobs=tuple(found[Kind.JOB]), services=tuple(found[Kind.SERVICE]))


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch, *targets: tuple[Any, str]) -> Iterator[Counter[str]]:
    """Count the calls of each `module.name` (as that module sees it) while the block runs."""
    calls: Counter[str] = Counter()

    def counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return original(*args, **kwargs)

        return call

    with monkeypatch.context() as patch:
        for owner, name in targets:
            patch.setattr(owner, name, counted(name, getattr(owner, name)))
        yield calls


def python_calls(action: Callable[[], object]) -> int:
    """Every Python function call `action` makes (C functions are not counted)."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls
