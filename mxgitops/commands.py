"""The read-only commands behind `mxgitops status` and `mxgitops diff`.

Like `sync.sync`, each is one call that returns a value for the CLI to
render, so tests drive them without a subprocess.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mxgitops import config as settings
from mxgitops import manifests, report, source
from mxgitops.config import SyncConfig
from mxgitops.errors import ConfigError
from mxgitops.review import Review, review
from mxgitops.spec import NAMESPACE
from mxgitops.sync import repository_kind


def read_status(config: SyncConfig, commit: str | None) -> tuple[report.Summary | None, str]:
    """The status note of `commit` (default: the synced ref's tip) and the commit's sha."""
    if repository_kind(config.repo) == "directory":
        raise ConfigError(
            f"--repo {config.repo} is a plain directory; status notes live in a Git repository"
        )
    credentials = source.Credentials(config.git_token, config.ssh_key, config.known_hosts)
    repository = source.Repository(config.repo, cache_dir=config.cache_dir, credentials=credentials)
    checkout = repository.sync(config.ref)
    sha = source.resolve(checkout.root, commit) if commit else checkout.commit
    note = repository.read_note(sha, notes_ref=config.notes_ref)
    return (report.parse_note(note) if note else None), sha


def diff_commits(
    repo: Path, base: str, head: str, *, path: str | None, namespace: str | None
) -> Review:
    """Load the manifests of two commits of a checkout and compare them."""
    with tempfile.TemporaryDirectory(prefix="mxgitops-diff-") as scratch:
        results = []
        for name, rev in (("base", base), ("head", head)):
            tree = source.export_tree(repo, rev, Path(scratch) / name)
            repo_file = settings.read_repo_settings(tree)
            directory = path or repo_file.values.get("path", ".")
            default_namespace = namespace or repo_file.values.get("namespace", NAMESPACE)
            # A commit without the directory simply has no jobs (e.g. the first one).
            target = tree / directory
            target.mkdir(parents=True, exist_ok=True)
            loaded = manifests.load([target], default_namespace=default_namespace)
            results.append(settings.with_problems(loaded, repo_file.refused))
        return review(results[0], results[1])
