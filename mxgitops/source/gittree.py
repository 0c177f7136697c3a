"""A commit's files read from Git's objects, without touching any work tree.

`diff` compares two commits of a checkout this way, and a sync's sub-path is checked
and its symlinks followed the same way: every blob as Git stores it (no
`.gitattributes` applies), symlinks as symlinks, nothing written outside the
destination, whatever paths a crafted tree holds.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from mxgitops.errors import GitError
from mxgitops.source.gitcommand import Runner, local_git

SYMLINK_MODE = b"120000"
_MAX_SYMLINK_HOPS = 40


def resolve(repo_path: Path, rev: str) -> str:
    """The full sha of the commit `rev` names in the repository at `repo_path`."""
    # Any revision expression is fine (HEAD~1, origin/main), as long as it is no option.
    sha = None if rev.startswith("-") else local_git(repo_path).commit_of(rev)
    if sha is None:
        raise GitError(f"{rev!r} does not name a commit in {repo_path}")
    return sha


def export_tree(repo_path: Path, commit: str, dest: Path, *, subpath: str = "") -> Path:
    """Write the files of `commit` (only `subpath`, if given) under `dest`; return the dir.

    Used to compare two commits of a checkout without touching its work tree. Every
    blob is written from Git's objects as stored, the way a sync's checkout has it (no
    attribute applies: export-ignore hides nothing); symlinks are written as symlinks,
    whatever they point to (the manifest loader does not follow one out of the
    directory it reads, and reports it); submodules are left out. Nothing is written
    outside `dest`.
    """
    runner = local_git(repo_path)
    sha = resolve(repo_path, commit)
    sub = clean_subpath(subpath)
    require_directory(runner, sha, sub, where=str(repo_path))
    listing = runner.raw("ls-tree", "-r", "-z", "--full-tree", sha, *(["--", sub] if sub else []))
    entries = [tree_entry(record) for record in listing.split(b"\0") if record]
    blobs = [(mode, oid, name) for mode, kind, oid, name in entries if kind == b"blob"]
    contents = read_blobs(runner, {oid for _, oid, _ in blobs})
    dest.mkdir(parents=True, exist_ok=True)
    top = Path(os.path.realpath(dest))
    for mode, oid, name in blobs:
        target = _beneath(top, name)
        if mode == SYMLINK_MODE:
            os.symlink(os.fsdecode(contents[oid]), target)
        else:
            target.write_bytes(contents[oid])
    return dest / sub if sub else dest


def tree_entry(record: bytes) -> tuple[bytes, bytes, str, str]:
    """(mode, type, oid, path) of one `ls-tree -z` record."""
    meta, _, name = record.partition(b"\t")
    mode, kind, oid = meta.split()
    return mode, kind, oid.decode(), os.fsdecode(name)


def read_blobs(runner: Runner, oids: set[str]) -> dict[str, bytes]:
    """The contents of `oids`, through one `git cat-file --batch`."""
    if not oids:
        return {}
    ordered = sorted(oids)
    output = runner.raw("cat-file", "--batch", stdin=("\n".join(ordered) + "\n").encode())
    contents: dict[str, bytes] = {}
    position = 0
    for oid in ordered:
        end = output.index(b"\n", position)
        header = output[position:end].split()
        if len(header) != 3 or header[1] != b"blob":
            raise GitError(f"git cat-file: object {oid} is not a blob")
        size = int(header[2])
        contents[oid] = output[end + 1 : end + 1 + size]
        position = end + 1 + size + 1
    return contents


def _beneath(top: Path, name: str) -> Path:
    """`top / name`, its directories created; refused unless it stays under `top`
    without passing through a symlink (a crafted tree can hold any path)."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or {"..", ".", ".git"} & set(parts):
        raise GitError(f"refusing to write {name!r}: not a plain path inside the repository")
    target = top.joinpath(*parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    if Path(os.path.realpath(target.parent)) != target.parent or target.is_symlink():
        raise GitError(f"refusing to write {name!r}: it would pass through a symlink")
    return target


def follow_links(runner: Runner, commit: str, path: str) -> str | None:
    """`path` in `commit` with every symlink along it followed (relative targets only,
    at most 40): what the file system does in a checkout. None when it leaves the
    commit, goes nowhere or loops."""
    pending = list(PurePosixPath(path).parts) if path else []
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        if part == ".":
            continue
        candidate = "/".join([*done, part])
        listing = runner.raw("ls-tree", "-z", "--full-tree", commit, "--", candidate)
        if not listing:
            return None
        mode, _, oid, _ = tree_entry(listing.rstrip(b"\0"))
        if mode != SYMLINK_MODE:
            done.append(part)
            continue
        hops += 1
        target = PurePosixPath(os.fsdecode(read_blobs(runner, {oid})[oid]))
        if hops > _MAX_SYMLINK_HOPS or target.is_absolute():
            return None
        pending = [*target.parts, *pending]
    return "/".join(done)


def clean_subpath(subpath: str) -> str:
    """`subpath` normalised to a relative POSIX path ("" for the whole tree)."""
    pure = PurePosixPath(subpath.strip() or ".")
    if pure.is_absolute() or ".." in pure.parts:
        raise GitError(f"sub-path {subpath!r} must stay inside the repository")
    return "" if str(pure) == "." else str(pure)


def require_directory(runner: Runner, commit: str, sub: str, *, where: str) -> None:
    # Tree lookups do not follow symlinks, so a directory found here is inside the repo.
    if sub and runner.attempt("cat-file", "-t", f"{commit}:{sub}") != (0, "tree"):
        raise GitError(f"sub-path {sub!r} is not a directory in {commit[:7]} of {where}")
