"""`mxgitops check`: what this machine, the jobs repository and the cluster must provide
before a first sync, checked the way `flux check --pre` checks a cluster.

Each check is one `Finding`: ok, a problem (one line: what is missing and how to fix
it, with the `MxGitOpsError` a sync would meet, so that the CLI's one mapping gives the
exit code), or unknown (what could not be told, and why). The cluster is only read;
the repository gets one write, the proof that the credential may push the status
notes: a scratch ref pushed and deleted at once (`source.Repository.push_refused`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from mxgitops.commands.sync import Workspace, open_workspace, repository_kind
from mxgitops.errors import (
    ClusterError,
    ConfigError,
    GitError,
    ManifestError,
    MxGitOpsError,
    PrerequisiteMissing,
)
from mxgitops.kube import cluster as kube
from mxgitops.settings import config as settings
from mxgitops.settings import reading
from mxgitops.settings.config import SyncConfig
from mxgitops.words import counted

MIN_PYTHON = (3, 11)  # pyproject.toml's requires-python
MIN_KUSTOMIZE = (5, 0)  # the overlays' inline transformers
SHOWN_PROBLEMS = 10  # invalid manifests listed one a line; the rest counted
TESTED_KUBERNETES = "1.34"  # docs/getting-started/cluster.md, "Supported versions"
TOOL_TIMEOUT = 20.0  # seconds for `kubectl version --client`
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


class State(StrEnum):
    OK = "ok"
    PROBLEM = "problem"
    UNKNOWN = "unknown"
    WARNING = "warning"  # works, but outside what is tested or meant: says what to do


@dataclass(frozen=True)
class Finding:
    subject: str
    text: str
    state: State = State.OK
    error: MxGitOpsError | None = None  # a problem's: what a sync would meet

    def __str__(self) -> str:
        return f"{self.state}: {self.subject}: {self.text}"


def problem(subject: str, text: str, error: MxGitOpsError | None = None) -> Finding:
    return Finding(subject, text, State.PROBLEM, error or PrerequisiteMissing(text))


def check(
    config: SyncConfig,
    *,
    explicit: frozenset[str] = frozenset(),
    connect: Callable[..., kube.Cluster] = kube.connect,
) -> list[Finding]:
    """Every finding, in the order an installation meets them."""
    findings = [python_finding(sys.version_info[:3]), kustomize_finding(kustomize_version())]
    findings += local_checkout_findings(config.repo)
    namespaces: dict[str, list[str]] = {}
    with ExitStack() as cache:
        try:
            workspace = open_workspace(config, [], cache)
        except (GitError, ConfigError) as exc:
            fix = "check --repo, --ref and the credential (MXGITOPS_GIT_TOKEN or --ssh-key)"
            findings.append(problem("repository", f"{exc}; {fix}", exc))
        else:
            try:  # a .mxgitops.yaml a sync refuses, a `path` that names no directory
                config, _ = settings.apply_repo_settings(config, set(explicit), workspace.root)
                findings.append(_notes_finding(workspace, config))
                namespaces, invalid = job_namespaces(workspace, config)
                findings += invalid
            except ConfigError as exc:
                findings.append(problem("repository", str(exc), exc))
    return findings + cluster_findings(config, connect, namespaces)


def python_finding(version: Sequence[int]) -> Finding:
    shown = ".".join(map(str, version))
    needed = ".".join(map(str, MIN_PYTHON))
    if tuple(version[:2]) < MIN_PYTHON:
        return problem("python", f"Python {shown}, {needed} or later needed; install a newer one")
    return Finding("python", f"Python {shown} ({needed} or later)")


def kustomize_finding(version: str | None) -> Finding:
    needed = "v{}.{}".format(*MIN_KUSTOMIZE)
    if version is None:
        return Finding(
            "kustomize",
            "cannot tell: neither kubectl nor kustomize on PATH "
            f"(`kubectl apply -k` needs kustomize {needed} or later, kubectl 1.27 or later)",
            State.UNKNOWN,
        )
    found = _VERSION.search(version)
    if found is None:
        return Finding("kustomize", f"cannot tell from {version!r}", State.UNKNOWN)
    if (int(found.group(1)), int(found.group(2))) < MIN_KUSTOMIZE:
        return problem(
            "kustomize",
            f"{version} is too old: cronjob/'s overlays need {needed} or later (inline "
            "transformers); install kubectl 1.27 or later, or kustomize 5",
        )
    return Finding("kustomize", f"{version} ({needed} or later)")


def kustomize_version() -> str | None:
    """The kustomize `kubectl apply -k` runs (kubectl's own, as `kubectl version
    --client` reports it), else a standalone kustomize's; None if neither is on PATH."""
    kubectl, standalone = shutil.which("kubectl"), shutil.which("kustomize")
    try:
        if kubectl is not None:
            shown = _run([kubectl, "version", "--client", "-o", "json"])
            version = json.loads(shown).get("kustomizeVersion") if shown else None
            return str(version) if version else None
        if standalone is not None:
            return _run([standalone, "version"]).strip() or None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return None


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False)
    return done.stdout if done.returncode == 0 else ""


def _notes_finding(workspace: Workspace, config: SyncConfig) -> Finding:
    repository = workspace.repository
    if not config.notes:
        return Finding("notes", "off (--no-notes): the credential needs to read only")
    if repository is None:
        return Finding(
            "notes", f"{config.repo} is read as a directory: no notes to push", State.UNKNOWN
        )
    refused = repository.push_refused(workspace.commit)
    if refused is None:
        return Finding("notes", f"the credential may push to {repository.url}")
    text = (
        f"the credential cannot push to {repository.url} ({refused}), and the status notes "
        "need it: give the token write access to the repository (GitHub: Contents read "
        "and write; GitLab: write_repository; Gitea: write:repository; an SSH deploy "
        "key: allow write access), or set MXGITOPS_NOTES=false"
    )
    return problem("notes", text, GitError(text))


def job_namespaces(
    workspace: Workspace, config: SyncConfig
) -> tuple[dict[str, list[str]], list[Finding]]:
    """The namespaces the repository's valid jobs go to, each with its jobs' files; and
    one problem per invalid manifest's problem, as validate prints it (a sync would
    apply none of those jobs and end with exit 1)."""
    loaded = reading.load_repository(workspace.root, reading.of_config(config))
    found: dict[str, list[str]] = defaultdict(list)
    for job in loaded.jobs:
        found[job.namespace].append(job.source_path)
    problems = sorted(loaded.problems, key=lambda p: (p.file, p.line))
    invalid = [
        problem("manifests", f"{p}; mxgitops validate shows them all", ManifestError(str(p)))
        for p in problems[:SHOWN_PROBLEMS]
    ]
    if len(problems) > SHOWN_PROBLEMS:
        more = counted(len(problems) - SHOWN_PROBLEMS, "more problem")
        invalid.append(problem("manifests", f"and {more}: mxgitops validate shows them all"))
    return dict(found), invalid


def local_checkout_findings(repo: str) -> list[Finding]:
    """A local path works on this machine, not in the CronJob's pod: say which URL to
    pass instead (the checkout's remote, where it has one)."""
    try:
        kind = repository_kind(repo)
    except ConfigError:
        return []  # open_workspace says what is wrong with it
    if kind == "url":
        return []
    url = _remote_url(repo) if kind != "directory" else None
    instead = f"--repo {url}" if url else "--repo with the repository's URL"
    return [
        Finding(
            "repository",
            f"{repo} is a local {kind}: a sync in the cluster cannot read it; check and "
            f"install the way the CronJob will fetch it: {instead}",
            State.WARNING,
        )
    ]


def _remote_url(path: str) -> str | None:
    """The checkout's `origin` (else first) remote's fetch URL, its credentials left out."""
    from mxgitops.source.gitcommand import local_git

    try:
        git = local_git(Path(path))
        remotes = git("remote").split()
        if not remotes:
            return None
        url = git("remote", "get-url", "origin" if "origin" in remotes else remotes[0]).strip()
    except (GitError, OSError):
        return None
    return " ".join(re.sub(r"://[^/@]*@", "://", url).split())[:500]


def cluster_findings(
    config: SyncConfig, connect: Callable[..., kube.Cluster], namespaces: dict[str, list[str]]
) -> list[Finding]:
    try:
        cluster = connect(
            kubeconfig=config.kubeconfig,
            context=config.context,
            request_timeout=config.request_timeout,
        )
        version = cluster.server_version()
    except ConfigError as exc:  # no cluster configured, or a kubeconfig unread: says why
        return [problem("cluster", str(exc), exc)]
    except ClusterError as exc:
        fix = "pass --kubeconfig and --context of the cluster to install in"
        return [problem("cluster", f"{exc}; {fix}", exc)]
    tested = f"tested: Kubernetes {TESTED_KUBERNETES}"
    findings = [Finding("cluster", f"Kubernetes {version} at {cluster.server} ({tested})")]
    minor = _VERSION.search(version)
    if minor is None or f"{minor.group(1)}.{minor.group(2)}" != TESTED_KUBERNETES:
        findings.append(
            Finding(
                "cluster",
                f"Kubernetes {version} is not a tested version (Kubernetes "
                f"{TESTED_KUBERNETES}): it may work; what differs is untested",
                State.WARNING,
            )
        )
    findings.append(_storage_finding(cluster))
    findings += [_namespace_finding(cluster, ns, files) for ns, files in sorted(namespaces.items())]
    return findings


def _storage_finding(cluster: kube.Cluster) -> Finding:
    try:
        defaults = cluster.default_storage_classes()
    except ClusterError as exc:
        return Finding("storage", f"cannot tell: {exc}", State.UNKNOWN)
    if not defaults:
        return problem(
            "storage",
            "no default StorageClass: the Git cache's PersistentVolumeClaim (the overlay's "
            "cache.yaml) would stay Pending; mark one default (kubectl annotate "
            "storageclass NAME storageclass.kubernetes.io/is-default-class=true) or name "
            "one in cache.yaml (spec.storageClassName)",
        )
    return Finding("storage", f"default StorageClass {', '.join(defaults)}")


def _namespace_finding(cluster: kube.Cluster, namespace: str, files: list[str]) -> Finding:
    jobs = f"{counted(len(files), 'job')} ({', '.join(sorted(files)[:3])}"
    jobs += ", ...)" if len(files) > 3 else ")"
    try:
        exists = cluster.namespace_exists(namespace)
    except ClusterError as exc:
        return Finding(f"namespace {namespace}", f"cannot tell: {exc}", State.UNKNOWN)
    if not exists:
        return problem(
            f"namespace {namespace}",
            f"does not exist, and {jobs} go there: create it (kubectl create namespace "
            f"{namespace}); mxgitops creates no namespace",
        )
    return Finding(f"namespace {namespace}", f"exists, for {jobs}")
