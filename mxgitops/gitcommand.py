"""Running git: one command at a time in one repository, its failures as redacted,
one-line errors.

`source.py` (the cache clone and its notes) and `gittree.py` (reading a commit's files)
run every git command through a :class:`Runner`. GitPython is imported on first use
(:func:`gitpython`): validate and convert of a plain directory never run git, and should
not pay for loading it. This is the only module that imports GitPython (an
import-linter contract keeps it so).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO

from mxgitops.errors import GitError
from mxgitops.gitauth import GIT_IDENTITY, redact

if TYPE_CHECKING:
    import git


class CommandFailed(GitError):
    """A git command exited non-zero; `stderr` is already redacted."""

    def __init__(self, message: str, *, status: int, stderr: str) -> None:
        super().__init__(message)
        self.status = status
        self.stderr = stderr


class Runner:
    """Runs git in one repository with our environment; failures become redacted errors."""

    def __init__(self, cwd: Path, env: Mapping[str, str], secrets: tuple[str, ...] = ()) -> None:
        self._git: git.Git = gitpython().Git(cwd)
        self._git.update_environment(**env)
        self._secrets = secrets

    def __call__(self, *args: str, stdin: BinaryIO | None = None) -> str:
        with self._failures(args):
            return self._git.execute([_executable(), *args], istream=stdin)

    def raw(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Stdout as bytes, exactly as git wrote it."""
        with tempfile.TemporaryFile() as stream, self._failures(args):
            if stdin is not None:
                stream.write(stdin)
                stream.seek(0)
            return self._git.execute(
                [_executable(), *args],
                istream=stream if stdin is not None else None,
                stdout_as_string=False,
                strip_newline_in_stdout=False,
            )

    def attempt(self, *args: str) -> tuple[int, str]:
        """(exit status, stdout on success else stderr), never raising for git's exit."""
        try:
            return 0, self(*args)
        except CommandFailed as exc:
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
        except gitpython().CommandError as exc:
            stderr = redact(_stderr_text(exc), self._secrets)
            status = exc.status if isinstance(exc.status, int) else -1
            message = f"git {args[0]} failed: {meaningful_line(stderr) or f'exit status {status}'}"
            raise CommandFailed(message, status=status, stderr=stderr) from exc


def _executable() -> str:
    return str(gitpython().Git.GIT_PYTHON_GIT_EXECUTABLE or "git")


def gitpython() -> ModuleType:
    """GitPython, imported on first use: validate and convert of a plain directory
    never run git, and should not pay for loading it."""
    import git

    return git


# What git adds to a failure without saying anything about it.
_GENERIC = re.compile(
    r"Could not read from remote repository|Please make sure you have the correct access"
    r"|and the repository exists"
)


def meaningful_line(stderr: str) -> str:
    """git's last line that says what went wrong (its `fatal:` or `error:` lines first,
    its boilerplate last): an error message is one line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    told = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines
    return next(
        (line for line in reversed(told) if not _GENERIC.search(line)), told[-1] if told else ""
    )


def push_refusal(stderr: str) -> str:
    """A refused push in one line: the refused ref's line of git's report, then what the
    remote said about it (a hook's words), without git's "To URL" and closing lines."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    refused = [line.removeprefix("! ") for line in lines if "rejected]" in line]
    remote = [line for line in lines if line.startswith("remote:")]
    return "; ".join(refused + remote) or meaningful_line(stderr)


def _stderr_text(exc: git.CommandError) -> str:
    # GitPython stores stderr pre-formatted as "\n  stderr: '...'"; keep the message only.
    text = str(exc.stderr).strip()
    return text.removeprefix("stderr: '").removesuffix("'").strip()


def _locate(path: Path) -> dict[str, str] | None:
    """GIT_DIR (and GIT_WORK_TREE unless bare) of the repository holding `path`, or None."""
    git = gitpython()
    try:
        with git.Repo(path, search_parent_directories=True) as repo:
            located = {"GIT_DIR": str(repo.git_dir)}
            if repo.working_tree_dir is not None:
                located["GIT_WORK_TREE"] = str(repo.working_tree_dir)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    return located


def local_git(repo_path: Path) -> Runner:
    # Naming the repository explicitly beats discovery: an inherited GIT_DIR (git hooks,
    # CI) would otherwise point every command somewhere else.
    located = _locate(repo_path)
    if located is None:
        raise GitError(f"{repo_path} is not a git repository")
    cwd = Path(located.get("GIT_WORK_TREE", located["GIT_DIR"]))  # pathspecs are cwd-relative
    return Runner(cwd, {**GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0", **located})
