"""The write path of `cluster.Cluster`: single writes that must not be blind (the
ledger, the Lease) and the idempotent bulk writes apply makes.

Bulk writes run with bounded parallelism and are idempotent: AlreadyExists on create
and NotFound on delete count as success, so a retried write (after a 429, a 5xx or a
dropped connection) never duplicates anything, and no GET is needed before a create.
Once the cluster is stopping (SIGTERM), no further write starts; writes run on daemon
threads, so a write in flight never keeps the process from exiting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from mxgitops.errors import ClusterClientError, ClusterError
from mxgitops.kube import transport
from mxgitops.kube.calls import Calls, path_of
from mxgitops.objects import (
    Create,
    Delete,
    Kind,
    KubeObject,
    ObjectRef,
    Patch,
    Write,
    WriteResult,
    same_owner,
)


class Writes(Calls):
    """What apply, the ledger and the Lease write."""

    def create_strict(self, obj: KubeObject) -> KubeObject:
        """Create, failing with a 409 ClusterClientError if the object exists."""
        ref = ObjectRef.of(obj)
        return self._request("POST", path_of(ref.kind, ref.namespace), body=obj)

    def replace(self, obj: KubeObject) -> KubeObject:
        """Replace, failing with a 409 ClusterClientError on a stale resourceVersion."""
        ref = ObjectRef.of(obj)
        return self._request("PUT", path_of(ref.kind, ref.namespace, ref.name), body=obj)

    # -- idempotent bulk writes ---------------------------------------------------

    def write(
        self, writes: Sequence[Write], on_done: Callable[[WriteResult], None] | None = None
    ) -> list[WriteResult]:
        """Run writes with bounded parallelism; one result per write, in order.

        The writers are daemon threads that take the next write only while the
        cluster is not stopping. The caller waits for them in `join`, which a
        signal interrupts: a SIGTERM then stops the sync at once, and a write in
        flight finishes (or times out) on its own without holding the exit up.
        """
        results: list[WriteResult | None] = [None] * len(writes)
        pending = iter(range(len(writes)))
        claim = threading.Lock()
        crashes: list[BaseException] = []

        def writer() -> None:
            while not self.stopping.is_set():
                with claim:
                    index = next(pending, None)
                if index is None:
                    return
                try:
                    results[index] = result = self._write_one(writes[index])
                    if on_done is not None:
                        on_done(result)
                except Exception as exc:  # a bug: raised again in the caller's thread
                    crashes.append(exc)
                    return

        workers = [
            threading.Thread(target=writer, name=f"mxgitops-write-{n}", daemon=True)
            for n in range(min(self.parallelism, len(writes)))
        ]
        try:
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        except BaseException:
            self.stop()
            raise
        if crashes:
            raise crashes[0]
        return [
            r if r is not None else WriteResult(w, _stopped())
            for r, w in zip(results, writes, strict=True)
        ]

    def create(self, objects: Sequence[KubeObject]) -> None:
        _raise_first(self.write([Create(o) for o in objects]))

    def delete(self, refs: Sequence[ObjectRef]) -> None:
        _raise_first(self.write([Delete(r) for r in refs]))

    def _write_one(self, write: Write) -> WriteResult:
        said: list[str] = []  # the response's Warning headers (e.g. PodSecurity's)
        ref = write.ref
        try:
            # The object the server answers with is read, not decoded: nothing uses it.
            if isinstance(write, Create):
                path, method, body = path_of(ref.kind, ref.namespace), "POST", write.obj
            elif isinstance(write, Patch):
                path, method, body = path_of(ref.kind, ref.namespace, ref.name), "PATCH", write.body
            else:
                # Background: the Job goes at once, the garbage collector takes its pods.
                # Foreground: the Job stays, being deleted, until its pods are gone.
                path, method = path_of(ref.kind, ref.namespace, ref.name), "DELETE"
                policy = "Foreground" if write.foreground else "Background"
                body = {"propagationPolicy": policy}
            self._call(method, path, body=body, warnings=said, read=transport.read_bytes)
        except ClusterClientError as exc:
            if isinstance(write, Delete) and exc.status == 404:
                return WriteResult(write)
            if isinstance(write, Create) and exc.reason == "AlreadyExists":
                if ref.kind is Kind.EVENT:
                    # An Event's name is a digest of what it says: that was said. (No GET:
                    # mxgitops may only create events.)
                    return WriteResult(write)
                return self._created_before(write)
            return WriteResult(write, exc)
        except ClusterError as exc:
            return WriteResult(write, exc)
        return WriteResult(write, warnings=tuple(said))

    def _created_before(self, write: Create) -> WriteResult:
        """AlreadyExists is success when the object is ours (a retried create); an
        object of the same name that another owner made is never taken over."""
        try:
            existing = self.get(write.ref)
        except ClusterError as exc:
            return WriteResult(write, exc)
        if existing is None or same_owner(existing, write.obj):
            return WriteResult(write)
        return WriteResult(
            write,
            ClusterClientError(
                f"{write.ref} already exists and is not managed by this mxgitops instance; "
                "mxgitops leaves it alone",
                status=409,
                reason="AlreadyExists",
            ),
        )


def _raise_first(results: list[WriteResult]) -> None:
    for result in results:
        if result.error is not None:
            raise result.error


def _stopped() -> ClusterError:
    return ClusterError("not sent: the sync was stopping")
