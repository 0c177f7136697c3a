"""The sinks' writes to the cluster (the Events, the notifications' book), under the
instance's Lease like every other write.

The sinks run once the apply's Lease is released, so that chats and forges that are slow
to answer do not hold up the next sync. A sink that has something to write to the cluster
takes the Lease for that write alone, through the cluster's `Fence`: each request is
checked right before it is sent, so none goes out once the Lease may be another's. A
Lease that another sync holds, or that cannot be taken, fails that sink alone (an
`OutputError`, one line), never what was applied.

Taking the Lease for these writes must not hide from the next holder that the apply
before them left writes unrecorded (`state/handoff.py`): a Lease found not handed over
cleanly is released marked so again. A sync that has nothing to write takes no Lease.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from mxgitops.errors import ClusterError, LeaseHeldError, OutputError, StateDamagedError
from mxgitops.kube import cluster as kube
from mxgitops.kube import lease
from mxgitops.kube.clustertext import said

# What a sink enters around its cluster writes, given what they are ("Events").
Leased = Callable[[str], AbstractContextManager[None]]


def for_cluster(cluster: kube.Cluster, *, instance: str, namespace: str) -> Leased:
    """The sinks' `Leased` for `cluster`: the instance's Lease, held for the writes."""

    @contextmanager
    def leased(what: str) -> Iterator[None]:
        try:
            with lease.held(
                cluster,
                instance=instance,
                namespace=namespace,
                holder=lease.default_holder(),
                fence=cluster.fence,
            ) as holding:
                holding.writes_unrecorded = not holding.handed_over
                holding.renew_in_background()
                yield
                holding.raise_if_lost()
        except (LeaseHeldError, StateDamagedError, ClusterError) as exc:
            raise OutputError(f"{what} not written: {said(str(exc), 300)}") from None

    return leased
