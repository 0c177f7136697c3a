"""Running git: one command at a time in one repository, its failures as redacted,
one-line errors.

`source/repository.py` (the cache clone and its notes) and `gittree.py` (reading a commit's files)
run every git command through a :class:`Runner`. GitPython is imported on first use
(:func:`gitpython`): validate and convert of a plain directory never run git, and should
not pay for loading it. This is the only module that imports GitPython (an
import-linter contract keeps it so).

Every command has a deadline (`timeout`: `--request-timeout`, 30 s by default, the one
that bounds each Kubernetes call): git runs in a process group of its own, which is
killed at the deadline (git and its helpers: git-remote-http, ssh), and the command
fails with `GitTimeout`. A remote that accepts the connection and never answers would
otherwise hold a sync, and the cache's lock, for ever.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from types import ModuleType
from typing import IO, BinaryIO

from mxgitops.errors import GitError
from mxgitops.source.gitauth import GIT_IDENTITY, redact

DEFAULT_TIMEOUT = 30.0  # seconds a git command may take: the default --request-timeout


class GitTimeout(GitError):
    """A git command did not end within its deadline, and was killed."""


class CommandFailed(GitError):
    """A git command exited non-zero; `stderr` is already redacted."""

    def __init__(self, message: str, *, status: int, stderr: str) -> None:
        super().__init__(message)
        self.status = status
        self.stderr = stderr


class Runner:
    """Runs git in one repository with our environment, each command within `timeout`
    seconds; failures become redacted errors. `remote` (safe to print) names the
    remote in a timeout's message."""

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str],
        secrets: tuple[str, ...] = (),
        *,
        timeout: float = DEFAULT_TIMEOUT,
        remote: str = "",
    ) -> None:
        self._cwd = cwd
        # As GitPython ran git: messages in English, whatever the locale.
        self._env = {**os.environ, "LANGUAGE": "C", "LC_ALL": "C", **env}
        self._secrets = secrets
        self._timeout = timeout
        self._remote = remote

    def __call__(self, *args: str, stdin: BinaryIO | None = None) -> str:
        out = self._run(args, stdin)
        text = out.decode("utf-8", errors="surrogateescape")
        return text[:-1] if text.endswith("\n") else text

    def raw(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Stdout as bytes, exactly as git wrote it."""
        if stdin is None:
            return self._run(args, None)
        with tempfile.TemporaryFile() as stream:
            stream.write(stdin)
            stream.seek(0)
            return self._run(args, stream)

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

    def _run(self, args: tuple[str, ...], stdin: IO[bytes] | None) -> bytes:
        """git's stdout; a non-zero exit is `CommandFailed`, the deadline `GitTimeout`."""
        try:
            process = subprocess.Popen(
                [_executable(), *args],
                cwd=self._cwd,
                env=self._env,
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a process group: its helpers die with it
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc.strerror or exc}") from exc
        try:
            out, err = process.communicate(timeout=self._timeout)
        except subprocess.TimeoutExpired as exc:
            _kill(process)
            where = f" ({self._remote})" if self._remote else ""
            raise GitTimeout(
                f"git {args[0]}{where} gave no answer within {self._timeout:g} s "
                "(--request-timeout); it was stopped"
            ) from exc
        except BaseException:  # SIGTERM, Ctrl-C: git goes with the command
            _kill(process)
            raise
        if process.returncode != 0:
            stderr = redact(err.decode("utf-8", errors="replace").strip(), self._secrets)
            status = process.returncode
            message = f"git {args[0]} failed: {meaningful_line(stderr) or f'exit status {status}'}"
            raise CommandFailed(message, status=status, stderr=stderr)
        return out


def _kill(process: subprocess.Popen[bytes]) -> None:
    """git's process group killed, and git waited for."""
    with suppress(ProcessLookupError):  # ended by itself meanwhile
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


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
