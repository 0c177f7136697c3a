"""What a job's run policy asks of the planner beyond its objects' fields: pure.

`plan.py` builds the changes; these say which objects they concern. A finished job's
`ttlSecondsAfterFinished` and `cleanPodPolicy`, which Kubeflow's operator carried out
on the MXJob as a whole, and `suspend` on a dist job some of whose replicas finished,
which the operator resumed whole. And the operator's bound on running a job again for
disruptions, which Kubeflow's operator did not have (it failed a disrupted job).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from mxgitops.bookkeeping import stamped_before
from mxgitops.ledger import Finished
from mxgitops.objects import ObjectRef
from mxgitops.runtime.disruption import Disruption
from mxgitops.runtime.failure import MAX_MESSAGE, Failure
from mxgitops.runtime.reruns import replica_of
from mxgitops.runtimes import Live as LiveJob
from mxgitops.spec import CleanPodPolicy, JobMode, MxJob


def ttl_passed(job: MxJob, finished: Finished | None, now: datetime) -> str | None:
    """Why the job's ttlSecondsAfterFinished has run out, or None while it has not.

    It is counted job-wide from the job's completion as mxgitops saw it: the sync
    that recorded it in the ledger (Kubeflow's operator counted it from the MXJob's
    completion, and then deleted the MXJob). Never set on a batch Job or a JobSet,
    whose objects Kubernetes could take before any sync saw the job finish: it would
    run again, or read Running for ever. So the objects stay until a sync recorded
    the outcome, and go in the first sync at least the TTL after that one.
    """
    ttl = job.run_policy.ttl_seconds_after_finished
    if ttl is None or finished is None:
        return None
    if not stamped_before(finished.finished_at, now - timedelta(seconds=ttl)):
        return None  # as the operator: once the time is after the expiry
    return f"ttlSecondsAfterFinished {ttl} passed since a sync saw it finished"


def cleanable(live: LiveJob, policy: CleanPodPolicy | None) -> tuple[ObjectRef, ...]:
    """Pods go through their batch Jobs: deleting a Job takes its pods with it."""
    if policy is CleanPodPolicy.ALL:
        return tuple(live.refs())
    if policy is CleanPodPolicy.RUNNING:
        return tuple(live.unfinished_job_refs())
    return ()


def finished_while_suspended(job: MxJob, live: LiveJob) -> tuple[ObjectRef, ...]:
    """The objects of a suspended dist job that hold a replica that finished (succeeded:
    one that failed fails the job), `Live.finished_replicas`: its batch Jobs, or its
    JobSet. Kubeflow's operator deleted every pod on suspend and made them all anew on
    resume; a replica that completed would not run again on resume, and the others would
    wait for it: so they are made anew, suspended, like the rest."""
    if not job.run_policy.suspend or job.mode is not JobMode.DIST:
        return ()
    return tuple(live.finished_replicas())


DISRUPTION_RUNS_EXCEEDED = "DisruptionRunsExceeded"  # the reason of such a job's failure


def disrupted_too_often(
    earlier: Sequence[str], now: Disruption | None, max_runs: int
) -> Failure | None:
    """The job's failure once the disruptions it met in a row (`earlier`, each run again
    since, and `now`, which would run it again) are more than `max_runs`, listing them;
    None while they are not. A disruption is no failure, but one the job meets again and
    again is most likely its own doing (`runtime/reruns.py`)."""
    said = [*earlier, *([now.describe()] if now is not None else [])]
    if len(said) <= max_runs:
        return None
    head = f"disrupted {len(said)} times in a row, past --max-disruption-runs {max_runs}: "
    room = max((MAX_MESSAGE - len(head)) // len(said) - 4, 16)
    listed = "; ".join(f"{n}) {s[:room]}" for n, s in enumerate(said, 1))
    replica = now.replica if now is not None else replica_of(said[-1]) or "JobSet"
    return Failure(replica, None, DISRUPTION_RUNS_EXCEEDED, (head + listed)[:MAX_MESSAGE])
