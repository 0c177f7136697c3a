"""The sinks that write to the cluster (the Events, the notifications' book) write
under the instance's Lease, taken for those writes alone and checked right before each
is sent: a sync whose Lease another sync holds by the time its sinks run sends none of
them, and says so; the chats are told all the same (an HTTP call, outside the Lease)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mxgitops.commands.sync import SyncOutcome, sync
from mxgitops.kube import cluster, lease
from mxgitops.outputs.notify.outbox import name_of
from mxgitops.outputs.summary import Summary
from tests.helpers.chatserver import chat_server, notifications_file
from tests.helpers.sync import INSTANCE, NS, RETRY, WRITE_METHODS, Syncer, mxjob, repo, run, write
from tests.kubeapi.harness import KubeAPI

__all__ = ["repo", "run"]  # fixtures from tests/helpers, used here

OTHER = "another-sync/1"
BOOK = name_of(INSTANCE)


def hold_lease_as_another(api: KubeAPI) -> None:
    """Another sync takes the (released) Lease now, for a minute."""
    client = cluster.connect(kubeconfig=api.kubeconfig, retry=RETRY)
    ref = lease.lease_ref(INSTANCE, NS)
    found = client.get(ref)
    assert found is not None  # the apply took and released it
    now = lease.micro_time(datetime.now(UTC))
    spec = {**found["spec"], "holderIdentity": OTHER, "acquireTime": now, "renewTime": now}
    spec["leaseDurationSeconds"] = 60
    client.replace({**found, "spec": spec})


def sync_then(run: Syncer, hook: Any, **overrides: Any) -> SyncOutcome:
    """A sync whose `hook` runs once it has its summary, before the note and the sinks."""
    run.api.settle()
    connect = functools.partial(cluster.connect, retry=RETRY, sleep=run.sleeps.append)

    def on_summary(summary: Summary, notices: tuple[str, ...]) -> None:
        hook()

    config = run.config(**overrides)
    explicit = frozenset({"namespace", "instance", *overrides})
    return sync(config, explicit=explicit, connect=connect, on_summary=on_summary)


def sink_writes(api: KubeAPI) -> list[tuple[str, str]]:
    return [
        (e["method"], e["resource"])
        for e in api.request_log
        if e["method"] in WRITE_METHODS and e["resource"] in ("events", "configmaps")
    ]


def test_with_the_lease_another_syncs_no_event_nor_book_is_written(
    kubeapi: KubeAPI, repo: Path, run: Syncer, tmp_path: Path
) -> None:
    with chat_server() as chat:
        settings = notifications_file(tmp_path, chat.url, "generic")
        write(repo, mxjob("train", servers=0, restart="Never"))

        def after_the_apply() -> None:
            hold_lease_as_another(kubeapi)
            kubeapi.clear_log()

        outcome = sync_then(run, after_the_apply, events=True, notifications_file=settings)
    assert sink_writes(kubeapi) == []
    said = " ".join(outcome.undelivered)
    assert "Events" in said and OTHER in said, outcome.undelivered
    assert "book" in said, outcome.undelivered
    assert outcome.summary.ok  # what was applied stands


class Watched(cluster.Cluster):
    """Notes, for each write, what it wrote and whether a Lease was held then (its fence
    set)."""

    seen: list[tuple[str, bool]]  # set after construction: not a dataclass field

    def write(self, writes: Any, *args: Any, **kwargs: Any) -> Any:
        held = self.fence.left() is not None
        self.seen += [(f"{w.ref.kind}/{w.ref.name}", held) for w in writes]
        return super().write(writes, *args, **kwargs)

    def replace(self, obj: Any) -> Any:
        self._saw(obj)
        return super().replace(obj)

    def create_strict(self, obj: Any) -> Any:
        self._saw(obj)
        return super().create_strict(obj)

    def _saw(self, obj: Any) -> None:
        self.seen.append(
            (f"{obj['kind']}/{obj['metadata']['name']}", self.fence.left() is not None)
        )


def test_the_sinks_writes_are_sent_while_a_lease_is_held(
    kubeapi: KubeAPI, repo: Path, run: Syncer, tmp_path: Path
) -> None:
    watched: list[Watched] = []

    def connect(**kwargs: Any) -> cluster.Cluster:
        plain = cluster.connect(**kwargs, retry=RETRY, sleep=run.sleeps.append)
        fields = ("api_client", "parallelism", "retry", "sleep", "server")
        made = Watched(**{f: getattr(plain, f) for f in fields})
        made.seen = []
        watched.append(made)
        return made

    with chat_server() as chat:
        settings = notifications_file(tmp_path, chat.url, "generic")
        write(repo, mxjob("train", servers=0, restart="Never"))
        config = run.config(events=True, notifications_file=settings)
        outcome = sync(config, explicit=frozenset({"namespace", "instance"}), connect=connect)
    assert outcome.undelivered == ()
    (connected,) = watched
    sinks = [(w, held) for w, held in connected.seen if w.startswith("Event/") or BOOK in w]
    assert any(w.startswith("Event/") for w, _ in sinks), connected.seen
    assert any(BOOK in w for w, _ in sinks), connected.seen
    assert all(held for _, held in sinks), connected.seen
    final = cluster.connect(kubeconfig=kubeapi.kubeconfig, retry=RETRY).get(
        lease.lease_ref(INSTANCE, NS)
    )
    assert final is not None and not final["spec"].get("holderIdentity")  # released
