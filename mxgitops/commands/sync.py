"""One sync, end to end: Git in, cluster reconciled, status out.

This is the programmatic entry point behind `mxgitops sync`: it wires the
modules together in the order of the data flow (source, manifests, live
state, plan, apply, report, note) and returns a `SyncOutcome` instead of
printing, so tests and other programs need no subprocess. Each step is one
call into the module that owns it; the decisions live in those modules.
"""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from mxgitops import __version__
from mxgitops.errors import ClusterError, ConfigError, GitError, LeaseLostError
from mxgitops.kube import cluster as kube
from mxgitops.kube import kubeconfig, lease
from mxgitops.manifests import loadcache, loading
from mxgitops.manifests.files import Problem
from mxgitops.objects import LiveObjects
from mxgitops.outputs import recordnotes, report, sinks
from mxgitops.outputs.forge.post import MAX_COMMITS
from mxgitops.outputs.summary import Summary
from mxgitops.planning import ledger
from mxgitops.planning.changes import Plan, PlanOptions
from mxgitops.planning.plan import plan
from mxgitops.runtimes.shared.accelerators import parse_accelerators
from mxgitops.settings import config as settings
from mxgitops.settings import reading
from mxgitops.settings.config import SyncConfig
from mxgitops.source import githistory
from mxgitops.source import repository as source
from mxgitops.state import clusterstate, failurelog, handoff, training
from mxgitops.state.apply import ChangeSet, apply
from mxgitops.state.clusterstate import ClusterState

log = logging.getLogger("mxgitops")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^[^/]+@[^/:]+:", re.IGNORECASE)


class Progress:
    """Told what the sync is doing; the CLI shows it on a terminal. Silent by default."""

    def phase(self, description: str, total: int | None = None) -> None:
        log.debug(description)

    def advance(self, count: int = 1) -> None:
        pass


@dataclass(frozen=True)
class Workspace:
    """The manifests' directory and, when it came from Git, the commit and its cache."""

    root: Path
    commit: str = ""
    repository: source.Repository | None = None
    checkout: source.Checkout | None = None


@dataclass(frozen=True)
class SyncOutcome:
    config: SyncConfig
    summary: Summary
    plan: Plan
    changeset: ChangeSet | None
    workspace: Workspace
    notices: tuple[str, ...] = ()
    note_written: bool = False
    note_error: str = ""  # the note could not be written or pushed; the apply stands
    undelivered: tuple[str, ...] = ()  # statuses, Events, metrics not delivered (outputs/sinks.py)

    @property
    def ok(self) -> bool:
        return self.summary.ok


def sync(
    config: SyncConfig,
    *,
    explicit: frozenset[str] = frozenset(),
    connect: Callable[..., kube.Cluster] = kube.connect,
    progress: Progress | None = None,
    on_summary: Callable[[Summary, tuple[str, ...]], None] | None = None,
    exit_code: sinks.ExitCode = sinks.plain_exit_code,
) -> SyncOutcome:
    """Run one sync. `explicit` names the settings given by flag or environment,
    which the jobs repository's .mxgitops.yaml must not override. `on_summary`
    hears what this sync did (and its notices) before the note is written, so a
    note that cannot be pushed never hides it. `exit_code` is the CLI's mapping, for the
    metrics to say how the sync ends."""
    progress = progress or Progress()
    # The Git cache stays locked until the note is written: other syncs sharing it wait.
    with sinks.delivering(config, exit_code) as outlet, ExitStack() as cache:
        cache.enter_context(_fewer_collections())
        notices: list[str] = []
        progress.phase("fetching the jobs repository")
        workspace = open_workspace(config, notices, cache, progress)
        config, refused = settings.apply_repo_settings(config, set(explicit), workspace.root)
        progress.phase("validating manifests")
        loaded = _load_manifests(workspace, config, refused)
        options = PlanOptions(
            instance=config.instance,
            commit=workspace.commit,
            accelerators=parse_accelerators(config.accelerators),
            prune=config.prune,
            max_prune_share=config.max_prune_share,
            force_prune=config.force_prune,
            cancel=frozenset(config.cancel),
            max_disruption_runs=config.max_disruption_runs,
        )
        progress.phase("reading the cluster")
        cluster = _cluster(config, connect, notices)
        state = clusterstate.read(cluster, _home(config), loaded.jobs, notices)
        options = replace(options, names=clusterstate.names_needed(cluster, loaded.jobs))

        def planned(state: ClusterState, records: training.Records | None = None) -> Plan:
            # Logs of newly failed replicas are read before apply deletes anything.
            made = _plan(loaded, state.live, state.known, options).with_records(records or {})
            return failurelog.capture(made, cluster, lines=config.failure_log_lines)

        the_plan = planned(state)
        collected = _training(the_plan, state, loaded, cluster, workspace, config, notices)
        the_plan = the_plan.with_records(collected.records)
        changeset = None
        if cluster is not None and not config.dry_run and the_plan.writes:
            the_plan, changeset = _apply_under_lease(
                cluster,
                config,
                progress,
                (state, the_plan),
                lambda state: planned(state, collected.records),
                workspace.commit,
            )
        summary = report.summarize(
            the_plan,
            changeset,
            problems=[str(p) for p in loaded.problems],
            warnings=[str(w) for w in loaded.warnings],
            commit=workspace.commit,
            instance=config.instance,
            dry_run=config.dry_run,
            synced_at=datetime.now(UTC),
            version=__version__,
        )
        summary = _with_authors(_vouched_commits(summary, workspace), workspace, notices)
        _log(summary, notices, the_plan)
        if on_summary is not None:
            on_summary(summary, tuple(notices))
        written, note_error = _note(workspace, config, summary, progress, notices, collected.read)
        cache.close()  # the Git cache is the next sync's while the forge is asked
        undelivered = outlet.deliver(summary, the_plan, changeset, cluster, note_error)
        return SyncOutcome(
            config,
            summary,
            the_plan,
            changeset,
            workspace,
            tuple(notices),
            written,
            note_error,
            undelivered,
        )


