"""The runtime protocol, checked the same way over every runtime in the registry.

Each runtime (`mxgitops/runtimes/shared/base.py`'s `Runtime`) must render deterministically,
name its objects without rendering them, claim them back from a LIST as one whole group
of the job that made them, and patch its in-place fields without a replace. A new
runtime registered in `runtimes.RUNTIMES` is checked here without a line added. What a
runtime alone knows (its kinds, its names, its part of the spec hash) stays in it: no
neutral module names JobSet or Workload.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import mxgitops
from mxgitops import model, objects
from mxgitops.manifests.spec import from_manifest
from mxgitops.model import MxJob, OnChange
from mxgitops.objects import KubeObject, LiveObjects, ObjectRef
from mxgitops.runtimes import registry as runtimes
from mxgitops.runtimes.shared.labels import RUNTIME_ID_LABEL
from mxgitops.runtimes.shared.podtemplate import RenderContext
from mxgitops.runtimes.shared.state import State
from tests.helpers.sync import mxjob

CTX = RenderContext("conformance", commit="a" * 40)
RUNTIMES = list(runtimes.RUNTIMES)
PACKAGE = Path(mxgitops.__file__).parent
# The modules that see every runtime alike (issue 36), the kube* modules and forge/ too.
NEUTRAL = [
    *(
        PACKAGE / f"{name}.py"
        for name in [
            "planning/plan",
            "planning/changes",
            "outputs/report",
            "outputs/summary",
            "outputs/sinks",
            "outputs/events",
            "commands/sync",
            "settings/config",
            "planning/bookkeeping",
            "commands/review",
            "objects",
            "model",
            "manifests/spec",
        ]
    ),
    *(
        PACKAGE / "kube" / f"{name}.py"
        for name in [
            "calls",
            "kubeconfig",
            "connections",
            "cronjobs",
            "transport",
            "reads",
            "writes",
        ]
    ),
    *(PACKAGE / "outputs" / "forge").glob("*.py"),
]


def job_on(runtime: str, name: str = "a", **spec: Any) -> MxJob:
    """A dist job that runs on `runtime` (the operator's default for dist jobs)."""
    job = from_manifest(mxjob(name, **spec), default_namespace="ml", default_runtime=runtime)
    assert job.runtime is runtime
    return job


def created(job: MxJob) -> LiveObjects:
    runtime = runtimes.RUNTIMES[job.runtime]
    return runtime.as_created(runtime.render(job, CTX))


def test_every_runtime_is_registered_under_its_name() -> None:
    assert tuple(runtimes.RUNTIMES) == runtimes.NAMES
    for name, runtime in runtimes.RUNTIMES.items():
        assert runtime.name == name
        assert runtime.own_kinds <= runtime.kinds
        assert objects.Kind.POD in runtime.kinds  # every runtime's replicas are pods
    default = next(iter(runtimes.RUNTIMES.values()))
    assert default.name == model.DEFAULT_RUNTIME  # what a job runs on unless it says
    assert not default.own_kinds  # listed by every sync: its objects are never unlisted


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_rendering_is_deterministic_and_refs_name_it_without_rendering(runtime: str) -> None:
    job = job_on(runtime)
    rendered = runtimes.render(job, CTX)
    assert rendered == runtimes.render(job, CTX)
    assert runtimes.refs(job) == [ObjectRef.of(o) for o in rendered]
    assert {o["kind"] for o in rendered} <= runtimes.RUNTIMES[runtime].kinds


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_object_says_whose_it_is_and_of_which_spec(runtime: str) -> None:
    job = job_on(runtime)
    for obj in runtimes.render(job, CTX):
        assert objects.is_owned(obj, "conformance")
        assert objects.labels_of(obj)[objects.JOB_NAME_LABEL] == job.name
        annotations = objects.annotations_of(obj)
        assert annotations[objects.SPEC_HASH_ANNOTATION] == job.spec_hash
        assert annotations[objects.COMMIT_ANNOTATION] == CTX.commit
        assert obj["metadata"]["namespace"] == job.namespace


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_its_created_objects_read_back_as_one_whole_group_of_the_job(runtime: str) -> None:
    job = job_on(runtime)
    group = runtimes.group_live(created(job))[job.key]
    assert (group.namespace, group.name, group.key) == (job.namespace, job.name, job.key)
    assert (group.spec_hash, group.runtime_id) == (job.spec_hash, job.runtime_id)
    assert group.has_objects and group.strays == () and group.incomplete() is None
    assert group.refs() == sorted(runtimes.refs(job))
    assert group.refs_of(job.spec_hash) == sorted(runtimes.refs(job))
    assert all(group.has(ref) for ref in runtimes.refs(job))
    state, _ = group.status()
    assert state not in (State.SUCCEEDED, State.FAILED)
    assert group.failure() is None and group.disruption() is None
    assert group.on_change() is OnChange.REPLACE
    assert runtimes.as_created(job, CTX).refs() == group.refs()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_same_job_patches_nothing_and_a_suspend_patches_in_place(runtime: str) -> None:
    job = job_on(runtime)
    group = runtimes.group_live(created(job))[job.key]
    assert group.compare_in_place(job) == []
    suspended = job_on(runtime, runPolicy={"suspend": True})
    assert suspended.spec_hash == job.spec_hash  # no replace: the same runtime id
    assert runtimes.in_place_values(suspended) != runtimes.in_place_values(job)
    patches = group.compare_in_place(suspended)
    assert patches and all("suspend" in ", ".join(p.fields) for p in patches)
    assert {p.ref for p in patches} <= set(group.refs())


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_on_change_wait_is_read_back(runtime: str) -> None:
    job = job_on(runtime, annotations={"mxgitops.io/on-change": "wait"})
    assert runtimes.as_created(job, CTX).on_change() is OnChange.WAIT


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_when_its_run_was_made_is_its_oldest_objects_creation_time(runtime: str) -> None:
    """What tells a run the ledger recorded finished from a later run of the same spec."""
    job = job_on(runtime)
    assert runtimes.group_live(created(job))[job.key].created == ""  # not stored yet
    found = [dict(o) for o in created(job).all()]
    for index, obj in enumerate(found):
        stamp = f"2026-01-02T03:04:{5 + index:02d}Z"
        obj["metadata"] = {**obj["metadata"], "creationTimestamp": stamp}
    group = runtimes.group_live(LiveObjects.of_objects(found))[job.key]
    owned = set(group.refs())
    oldest = min(o["metadata"]["creationTimestamp"] for o in found if ObjectRef.of(o) in owned)
    assert group.created == oldest
    found[0]["metadata"]["creationTimestamp"] = "x" * 4000  # not a time: never taken for one
    assert len(runtimes.group_live(LiveObjects.of_objects(found))[job.key].created) <= 40


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_hand_edited_object_is_a_stray_not_the_jobs(runtime: str) -> None:
    job = job_on(runtime)
    rendered = runtimes.render(job, CTX)
    edited = [_relabelled(rendered[0], runtime_id="zzzzz"), *rendered[1:]]
    group = runtimes.group_live(runtimes.RUNTIMES[runtime].as_created(edited))[job.key]
    assert [s.ref for s in group.strays] == [ObjectRef.of(rendered[0])]
    assert not group.has(ObjectRef.of(rendered[0]))


def test_jobs_on_every_runtime_are_grouped_each_by_its_own() -> None:
    jobs = [job_on(runtime, f"j{i}") for i, runtime in enumerate(RUNTIMES)]
    live = _merged([created(job) for job in jobs])
    grouped = runtimes.group_live(live)
    assert sorted(grouped) == sorted(job.key for job in jobs)
    for job in jobs:
        assert grouped[job.key].spec_hash == job.spec_hash
        assert grouped[job.key].refs() == sorted(runtimes.refs(job))


@pytest.mark.parametrize(
    "ledger",
    [lambda r: None, lambda r: frozenset(RUNTIMES)],
    ids=["no-record", "all-recorded"],
)
def test_a_runtime_is_listed_where_the_ledger_may_not_know_of_it(
    ledger: Callable[[str], frozenset[str] | None],
) -> None:
    for runtime in RUNTIMES:
        assert runtimes.unlisted(ledger(runtime), [job_on(runtime)]) == frozenset()
        creates = runtimes.render(job_on(runtime), CTX)
        recorded = runtimes.in_use(LiveObjects(), creates, frozenset())
        assert runtime in recorded
        assert not runtimes.needs_record(creates, recorded)


def _relabelled(obj: KubeObject, *, runtime_id: str) -> KubeObject:
    """`obj` with a runtime id label its name and spec hash disagree with (a hand's edit)."""
    labels = {**objects.labels_of(obj), RUNTIME_ID_LABEL: runtime_id}
    return {**obj, "metadata": {**obj["metadata"], "labels": labels}}


def _merged(parts: list[LiveObjects]) -> LiveObjects:
    found: list[KubeObject] = [o for part in parts for o in part.all()]
    return LiveObjects.of_objects(found)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_its_name_rules_pass_a_short_name_and_refuse_one_too_long_for_its_objects(
    runtime: str,
) -> None:
    job = job_on(runtime)
    rules = runtimes.RUNTIMES[runtime]
    assert rules.name_problems(job) == []
    problems = rules.name_problems(replace(job, name="a" * 60))
    assert problems and {p.path for p in problems} == {("metadata", "name")}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_its_part_of_the_spec_hash_names_it_and_the_default_adds_none(runtime: str) -> None:
    shape = runtimes.RUNTIMES[runtime].hash_shape(job_on(runtime))
    if runtime == model.DEFAULT_RUNTIME:
        assert shape is None  # a batch job hashes as every job did before runtimes
    else:
        assert shape is not None and shape["name"] == runtime


def test_a_job_of_no_registered_runtime_has_no_spec_hash() -> None:
    """Hashed without its runtime's part, a job would replace its live objects."""
    with pytest.raises(LookupError, match="no runtime named 'volcano'"):
        _ = replace(job_on(RUNTIMES[0]), runtime="volcano").spec_hash


def test_no_neutral_module_names_jobset_or_workload() -> None:
    named = {
        path.relative_to(PACKAGE).as_posix(): sorted(
            set(re.findall(r"jobset|workload", path.read_text(encoding="utf-8"), re.I))
        )
        for path in NEUTRAL
    }
    assert len(named) > 20  # the list found its modules
    assert {module: words for module, words in named.items() if words} == {}
