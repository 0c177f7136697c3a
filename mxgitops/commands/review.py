"""What a pull request does to the jobs: `mxgitops diff BASE HEAD`.

Compares the manifests of two commits without a cluster: which jobs the
change adds, changes (their spec hash moves, so a sync would replace them),
updates in place (fields outside the hash, such as `suspend` or
`activeDeadlineSeconds`, which a sync patches onto the running job: they can
pause or kill it, so each shows with its value before and after) and removes
(a sync would prune them), and which manifests it breaks. The
markdown rendering is meant for a pull-request comment: every name and
message in it comes from the pull request, so each goes through `markdown`
and cannot add a line, a heading or a link to the comment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from mxgitops.manifests.files import Problem
from mxgitops.manifests.loading import LoadResult
from mxgitops.model import ON_CHANGE_ANNOTATION, MxJob, OnChange
from mxgitops.outputs.markdown import code, text, visible
from mxgitops.runtimes import registry as runtimes
from mxgitops.runtimes.shared.inplace import Move
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.words import counted, duration


@dataclass(frozen=True)
class JobChange:
    namespace: str
    name: str
    source: str
    detail: str = ""
    effect: str = ""  # what a sync does, when on-change: wait makes it wait
    moves: tuple[Move, ...] = ()  # an in-place update: each field, before -> after

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class LastRun:
    """What the last run of a changed job reached, from the notes of BASE's history
    (`history.last_runs`): its commit, outcome, final key metric and cost."""

    job: str  # namespace/name
    commit: str
    outcome: str = ""
    metric: str = ""  # the key metric's name ("" when its record has none)
    final: float | None = None
    duration_seconds: float | None = None
    gpu_hours: float | None = None
    estimate: bool = False  # the GPU-hours are an estimate

    def describe(self) -> str:
        """`default/mnist: its last run (abc1234, Succeeded) reached validation-accuracy
        0.91 in 2h05m, 4.2 GPU-hours`."""
        outcome = f", {self.outcome}" if self.outcome else ""
        words = f"{self.job}: its last run ({self.commit[:7]}{outcome})"
        reached = f" reached {self.metric} {self.final:.4g}" if self.final is not None else ""
        cost = []
        if self.duration_seconds is not None:
            cost.append(f"in {duration(self.duration_seconds)}")
        if self.gpu_hours is not None:
            cost.append(f"{'~' if self.estimate else ''}{self.gpu_hours:.3g} GPU-hours")
        return words + (reached or " ran") + (" " + ", ".join(cost) if cost else "")


@dataclass(frozen=True)
class Review:
    added: list[JobChange] = field(default_factory=list)
    changed: list[JobChange] = field(default_factory=list)
    updated: list[JobChange] = field(default_factory=list)  # patched in place, no restart
    removed: list[JobChange] = field(default_factory=list)
    unchanged: int = 0
    broken: list[Problem] = field(default_factory=list)  # problems HEAD has and BASE had not
    still_broken: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)  # warnings HEAD has and BASE had not
    last_runs: tuple[LastRun, ...] = ()  # of the changed jobs that ran before

    @property
    def ok(self) -> bool:
        return not self.broken and not self.still_broken

    @property
    def violations(self) -> list[Problem]:
        """The policy violations this change adds: a sync would not run those jobs."""
        return [p for p in self.broken if p.message.startswith("policy: ")]


def review(base: LoadResult, head: LoadResult, *, cancel: frozenset[str] = frozenset()) -> Review:
    """`cancel`: HEAD's `.mxgitops.yaml` cancel list, removals that wait for nothing."""
    before = {job.key: job for job in base.jobs}
    after = {job.key: job for job in head.jobs}
    held = {job.key for job in head.held}  # the policy forbids them: held, not pruned
    known_before = {(p.file, p.field, p.message) for p in base.problems}
    warned_before = {(w.file, w.field, w.message) for w in base.warnings}
    result = Review(
        added=[_change(j) for k, j in sorted(after.items()) if k not in before],
        changed=[
            _change(j, _what_changed(before[k], j), _waits(j, WAIT_REPLACE))
            for k, j in sorted(after.items())
            if k in before and before[k].spec_hash != j.spec_hash
        ],
        updated=[
            JobChange(j.namespace, j.name, j.source_path, moves=moves)
            for k, j in sorted(after.items())
            if k in before and before[k].spec_hash == j.spec_hash
            if (moves := in_place_moves(before[k], j))
        ],
        removed=[
            _change(j, effect=_waits(j, WAIT_REMOVE, cancelled=f"{k[0]}/{k[1]}" in cancel))
            for k, j in sorted(before.items())
            if k not in after and k not in head.invalid_keys and k not in held
        ],
        unchanged=sum(
            1
            for k, j in after.items()
            if k in before and before[k].spec_hash == j.spec_hash
            if not in_place_moves(before[k], j)
        ),
        broken=[p for p in head.problems if (p.file, p.field, p.message) not in known_before],
        still_broken=[p for p in head.problems if (p.file, p.field, p.message) in known_before],
        warnings=[w for w in head.warnings if (w.file, w.field, w.message) not in warned_before],
    )
    return result


