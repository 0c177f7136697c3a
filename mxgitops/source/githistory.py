"""Reading a branch's past in a constant number of git processes: `mxgitops history`.

A job's history is the first-parent line of its branch (the commits a sync of that branch
saw, a merge seen as its pull request's change), each commit with the files it changed
and their blob ids (`first_parent_log`: one `git log`), the blobs read in one
`git cat-file --batch` (`read_blobs`), and the notes of every commit listed from the notes
trees (`note_blobs`: `git ls-tree` of ours, theirs and their merge base), so that 200
commits cost what 2 do. Each runs in the git of a cache clone (`Repository.reader`) or of
a checkout (`gitcommand.local_git`). Nothing here parses a manifest or a note: the
callers do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mxgitops.source.gitcommand import Runner
from mxgitops.source.repository import full_notes_ref, tracking_notes_ref

MAX_COMMITS = 5000  # of the branch walked at most: a job's history, not the repository's
MAX_AUTHOR = 256  # characters of an author's name kept: git sets no bound
_HEADER = "\x01"
_SHA = re.compile(r"[0-9a-f]{40}")
_NO_BLOB = "0" * 40


@dataclass(frozen=True)
class FileChange:
    """One file a commit changed; a path or blob is "" where the file was not."""

    old_path: str
    new_path: str
    old_blob: str
    new_blob: str


@dataclass(frozen=True)
class LoggedCommit:
    sha: str
    author: str  # as git stores it, cut to MAX_AUTHOR: untrusted text
    date: str  # the author date, RFC 3339
    changes: tuple[FileChange, ...]


def first_parent_log(git: Runner, tip: str, *, most: int = MAX_COMMITS) -> list[LoggedCommit]:
    """The first-parent history of `tip`, newest first, each commit with the files it
    changed against its first parent (renames followed): one `git log`."""
    out = git.raw(
        "log",
        "--first-parent",
        "--diff-merges=first-parent",
        "--raw",
        "-M",
        "--no-abbrev",
        "-z",
        f"--max-count={most}",
        f"--format={_HEADER}%H%x00%aI%x00%an",
        tip,
        "--",
    )
    return _parse_log(out.decode("utf-8", errors="replace"))


def _parse_log(text: str) -> list[LoggedCommit]:
    tokens = text.split("\0")
    commits: list[LoggedCommit] = []
    at = 0
    while at < len(tokens):
        token = tokens[at].lstrip("\n")
        if not token.startswith(_HEADER) or at + 2 >= len(tokens):
            at += 1
            continue
        sha, date, author = token[1:], tokens[at + 1][:64], tokens[at + 2][:MAX_AUTHOR]
        at += 3
        changes: list[FileChange] = []
        while at < len(tokens) and tokens[at].lstrip("\n").startswith(":"):
            meta = tokens[at].lstrip("\n")[1:].split()
            renamed = meta[-1][:1] in ("R", "C")
            paths = tokens[at + 1 : at + (3 if renamed else 2)]
            at += 3 if renamed else 2
            old_blob, new_blob = (b if b != _NO_BLOB else "" for b in meta[2:4])
            old_path = paths[0] if old_blob else ""
            new_path = (paths[-1] if renamed else paths[0]) if new_blob else ""
            if meta[-1][:1] == "C":
                old_path, old_blob = "", ""  # a copy leaves its source where it was
            changes.append(FileChange(old_path, new_path, old_blob, new_blob))
        if _SHA.fullmatch(sha):
            commits.append(LoggedCommit(sha, author, date, tuple(changes)))
    return commits


def read_blobs(
    git: Runner, ids: Iterable[str], *, max_size: int
) -> tuple[dict[str, bytes], frozenset[str]]:
    """The blobs of `ids` (one `cat-file --batch-check`, one `cat-file --batch`), and
    those left unread: larger than `max_size` bytes, or no blob."""
    wanted = sorted({blob for blob in ids if _SHA.fullmatch(blob)})
    if not wanted:
        return {}, frozenset()
    sizes = _sizes(git, wanted)
    small = [blob for blob in wanted if 0 <= sizes.get(blob, -1) <= max_size]
    found: dict[str, bytes] = {}
    if small:
        out = git.raw("cat-file", "--batch", stdin="".join(f"{b}\n" for b in small).encode())
        at = 0
        for blob in small:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            found[blob] = out[header_end + 1 : header_end + 1 + size]
            at = header_end + 1 + size + 1
    return found, frozenset(wanted) - found.keys()


def _sizes(runner: Runner, blobs: list[str]) -> dict[str, int]:
    out = runner.raw(
        "cat-file",
        "--batch-check=%(objectname) %(objecttype) %(objectsize)",
        stdin="".join(f"{b}\n" for b in blobs).encode(),
    ).decode()
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    return sizes


def note_blobs(git: Runner, notes_ref: str) -> dict[str, str]:
    """The note blob of every annotated commit, as the next push would leave it (as
    `Repository.read_note` resolves one note: whoever changed it since the merge base of
    our notes and the remote's wins; both, ours)."""
    runner = git
    ref = full_notes_ref(notes_ref)
    ours_tip, theirs_tip = runner.commit_of(ref), runner.commit_of(tracking_notes_ref(ref))
    ours, theirs = _notes_tree(runner, ours_tip), _notes_tree(runner, theirs_tip)
    if ours_tip is None or theirs_tip is None:
        return ours if ours_tip is not None else theirs
    base = _notes_tree(runner, runner.merge_base(ours_tip, theirs_tip))
    merged: dict[str, str] = {}
    for commit in ours.keys() | theirs.keys():
        mine = ours.get(commit)
        chosen = theirs.get(commit) if mine == base.get(commit) else mine
        if chosen is not None:
            merged[commit] = chosen
    return merged


def _notes_tree(runner: Runner, notes_commit: str | None) -> dict[str, str]:
    """Commit -> note blob in one notes commit, at whatever fan-out git wrote it."""
    if notes_commit is None:
        return {}
    listing = runner.raw("ls-tree", "-r", "-z", notes_commit).decode("utf-8", errors="replace")
    notes: dict[str, str] = {}
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        commit = path.replace("/", "")
        if len(parts) == 3 and parts[1] == "blob" and _SHA.fullmatch(commit):
            notes[commit] = parts[2]
    return notes
