"""What a sync reads of the cluster to plan from, and the ledger it writes back.

The ConfigMaps of the instance's home namespace come first, in one LIST: the
ledger's shards (`ledgerstore.py`) and the hand-off record (`handoff.py`). The
ledger says which runtimes this instance may have objects of, so the live
objects come next, one LIST per kind, without the kinds that cannot hold any of
ours (`registry.unlisted`): a no-op sync of an instance that never used a runtime
with kinds of its own lists none of them. Under the Lease the ledger is read again,
and the objects too if another sync may have written since, or if the ledger now asks
for a kind the first read skipped.

The ledger is written twice at most: before anything is applied when the plan
creates objects of a runtime it does not record yet (if that write fails, the
jobs that would create them are not started, and say why), and after the apply
with the finished jobs (`bookkeeping.py`) and the runtimes left.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from mxgitops.errors import ClusterError
from mxgitops.kube import cluster as kube
from mxgitops.model import MxJob
from mxgitops.objects import Kind, LiveObjects, ownership_selector
from mxgitops.planning import ledger
from mxgitops.planning.changes import Plan
from mxgitops.planning.ledger import JobKey
from mxgitops.runtimes import registry
from mxgitops.runtimes.registry import unlisted
from mxgitops.state import handoff, ledgerstore
from mxgitops.state.apply import ChangeSet

log = logging.getLogger("mxgitops")


@dataclass(frozen=True)
class Home:
    """Where an instance keeps its books: the instance whose objects a sync reads, and
    the namespace of its ledger and hand-off record. All this module needs of the
    settings, so that the state sits below them."""

    instance: str
    namespace: str


@dataclass(frozen=True)
class ClusterState:
    """What a sync read of the cluster: its objects, the ledger, and the version of
    the hand-off record (`handoff.py`), which says whether the read is still current;
    `desired` are the jobs it was read for (which runtimes' kinds are listed)."""

    live: LiveObjects
    known: ledger.Ledger
    record: str = ""
    desired: tuple[MxJob, ...] = ()

    def moved_from(self, before: ClusterState) -> bool:
        if self.known != before.known:
            return True
        return self.live is not before.live and self.live.versions() != before.live.versions()


def names_needed(cluster: kube.Cluster | None, jobs: Sequence[MxJob]) -> dict[Kind, frozenset[str]]:
    """The names of the cluster-scoped objects the runtimes render `jobs` by, each kind
    read only when a job needs it (`registry.names_needed`); none without a cluster."""
    if cluster is None:
        return {}
    return {kind: cluster.names_of(kind) for kind in sorted(registry.names_needed(jobs))}


def read(
    cluster: kube.Cluster | None,
    home: Home,
    desired: Sequence[MxJob],
    notices: list[str],
) -> ClusterState:
    """The state to plan `desired` from; what the ledger could not say goes to `notices`."""
    if cluster is None:
        return ClusterState(LiveObjects(), ledger.Ledger(), desired=tuple(desired))
    # The ConfigMaps first: a sync that wrote after this read changes the record after it.
    known, record = _read_books(cluster, home)
    if known.unreadable:
        notices.append(known.unreadable)
        log.warning(known.unreadable)
    return _read_live(cluster, home, known, record, tuple(desired))


def _read_live(
    cluster: kube.Cluster,
    home: Home,
    known: ledger.Ledger,
    record: str,
    desired: tuple[MxJob, ...],
) -> ClusterState:
    """The jobs' objects, read after the ConfigMaps that gave `known` and `record`."""
    selector = ownership_selector(home.instance)
    live = cluster.list_live(selector, unlisted(known.runtimes, desired))
    return ClusterState(live, known, record, desired)


def _read_books(cluster: kube.Cluster, home: Home) -> tuple[ledger.Ledger, str]:
    """The ledger and the hand-off record's version: all shards in one LIST, however many."""
    found = cluster.list_all(Kind.CONFIG_MAP, ownership_selector(home.instance), home.namespace)
    shards = [o for o in found if ledgerstore.is_shard(o["metadata"]["name"], home.instance)]
    return ledgerstore.from_config_maps(shards), handoff.version(found, home.instance)


def read_again(
    cluster: kube.Cluster, home: Home, before: ClusterState, handed_over: bool
) -> ClusterState:
    """The state under the Lease. The ledger is read again; the objects only if another
    sync may have written since `before` was read (the Lease was not handed over
    cleanly, or the hand-off record moved), or if the ledger now asks for a kind
    `before` did not list. A change costs what it writes, not a second read of every
    job."""
    known, record = _read_books(cluster, home)
    skipped_before = before.live.unlisted - unlisted(known.runtimes, before.desired)
    if handed_over and record == before.record and not skipped_before:
        return ClusterState(before.live, known, record, before.desired)
    if skipped_before:
        kinds = ", ".join(sorted(skipped_before))
        log.info("the ledger now says %s objects of this instance may exist: reading again", kinds)
    else:
        log.info("another sync wrote since this one read the cluster: reading it again")
    return _read_live(cluster, home, known, record, before.desired)


def record_first(
    cluster: kube.Cluster, home: Home, done: Plan
) -> tuple[ledger.Ledger | None, Mapping[JobKey, str]]:
    """Before anything of `done` is applied: the ledger records the runtimes whose
    objects it creates (`Plan.recorded_first`), or no sync after it would list them.
    The ledger as stored then (None if nothing was written), and the jobs that must
    not be started, each with why (all of `Plan.records_first` if the write failed)."""
    if done.recorded_first is None:
        return None, {}
    try:
        stored = ledgerstore.save(
            cluster, done.recorded_first, instance=home.instance, namespace=home.namespace
        )
    except ClusterError as exc:
        runtimes = ",".join(sorted(done.recorded_first.runtimes or ()))
        why = (
            f"not started: the ledger could not record that this instance may have objects "
            f"of the runtimes {runtimes} ({exc}); without that record a later sync would not "
            "look for them"
        )
        log.error(why)
        return None, dict.fromkeys(done.records_first, why)
    return stored, {}


def write_ledger(
    cluster: kube.Cluster,
    home: Home,
    done: Plan,
    changeset: ChangeSet,
    stored_first: ledger.Ledger | None,
) -> ChangeSet:
    """Record finished jobs and the runtimes left; a job whose prune failed keeps its
    entry. Written over the shards `record_first` left, if it wrote."""
    book = done.ledger_after({r.change.key for r in changeset.failed})
    if stored_first is not None:
        book = book.with_stored(stored_first)
    try:
        ledgerstore.save(cluster, book, instance=home.instance, namespace=home.namespace)
    except ClusterError as exc:
        return replace(changeset, ledger_error=f"recording finished jobs failed: {exc}")
    return changeset
