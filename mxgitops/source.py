"""Git, and only git: the cache clone a sync reads manifests from, and its status notes.

Every other module works on plain files and values. Talking to a remote is where a
GitOps reconciler fails in the field (credentials, force-pushes, half-written caches,
concurrent writers of notes), so all of it lives here, behind a small typed API, and this
is the only module that imports GitPython (an import-linter contract keeps it so).

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
- Notes are never lost: a rejected push fetches the remote's notes, merges them with
  ``git notes merge -s ours`` (notes on other commits are kept; for the same commit
  this writer wins) and retries.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import git

from mxgitops.errors import GitError
from mxgitops.gitauth import GIT_IDENTITY, Remote, git_environment
from mxgitops.gitauth import Credentials as Credentials  # re-exported: part of this API
from mxgitops.gitauth import redact as redact

NOTES_REF = "refs/notes/mxgitops"
PUSH_ATTEMPTS = 5

_REMOTE = "origin"
_BRANCHES = "+refs/heads/*:refs/remotes/origin/*"
_TAGS = "+refs/tags/*:refs/tags/*"
# Remote notes land in tracking refs, never in the local notes refs: fetching (also in a
# dry run) must not change the notes this cache writes.
_NOTES = "+refs/notes/*:refs/notes/remotes/origin/*"
_LAST_SYNCED = "refs/mxgitops/last-synced/"
_HEX_SHA = re.compile(r"[0-9a-fA-F]{4,40}")
_BAD_REV = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|^-")
_PUSH_RACE = ("[rejected]", "[remote rejected]", "non-fast-forward", "fetch first")


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


def resolve(repo_path: Path, rev: str) -> str:
    """The full sha of the commit `rev` names in the repository at `repo_path`."""
    # Any revision expression is fine (HEAD~1, origin/main), as long as it is no option.
    sha = None if rev.startswith("-") else _local_git(repo_path).commit_of(rev)
    if sha is None:
        raise GitError(f"{rev!r} does not name a commit in {repo_path}")
    return sha


def export_tree(repo_path: Path, commit: str, dest: Path, *, subpath: str = "") -> Path:
    """Write the files of `commit` (only `subpath`, if given) under `dest`; return the dir.

    Used to compare two commits of a checkout without touching its work tree.
    """
    runner = _local_git(repo_path)
    sha = resolve(repo_path, commit)
    sub = _clean_subpath(subpath)
    _require_directory(runner, sha, sub, where=str(repo_path))
    archive = runner.raw("archive", "--format=tar", sha, *([sub] if sub else []))
    _extract(archive, dest)
    return dest / sub if sub else dest


def _extract(archive: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            # The "data" filter refuses absolute paths and links leaving `dest`.
            tar.extractall(dest, filter="data")
    except tarfile.TarError as exc:
        raise GitError(f"cannot materialise the commit into {dest}: {exc}") from exc


class Repository:
    """The cache of one remote: a non-bare clone under `cache_dir`, reused across runs."""

    def __init__(
        self, url: str, *, cache_dir: Path, credentials: Credentials | None = None
    ) -> None:
        credentials = credentials or Credentials()
        self._remote = Remote.parse(url, credentials)
        self.path = Path(cache_dir) / _cache_name(self._remote.url)
        self._env = git_environment(self._remote, credentials)

    @property
    def url(self) -> str:
        """The remote's URL, safe to print."""
        return self._remote.display

    def sync(self, ref: str | None = None, *, subpath: str = "") -> Checkout:
        """Bring the cache to the remote's `ref` (None: its default branch) and check it out.

        `ref` is a branch, a tag or a (possibly abbreviated) commit sha. `subpath` must be
        a directory of that commit. Clones when there is no usable cache, fetches otherwise.
        """
        sub = _clean_subpath(subpath)
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
        """The id of the tree at `subpath` of `commit`: equal ids, identical files."""
        sub = _clean_subpath(subpath)
        status, sha = self._git().attempt("rev-parse", "--verify", "--quiet", f"{commit}:{sub}")
        return sha if status == 0 and sha else None

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
        if self.read_note(sha, notes_ref=notes_ref) == text:
            return False
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
            except _CommandFailed as exc:
                if not any(marker in exc.stderr for marker in _PUSH_RACE):
                    raise
                last_rejection = exc.stderr
                runner("fetch", "--quiet", "--prune", _REMOTE, _NOTES)
                continue
            runner("update-ref", _tracking(ref), ours)
            return
        raise GitError(
            f"pushing {ref} to {self.url} was rejected {attempts} times (last: {last_rejection}); "
            "the notes stay in the cache and go with the next push"
        )

    # -- cache life cycle -------------------------------------------------------------

    def _git(self, path: Path | None = None) -> _Runner:
        work_tree = path or self.path
        located = {"GIT_DIR": str(work_tree / ".git"), "GIT_WORK_TREE": str(work_tree)}
        return _Runner(work_tree, {**self._env, **located}, self._remote.secrets)

    def _synced_git(self) -> _Runner:
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
        return None

    def _clone(self) -> None:
        """Build a fresh cache beside the old one and move it in place once fetched."""
        partial = self.path.with_name(self.path.name + ".partial")
        _remove(partial)
        partial.mkdir(parents=True)
        try:
            runner = self._git(partial)
            runner("init", "--quiet")
            runner("remote", "add", _REMOTE, self._remote.url)
            self._fetch(runner, fresh=True)
            self._refresh_default_branch(runner)
        except BaseException:
            _remove(partial)
            raise
        _remove(self.path)
        partial.rename(self.path)

    def _fetch(self, runner: _Runner, *, fresh: bool = False) -> None:
        args = ("fetch", "--quiet", "--prune", "--no-tags", _REMOTE, _BRANCHES, _TAGS, _NOTES)
        try:
            runner(*args)
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
        _require_directory(runner, commit, sub, where=self.url)
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

    def _target(self, runner: _Runner, ref: str | None) -> tuple[str, str | None]:
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

    def _default_branch(self, runner: _Runner) -> str:
        head = f"refs/remotes/{_REMOTE}/HEAD"
        status, target = runner.attempt("symbolic-ref", "--quiet", head)
        if status != 0 or runner.commit_of(target) is None:
            # The remote's default branch changed (or was deleted) since the clone.
            self._refresh_default_branch(runner)
            target = runner("symbolic-ref", head)
        return target.removeprefix(f"refs/remotes/{_REMOTE}/")

    def _refresh_default_branch(self, runner: _Runner) -> None:
        try:
            runner("remote", "set-head", _REMOTE, "--auto")
        except GitError as exc:
            raise GitError(f"{self.url} has no default branch (empty repository?)") from exc

    def _commit(self, runner: _Runner, rev: str) -> str:
        _check_rev(rev)
        sha = runner.commit_of(rev)
        if sha is None:
            raise GitError(f"{rev!r} does not name a commit in the cache of {self.url}")
        return sha

    # -- notes --------------------------------------------------------------------------

    def _merge_remote_notes(self, runner: _Runner, ref: str) -> None:
        """Fold the fetched remote notes into ours: other commits' notes kept, ours win."""
        tracking = _tracking(ref)
        if runner.commit_of(tracking) is not None:
            runner("notes", f"--ref={ref}", "merge", "--quiet", "--strategy=ours", tracking)


