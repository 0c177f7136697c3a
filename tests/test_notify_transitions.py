"""Which transitions a destination is told of, sync after sync (pure: the book in, the
book out): waiting past waitingAfter once, a disruption per disruption, the jobs of
before notifications began not told, a failed delivery tried MAX_TRIES times, the book
bounded, and read back strictly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mxgitops.outputs.notify import outbox, transitions
from mxgitops.outputs.notify.settings import Destination, Notifications
from mxgitops.outputs.notify.transitions import Book, decide, delivered
from mxgitops.outputs.summary import JobSummary, Summary

T0 = datetime(2026, 12, 7, 4, 0, tzinfo=UTC)
ALL = ("failed", "succeeded", "disrupted", "waiting", "sync-failed")


def job(name: str, state: str, **fields: object) -> JobSummary:
    values: dict[str, object] = {"action": "unchanged", "reason": "", "runtime_id": "r1"}
    values.update(fields)
    return JobSummary("ml", name, state=state, **values)  # type: ignore[arg-type]


def told(
    jobs: list[JobSummary],
    book: Book,
    now: datetime = T0,
    *,
    finished: tuple[str, ...] = (),
    destination: Destination | None = None,
    problems: tuple[str, ...] = (),
) -> tuple[list[str], Book]:
    """What the one destination is told (as headlines), and the book once delivered."""
    target = destination or Destination("team", "slack", events=ALL)
    summary = Summary(jobs=tuple(jobs), problems=problems)
    queued, after = decide(
        summary, [("ml", n) for n in finished], Notifications((target,)), book, now
    )
    notices = queued.get(target.name, [])
    return [n.headline for n in notices], delivered(after, target.name, notices, ok=True)


def test_a_job_waiting_past_waiting_after_is_told_once() -> None:
    pending = [job("train", "Pending")]
    said, book = told(pending, Book())
    assert said == []
    said, book = told(pending, book, T0 + timedelta(minutes=29))
    assert said == []
    said, book = told(pending, book, T0 + timedelta(minutes=31))
    assert said == ["ml/train is still waiting"]
    said, book = told(pending, book, T0 + timedelta(hours=5))
    assert said == []
    said, book = told([job("train", "Running")], book, T0 + timedelta(hours=6))
    assert said == [] and book.waiting == {}


def test_each_disruption_is_told_and_the_run_it_started_is_not_told_as_waiting() -> None:
    first = job(
        "dist", "Pending", action="replace", reason="disrupted, not failed: node lost; run again 1"
    )
    said, book = told([first], Book())
    assert said == ["ml/dist was disrupted and runs again"]
    said, book = told([first], book)
    assert said == []
    second = job(
        "dist", "Pending", action="replace", reason="disrupted, not failed: evicted; run again 2"
    )
    said, book = told([second], book)
    assert said == ["ml/dist was disrupted and runs again"]


def test_turning_notifications_on_tells_only_what_finishes_from_then() -> None:
    old = job("old", "Failed", runtime_id="a")
    new = job("new", "Failed", runtime_id="b")
    said, book = told([old, new], Book(new=True), finished=("new",))
    assert said == ["ml/new failed"]
    said, book = told([old, new], book)
    assert said == []


def test_a_run_of_a_new_spec_is_a_new_transition() -> None:
    said, book = told([job("train", "Failed", runtime_id="a")], Book(), finished=("train",))
    assert said == ["ml/train failed"]
    said, book = told([job("train", "Succeeded", runtime_id="b")], book, finished=("train",))
    assert said == ["ml/train succeeded"]


def test_a_failed_delivery_is_tried_max_tries_times_then_given_up() -> None:
    target = Destination("team", "slack", events=ALL)
    failing = [job("train", "Failed")]
    book = Book()
    tries = 0
    while True:
        queued, after = decide(Summary(jobs=tuple(failing)), [], Notifications((target,)), book, T0)
        if not queued:
            break
        tries += 1
        book = delivered(after, "team", queued["team"], ok=False)
        if tries == transitions.MAX_TRIES:
            assert transitions.given_up(after, book) == ["team|ml/train|failed|r1"]
    assert tries == transitions.MAX_TRIES


def test_selectors_and_events_choose_what_a_destination_hears() -> None:
    only = Destination("gpu", "slack", events=("failed",), namespaces=("ml",), jobs=("gpu-*",))
    jobs = [job("gpu-1", "Failed"), job("cpu-1", "Failed"), job("gpu-2", "Succeeded")]
    said, _ = told(jobs, Book(), destination=only, problems=("a.yaml: invalid",))
    assert said == ["ml/gpu-1 failed"]
    everyone = Destination("all", "slack", events=("sync-failed",))
    said, _ = told(jobs, Book(), destination=everyone, problems=("a.yaml: invalid",))
    assert said == ["the jobs repository could not be synced"]


def test_the_book_forgets_what_no_sync_sees_and_stays_bounded() -> None:
    _, book = told([job("train", "Failed")], Book())
    assert list(book.entries) == ["team|ml/train|failed|r1"]
    _, book = told([], book, T0 + transitions.FORGET_AFTER + timedelta(days=1))
    assert book.entries == {}
    many = [job(f"j{n}", "Failed") for n in range(transitions.MAX_ENTRIES + 10)]
    _, book = told(many, Book())
    assert len(book.entries) == transitions.MAX_ENTRIES
    assert len(outbox.encode(book).encode()) < 900 * 1024  # within a ConfigMap


def test_the_book_is_read_back_whole_or_not_at_all() -> None:
    _, book = told([job("train", "Pending")], Book())
    _, book = told([job("train", "Failed")], book)
    assert outbox.decode(outbox.encode(book)) == book
    for hostile in ('{"v": 1, "sent": {"k": ["x", "1", 0]}, "waiting": {}}', "[]", '{"v": 2}'):
        with pytest.raises((ValueError, TypeError, KeyError)):
            outbox.decode(hostile)