def in_place_moves(old: MxJob, new: MxJob) -> tuple[Move, ...]:
    """What a sync patches onto the live objects of `old` (running as merged before)
    when `new` is merged: the planner's own comparison, run on `old`'s objects as its
    runtime renders them, so that review shows exactly the fields and values the sync
    writes."""
    same = runtimes.in_place_values(old) == runtimes.in_place_values(new)
    if same and old.on_change is new.on_change:
        return ()  # the common case (no in-place field moved), without rendering anything
    live = runtimes.as_created(old, RenderContext(instance="review"))
    patches = live.compare_in_place(new)
    return tuple(dict.fromkeys(m for p in patches for m in p.moves))


def _change(job: MxJob, detail: str = "", effect: str = "") -> JobChange:
    return JobChange(job.namespace, job.name, job.source_path, detail, effect)


# A sync holds these while the job runs (plan.py): the changed job's new manifest, and
# the removed job's last one (its live objects carry it), say on-change: wait.
WAIT_REPLACE = "replaced when the running job finishes"
WAIT_REMOVE = "removed when it finishes"


def _waits(job: MxJob, effect: str, *, cancelled: bool = False) -> str:
    if job.on_change is not OnChange.WAIT:
        return ""
    if cancelled:
        return f"removed at once: its {ON_CHANGE_ANNOTATION}: wait is cancelled (.mxgitops.yaml)"
    return f"{effect} ({ON_CHANGE_ANNOTATION}: wait; at once if it has finished)"


def _what_changed(old: MxJob, new: MxJob) -> str:
    """A short account of what moved, for people; the spec hash decides."""
    parts = []
    old_counts = {r.type.value: r.replicas for r in old.replica_specs}
    new_counts = {r.type.value: r.replicas for r in new.replica_specs}
    for replica_type in sorted(set(old_counts) | set(new_counts)):
        a, b = old_counts.get(replica_type, 0), new_counts.get(replica_type, 0)
        if a != b:
            parts.append(f"{replica_type} replicas {a} -> {b}")
    if old.run_policy != new.run_policy:
        parts.append("run policy")
    if [r.template for r in old.replica_specs] != [r.template for r in new.replica_specs]:
        parts.append("pod template")
    return ", ".join(parts) or "spec"


def render_text(result: Review) -> str:
    lines = [
        f"{len(result.added)} added, {len(result.changed)} changed (replaced on sync), "
        f"{len(result.updated)} updated in place, "
        f"{len(result.removed)} removed (pruned on sync), {result.unchanged} unchanged, "
        f"{counted(len(result.broken), 'new problem')}"
        + (f", {_of_them(len(result.violations))}" if result.violations else "")
    ]
    lines += [f"  + {c.qualified_name} ({c.source})" for c in result.added]
    lines += [
        f"  ~ {c.qualified_name} ({c.source}): {c.detail}" + (f"; {c.effect}" if c.effect else "")
        for c in result.changed
    ]
    lines += [
        f"  * {c.qualified_name} ({c.source}): patched in place, no restart: "
        + ", ".join(str(m) for m in c.moves)
        for c in result.updated
    ]
    lines += [
        f"  - {c.qualified_name} ({c.source})" + (f": {c.effect}" if c.effect else "")
        for c in result.removed
    ]
    lines += [f"  ! {p}" for p in result.broken]
    lines += [f"  ! (already before) {p}" for p in result.still_broken]
    lines += [f"  ? {w}" for w in result.warnings]
    lines += [f"  = {run.describe()}" for run in result.last_runs]
    return "\n".join(visible(line) for line in lines)


