"""Git, and only git: the cache clone a sync reads manifests from, and its status notes.

Every other module works on plain files and values. Talking to a remote is where a
GitOps reconciler fails in the field (credentials, force-pushes, half-written caches,
concurrent writers of notes), so all of it lives here, behind a small typed API. Each git
command runs through `gitcommand.py`, the only module that imports GitPython (an
import-linter contract keeps it so); `gittree.py` reads a commit's files without a
checkout.

What callers can rely on:

- Secrets never reach git's command line, the cache's ``.git/config``, logs or
  exceptions. The remote is stored without credentials; they travel in environment
  variables (``GIT_CONFIG_*`` with an ``http.<url>.extraHeader``, or ``GIT_SSH_COMMAND``),
  and every error message is passed through :func:`redact`.
- The remote is the truth: branches and tags are fetched with forced refspecs and the
  work tree is checked out detached at the remote's commit. A rewritten branch is
  followed and reported (:attr:`Checkout.forced_update`).
- A cache that cannot be trusted (not a repository, another remote, broken ``.git``, an
  interrupted clone, a fetch or checkout that fails while the remote is fine) is thrown
  away and cloned again, and the result says why.
- No git command outlasts its deadline (`timeout`, the `--request-timeout`): git is
  killed with its process group (`gitcommand.GitTimeout`), and the lock files a killed
  git leaves in the cache are removed by the next run that holds the cache's lock
  (no other git can be using it then), so the cache is used again as it is.
- Notes are never lost: a rejected push fetches the remote's notes, merges them with
  ``git notes merge -s ours`` (notes on other commits are kept; for the same commit
  this writer wins) and retries.
- Trees are read as Git stores them, by sync and diff alike: the repository's own
  ``.gitattributes`` (export-ignore, ident, eol, working-tree-encoding, filters) change
  nothing a sync applies or a pull request's diff shows.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mxgitops.errors import GitError
from mxgitops.objects import FULL_COMMIT_ID
from mxgitops.source import cachelock
from mxgitops.source.gitauth import Credentials, Remote, git_environment, redact
from mxgitops.source.gitcommand import (
    DEFAULT_TIMEOUT,
    CommandFailed,
    GitTimeout,
    Runner,
    push_refusal,
)
from mxgitops.source.gittree import clean_subpath, follow_links, require_directory

NOTES_REF = "refs/notes/mxgitops"
PUSH_ATTEMPTS = 5
# Bytes of a status note read at most. A note of 10,000 jobs is a few MB; one of hundreds
# of MB packs into a few hundred KB of repeated bytes, and anyone who can push can write it.
MAX_NOTE_SIZE = 32 << 20

_REMOTE = "origin"
_BRANCHES = "+refs/heads/*:refs/remotes/origin/*"
_TAGS = "+refs/tags/*:refs/tags/*"
# Remote notes land in tracking refs, never in the local notes refs: fetching (also in a
# dry run) must not change the notes this cache writes.
_NOTES = "+refs/notes/*:refs/notes/remotes/origin/*"
_LAST_SYNCED = "refs/mxgitops/last-synced/"
_CHECK_REFS = "refs/mxgitops/check/"  # `mxgitops check`'s scratch refs (push_refused)
_HEX_SHA = re.compile(r"[0-9a-fA-F]{4,40}")
_BAD_REV = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|^-")
_PUSH_RACE = ("[rejected]", "[remote rejected]", "non-fast-forward", "fetch first")
# $GIT_DIR/info/attributes outranks every .gitattributes in the tree: with these, a
# checkout writes each blob byte for byte, as `export_tree` does.
_VERBATIM = "* -text -eol -crlf -ident -filter -working-tree-encoding\n"


class NoteTooLarge(GitError):
    """A note's blob is larger than any mxgitops writes: not read (`MAX_NOTE_SIZE`)."""

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message)
        self.size = size