def _vouched_commits(summary: Summary, workspace: Workspace) -> Summary:
    """The summary with the commits that submitted live jobs (their objects' annotation,
    which a tenant may edit) kept only if they are commits of the synced history: the
    forge's statuses go to those, and nowhere an annotation points."""
    repository = workspace.repository
    candidates = report.submitting_commits(summary, MAX_COMMITS)
    if repository is None or not workspace.commit or not candidates:
        return report.with_commits(summary, ())
    return report.with_commits(summary, repository.in_history(workspace.commit, candidates))


def _with_authors(summary: Summary, workspace: Workspace, notices: list[str]) -> Summary:
    """The summary with each job's commit's author (who to tell), in one git call."""
    if workspace.repository is None:
        return summary
    try:
        named = githistory.authors(workspace.repository.reader(), (j.commit for j in summary.jobs))
    except GitError as exc:
        notices.append(f"the commits' authors could not be read: {exc}")
        return summary
    return report.with_authors(summary, named)


def _previous_note(
    repository: source.Repository, commit: str, notes_ref: str
) -> tuple[Summary | None, str]:
    """The note on `commit`, and why it is set aside ("" if it is not)."""
    try:
        return report.read_note(repository.read_note(commit, notes_ref=notes_ref) or "")
    except source.NoteTooLarge as exc:
        return None, str(exc)


def _training(
    made: Plan,
    state: ClusterState,
    loaded: loading.LoadResult,
    cluster: kube.Cluster | None,
    workspace: Workspace,
    config: SyncConfig,
    notices: list[str],
) -> training.Collected:
    """The training records of the runs this sync follows, read before apply deletes
    anything (a finishing run's last lines); 0 log reads a sync: none followed."""
    if cluster is None or config.training_log_reads <= 0:
        return training.Collected({}, frozenset())
    collected = training.collect(
        training.runs(made, state.live, {job.key: job for job in loaded.jobs}),
        cluster,
        recordnotes.kept(workspace.repository, workspace.commit, config.notes_ref),
        budget=config.training_log_reads,
        now=datetime.now(UTC),
    )
    for warning in collected.warnings:
        log.warning(warning)
    notices.extend(collected.warnings)
    return collected


def _log(summary: Summary, notices: list[str], done: Plan) -> None:
    """What the CronJob's logs should show besides the printed summary (which already
    tells a person at a terminal about notices and problems, hence info for those),
    and why the ledger of finished jobs changed."""
    for notice in notices:
        log.info(notice)
    for change in done.ledger_changes:
        name = "/".join(change.key)
        log.info(
            "ledger: %s %s: %s",
            change.action,
            name,
            change.reason,
            extra={"job": name, "ledger": str(change.action)},
        )
    for problem in summary.problems:
        log.info("invalid: %s", problem)
    if summary.prune_refused:
        log.warning("pruning refused: %s", summary.prune_refused)
    for job in summary.jobs:
        for error in job.errors:
            log.error(
                "%s %s: %s",
                job.action,
                job.qualified_name,
                error,
                extra={"job": job.qualified_name, "action": job.action},
            )


