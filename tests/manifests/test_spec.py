"""The MxJob model: both dialects, defaults and every rule of spec.py."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from mxgitops.manifests.spec import dialect_of, from_manifest, refusals
from mxgitops.model import (
    DEFAULT_PS_ROOT_PORT,
    CleanPodPolicy,
    Dialect,
    JobMode,
    MxJob,
    OnChange,
    ReplicaType,
    RestartPolicy,
    SpecError,
    SuccessPolicy,
    format_path,
)
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.podtemplate import RenderContext


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "mxnet", "image": "mxnet:1.9", **container}]}}


def seed(name: str = "resnet", mode: str | None = "dist", **spec: Any) -> dict[str, Any]:
    replica_specs = [
        {"replicas": 1, "mxReplicaType": "SCHEDULER", "template": template()},
        {"replicas": 2, "mxReplicaType": "SERVER", "template": template()},
        {"replicas": 3, "mxReplicaType": "WORKER", "template": template()},
    ]
    if mode == "local":
        replica_specs = [{"replicas": 1, "mxReplicaType": "WORKER", "template": template()}]
    body: dict[str, Any] = {"replicaSpecs": replica_specs, **spec}
    if mode is not None:
        body["jobMode"] = mode
    return {
        "apiVersion": "mxnet.mlkube.io/v1beta1",
        "kind": "MxJob",
        "metadata": {"name": name},
        "spec": body,
    }


def kubeflow(name: str = "resnet", local: bool = False, **spec: Any) -> dict[str, Any]:
    replicas: dict[str, Any] = {
        "Scheduler": {"replicas": 1, "restartPolicy": "OnFailure", "template": template()},
        "Server": {"replicas": 2, "restartPolicy": "OnFailure", "template": template()},
        "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template()},
    }
    if local:
        replicas = {"Worker": {"replicas": 1, "template": template()}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": replicas, **spec},
    }


def problems(doc: dict[str, Any]) -> dict[str, str]:
    """field path -> message of every problem from_manifest reports."""
    with pytest.raises(SpecError) as caught:
        from_manifest(doc)
    return {p.field_path: p.message for p in caught.value.problems}


# -- dialects and defaults ---------------------------------------------------------


def test_dialect_of_both_dialects_and_other_kinds() -> None:
    assert dialect_of(seed()) is Dialect.SEED
    assert dialect_of(kubeflow()) is Dialect.KUBEFLOW
    assert dialect_of({"apiVersion": "v1", "kind": "ConfigMap"}) is None
    assert dialect_of({"apiVersion": "kubeflow.org/v1", "kind": "MxJob"}) is None


def test_seed_dist_job_is_normalised_in_replica_order() -> None:
    doc = seed()
    doc["spec"]["replicaSpecs"].reverse()
    job = from_manifest(doc)
    assert job.mode is JobMode.DIST
    assert [r.type for r in job.replica_specs] == list(ReplicaType)
    assert [r.replicas for r in job.replica_specs] == [1, 2, 3]
    assert job.namespace == "default"
    assert job.dialect is Dialect.SEED


def test_seed_defaults_replicas_port_type_and_restart_policy() -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"] = [{"template": template()}]
    job = from_manifest(doc)
    (worker,) = job.replica_specs
    assert worker.type is ReplicaType.WORKER
    assert worker.replicas == 1
    assert worker.ps_root_port == DEFAULT_PS_ROOT_PORT == 9091
    assert worker.restart_policy is RestartPolicy.ON_FAILURE


def test_seed_ps_root_port_is_kept() -> None:
    doc = seed()
    doc["spec"]["replicaSpecs"][0]["PsRootPort"] = 9000
    assert from_manifest(doc).replica(ReplicaType.SCHEDULER).ps_root_port == 9000  # type: ignore[union-attr]


def test_kubeflow_defaults_and_port_from_mxjob_port() -> None:
    doc = kubeflow()
    del doc["spec"]["mxReplicaSpecs"]["Worker"]["restartPolicy"]
    doc["spec"]["mxReplicaSpecs"]["Scheduler"]["template"] = template(
        ports=[{"name": "mxjob-port", "containerPort": 9876}]
    )
    job = from_manifest(doc, default_namespace="ml")
    assert job.namespace == "ml"
    assert job.replica(ReplicaType.WORKER).restart_policy is RestartPolicy.NEVER  # type: ignore[union-attr]
    assert job.replica(ReplicaType.SCHEDULER).ps_root_port == 9876  # type: ignore[union-attr]
    assert job.success_policy is SuccessPolicy.SCHEDULER


def test_manifest_namespace_wins_over_default() -> None:
    doc = seed()
    doc["metadata"]["namespace"] = "team-a"
    assert from_manifest(doc, default_namespace="ml").namespace == "team-a"


def test_job_mode_is_inferred_when_absent() -> None:
    assert from_manifest(seed(mode=None)).mode is JobMode.DIST
    assert from_manifest(kubeflow()).mode is JobMode.DIST
    assert from_manifest(kubeflow(local=True)).mode is JobMode.LOCAL


# -- job modes -----------------------------------------------------------------------


def test_local_job_with_a_scheduler_is_refused() -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"].append(
        {"replicas": 1, "mxReplicaType": "SCHEDULER", "template": template()}
    )
    found = problems(doc)
    assert "exactly one replica set, of type WORKER" in found["spec.replicaSpecs"]
    assert "SCHEDULER" in found["spec.replicaSpecs"]


def test_local_job_runs_one_worker_replica() -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"][0]["replicas"] = 4
    assert problems(doc) == {
        "spec.replicaSpecs[0].replicas": "a local job runs exactly 1 WORKER replica, not 4"
    }


def test_dist_job_needs_all_three_types() -> None:
    doc = seed()
    del doc["spec"]["replicaSpecs"][1]
    message = problems(doc)["spec.replicaSpecs"]
    assert "needs SCHEDULER, SERVER and WORKER" in message
    assert message.endswith("missing SERVER")


def test_kubeflow_dist_job_missing_server_points_at_mx_replica_specs() -> None:
    doc = kubeflow()
    del doc["spec"]["mxReplicaSpecs"]["Server"]
    assert "missing SERVER" in problems(doc)["spec.mxReplicaSpecs"]


def test_scheduler_has_exactly_one_replica() -> None:
    doc = seed()
    doc["spec"]["replicaSpecs"][0]["replicas"] = 2
    assert problems(doc) == {
        "spec.replicaSpecs[0].replicas": "SCHEDULER has exactly 1 replica, not 2"
    }


def test_replica_type_twice_is_refused() -> None:
    doc = seed()
    doc["spec"]["replicaSpecs"].append(copy.deepcopy(doc["spec"]["replicaSpecs"][2]))
    assert problems(doc) == {
        "spec.replicaSpecs[3].mxReplicaType": "WORKER appears twice (also at spec.replicaSpecs[2])"
    }


# -- containers and environment -------------------------------------------------------


def test_every_template_needs_an_mxnet_container() -> None:
    doc = seed()
    doc["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["name"] = "main"
    assert problems(doc) == {
        "spec.replicaSpecs[1].template.spec.containers": (
            "every pod template needs a container named 'mxnet'"
        )
    }


@pytest.mark.parametrize("name", ["DMLC_PS_ROOT_URI", "DMLC_ROLE", "MX_CONFIG"])
def test_reserved_environment_is_refused(name: str) -> None:
    doc = kubeflow()
    doc["spec"]["mxReplicaSpecs"]["Worker"]["template"] = template(
        env=[{"name": "DATA", "value": "/data"}, {"name": name, "value": "x"}]
    )
    assert problems(doc) == {
        "spec.mxReplicaSpecs.Worker.template.spec.containers[0].env[1].name": (
            f"{name} is set by mxgitops on every container; remove it"
        )
    }


@pytest.mark.parametrize("name", ["DMLC_INTERFACE", "DMLC_ENABLE_RDMA", "DMLC_NODE_HOST"])
def test_the_mxnet_settings_mxgitops_does_not_set_are_the_users(name: str) -> None:
    """MXNet's own `DMLC_*` settings (DMLC_INTERFACE picks the network interface): only
    the names mxgitops sets are reserved, as the operator set them and refused none."""
    doc = kubeflow()
    doc["spec"]["mxReplicaSpecs"]["Worker"]["template"] = template(
        env=[{"name": name, "value": "eth1"}]
    )
    (worker, *_) = (
        o
        for o in render_job(from_manifest(doc), RenderContext("t1"))
        if "-worker-" in o["metadata"]["name"]
    )
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert {"name": name, "value": "eth1"} in container["env"]


def test_a_sidecar_may_not_set_what_mxgitops_sets_on_every_container() -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "busybox", "env": [{"name": "DMLC_ROLE", "value": "x"}]}
    )
    assert problems(doc) == {
        "spec.replicaSpecs[0].template.spec.containers[1].env[0].name": (
            "DMLC_ROLE is set by mxgitops on every container; remove it"
        )
    }


def test_a_templates_hostname_and_subdomain_are_replaced_with_a_warning() -> None:
    doc = kubeflow()
    doc["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["hostname"] = "mine"
    warned = {w.field_path for w in from_manifest(doc).warnings}
    assert "spec.mxReplicaSpecs.Worker.template.spec.hostname" in warned


def test_user_environment_and_other_containers_are_fine() -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"].insert(
        0, {"name": "sidecar", "image": "busybox", "env": [{"name": "DMLC_X", "value": "1"}]}
    )
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][1]["env"] = [
        {"name": "MXNET_ENGINE_TYPE", "value": "NaiveEngine"}
    ]
    assert from_manifest(doc).mode is JobMode.LOCAL


def test_null_list_items_allowed_by_the_kubernetes_schema_do_not_crash() -> None:
    doc = kubeflow()
    doc["spec"]["mxReplicaSpecs"]["Scheduler"]["template"] = {
        "spec": {
            "containers": [
                None,
                {
                    "name": "mxnet",
                    "image": "mxnet",
                    "env": [None],
                    "ports": [None, {"containerPort": 1}],
                },
            ]
        }
    }
    assert from_manifest(doc).replica(ReplicaType.SCHEDULER) is not None


# -- restart policies --------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["OnFailure", "Never"])
def test_seed_template_restart_policy_is_used(policy: str) -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["restartPolicy"] = policy
    assert from_manifest(doc).replica_specs[0].restart_policy == policy


@pytest.mark.parametrize("policy", ["Always", "ExitCode"])
def test_seed_template_restart_policy_always_or_exit_code_is_refused(policy: str) -> None:
    doc = seed(mode="local")
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["restartPolicy"] = policy
    assert problems(doc) == {
        "spec.replicaSpecs[0].template.spec.restartPolicy": (
            f"restartPolicy {policy} is not supported: each replica runs as a batch Job, "
            "use OnFailure or Never"
        )
    }


@pytest.mark.parametrize("policy", ["OnFailure", "Never", "ExitCode"])
def test_kubeflow_restart_policies(policy: str) -> None:
    doc = kubeflow(local=True)
    doc["spec"]["mxReplicaSpecs"]["Worker"]["restartPolicy"] = policy
    assert from_manifest(doc).replica_specs[0].restart_policy == policy


def test_kubeflow_restart_policy_always_is_refused() -> None:
    doc = kubeflow(local=True)
    doc["spec"]["mxReplicaSpecs"]["Worker"]["restartPolicy"] = "Always"
    message = problems(doc)["spec.mxReplicaSpecs.Worker.restartPolicy"]
    assert message.startswith("restartPolicy Always is not supported")
    assert "OnFailure or Never or ExitCode" in message


@pytest.mark.parametrize(
    ("declared", "in_template", "runs", "source"),
    [
        ("Never", "OnFailure", RestartPolicy.NEVER, "restartPolicy Never"),
        ("OnFailure", "Never", RestartPolicy.ON_FAILURE, "restartPolicy OnFailure"),
        (None, "OnFailure", RestartPolicy.NEVER, "default restartPolicy Never"),
        (None, "Always", RestartPolicy.NEVER, "default restartPolicy Never"),
    ],
)
def test_the_kubeflow_replica_restart_policy_overrides_the_template_with_a_warning(
    declared: str | None, in_template: str, runs: RestartPolicy, source: str
) -> None:
    """As Kubeflow's training operator did: the replica's policy (default Never) runs."""
    doc = kubeflow(local=True)
    worker = doc["spec"]["mxReplicaSpecs"]["Worker"]
    if declared is not None:
        worker["restartPolicy"] = declared
    worker["template"]["spec"]["restartPolicy"] = in_template
    job = from_manifest(doc)
    assert job.replica_specs[0].restart_policy is runs
    assert [(w.field_path, w.message) for w in job.warnings] == [
        (
            "spec.mxReplicaSpecs.Worker.template.spec.restartPolicy",
            f"{in_template} is overridden: the replica's {source} is what runs, as in "
            "Kubeflow's training operator; remove it from the template or set the "
            "replica's restartPolicy",
        )
    ]


def test_exit_code_runs_as_never_so_a_never_template_is_no_override() -> None:
    doc = kubeflow(local=True)
    worker = doc["spec"]["mxReplicaSpecs"]["Worker"]
    worker["restartPolicy"] = "ExitCode"
    worker["template"]["spec"]["restartPolicy"] = "Never"
    job = from_manifest(doc)
    assert job.replica_specs[0].restart_policy is RestartPolicy.EXIT_CODE
    assert job.warnings == ()


def test_agreeing_restart_policies_are_fine() -> None:
    doc = kubeflow(local=True)
    worker = doc["spec"]["mxReplicaSpecs"]["Worker"]
    worker["restartPolicy"] = worker["template"]["spec"]["restartPolicy"] = "Never"
    assert from_manifest(doc).replica_specs[0].restart_policy is RestartPolicy.NEVER


# -- MXTune ----------------------------------------------------------------------------------


def test_mxtune_is_refused_before_anything_else() -> None:
    doc = kubeflow()
    doc["spec"]["jobMode"] = "MXTune"
    doc["spec"]["mxReplicaSpecs"] = {"TunerTracker": {"replicas": 1}}
    (refusal,) = refusals(doc)
    assert refusal.field_path == "spec.jobMode"
    assert "MXTune is not supported" in refusal.message
    assert problems(doc) == {"spec.jobMode": refusal.message}


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ResNet", "res_net", "-resnet", "resnet-", "", "a" * 64])
def test_names_must_be_dns_1123_labels(name: str) -> None:
    message = problems(seed(name=name, mode="local"))["metadata.name"]
    assert message.startswith(f"{name!r} is not a valid name")
    assert "at most 63 characters" in message


def test_namespace_must_be_a_dns_1123_label() -> None:
    doc = seed()
    doc["metadata"]["namespace"] = "Team_A"
    assert problems(doc) == {"metadata.namespace": "'Team_A' is not a valid namespace"}


def test_dist_job_names_must_be_dns_1035_labels() -> None:
    assert from_manifest(seed(name="1job", mode="local")).name == "1job"
    message = problems(seed(name="1job"))["metadata.name"]
    assert "must start with a letter" in message
    assert "DNS-1035" in message


def test_derived_object_name_too_long_names_the_maximum() -> None:
    # local: "{name}-worker-{5 chars}-0" leaves 63 - 15 = 48 characters for the name
    assert from_manifest(seed(name="a" * 48, mode="local")).name == "a" * 48
    message = problems(seed(name="a" * 49, mode="local"))["metadata.name"]
    assert "the maximum is 63" in message
    assert "has 64 characters" in message
    assert "use at most 48 characters for this job's name" in message
    # dist: the scheduler's suffix "-scheduler-xxxxx-0" is the longest (18)
    assert "use at most 45 characters" in problems(seed(name="a" * 46))["metadata.name"]


# -- annotations and run policy ------------------------------------------------------------


@pytest.mark.parametrize("value", ["replace", "wait"])
def test_on_change_annotation(value: str) -> None:
    doc = seed()
    doc["metadata"]["annotations"] = {"mxgitops.io/on-change": value}
    assert from_manifest(doc).on_change is OnChange(value)


def test_on_change_defaults_to_replace_and_rejects_other_values() -> None:
    assert from_manifest(seed()).on_change is OnChange.REPLACE
    doc = seed()
    doc["metadata"]["annotations"] = {"mxgitops.io/on-change": "later"}
    assert problems(doc) == {
        "metadata.annotations.mxgitops.io/on-change": "'later' is not one of replace or wait"
    }


def test_run_policy_inline_and_nested() -> None:
    inline = from_manifest(kubeflow(cleanPodPolicy="Running", backoffLimit=2))
    nested = from_manifest(
        kubeflow(runPolicy={"cleanPodPolicy": "Running", "backoffLimit": 2}, backoffLimit=2)
    )
    assert inline.run_policy == nested.run_policy
    assert inline.run_policy.clean_pod_policy is CleanPodPolicy.RUNNING
    assert inline.run_policy.backoff_limit == 2
    assert inline.spec_hash == nested.spec_hash


def test_run_policy_inline_contradicting_run_policy_is_refused() -> None:
    doc = kubeflow(runPolicy={"ttlSecondsAfterFinished": 60}, ttlSecondsAfterFinished=30)
    assert problems(doc) == {
        "spec.ttlSecondsAfterFinished": (
            "30 contradicts spec.runPolicy.ttlSecondsAfterFinished 60; set only one"
        )
    }


def test_success_policy_all_workers() -> None:
    job = from_manifest(kubeflow(successPolicy="AllWorkers"))
    assert job.success_policy is SuccessPolicy.ALL_WORKERS


def test_all_problems_are_reported_at_once() -> None:
    doc = seed(name="Bad")
    doc["spec"]["replicaSpecs"][0]["replicas"] = 2
    doc["spec"]["replicaSpecs"][2]["template"]["spec"]["containers"][0]["name"] = "x"
    assert set(problems(doc)) == {
        "metadata.name",
        "spec.replicaSpecs[0].replicas",
        "spec.replicaSpecs[2].template.spec.containers",
    }


# -- spec hash ------------------------------------------------------------------------------


def test_spec_hash_is_the_same_in_both_dialects() -> None:
    seed_job = from_manifest(seed())
    kubeflow_job = from_manifest(kubeflow())
    assert seed_job.dialect is not kubeflow_job.dialect
    assert seed_job.spec_hash == kubeflow_job.spec_hash
    assert seed_job.runtime_id == kubeflow_job.runtime_id
    assert len(seed_job.runtime_id) == 5


def test_spec_hash_is_stable_and_ignores_on_change_and_source_path() -> None:
    job = from_manifest(seed())
    again = from_manifest(seed())
    assert job.spec_hash == again.spec_hash == replace(job, source_path="x.yaml").spec_hash
    doc = seed()
    doc["metadata"]["annotations"] = {"mxgitops.io/on-change": "wait"}
    assert from_manifest(doc).spec_hash == job.spec_hash


def test_spec_hash_changes_with_replicas_image_and_namespace() -> None:
    job = from_manifest(seed())
    more = seed()
    more["spec"]["replicaSpecs"][2]["replicas"] = 4
    image = seed()
    image["spec"]["replicaSpecs"][2]["template"]["spec"]["containers"][0]["image"] = "mxnet:2"
    hashes = {
        job.spec_hash,
        from_manifest(more).spec_hash,
        from_manifest(image).spec_hash,
        from_manifest(seed(), default_namespace="other").spec_hash,
    }
    assert len(hashes) == 4


def test_format_path() -> None:
    assert format_path(("spec", "replicaSpecs", 0, "template")) == "spec.replicaSpecs[0].template"
    assert format_path(()) == "(document)"


def test_job_key() -> None:
    job: MxJob = from_manifest(seed(), default_namespace="ml")
    assert job.key == ("ml", "resnet")