@dataclass(frozen=True)
class Checkout:
    """The work tree of a cache clone, detached at `commit`."""

    root: Path
    commit: str
    ref: str
    url: str
    cloned: bool
    recloned_reason: str | None = None
    forced_update: str | None = None
    subpath: str = ""

    @property
    def path(self) -> Path:
        """The directory the caller reads manifests from: `root / subpath`."""
        return self.root / self.subpath if self.subpath else self.root


class Repository:
    """The cache of one remote: a non-bare clone under `cache_dir`, reused across runs."""

    def __init__(
        self,
        url: str,
        *,
        cache_dir: Path,
        credentials: Credentials | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        credentials = credentials or Credentials()
        self._remote = Remote.parse(url, credentials)
        self.path = Path(cache_dir) / _cache_name(self._remote.url)
        self._timeout = timeout  # of each git command
        self._env = git_environment(self._remote, credentials, timeout=timeout)
        self._locked = False

    @property
    def url(self) -> str:
        """The remote's URL, safe to print."""
        return self._remote.display

    @contextmanager
    def locked(
        self, *, timeout: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[None]:
        """This process alone uses the cache in the `with` (see `cachelock`): the lock is
        on the cache directory, which a re-clone of this clone never replaces."""
        with cachelock.held(self.path.parent, timeout=timeout, on_wait=on_wait):
            self._locked = True
            try:
                yield
            finally:
                self._locked = False

    def sync(self, ref: str | None = None, *, subpath: str = "") -> Checkout:
        """Bring the cache to the remote's `ref` (None: its default branch) and check it out.

        `ref` is a branch, a tag or a (possibly abbreviated) commit sha. `subpath` must be
        a directory of that commit. Clones when there is no usable cache, fetches otherwise.
        """
        sub = clean_subpath(subpath)
        if self._locked:
            _remove_stale_locks(self.path / ".git")
        reason = self._cache_problem() if self.path.exists() else None
        if self.path.exists() and reason is None:
            try:
                self._fetch(self._git())
                return self._check_out(ref, sub, cloned=False, reason=None)
            except _BrokenCache as exc:
                reason = str(exc)
        self._clone()
        return self._check_out(ref, sub, cloned=True, reason=reason)

    def tree_id(self, commit: str, subpath: str = "") -> str | None:
        """The id of what a sync reads at `subpath` of `commit`: equal ids, identical files.

        Symlinks along `subpath` are followed inside the commit, as the file system
        follows them in the checkout: the id is that of the directory they lead to,
        never of a link (whose blob stays the same when its target's files change).
        None when the path leads out of the commit or to nothing.
        """
        runner = self._git()
        resolved = follow_links(runner, commit, clean_subpath(subpath))
        if resolved is None:
            return None
        status, sha = runner.attempt("rev-parse", "--verify", "--quiet", f"{commit}:{resolved}")
        return sha if status == 0 and sha else None

    def in_history(self, commit: str, candidates: Iterable[str]) -> frozenset[str]:
        """Those of `candidates` that are commits in the history of `commit`, each a full
        commit id as git writes it (one `git merge-base --is-ancestor` each)."""
        runner = self._synced_git()
        return frozenset(
            candidate
            for candidate in candidates
            if FULL_COMMIT_ID.fullmatch(candidate)
            and runner.attempt("merge-base", "--is-ancestor", candidate, commit)[0] == 0
        )

    def state_file(self, name: str) -> Path:
        """A file of mxgitops' own beside the cache's git data, untouched by checkouts."""
        return self.path / ".git" / "mxgitops" / name

    def read_note(self, commit: str, *, notes_ref: str = NOTES_REF) -> str | None:
        """The note on `commit`, as the next push would leave it (ours merged with theirs).

        Reads the local notes ref and the remote's (fetched at sync time) without changing
        either, and resolves them the way ``git notes merge -s ours`` will.
        """
        runner = self._synced_git()
        sha = self._commit(runner, commit)
        ref = _full_notes_ref(notes_ref)
        ours_tip, theirs_tip = runner.commit_of(ref), runner.commit_of(_tracking(ref))
        ours = _note_in(runner, ours_tip, sha)
        theirs = _note_in(runner, theirs_tip, sha)
        if ours_tip is None or theirs_tip is None:
            return ours if ours_tip is not None else theirs
        base = _note_in(runner, runner.merge_base(ours_tip, theirs_tip), sha)
        # Three-way: whoever changed the note since the common base wins; both → ours.
        return theirs if ours == base else ours

    def write_note(self, commit: str, text: str, *, notes_ref: str = NOTES_REF) -> bool:
        """Set the note on `commit` in the cache (not pushed); False if it already says that."""
        runner = self._synced_git()
        sha = self._commit(runner, commit)
        try:
            if self.read_note(sha, notes_ref=notes_ref) == text:
                return False
        except NoteTooLarge:
            pass  # not ours, whatever it says: written over
        ref = _full_notes_ref(notes_ref)
        self._merge_remote_notes(runner, ref)
        blob = runner.store_blob(text.encode())
        # -C takes the blob verbatim (no whitespace clean-up), so read_note returns `text`.
        runner("notes", f"--ref={ref}", "add", "--force", "--allow-empty", "-C", blob, sha)
        return True

    def push_notes(self, *, notes_ref: str = NOTES_REF, attempts: int = PUSH_ATTEMPTS) -> None:
        """Push the notes ref; when another writer moved it, merge theirs and retry."""
        runner = self._synced_git()
        ref = _full_notes_ref(notes_ref)
        last_rejection = "no attempt made"
        for _ in range(attempts):
            self._merge_remote_notes(runner, ref)
            ours = runner.commit_of(ref)
            if ours is None or ours == runner.commit_of(_tracking(ref)):
                return
            try:
                runner("push", "--quiet", _REMOTE, f"{ref}:{ref}")
            except CommandFailed as exc:
                if not any(marker in exc.stderr for marker in _PUSH_RACE):
                    raise
                last_rejection = push_refusal(exc.stderr)
                runner("fetch", "--quiet", "--prune", _REMOTE, _NOTES)
                continue
            runner("update-ref", _tracking(ref), ours)
            return
        raise GitError(
            f"pushing {ref} to {self.url} was rejected {attempts} times (last: {last_rejection}); "
            "the notes stay in the cache and go with the next push"
        )

    def push_refused(self, commit: str) -> str | None:
        """Why the remote refuses this credential's pushes (the notes need them), in one
        line; None when it accepts them. The proof is a push: `commit` (already on the
        remote, so nothing is uploaded) to a scratch ref, deleted at once."""
        runner = self._synced_git()
        scratch = f"{_CHECK_REFS}{secrets.token_hex(8)}"
        status, stderr = runner.attempt("push", "--quiet", _REMOTE, f"{commit}:{scratch}")
        if status != 0:
            return push_refusal(stderr)
        status, stderr = runner.attempt("push", "--quiet", _REMOTE, f":{scratch}")
        if status != 0:
            return f"pushed {scratch} but could not delete it: {push_refusal(stderr)}"
        return None

    # -- cache life cycle -------------------------------------------------------------

    def _git(self, path: Path | None = None) -> Runner:
        work_tree = path or self.path
        located = {"GIT_DIR": str(work_tree / ".git"), "GIT_WORK_TREE": str(work_tree)}
        return Runner(
            work_tree,
            {**self._env, **located},
            self._remote.secrets,
            timeout=self._timeout,
            remote=self.url,
        )

    def reader(self) -> Runner:
        """git in the synced cache, for the read-only walks of `githistory.py`."""
        return self._synced_git()

    def _synced_git(self) -> Runner:
        if not (self.path / ".git").is_dir():
            raise GitError(f"no cache of {self.url} yet: sync before reading or writing notes")
        return self._git()

    def _cache_problem(self) -> str | None:
        """Why the existing cache cannot be used, or None when it can."""
        if not (self.path / ".git").is_dir():
            return "not a git repository"
        runner = self._git()
        status, err = runner.attempt("rev-parse", "--git-dir")
        if status != 0:
            return f"broken .git: {err.splitlines()[-1] if err else 'unreadable'}"
        status, origin = runner.attempt("config", "--get", f"remote.{_REMOTE}.url")
        if status != 0:
            return "the cache has no origin remote"
        if origin != self._remote.url:
            return f"the cache clones another remote ({redact(origin)})"
        if runner.commit_of("HEAD") is None:
            return "HEAD does not point to a commit (interrupted clone?)"
        if _read_file(self.path / ".git" / "info" / "attributes") != _VERBATIM:
            return "its work tree may have been checked out through the repository's .gitattributes"
        return None

    def _clone(self) -> None:
        """Build a fresh cache beside the old one and move it in place once fetched."""
        partial = self.path.with_name(self.path.name + ".partial")
        _remove(partial)
        partial.mkdir(parents=True)
        try:
            runner = self._git(partial)
            runner("init", "--quiet")
            info = partial / ".git" / "info"
            info.mkdir(parents=True, exist_ok=True)
            (info / "attributes").write_text(_VERBATIM, encoding="utf-8")
            runner("remote", "add", _REMOTE, self._remote.url)
            self._fetch(runner, fresh=True)
            self._refresh_default_branch(runner)
        except BaseException:
            _remove(partial)
            raise
        _remove(self.path)
        partial.rename(self.path)

    def _fetch(self, runner: Runner, *, fresh: bool = False) -> None:
        args = ("fetch", "--quiet", "--prune", "--no-tags", _REMOTE, _BRANCHES, _TAGS, _NOTES)
        try:
            runner(*args)
        except GitTimeout:
            raise  # the remote does not answer: asking it again would wait as long
        except GitError as exc:
            if fresh or runner.attempt("ls-remote", _REMOTE, "HEAD")[0] != 0:
                raise GitError(f"cannot fetch from {self.url}: {exc}") from exc
            raise _BrokenCache(f"fetching into the cache failed: {exc}") from exc

    def _check_out(
        self, ref: str | None, sub: str, *, cloned: bool, reason: str | None
    ) -> Checkout:
        runner = self._git()
        commit, branch = self._target(runner, ref)
        forced = _forced_update(runner, branch, commit)
        if runner.commit_of("HEAD") != commit:
            try:
                runner("checkout", "--quiet", "--force", "--detach", commit)
                # A stray file in the work tree would be read as a manifest.
                runner("clean", "-ffdxq")
            except GitError as exc:
                raise _BrokenCache(f"checkout of {commit[:7]} failed: {exc}") from exc
        require_directory(runner, commit, sub, where=self.url)
        if branch is not None:
            runner("update-ref", _LAST_SYNCED + branch, commit)
        return Checkout(
            root=self.path,
            commit=commit,
            ref=ref or branch or commit,
            url=self.url,
            cloned=cloned,
            recloned_reason=reason,
            forced_update=forced,
            subpath=sub,
        )

    # -- revisions ----------------------------------------------------------------------

    def _target(self, runner: Runner, ref: str | None) -> tuple[str, str | None]:
        """The commit `ref` names on the remote, and its branch name when it is a branch."""
        if ref is None:
            branch = self._default_branch(runner)
            return self._commit(runner, f"refs/remotes/{_REMOTE}/{branch}"), branch
        _check_rev(ref)
        branch = ref.removeprefix("refs/heads/")
        sha = runner.commit_of(f"refs/remotes/{_REMOTE}/{branch}")
        if sha is not None:
            return sha, branch
        sha = runner.commit_of(f"refs/tags/{ref.removeprefix('refs/tags/')}")
        if sha is None and _HEX_SHA.fullmatch(ref):
            sha = runner.commit_of(ref)
        if sha is None:
            raise GitError(f"{ref!r} is not a branch, tag or commit of {self.url}")
        return sha, None

    def _default_branch(self, runner: Runner) -> str:
        head = f"refs/remotes/{_REMOTE}/HEAD"
        status, target = runner.attempt("symbolic-ref", "--quiet", head)
        if status != 0 or runner.commit_of(target) is None:
            # The remote's default branch changed (or was deleted) since the clone.
            self._refresh_default_branch(runner)
            target = runner("symbolic-ref", head)
        return target.removeprefix(f"refs/remotes/{_REMOTE}/")

    def _refresh_default_branch(self, runner: Runner) -> None:
        try:
            runner("remote", "set-head", _REMOTE, "--auto")
        except GitError as exc:
            raise GitError(f"{self.url} has no default branch (empty repository?)") from exc

    def _commit(self, runner: Runner, rev: str) -> str:
        _check_rev(rev)
        sha = runner.commit_of(rev)
        if sha is None:
            raise GitError(f"{rev!r} does not name a commit in the cache of {self.url}")
        return sha

    # -- notes --------------------------------------------------------------------------

    def _merge_remote_notes(self, runner: Runner, ref: str) -> None:
        """Fold the fetched remote notes into ours: other commits' notes kept, ours win."""
        tracking = _tracking(ref)
        if runner.commit_of(tracking) is not None:
            runner("notes", f"--ref={ref}", "merge", "--quiet", "--strategy=ours", tracking)


def _forced_update(runner: Runner, branch: str | None, commit: str) -> str | None:
    """A message when the branch's new tip does not descend from the last synced one."""
    if branch is None:
        return None
    previous = runner.commit_of(_LAST_SYNCED + branch)
    if previous is None or previous == commit:
        return None
    # Exit 1 means "not an ancestor"; other failures (object gone) prove nothing.
    if runner.attempt("merge-base", "--is-ancestor", previous, commit)[0] != 1:
        return None
    return f"branch {branch} was force-pushed: {previous[:7]}...{commit[:7]} (history rewritten)"


def _note_in(runner: Runner, notes_commit: str | None, sha: str) -> str | None:
    """The note on `sha` in one notes commit, looked up at every fan-out depth git uses."""
    if notes_commit is None:
        return None
    candidates = [
        "/".join([*(sha[i : i + 2] for i in range(0, 2 * depth, 2)), sha[2 * depth :]])
        for depth in range(4)
    ]
    listing = runner("ls-tree", "-r", notes_commit, "--", *candidates)
    if not listing:
        return None
    blob = listing.split()[2]
    size = int(runner("cat-file", "-s", blob))
    if size > MAX_NOTE_SIZE:
        raise NoteTooLarge(f"too large: {size} bytes, at most {MAX_NOTE_SIZE} are read", size=size)
    return runner.raw("cat-file", "blob", blob).decode("utf-8", errors="replace")


def _full_notes_ref(notes_ref: str) -> str:
    if notes_ref.startswith("refs/notes/"):
        return notes_ref
    return "refs/notes/" + notes_ref.removeprefix("notes/")


full_notes_ref = _full_notes_ref  # what `status` tells a checkout to fetch


def _tracking(notes_ref: str) -> str:
    return "refs/notes/remotes/origin/" + notes_ref.removeprefix("refs/notes/")


tracking_notes_ref = _tracking  # where the remote's notes are fetched to


def _cache_name(url: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", url.lower()).strip("-")[:60].strip("-")
    return f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


# -- small helpers ------------------------------------------------------------------


def _read_file(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _check_rev(rev: str) -> None:
    if not rev or _BAD_REV.search(rev):
        raise GitError(f"{rev!r} is not a valid branch, tag or commit name")


# Lock files git takes in a repository (the index, HEAD, config, packed-refs, shallow,
# each ref), named `<file>.lock`; none under objects/ (its temporary files are not locks).
_LOCKED_FILES = ("index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")


def _remove_stale_locks(git_dir: Path) -> None:
    """The lock files a git killed at its deadline (or with mxgitops) left: only called
    under the cache's lock, when no other git can be using the repository."""
    if not git_dir.is_dir():
        return
    found = [git_dir / name for name in _LOCKED_FILES]
    found += (git_dir / "refs").rglob("*.lock") if (git_dir / "refs").is_dir() else []
    for path in found:
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


class _BrokenCache(GitError):
    """The cache, not the remote, is at fault: the caller clones again."""
