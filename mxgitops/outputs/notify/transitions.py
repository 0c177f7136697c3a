"""Which transitions each destination is told of in this sync: pure.

A transition is a job's state as it is worth telling once: failed or succeeded (per
run: its runtime), disrupted (per disruption: the reason counts the runs), waiting
longer than the destination's `waitingAfter` (per run), or not synced (per distinct
set of errors). The outbox (`Book`, kept by `outbox.py`) holds, per destination and
transition, whether it was delivered and how many deliveries failed, so a transition
is told once, however many syncs see it and however often the sync is restarted; a
failed delivery is tried again at a later sync, `MAX_TRIES` times in all, each wait
twice the one before (`RETRY_AFTER`: 1, 2, 4, 8 minutes; syncs a push starts every
minute do not spend the tries on a chat that is down for a moment).

The book stays bounded by what the cluster shows: an entry whose transition no sync
has seen for `FORGET_AFTER` goes, and at most `MAX_ENTRIES` are kept (the least
recently seen go first). On the first sync with notifications (no book yet), the
jobs already finished before are entered as told, not told: turning notifications
on does not flood a chat with last month's failures.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlsplit

from mxgitops.outputs.notify.notice import Notice, for_job, for_problems
from mxgitops.outputs.notify.settings import Destination, Notifications
from mxgitops.outputs.summary import JobSummary, Summary

MAX_TRIES = 5
RETRY_AFTER = timedelta(minutes=1)  # after the first failed delivery; doubled after each
MAX_QUEUE = 200  # notices one destination is sent in one sync; the others wait a sync
MAX_ENTRIES = 4000
MAX_WAITING = 2000
FORGET_AFTER = timedelta(days=2)
WAITING_STATES = frozenset({"Pending", "Queued", "Waiting"})
FINISHED = frozenset({"Succeeded", "Failed"})
DISRUPTED = "disrupted, not failed"


@dataclass(frozen=True)
class Entry:
    seen: str  # the day (UTC, YYYY-MM-DD) of the last sync that saw the transition
    tries: int = 0  # deliveries that failed
    done: bool = False  # delivered, or given up after MAX_TRIES
    retry_at: str = ""  # after a failed delivery: not tried before (UTC, `_moment`)


@dataclass(frozen=True)
class Book:
    entries: Mapping[str, Entry] = field(default_factory=dict)  # "dest|transition"
    waiting: Mapping[str, str] = field(default_factory=dict)  # "ns/name|run" -> since
    new: bool = False  # no book was kept before this sync


@dataclass(frozen=True)
class Transition:
    event: str
    key: str
    job: JobSummary | None  # None: the sync's own trouble (invalid manifests)
    waited: timedelta = timedelta(0)


def decide(
    summary: Summary,
    finished: Iterable[tuple[str, str]],
    notifications: Notifications,
    book: Book,
    now: datetime,
    repo: str = "",
) -> tuple[dict[str, list[Notice]], Book]:
    """What each destination is sent now (by its name), and the book as it stands if
    every delivery fails (`delivered` marks those that did not)."""
    stamp = _day(now)
    newly = set(finished)
    transitions, waiting = _transitions(summary, book.waiting, now)
    entries = dict(book.entries)
    queued: dict[str, list[Notice]] = {}
    for destination in notifications.destinations:
        for seen in transitions:
            if not _wanted(destination, seen):
                continue
            slot = f"{destination.name}|{seen.key}"
            entry = entries.get(slot)
            entries[slot] = replace(entry, seen=stamp) if entry else Entry(stamp)
            if entry is not None and (entry.done or _moment(now) < entry.retry_at):
                continue
            if entry is None and book.new and _from_before(seen, newly):
                entries[slot] = Entry(stamp, done=True)  # finished before notifications began
                continue
            mine = queued.setdefault(destination.name, [])
            if len(mine) < MAX_QUEUE:
                mine.append(_notice(seen, summary, notifications, repo))
    return queued, Book(_bounded(entries, now), waiting)


def delivered(
    book: Book,
    destination: str,
    notices: Sequence[Notice],
    ok: bool,
    now: datetime | None = None,
) -> Book:
    """The book once `notices` were (ok) or were not delivered to `destination` (`now`:
    a failed one is not tried again before its back-off has passed)."""
    entries = dict(book.entries)
    for notice in notices:
        slot = f"{destination}|{notice.key}"
        entry = entries.get(slot)
        if entry is None:
            continue
        tries = entry.tries + (0 if ok else 1)
        retry_at = ""
        if not ok and now is not None:
            retry_at = _moment(now + RETRY_AFTER * (1 << min(tries - 1, 16)))
        done = ok or tries >= MAX_TRIES
        entries[slot] = replace(entry, tries=tries, done=done, retry_at=retry_at)
    return replace(book, entries=entries)


def _moment(when: datetime) -> str:
    """A time as the book keeps it: compared as text, in UTC."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def given_up(before: Book, after: Book) -> list[str]:
    """Transitions whose last try failed now: never tried again."""
    return [
        slot
        for slot, entry in after.entries.items()
        if entry.done and entry.tries >= MAX_TRIES and not before.entries[slot].done
    ]


