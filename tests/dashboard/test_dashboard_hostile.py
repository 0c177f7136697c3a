"""The dashboard against what wears it down: a refresh that fails every time is tried
again less and less often, and the notes it keeps parsed are bounded by their bytes as
well as their number (a note may be 32 MiB)."""

from __future__ import annotations

from mxgitops.dashboard import loading
from mxgitops.dashboard.server import MAX_REFRESH_BACKOFF, Refresher
from mxgitops.dashboard.snapshot import Snapshot
from mxgitops.errors import GitError


class Failing:
    """A loader whose remote is gone, until it comes back."""

    def __init__(self) -> None:
        self.broken = True
        self.reads = 0

    def read(self) -> object:
        self.reads += 1
        if self.broken:
            raise GitError("cannot fetch: connection refused")
        return Snapshot()


def test_a_refresh_that_fails_backs_off_and_a_success_resets_it() -> None:
    loader = Failing()
    refresher = Refresher(loader, interval=10)  # type: ignore[arg-type]
    waits = []
    for _ in range(12):
        refresher.refresh()
        waits.append(refresher.next_wait())
    assert waits[:4] == [20, 40, 80, 160]
    assert waits[-1] == MAX_REFRESH_BACKOFF and max(waits) == MAX_REFRESH_BACKOFF
    assert "connection refused" in refresher.current().problem
    loader.broken = False
    refresher.refresh()
    assert refresher.next_wait() == 10 and refresher.ready


def test_the_parsed_notes_kept_are_bounded_by_their_weight() -> None:
    kept = loading._Lru(128, 100, lambda size: int(str(size)))  # each value its own weight
    for blob in range(10):
        kept.put(f"blob{blob}", 30)
    assert list(kept) == ["blob7", "blob8", "blob9"]  # 90: a fourth is over
    kept.put("huge", 1000)  # over the budget alone: kept, the others go
    assert list(kept) == ["huge"]