def open_workspace(
    config: SyncConfig,
    notices: list[str],
    cache: ExitStack | None = None,
    progress: Progress | None = None,
) -> Workspace:
    """A Git URL, a bare repository, or a checkout with --ref is synced through the
    cache; any other directory (a checkout's work tree too) is read as it is. The
    cache is locked first, until `cache` closes, waiting for another process's use."""
    kind = repository_kind(config.repo)
    if kind == "directory" or (kind == "work tree" and not config.ref):
        if config.ref:
            raise ConfigError(
                f"--ref {config.ref} needs a Git repository, and {config.repo} is a plain directory"
            )
        if kind == "work tree":
            notices.append(
                f"reading the work tree of {config.repo} as it is (uncommitted changes "
                "included, no status note); pass --ref, or a URL, to sync a commit"
            )
        return Workspace(Path(config.repo).expanduser().resolve())
    repository = reading.repository_of(config)
    if cache is not None:
        waiting = (progress or Progress()).phase
        cache.enter_context(repository.locked(on_wait=lambda who: waiting(f"waiting for {who}")))
    checkout = repository.sync(config.ref)
    if checkout.recloned_reason:
        notices.append(f"the cache was cloned again: {checkout.recloned_reason}")
    if checkout.forced_update:
        notices.append(checkout.forced_update)
    log.info(
        "checked out %s at %s (%s)",
        checkout.url,
        checkout.commit[:12],
        "cloned" if checkout.cloned else "fetched",
    )
    return Workspace(checkout.root, checkout.commit, repository, checkout)


RepositoryKind = Literal["url", "bare repository", "work tree", "directory"]


def repository_kind(repo: str) -> RepositoryKind:
    """What --repo names: a URL or a local path of one of three kinds."""
    if _URL.match(repo):
        return "url"
    local = Path(repo).expanduser()
    if not local.is_dir():
        raise ConfigError(f"--repo {repo}: no such directory, and not a Git URL")
    if (local / "HEAD").is_file() and (local / "objects").is_dir():
        return "bare repository"
    return "work tree" if (local / ".git").exists() else "directory"