def _forced_update(runner: _Runner, branch: str | None, commit: str) -> str | None:
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


def _note_in(runner: _Runner, notes_commit: str | None, sha: str) -> str | None:
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
    return runner.raw("cat-file", "blob", blob).decode("utf-8", errors="replace")


def _full_notes_ref(notes_ref: str) -> str:
    if notes_ref.startswith("refs/notes/"):
        return notes_ref
    return "refs/notes/" + notes_ref.removeprefix("notes/")


def _tracking(notes_ref: str) -> str:
    return "refs/notes/remotes/origin/" + notes_ref.removeprefix("refs/notes/")


def _cache_name(url: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", url.lower()).strip("-")[:60].strip("-")
    return f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


# -- small helpers ------------------------------------------------------------------


def _clean_subpath(subpath: str) -> str:
    """`subpath` normalised to a relative POSIX path ("" for the whole tree)."""
    pure = PurePosixPath(subpath.strip() or ".")
    if pure.is_absolute() or ".." in pure.parts:
        raise GitError(f"sub-path {subpath!r} must stay inside the repository")
    return "" if str(pure) == "." else str(pure)


def _require_directory(runner: _Runner, commit: str, sub: str, *, where: str) -> None:
    # Tree lookups do not follow symlinks, so a directory found here is inside the repo.
    if sub and runner.attempt("cat-file", "-t", f"{commit}:{sub}") != (0, "tree"):
        raise GitError(f"sub-path {sub!r} is not a directory in {commit[:7]} of {where}")


def _check_rev(rev: str) -> None:
    if not rev or _BAD_REV.search(rev):
        raise GitError(f"{rev!r} is not a valid branch, tag or commit name")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _locate(path: Path) -> dict[str, str] | None:
    """GIT_DIR (and GIT_WORK_TREE unless bare) of the repository holding `path`, or None."""
    try:
        with git.Repo(path, search_parent_directories=True) as repo:
            located = {"GIT_DIR": str(repo.git_dir)}
            if repo.working_tree_dir is not None:
                located["GIT_WORK_TREE"] = str(repo.working_tree_dir)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    return located


def _local_git(repo_path: Path) -> _Runner:
    # Naming the repository explicitly beats discovery: an inherited GIT_DIR (git hooks,
    # CI) would otherwise point every command somewhere else.
    located = _locate(repo_path)
    if located is None:
        raise GitError(f"{repo_path} is not a git repository")
    cwd = Path(located.get("GIT_WORK_TREE", located["GIT_DIR"]))  # pathspecs are cwd-relative
    return _Runner(cwd, {**GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0", **located})


class _CommandFailed(GitError):
    """A git command exited non-zero; `stderr` is already redacted."""

    def __init__(self, message: str, *, status: int, stderr: str) -> None:
        super().__init__(message)
        self.status = status
        self.stderr = stderr


class _BrokenCache(GitError):
    """The cache, not the remote, is at fault: the caller clones again."""


class _Runner:
    """Runs git in one repository with our environment; failures become redacted errors."""

    def __init__(self, cwd: Path, env: Mapping[str, str], secrets: tuple[str, ...] = ()) -> None:
        self._git = git.Git(cwd)
        self._git.update_environment(**env)
        self._secrets = secrets

    def __call__(self, *args: str, stdin: BinaryIO | None = None) -> str:
        with self._failures(args):
            return self._git.execute([_executable(), *args], istream=stdin)

    def raw(self, *args: str) -> bytes:
        """Stdout as bytes, exactly as git wrote it."""
        with self._failures(args):
            return self._git.execute(
                [_executable(), *args], stdout_as_string=False, strip_newline_in_stdout=False
            )

    def attempt(self, *args: str) -> tuple[int, str]:
        """(exit status, stdout on success else stderr), never raising for git's exit."""
        try:
            return 0, self(*args)
        except _CommandFailed as exc:
            return exc.status, exc.stderr

    def commit_of(self, rev: str) -> str | None:
        status, sha = self.attempt("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return sha if status == 0 and sha else None

    def merge_base(self, a: str, b: str) -> str | None:
        status, sha = self.attempt("merge-base", a, b)
        return sha if status == 0 and sha else None

    def store_blob(self, data: bytes) -> str:
        with tempfile.TemporaryFile() as stdin:
            stdin.write(data)
            stdin.seek(0)
            return self("hash-object", "-w", "--stdin", stdin=stdin)

    @contextmanager
    def _failures(self, args: tuple[str, ...]) -> Iterator[None]:
        try:
            yield
        except git.CommandError as exc:
            stderr = redact(_stderr_text(exc), self._secrets)
            status = exc.status if isinstance(exc.status, int) else -1
            message = f"git {args[0]} failed: {stderr or f'exit status {status}'}"
            raise _CommandFailed(message, status=status, stderr=stderr) from exc


def _executable() -> str:
    return str(git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git")


def _stderr_text(exc: git.CommandError) -> str:
    # GitPython stores stderr pre-formatted as "\n  stderr: '...'"; keep the message only.
    text = str(exc.stderr).strip()
    return text.removeprefix("stderr: '").removesuffix("'").strip()
