"""`mxgitops install` and `uninstall`, each one call: preflight, apply, first sync.

install: check's preflight (the repository fetched and a note push proved with the
credentials given, the cluster and its version, the jobs' namespaces) and the installing
user's rights to what install writes; a problem stops it before any write, one line
each. Then `apply.apply` (nothing written when nothing differs, and then no sync is
started either: the CronJob runs on its schedule), then the first sync, waited for, its
outcome and the note it wrote. uninstall deletes what install labelled as its own;
training jobs only when asked (they are the instance's, deleted with their labels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mxgitops.commands.preflight import Finding, State, problem
from mxgitops.commands.preflight import check as check_findings
from mxgitops.errors import MxGitOpsError
from mxgitops.install import apply as applying
from mxgitops.install import firstsync
from mxgitops.install.overlay import BASE, Installation
from mxgitops.install.render import read_env
from mxgitops.kube.cluster import Cluster
from mxgitops.kube.installs import KINDS
from mxgitops.objects import INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from mxgitops.runtimes import registry
from mxgitops.settings.config import SyncConfig

# What install writes, as (verb, API group, resource, cluster-wide?): the rights checked.
_WRITES = [
    ("patch", "", "namespaces", True),
    ("patch", "rbac.authorization.k8s.io", "clusterroles", True),
    ("patch", "rbac.authorization.k8s.io", "clusterrolebindings", True),
    ("patch", "rbac.authorization.k8s.io", "roles", False),
    ("patch", "", "secrets", False),
    ("patch", "", "configmaps", False),
    ("patch", "batch", "cronjobs", False),
    ("create", "batch", "jobs", False),
]
# check's findings install has no use for: it runs no kustomize, and its Git cache is
# an emptyDir (no PersistentVolumeClaim waits for a StorageClass).
_NOT_INSTALLS = ("python", "kustomize", "storage")


@dataclass(frozen=True)
class Outcome:
    changed: bool
    problems: tuple[Finding, ...] = ()
    first_sync: firstsync.FirstSync | None = None
    error: MxGitOpsError | None = None  # the first problem's: the exit code


def preflight(config: SyncConfig, cluster: Cluster, namespace: str) -> list[Finding]:
    """check's findings that concern install, and the installing user's rights."""
    findings = [
        f
        for f in check_findings(config, connect=lambda **_: cluster)
        if f.subject not in _NOT_INSTALLS
    ]
    if any(f.subject == "cluster" and f.state is State.PROBLEM for f in findings):
        return findings
    for verb, group, resource, cluster_wide in _WRITES:
        allowed = cluster.may(verb, group, resource, None if cluster_wide else namespace)
        if allowed is False:
            where = "cluster-wide" if cluster_wide else f"in namespace {namespace}"
            findings.append(
                problem(
                    "rights",
                    f"you may not {verb} {resource} {where}: install as a cluster "
                    "administrator, or use --export and let one apply it",
                )
            )
    return findings


def install(
    cluster: Cluster,
    installation: Installation,
    config: SyncConfig,
    *,
    dry_run: bool,
    wait_timeout: float,
    echo: Callable[[str], None],
) -> Outcome:
    problems = [
        f for f in preflight(config, cluster, installation.namespace) if f.state is State.PROBLEM
    ]
    if problems:
        for finding in problems:
            echo(str(finding))
        return Outcome(False, tuple(problems), error=problems[0].error)
    changes = applying.apply(cluster, installation, dry_run=dry_run, echo=echo)
    if not changes:
        echo(
            f"nothing changed: the installation in namespace {installation.namespace} is "
            "as these flags describe it"
        )
        return Outcome(False)
    if dry_run:
        return Outcome(True)
    name = firstsync.start(cluster, installation.namespace)
    echo(f"first sync started: Job {installation.namespace}/{name}")
    done = firstsync.wait(cluster, installation.namespace, name, timeout=wait_timeout)
    code = f", exit code {done.exit_code}" if done.exit_code is not None else ""
    echo(f"first sync: {done.reason}{code}")
    for line in done.log:
        echo(f"  {line}")
    return Outcome(True, first_sync=done)


def sync_config(installation: Installation, base: SyncConfig) -> SyncConfig:
    """The settings the installed sync runs with, as check reads them."""
    return replace(
        base,
        repo=installation.repo,
        ref=installation.branch,
        path=installation.path or base.path,
        namespace=installation.jobs_namespace or base.namespace,
        ssh_key=installation.ssh_key,
        known_hosts=installation.known_hosts,
    )


def uninstall(
    cluster: Cluster, namespace: str, *, jobs: bool, echo: Callable[[str], None]
) -> list[str]:
    """Delete install's objects (the namespace last); with `jobs`, the instance's
    training jobs first, across namespaces: the objects only a runtime makes (JobSets,
    whose Jobs go with them), then its batch Jobs and Services."""
    deleted: list[str] = []
    if jobs:
        instance = read_env(BASE / "config.env")["MXGITOPS_INSTANCE"]  # install sets none
        owned = f"{MANAGED_BY_LABEL}={MANAGED_BY},{INSTANCE_LABEL}={instance}"
        for kind in (*registry.own_kinds(), "Job", "Service"):
            for obj in cluster.labelled(kind, owned):
                cluster.delete_object({**obj, "kind": kind})
                deleted.append(applying.name_of({**obj, "kind": kind}))
    kinds = (*(k for k in KINDS if k not in ("Job", "Pod", "Namespace")), "Namespace")
    for obj in applying.made_before(cluster, namespace, kinds):
        if cluster.delete_object(obj):
            deleted.append(applying.name_of(obj))
    for line in deleted:
        echo(f"{line} deleted")
    if not deleted:
        echo(f"nothing to delete: no object of install's in namespace {namespace}")
    return deleted


__all__ = ["Installation", "Outcome", "install", "sync_config", "uninstall"]