@contextmanager
def _fewer_collections(young: int = 50_000) -> Iterator[None]:
    """The cycle collector run every `young` new objects, not every 700, until the sync
    ends. What a sync builds (manifests, rendered and live objects) lives until it
    ends; at the default, the collector walks it again hundreds of times, under the GIL
    every writer waits on (docs/development: measurements). Planning, which
    makes no cycle at all, pauses the collector outright (`plan._collector_paused`);
    the rest of a sync (YAML, threads, HTTP) may, so here it still runs, only less often."""
    before = gc.get_threshold()
    gc.set_threshold(max(young, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _load_manifests(
    workspace: Workspace, config: SyncConfig, refused: tuple[Problem, ...]
) -> loading.LoadResult:
    """Validate the manifests, reusing the verdict on each file seen before unchanged
    (in most syncs, all of them)."""
    read = reading.of_config(config, refused)

    def validate(verdicts: loading.Verdicts) -> loading.LoadResult:
        return reading.load_repository(workspace.root, read, verdicts=verdicts)

    repository = workspace.repository
    kept = (
        repository.state_file("manifests.json")
        if repository is not None
        else loadcache.directory_cache(
            config.cache_dir, reading.manifest_dir(workspace.root, read.path)
        )
    )
    return loadcache.load(kept, read.shaping(), validate)


def _cluster(
    config: SyncConfig, connect: Callable[..., kube.Cluster], notices: list[str]
) -> kube.Cluster | None:
    # First of all notices: what a dry run plans against is said before anything, as
    # a laptop's current context may name any cluster, or none.
    if config.offline:
        notices.insert(0, "--offline: planning against an empty cluster; no cluster was asked")
        return None
    if config.dry_run:
        against = kubeconfig.planned_against(config.kubeconfig, config.context)
        if against is None:
            notices.insert(
                0, "no cluster configured (no kubeconfig): planning against an empty cluster"
            )
            return None
        notices.insert(0, f"planning against {against}")
    return connect(
        kubeconfig=config.kubeconfig,
        context=config.context,
        parallelism=config.parallelism,
        request_timeout=config.request_timeout,
        tenant_service_account=config.tenant_service_account,
    )


def _plan(
    loaded: loading.LoadResult, live: LiveObjects, known: ledger.Ledger, options: PlanOptions
) -> Plan:
    return plan(
        loaded.jobs,
        live,
        known,
        options,
        invalid=loaded.invalid_keys,
        unnamed_invalid=loaded.unnamed_invalid,
        held=loaded.policy_holds(),
    )


def _apply_under_lease(
    cluster: kube.Cluster,
    config: SyncConfig,
    progress: Progress,
    planned: tuple[ClusterState, Plan],
    replan: Callable[[ClusterState], Plan],
    commit: str,
) -> tuple[Plan, ChangeSet]:
    """Take the Lease, make sure the plan stands on a current read (another sync may
    have just written), record in the ledger the runtimes it starts using, apply,
    record finished jobs in the ledger, and record that this sync wrote, for the next
    one."""
    progress.phase("taking the lease")
    holder = lease.default_holder()
    with lease.held(
        cluster,
        instance=config.instance,
        namespace=config.state_namespace,
        holder=holder,
        fence=cluster.fence,
    ) as holding:
        holding.renew_in_background()
        before, fresh = planned
        state = clusterstate.read_again(cluster, _home(config), before, holding.handed_over)
        if state.moved_from(before):
            fresh = replan(state)
        progress.phase(
            "applying", total=sum(len(c.creates) + len(c.deletes) for c in fresh.changes)
        )
        holding.writes_unrecorded = True
        try:
            stored, refused = clusterstate.record_first(cluster, _home(config), fresh)
            changeset = apply(
                fresh,
                cluster,
                on_done=lambda _: progress.advance(),
                while_waiting=holding.raise_if_lost,  # old pods going: not past the Lease
                refused=refused,
            )
            if fresh.ledger_changed:
                changeset = clusterstate.write_ledger(
                    cluster, _home(config), fresh, changeset, stored
                )
            holding.raise_if_lost()  # its writes were cut off: the sync ends on that
        except (SystemExit, KeyboardInterrupt, LeaseLostError):
            cluster.stop()  # SIGTERM, or the Lease lost: no further write; released at once
            raise
        holding.writes_unrecorded = not _record_writes(cluster, config, holder, commit)
    return fresh, changeset


def _home(config: SyncConfig) -> clusterstate.Home:
    return clusterstate.Home(instance=config.instance, namespace=config.state_namespace)


def _record_writes(cluster: kube.Cluster, config: SyncConfig, holder: str, commit: str) -> bool:
    """Record that this sync wrote; if that fails, the Lease is released saying so and
    the next sync reads everything again: slower, never wrong."""
    try:
        handoff.record(
            cluster,
            instance=config.instance,
            namespace=config.state_namespace,
            holder=holder,
            commit=commit,
        )
    except ClusterError as exc:
        log.warning("could not record this sync's writes (%s); the next sync reads again", exc)
        return False
    return True


def _note(
    workspace: Workspace,
    config: SyncConfig,
    summary: Summary,
    progress: Progress,
    notices: list[str],
    records: frozenset[ledger.JobKey] = frozenset(),
) -> tuple[bool, str]:
    """Write the summary as a note on the synced commit, if it changed, and push it.
    Whether it was written, and why it could not be (a Git error, logged): what was
    applied stands either way."""
    repository = workspace.repository
    if repository is None or not workspace.commit or config.dry_run or not config.notes:
        return False, ""
    progress.phase("writing the status note")
    try:
        found, unreadable = _previous_note(repository, workspace.commit, config.notes_ref)
        if unreadable:  # anyone who can push can write a note: read as none, and said
            notices.append(
                f"the status note on {workspace.commit[:12]} ({config.notes_ref}) is "
                f"{unreadable}; read as absent, and written anew"
            )
            log.warning(notices[-1])
        note = report.for_note(summary, found)
        written = repository.write_note(
            workspace.commit, report.render_note(note), notes_ref=config.notes_ref
        )
        # Each run's record also where it is kept: the note of the commit that asked for it.
        written = recordnotes.write(repository, summary, records, config.notes_ref) > 0 or written
        repository.push_notes(notes_ref=config.notes_ref)
    except GitError as exc:
        message = f"the status note was not pushed: {exc}"
        log.error(message)
        return False, message
    return written, ""