def _of_them(violations: int) -> str:
    what = "a policy violation" if violations == 1 else "policy violations"
    return f"{violations} of them {what}"


def render_markdown(result: Review) -> str:
    """The comment, most important first: a comment cut at the forge's size limit
    (ci/pr-plan.py) keeps the policy violations and the jobs deleted, and loses
    additions and warnings first."""
    lines = ["### mxgitops: what this change does to the training jobs", ""]
    violations = result.violations
    if violations:
        lines += [
            f"**This change adds {counted(len(violations), 'policy violation')}**: a sync "
            "neither creates nor changes those jobs.",
            "",
        ]
        lines += [f"- {code(str(p))}" for p in violations] + [""]
    lines += _table(result)
    if result.last_runs:
        lines += ["", "Earlier runs of the jobs it changes:", ""]
        lines += [f"- {code(run.describe())}" for run in result.last_runs]
    others = [p for p in result.broken if p not in violations]
    if others or result.still_broken:
        lines += [
            "",
            f"**{counted(len(result.broken) + len(result.still_broken), 'problem')}** "
            "(invalid manifests are never applied)"
            + (", the policy violations above among them" if violations else "")
            + ":",
            "",
        ]
        lines += [f"- {code(str(p))}" for p in others]
        lines += [f"- {code(str(p))} (already before this change)" for p in result.still_broken]
    if result.warnings:
        lines += ["", f"**{len(result.warnings)} new warnings** (valid, but worth a look):", ""]
        lines += [f"- {code(str(w))}" for w in result.warnings]
    return "\n".join(lines) + "\n"


_EFFECT = {
    "removed": "deleted",
    "changed": "replaced (new runtime)",
    "updated": "patched in place, no restart",
    "added": "created",
}


def _table(result: Review) -> list[str]:
    rows = [("removed", c) for c in result.removed] + [("changed", c) for c in result.changed]
    rows += [("updated", c) for c in result.updated] + [("added", c) for c in result.added]
    if not rows:
        return ["No job is added, changed, updated in place or removed."]
    lines = ["| | job | manifest | what happens on sync |", "|---|---|---|---|"]
    for kind, c in rows:
        what = text(c.effect, table=True) if c.effect else _EFFECT[kind]
        detail = f"{what}: {text(c.detail, table=True)}" if c.detail else what
        if c.moves:
            detail += ": " + ", ".join(_markdown_move(m) for m in c.moves)
        name, source = code(c.qualified_name, table=True), code(c.source, table=True)
        lines.append(f"| {kind} | {name} | {source} | {detail} |")
    return lines


def _markdown_move(move: Move) -> str:
    return text(str(move).replace(" -> ", " → ", 1), table=True)


def render_json(result: Review) -> str:
    def jobs(changes: list[JobChange]) -> list[dict[str, object]]:
        return [
            {
                "namespace": c.namespace,
                "name": c.name,
                "source": c.source,
                "detail": c.detail,
                **({"effect": c.effect} if c.effect else {}),
                **({"fields": [_json_move(m) for m in c.moves]} if c.moves else {}),
            }
            for c in changes
        ]

    def problems(items: list[Problem]) -> list[dict[str, object]]:
        return [
            {"file": p.file, "line": p.line, "job": p.job, "field": p.field, "message": p.message}
            for p in items
        ]

    return json.dumps(
        {
            "added": jobs(result.added),
            "changed": jobs(result.changed),
            "updated": jobs(result.updated),
            "removed": jobs(result.removed),
            "unchanged": result.unchanged,
            "broken": problems(result.broken),
            "policy_violations": problems(result.violations),
            "still_broken": problems(result.still_broken),
            "warnings": problems(result.warnings),
            "last_runs": [
                {
                    "job": run.job,
                    "commit": run.commit,
                    "outcome": run.outcome or None,
                    "metric": run.metric or None,
                    "final": run.final,
                    "duration_seconds": run.duration_seconds,
                    "gpu_hours": run.gpu_hours,
                    "gpu_hours_estimate": run.estimate,
                }
                for run in result.last_runs
            ],
        },
        indent=2,
    )


def _json_move(move: Move) -> dict[str, object]:
    return {"field": move.field, "before": move.before, "after": move.after}