def _from_before(seen: Transition, newly: set[tuple[str, str]]) -> bool:
    job = seen.job
    return (
        seen.event in ("failed", "succeeded")
        and job is not None
        and ((job.namespace, job.name) not in newly)
    )


def _wanted(destination: Destination, seen: Transition) -> bool:
    job = seen.job
    if job is None:
        return destination.wants(seen.event)
    if not destination.wants(seen.event, job.namespace, job.name):
        return False
    return seen.event != "waiting" or seen.waited >= destination.waiting_after


def _transitions(
    summary: Summary, since: Mapping[str, str], now: datetime
) -> tuple[list[Transition], dict[str, str]]:
    found: list[Transition] = []
    waiting: dict[str, str] = {}
    for job in summary.jobs:
        name = f"{job.namespace}/{job.name}"
        run = job.runtime_id or job.spec_hash or "-"
        if job.errors:
            found.append(
                Transition("sync-failed", f"{name}|sync-failed|{_digest(job.errors)}", job)
            )
        if job.state in FINISHED:
            found.append(Transition(job.state.lower(), f"{name}|{job.state.lower()}|{run}", job))
        elif job.reason.startswith(DISRUPTED):
            found.append(Transition("disrupted", f"{name}|disrupted|{_digest([job.reason])}", job))
        elif job.state in WAITING_STATES and job.action != "delete":
            slot = f"{name}|{run}"
            waiting[slot] = since.get(slot, _stamp(now))
            waited = now - _parsed(waiting[slot], now)
            found.append(Transition("waiting", f"{name}|waiting|{run}", job, waited))
    if summary.problems:
        key = f"-|sync-failed|{_digest(sorted(summary.problems))}"
        found.append(Transition("sync-failed", key, None))
    kept = dict(sorted(waiting.items(), key=lambda item: item[1])[:MAX_WAITING])
    return found, kept


def _notice(seen: Transition, summary: Summary, notifications: Notifications, repo: str) -> Notice:
    if seen.job is None:
        url = commit_url(repo, summary.commit)
        return for_problems(summary.problems, seen.key, summary.commit, url)
    job = seen.job
    notice = for_job(
        job,
        seen.event,
        seen.key,
        commit_url(repo, job.commit or summary.commit),
        notifications.job_link(job.namespace, job.name),
    )
    if seen.event == "waiting":
        minutes = int(seen.waited.total_seconds() // 60)
        return replace(notice, reason=f"{minutes} min so far; {notice.reason}".rstrip("; "))
    return notice if notice.commit else replace(notice, commit=summary.commit)


def commit_url(repo: str, commit: str) -> str:
    """The commit's page on the forge, from the jobs repository's URL (https://host/o/n
    or git@host:o/n): `/commit/SHA`, which GitHub, Gitea and GitLab all serve; "" for a
    local repository. Credentials in the URL are dropped."""
    if not commit or not all(c in "0123456789abcdef" for c in commit):
        return ""
    if "://" in repo:
        parts = urlsplit(repo)
        if parts.scheme not in ("http", "https", "ssh") or not parts.hostname:
            return ""
        host, path = parts.hostname, parts.path
        if parts.scheme in ("http", "https") and parts.port:
            host = f"{host}:{parts.port}"
        scheme = parts.scheme if parts.scheme != "ssh" else "https"
    elif ":" in repo and "@" in repo.split(":", 1)[0]:
        host, path = repo.split(":", 1)[0].rpartition("@")[2], repo.split(":", 1)[1]
        scheme = "https"
    else:
        return ""
    path = path.strip("/").removesuffix(".git")
    if not path or ".." in path.split("/"):
        return ""
    return f"{scheme}://{host}/{quote(path)}/commit/{commit}"


def _bounded(entries: Mapping[str, Entry], now: datetime) -> dict[str, Entry]:
    oldest = _day(now - FORGET_AFTER)
    kept = {slot: e for slot, e in entries.items() if e.seen >= oldest}
    newest = sorted(kept.items(), key=lambda item: item[1].seen, reverse=True)[:MAX_ENTRIES]
    return dict(sorted(newest))


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _day(moment: datetime) -> str:
    """Days, not seconds: a sync that sees what the last one saw leaves the book as it
    was, and writes nothing."""
    return moment.strftime("%Y-%m-%d")


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parsed(stamp: str, default: datetime) -> datetime:
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=default.tzinfo)
    except ValueError:
        return default
