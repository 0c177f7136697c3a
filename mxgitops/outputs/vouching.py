"""What mxgitops can vouch for in a status note, which anyone with push rights can write.

A note is read back by the next sync of its commit (an unchanged job keeps the
action the note gives it) and by `status`. Only `refs/notes/*` protect it, so a
note may be forged: actions mxgitops never took, reasons it never gave ("approved
by security"), objects that are not the job's. What this module checks is what a
forger cannot make true: the cluster's live runtime of the job (the sync compares),
objects named after the job (the renderer's names), and reasons in the words
mxgitops itself uses for each action (`plan.py`). A note that passes may still be
a copy of a genuine one; one that fails is not mxgitops' own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mxgitops.outputs.summary import JobSummary, Summary

# The reasons plan.py gives each action a note carries forward, as they begin.
REASONS = {
    "create": re.compile(r"new job\Z"),
    "replace": re.compile(r"spec changed; replace under way |finishing an interrupted replace "),
    "repair": re.compile(r"\d+ of its objects are missing: |edited by hand, set back in place: "),
    "update": re.compile(r"changed in place: "),
    "clean": re.compile(r"(succeeded|failed); cleanPodPolicy \w+ removes \d+ of its objects\Z"),
    "stop": re.compile(r"(succeeded|failed); its \d+ batch Jobs still active are stopped "),
    "delete": re.compile(r"manifest removed"),
}
FINISHED = ("Succeeded", "Failed")
# A MultiKueueCluster's name: a DNS subdomain.
_CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def carried(old: JobSummary, now: JobSummary) -> bool:
    """Whether `old`, the note's entry, may stand for `now`, the same job unchanged in
    this sync: an action that left the runtime the cluster has now (its objects named
    after it), in mxgitops' own words; a clean or stop only of a job now finished."""
    if old.action not in REASONS or old.action == "delete" or not now.runtime_id:
        return False
    if old.runtime_id != now.runtime_id or not _reason_ours(old):
        return False
    if old.action in ("clean", "stop") and now.state not in FINISHED:
        return False
    return not _strangers(old.objects, old.name, old.runtime_id)


def moved_from(old: JobSummary, now: JobSummary) -> str:
    """The cluster the same runtime ran on before the one it runs on now, by the note's
    entry `old` (Kueue dispatched it again: its worker was lost, or evicted it), while
    it runs there; "" if it did not move. A cluster's name only, as Kueue names one."""
    if not now.placement:
        return ""
    if old.placement and old.placement != now.placement:
        found = old.placement
    elif old.placement == now.placement:
        found = old.moved_from
    else:
        return ""
    return found if _CLUSTER_NAME.fullmatch(found) else ""


def doubts(summary: Summary) -> list[str]:
    """What in a note mxgitops cannot vouch for without the cluster, in words; [] when
    nothing. Which instance wrote it is no doubt: several share a repository's notes
    (`another_instance`)."""
    found = []
    for job in summary.jobs:
        who = f"{job.namespace}/{job.name}"
        if job.action in REASONS and not _reason_ours(job):
            found.append(f"{who}: a reason mxgitops does not give for {job.action}")
        strangers = _strangers(job.objects, job.name, job.runtime_id)
        if strangers:
            found.append(f"{who}: objects that are not its own ({', '.join(strangers[:3])})")
    return found


def _reason_ours(job: JobSummary) -> bool:
    return bool(REASONS[job.action].match(job.reason))


_OBJECT = re.compile(r"([+~-])([a-z]+)/([a-z0-9.-]+)(: .*)?\Z")


def _strangers(objects: Sequence[str], name: str, runtime_id: str) -> list[str]:
    """The objects not named after the job, `{name}-...`, as every runtime names them:
    what is created or patched carries the live runtime's id as one of its name's
    parts; what is deleted may be an older runtime's (a replace)."""
    strangers = []
    for entry in objects:
        found = _OBJECT.match(entry)
        object_name = found.group(3) if found else ""
        parts = object_name.removeprefix(f"{name}-").split("-")
        ours = object_name.startswith(f"{name}-")
        live = not runtime_id or runtime_id in parts
        if found is None or not ours or (found.group(1) != "-" and not live):
            strangers.append(entry)
    return strangers


def another_instance(summary: Summary, instance: str | None) -> str:
    """The instance that wrote the note when it is not `instance`, the one asked about
    (None: any), else "": another instance's note is its status, not a forgery."""
    if instance is None or summary.instance == instance:
        return ""
    return summary.instance or "(none)"
