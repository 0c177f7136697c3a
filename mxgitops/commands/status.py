"""The read-only commands behind `mxgitops status` and `mxgitops diff`.

Like `sync.sync`, each is one call that returns a value for the CLI to
render, so tests drive them without a subprocess.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from mxgitops.commands.history import last_runs
from mxgitops.commands.review import Review, review
from mxgitops.commands.sync import repository_kind
from mxgitops.errors import ConfigError, GitError
from mxgitops.model import DEFAULT_RUNTIME
from mxgitops.outputs import recordnotes, report
from mxgitops.outputs.summary import Summary
from mxgitops.settings import config as settings
from mxgitops.settings import reading
from mxgitops.settings.config import SyncConfig
from mxgitops.source import gittree
from mxgitops.source import repository as source
from mxgitops.source.gitcommand import local_git

log = logging.getLogger(__name__)


def in_checkout(config: SyncConfig) -> SyncConfig:
    """`config` with a --repo that is a directory inside a checkout (status run where
    the manifests are, the default `.`) made that checkout's top, as git finds it."""
    if repository_kind(config.repo) != "directory":
        return config
    start = Path(config.repo).expanduser().resolve()
    top = next((d for d in start.parents if (d / ".git").exists()), None)
    return config if top is None else replace(config, repo=str(top))


def read_status(config: SyncConfig, commit: str | None) -> tuple[Summary | None, str, str]:
    """The status note of `commit` (default: the synced ref's tip), the commit's sha,
    and why the note there was set aside ("" if it was not: ill-typed, not JSON)."""
    if repository_kind(config.repo) == "directory":
        raise ConfigError(
            f"--repo {config.repo} is a plain directory; status notes live in a Git repository"
        )
    repository = reading.repository_of(config)
    with repository.locked():  # a sync sharing the cache must not see it fetched under it
        checkout = repository.sync(config.ref)
        sha = gittree.resolve(checkout.root, commit) if commit else checkout.commit
        try:
            note = repository.read_note(sha, notes_ref=config.notes_ref)
        except source.NoteTooLarge as exc:
            return None, sha, str(exc)
        summary, unreadable = report.read_note(note or "")
        if summary is not None:
            summary = recordnotes.whole(repository, summary, config.notes_ref)
    return summary, sha, unreadable


def missing_note_hint(config: SyncConfig) -> str:
    """What to run when a local checkout has no status notes: a clone does not fetch them."""
    if repository_kind(config.repo) not in ("work tree", "bare repository"):
        return ""
    remotes = local_git(Path(config.repo))("remote").split()
    if not remotes:
        return "; it has no remote to fetch notes from: ask the repository's URL (--repo URL)"
    remote = "origin" if "origin" in remotes else remotes[0]
    ref = source.full_notes_ref(config.notes_ref)
    return f"; a clone does not fetch notes: git -C {config.repo} fetch {remote} {ref}:{ref}"


def diff_commits(
    repo: Path,
    base: str,
    head: str,
    *,
    path: str | None,
    namespace: str | None,
    policy_file: Path | None = None,
    default_runtime: str = DEFAULT_RUNTIME,
    notes_ref: str | None = source.NOTES_REF,
) -> Review:
    """Load the manifests of two commits of a checkout and compare them, each job on the
    runtime a sync with `default_runtime` runs it on.

    Each commit is written from Git's objects, as a sync reads it, into the same
    scratch directory in turn, so that both are read alike (down to messages that
    name the directory). The manifests' directory must stay inside it, whoever
    names it: the flag, or the pull request's .mxgitops.yaml.

    With `notes_ref`, each changed job's last run in BASE's history (the checkout's
    notes: a clone fetches none unless asked) is told too; a git error reading it only
    leaves that out.
    """
    with tempfile.TemporaryDirectory(prefix="mxgitops-diff-") as scratch:
        results, cancel, namespaces = [], (), []
        tree = Path(scratch) / "tree"
        for rev in (base, head):
            shutil.rmtree(tree, ignore_errors=True)
            gittree.export_tree(repo, rev, tree)
            repo_file = settings.read_repo_settings(tree)
            cancel = repo_file.values.get("cancel", ())  # HEAD's, the last read
            # Each commit under the operator's policy and its own .mxgitops.yaml's.
            read = reading.of_flags(
                repo_file,
                path=path,
                namespace=namespace,
                policy_file=policy_file,
                default_runtime=default_runtime,
            )
            results.append(reading.load_repository(tree, read, rev=rev))
            namespaces.append(read.namespace)
        result = review(results[0], results[1], cancel=frozenset(cancel))
    if notes_ref is None:
        return result
    changed = [(c.namespace, c.name) for c in (*result.changed, *result.updated)]
    try:
        earlier = last_runs(
            local_git(repo), base, changed, notes_ref=notes_ref, default_namespace=namespaces[0]
        )
    except GitError as exc:
        log.warning("the changed jobs' earlier runs are not shown: %s", exc)
        return result
    return replace(result, last_runs=earlier)
