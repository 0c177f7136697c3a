"""render_job: names, labels, env, Service, accelerators, run policy; schema-valid, pure."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mxgitops import model, objects
from mxgitops.errors import ConfigError
from mxgitops.manifests import spec
from mxgitops.manifests.schema import KUBERNETES_VERSION
from mxgitops.model import NAMESPACE
from mxgitops.runtimes.batch.render import job_refs, render_job
from mxgitops.runtimes.shared.accelerators import AcceleratorConfig, parse_accelerators
from mxgitops.runtimes.shared.labels import KubernetesLabels
from mxgitops.runtimes.shared.mxconfig import MxConfig
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.helpers import corpus
from tests.helpers.corpus import Corpus

K8S_VERSION = KUBERNETES_VERSION.removeprefix("v")
CTX = RenderContext(instance="prod", commit="c0ffee")
GPU = {
    "nvidia.com/gpu": {
        "volumes": [
            {"name": "nvidia-libs", "hostPath": "/usr/lib/nvidia", "mountPath": "/usr/local/nvidia"}
        ],
        "envVars": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
    }
}


def mxnet(**extra: Any) -> dict[str, Any]:
    return {"name": "mxnet", "image": "mxnet/python:1.9", **extra}


def seed_doc(
    mode: str = "dist",
    *,
    servers: int = 2,
    workers: int = 3,
    port: int = 9091,
    worker_container: dict[str, Any] | None = None,
    name: str = "mnist",
) -> dict[str, Any]:
    def replica(kind: str, replicas: int, container: dict[str, Any]) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "mxReplicaType": kind,
            "PsRootPort": port,
            "template": {"spec": {"containers": [container], "restartPolicy": "OnFailure"}},
        }

    worker = replica("WORKER", workers if mode == "dist" else 1, worker_container or mxnet())
    replica_specs = [worker]
    if mode == "dist":
        replica_specs = [
            replica("SCHEDULER", 1, mxnet()),
            replica("SERVER", servers, mxnet()),
            worker,
        ]
    return {
        "apiVersion": model.SEED_API_VERSION,
        "kind": model.SEED_KIND,
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"jobMode": mode, "replicaSpecs": replica_specs},
    }


def kubeflow_doc(
    *, restart: str = "ExitCode", run_policy: dict[str, Any] | None = None
) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": restart,
            "template": {"spec": {"containers": [mxnet()]}},
        }

    return {
        "apiVersion": model.KUBEFLOW_API_VERSION,
        "kind": model.KUBEFLOW_KIND,
        "metadata": {"name": "kf"},
        "spec": {
            "jobMode": "MXTrain",
            "runPolicy": run_policy or {},
            "mxReplicaSpecs": {"Scheduler": replica(1), "Server": replica(1), "Worker": replica(2)},
        },
    }


def job_of(doc: dict[str, Any], source: str = "") -> model.MxJob:
    job = spec.from_manifest(doc)
    return dataclasses.replace(job, source_path=source)


def by_name(rendered: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in rendered if o["kind"] == kind and o["metadata"]["name"] == name)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec_: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec_


def env_of(obj: dict[str, Any]) -> dict[str, str]:
    container = next(c for c in pod_spec(obj)["containers"] if c["name"] == "mxnet")
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def assert_valid(obj: dict[str, Any]) -> None:
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        first_line = str(error).splitlines()[0]
        pytest.fail(f"{obj['kind']} {obj['metadata']['name']} is invalid: {first_line}")


# -- schema -----------------------------------------------------------------------


@pytest.mark.parametrize("path", corpus.file_params(trainable_only=True))
def test_the_examples_render_schema_valid_objects(path: Path) -> None:
    job = spec.from_manifest(yaml.safe_load(path.read_text()))
    rendered = render_job(job, RenderContext("prod", "c0ffee", parse_accelerators(GPU)))
    assert len(rendered) == sum(r.replicas for r in job.replica_specs) + (job.mode == "dist")
    for obj in rendered:
        assert_valid(obj)


@pytest.mark.parametrize("examples", corpus.params())
def test_the_examples_are_all_there(examples: Corpus) -> None:
    """One file of each shape, each where corpus.py says: a test over them misses none."""
    named = sorted(example.file for example in examples.examples.values())
    assert [p.name for p in examples.files()] == named
    assert len(examples.trainable()) == 4


@pytest.mark.parametrize(
    "doc",
    [
        seed_doc("local"),
        seed_doc("dist"),
        kubeflow_doc(
            run_policy={
                "activeDeadlineSeconds": 3600,
                "backoffLimit": 2,
                "ttlSecondsAfterFinished": 60,
                "suspend": True,
            }
        ),
        seed_doc(worker_container=mxnet(resources={"limits": {"nvidia.com/gpu": 1}})),
    ],
    ids=["local", "dist", "exit-code-run-policy", "accelerator"],
)
def test_rendered_objects_are_schema_valid(doc: dict[str, Any]) -> None:
    ctx = RenderContext("prod", "c0ffee", parse_accelerators(GPU))
    for obj in render_job(job_of(doc, "jobs/mnist.yaml"), ctx):
        assert_valid(obj)


def test_job_refs_name_the_rendered_objects_without_rendering() -> None:
    examples = [yaml.safe_load(p.read_text()) for c in corpus.corpora() for p in c.trainable()]
    for doc in (seed_doc(), *examples):
        job = job_of(doc, "jobs/any.yaml")
        rendered = render_job(job, RenderContext("prod"))
        assert job_refs(job) == [objects.ObjectRef.of(o) for o in rendered]


# -- names and labels -----------------------------------------------------------------


def test_one_job_per_replica_index_in_replica_order_then_the_service() -> None:
    job = job_of(seed_doc(servers=2, workers=2))
    rid = job.runtime_id
    rendered = render_job(job, CTX)
    assert [(o["kind"], o["metadata"]["name"]) for o in rendered] == [
        ("Job", f"mnist-scheduler-{rid}-0"),
        ("Job", f"mnist-server-{rid}-0"),
        ("Job", f"mnist-server-{rid}-1"),
        ("Job", f"mnist-worker-{rid}-0"),
        ("Job", f"mnist-worker-{rid}-1"),
        ("Service", f"mnist-scheduler-{rid}-0"),
    ]
    assert {o["metadata"]["namespace"] for o in rendered} == {"ml"}
    for obj in rendered[:-1]:
        assert obj["apiVersion"] == "batch/v1"
        assert obj["spec"]["completions"] == 1
        assert obj["spec"]["parallelism"] == 1


def test_namespace_defaults_to_the_seeds() -> None:
    doc = seed_doc("local")
    del doc["metadata"]["namespace"]
    assert NAMESPACE == "default"
    assert render_job(job_of(doc), CTX)[0]["metadata"]["namespace"] == "default"


def test_labels_on_job_and_pod_template() -> None:
    job = job_of(seed_doc(servers=2))
    obj = by_name(
        render_job(job, CTX), "Job", model.job_object_name(job, model.ReplicaType.SERVER, 1)
    )
    expected = {
        "app.kubernetes.io/managed-by": "mxgitops",
        "mxgitops.io/instance": "prod",
        "mxgitops.io/job": "mnist",
        "mxnet.mlkube.io": "",
        "job_type": "SERVER",
        "runtime_id": job.runtime_id,
        "task_index": "1",
    }
    assert obj["metadata"]["labels"] == expected
    kubeflow = {
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "server",
        "training.kubeflow.org/replica-index": "1",
        "training.kubeflow.org/operator-name": "mxgitops",
        "training.kubeflow.org/job-role": "master",  # the operator's on every Server
    }
    assert obj["spec"]["template"]["metadata"]["labels"] == {**expected, **kubeflow}
    assert objects.is_owned(obj, "prod")


def test_kubeflows_pod_labels_on_every_pod_and_job_role_on_servers_only() -> None:
    """A selector written for the operator's pods (anti-affinity, a NetworkPolicy, a
    PodMonitor) matches the same pods under mxgitops."""
    job = job_of(kubeflow_doc())
    for obj in render_job(job, CTX):
        if obj["kind"] != "Job":
            continue
        labels = obj["spec"]["template"]["metadata"]["labels"]
        role = obj["metadata"]["labels"]["job_type"].lower()
        assert labels["training.kubeflow.org/job-name"] == "kf"
        assert labels["training.kubeflow.org/replica-type"] == role
        assert labels["training.kubeflow.org/replica-index"] == labels["task_index"]
        assert labels["training.kubeflow.org/operator-name"] == "mxgitops"
        assert ("training.kubeflow.org/job-role" in labels) == (role == "server")


def test_user_template_labels_are_kept_and_ours_win() -> None:
    doc = seed_doc("local")
    doc["spec"]["replicaSpecs"][0]["template"]["metadata"] = {
        "labels": {"team": "vision", "task_index": "7"},
        "annotations": {"note": "hi"},
    }
    obj = render_job(job_of(doc), CTX)[0]
    template_meta = obj["spec"]["template"]["metadata"]
    assert template_meta["labels"]["team"] == "vision"
    assert template_meta["labels"]["task_index"] == "0"
    assert template_meta["annotations"]["note"] == "hi"
    assert "team" not in obj["metadata"]["labels"]


def test_selector_is_sorted_and_deterministic() -> None:
    labels = KubernetesLabels({"runtime_id": "abc", "job_type": "WORKER", "mxnet.mlkube.io": ""})
    assert labels.to_selector() == "job_type=WORKER,mxnet.mlkube.io=,runtime_id=abc"
    assert isinstance(labels, dict)
    assert KubernetesLabels().to_selector() == ""


def test_annotations_on_every_object_and_empty_ones_left_out() -> None:
    job = job_of(seed_doc(), source="jobs/mnist.yaml")
    for obj in render_job(job, CTX):
        restart = {"mxgitops.io/restart-policy": "OnFailure"} if obj["kind"] == "Job" else {}
        assert obj["metadata"]["annotations"] == {
            objects.SPEC_HASH_ANNOTATION: job.spec_hash,
            objects.SOURCE_ANNOTATION: "jobs/mnist.yaml",
            objects.COMMIT_ANNOTATION: "c0ffee",
            "mxgitops.io/replicas": "SCHEDULER=1,SERVER=2,WORKER=3",
            **restart,
        }
    bare = render_job(job_of(seed_doc("local")), RenderContext("prod"))[0]
    assert bare["metadata"]["annotations"] == {
        objects.SPEC_HASH_ANNOTATION: job_of(seed_doc("local")).spec_hash,
        "mxgitops.io/replicas": "WORKER=1",
        "mxgitops.io/restart-policy": "OnFailure",
    }


def test_success_policy_is_annotated_only_when_not_the_default() -> None:
    doc = kubeflow_doc()
    doc["spec"]["successPolicy"] = "AllWorkers"
    obj = render_job(job_of(doc), CTX)[0]
    assert obj["metadata"]["annotations"]["mxgitops.io/success-policy"] == "AllWorkers"
    assert (
        "mxgitops.io/success-policy"
        not in render_job(job_of(kubeflow_doc()), CTX)[0]["metadata"]["annotations"]
    )


# -- the scheduler Service ----------------------------------------------------------------


def test_the_jobs_headless_service_gives_every_pod_its_dns_name() -> None:
    """One headless Service per dist job (no service IP), named and labelled as the
    scheduler's batch Job, selecting every pod of the job; each pod's hostname is its
    batch Job's name and its subdomain the Service, so `{hostname}.{service}` resolves
    to exactly that pod: every MX_CONFIG address and DMLC_PS_ROOT_URI is one."""
    job = job_of(seed_doc(port=9500))
    rendered = render_job(job, CTX)
    name = model.scheduler_service_name(job)
    service = by_name(rendered, "Service", name)
    assert service["apiVersion"] == "v1"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"] == [
        {"name": "ps-root-port", "port": 9500, "targetPort": 9500, "protocol": "TCP"}
    ]
    scheduler = by_name(rendered, "Job", name)
    assert service["metadata"]["labels"] == scheduler["metadata"]["labels"]
    pods = {o["metadata"]["name"]: o["spec"]["template"] for o in rendered if o["kind"] == "Job"}
    for batch, template in pods.items():
        labels = template["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
        assert (template["spec"]["hostname"], template["spec"]["subdomain"]) == (batch, name)
    mx_config = json.loads(env_of(scheduler)["MX_CONFIG"])
    addresses = [a["url"] for role in mx_config["cluster"].values() for a in role]
    assert addresses == [f"{batch}.{name}" for batch in pods]
    assert env_of(scheduler)["DMLC_PS_ROOT_URI"] == f"{name}.{name}"


def test_local_job_has_no_service() -> None:
    assert [o["kind"] for o in render_job(job_of(seed_doc("local")), CTX)] == ["Job"]


# -- environment ----------------------------------------------------------------------------


def test_dmlc_env_of_a_worker() -> None:
    job = job_of(seed_doc(servers=2, workers=3, port=9091))
    rid = job.runtime_id
    worker = by_name(render_job(job, CTX), "Job", f"mnist-worker-{rid}-1")
    env = env_of(worker)
    mx_config = env.pop("MX_CONFIG")
    sub = f"mnist-scheduler-{rid}-0"
    assert env == {
        "DMLC_PS_ROOT_URI": f"mnist-scheduler-{rid}-0.{sub}",
        "DMLC_PS_ROOT_PORT": "9091",
        "DMLC_NUM_SERVER": "2",
        "DMLC_NUM_WORKER": "3",
        "DMLC_ROLE": "worker",
        "DMLC_USE_KUBERNETES": "1",
        "DMLC_WORKER_ID": "1",  # BytePS reads it
    }
    assert mx_config == (
        '{"cluster":{'
        f'"scheduler":[{{"port":9091,"url":"mnist-scheduler-{rid}-0.{sub}"}}],'
        f'"server":[{{"port":9091,"url":"mnist-server-{rid}-0.{sub}"}},'
        f'{{"port":9091,"url":"mnist-server-{rid}-1.{sub}"}}],'
        f'"worker":[{{"port":9091,"url":"mnist-worker-{rid}-0.{sub}"}},'
        f'{{"port":9091,"url":"mnist-worker-{rid}-1.{sub}"}},'
        f'{{"port":9091,"url":"mnist-worker-{rid}-2.{sub}"}}]}},'
        '"labels":{"scheduler":"","server":"","worker":""},'
        '"task":{"index":1,"type":"worker"}}'
    )
    parsed = MxConfig.for_task(job, model.ReplicaType.WORKER, 1)
    assert json.loads(mx_config) == parsed.to_dict()
    assert parsed.task == {"type": "worker", "index": 1}


def test_every_mx_config_is_the_json_of_its_task() -> None:
    """Each replica's MX_CONFIG is `MxConfig.to_json` of its task, byte for byte, however
    it is put together (the job's part once, the task's per replica)."""
    job = job_of(seed_doc(servers=3, workers=12))
    for obj in render_job(job, CTX):
        if obj["kind"] != "Job":
            continue
        labels = obj["metadata"]["labels"]
        replica_type, index = model.ReplicaType(labels["job_type"]), int(labels["task_index"])
        expected = MxConfig.for_task(job, replica_type, index).to_json()
        assert env_of(obj)["MX_CONFIG"] == expected


@pytest.mark.parametrize("replica_type", list(model.ReplicaType))
def test_dmlc_role_per_replica_type(replica_type: model.ReplicaType) -> None:
    job = job_of(seed_doc())
    obj = by_name(render_job(job, CTX), "Job", model.job_object_name(job, replica_type, 0))
    env = env_of(obj)
    assert env["DMLC_ROLE"] == replica_type.role
    assert json.loads(env["MX_CONFIG"])["task"] == {"type": replica_type.role, "index": 0}


def test_kubeflow_ports_come_from_each_replicas_mxjob_port() -> None:
    doc = kubeflow_doc(restart="Never")
    doc["spec"]["mxReplicaSpecs"]["Scheduler"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "mxjob-port", "containerPort": 9999}
    ]
    job = job_of(doc)
    env = env_of(render_job(job, CTX)[0])
    assert env["DMLC_PS_ROOT_PORT"] == "9999"
    cluster = json.loads(env["MX_CONFIG"])["cluster"]
    assert cluster["scheduler"][0]["port"] == 9999
    assert cluster["worker"][0]["port"] == model.DEFAULT_PS_ROOT_PORT
    service = render_job(job, CTX)[-1]
    assert service["spec"]["ports"][0]["targetPort"] == 9999


def test_user_env_is_kept_first_then_ours() -> None:
    user_env = [{"name": "EPOCHS", "value": "10"}, {"name": "PYTHONUNBUFFERED", "value": "1"}]
    job = job_of(seed_doc(worker_container=mxnet(env=user_env)))
    worker = by_name(render_job(job, CTX), "Job", f"mnist-worker-{job.runtime_id}-0")
    names = [e["name"] for e in pod_spec(worker)["containers"][0]["env"]]
    assert names[:2] == ["EPOCHS", "PYTHONUNBUFFERED"]
    assert names[2:] == [
        "DMLC_PS_ROOT_URI",
        "DMLC_PS_ROOT_PORT",
        "DMLC_NUM_SERVER",
        "DMLC_NUM_WORKER",
        "DMLC_ROLE",
        "DMLC_USE_KUBERNETES",
        "MX_CONFIG",
        "DMLC_WORKER_ID",
    ]
    server = by_name(render_job(job, CTX), "Job", f"mnist-server-{job.runtime_id}-0")
    assert "DMLC_WORKER_ID" not in env_of(server)  # a worker's index, for workers alone


def test_a_local_job_gets_the_environment_the_operator_gave_it() -> None:
    """Kubeflow's operator: its own address in MX_CONFIG, one worker, no server, no
    scheduler (an empty address, port 0); its hostname resolves in its own pod."""
    job = job_of(seed_doc("local", worker_container=mxnet(env=[{"name": "A", "value": "1"}])))
    (obj,) = render_job(job, CTX)
    host = model.job_object_name(job, model.ReplicaType.WORKER, 0)
    env = env_of(obj)
    assert json.loads(env.pop("MX_CONFIG")) == {
        "cluster": {"worker": [{"url": host, "port": 9091}]},
        "labels": {"worker": ""},
        "task": {"type": "worker", "index": 0},
    }
    assert env == {
        "A": "1",
        "DMLC_PS_ROOT_URI": "",
        "DMLC_PS_ROOT_PORT": "0",
        "DMLC_NUM_SERVER": "0",
        "DMLC_NUM_WORKER": "1",
        "DMLC_ROLE": "worker",
        "DMLC_USE_KUBERNETES": "1",
        "DMLC_WORKER_ID": "0",
    }
    assert pod_spec(obj)["hostname"] == host and "subdomain" not in pod_spec(obj)


@pytest.mark.parametrize("mode", ["dist", "local"])
def test_what_is_rendered_is_what_validate_reserves_on_every_container(mode: str) -> None:
    from mxgitops.model import RENDERED_ENV_NAMES

    job = job_of(seed_doc(mode))
    names = {e["name"] for o in render_job(job, CTX) if o["kind"] == "Job" for e in env_of_all(o)}
    assert names == RENDERED_ENV_NAMES


def env_of_all(obj: dict[str, Any]) -> list[dict[str, str]]:
    return [e for c in pod_spec(obj)["containers"] for e in c.get("env") or []]


def test_the_mxnet_container_gets_the_mxjob_port_the_operator_gave_it() -> None:
    (obj, *_) = render_job(job_of(kubeflow_doc()), CTX)
    assert pod_spec(obj)["containers"][0]["ports"] == [
        {"name": "mxjob-port", "containerPort": 9091, "protocol": "TCP"}
    ]
    doc = kubeflow_doc()
    doc["spec"]["mxReplicaSpecs"]["Scheduler"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "mxjob-port", "containerPort": 9999}
    ]
    (mine, *_) = render_job(job_of(doc), CTX)
    assert pod_spec(mine)["containers"][0]["ports"] == [
        {"name": "mxjob-port", "containerPort": 9999}
    ]
    seed = render_job(job_of(seed_doc(port=9500)), CTX)[0]  # every dialect alike
    assert pod_spec(seed)["containers"][0]["ports"] == [
        {"name": "mxjob-port", "containerPort": 9500, "protocol": "TCP"}
    ]


def test_every_container_gets_the_environment() -> None:
    """As the operator set it: a launcher or monitoring sidecar reads it too."""
    sidecar = {"name": "logger", "image": "busybox"}
    doc = seed_doc()
    doc["spec"]["replicaSpecs"][2]["template"]["spec"]["containers"].append(sidecar)
    job = job_of(doc)
    worker = by_name(render_job(job, CTX), "Job", f"mnist-worker-{job.runtime_id}-0")
    mxnet_env, sidecar_env = (c["env"] for c in pod_spec(worker)["containers"])
    assert sidecar_env == mxnet_env and sidecar_env is not mxnet_env
    assert sidecar_env[0] is not mxnet_env[0]
    assert "env" not in doc["spec"]["replicaSpecs"][2]["template"]["spec"]["containers"][1]


# -- restart and run policy ---------------------------------------------------------------


# A dist job's replica fails on a disruption, to be run again whole (disruption.py).
DISRUPTION = {
    "action": "FailJob",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}


def test_restart_policy_of_the_replica_is_the_pods() -> None:
    for obj in render_job(job_of(seed_doc()), CTX):
        if obj["kind"] == "Job":
            assert pod_spec(obj)["restartPolicy"] == "OnFailure"
            assert "podFailurePolicy" not in obj["spec"]
    for obj in render_job(job_of(kubeflow_doc(restart="Never")), CTX):
        if obj["kind"] == "Job":
            assert pod_spec(obj)["restartPolicy"] == "Never"
            # A disruption only (issue 30, tests/planning/test_disruption.py).
            assert obj["spec"]["podFailurePolicy"] == {"rules": [DISRUPTION]}


def test_exit_code_is_never_plus_a_pod_failure_policy() -> None:
    for obj in render_job(job_of(kubeflow_doc(restart="ExitCode")), CTX):
        if obj["kind"] != "Job":
            continue
        assert pod_spec(obj)["restartPolicy"] == "Never"
        assert obj["spec"]["podFailurePolicy"] == {
            "rules": [
                DISRUPTION,
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": "mxnet",
                        "operator": "In",
                        "values": list(range(1, 128)),
                    },
                },
            ]
        }


def test_run_policy_on_every_batch_job_and_unset_fields_left_out() -> None:
    policy = {"activeDeadlineSeconds": 3600, "backoffLimit": 2}
    ttl = {"ttlSecondsAfterFinished": 60}  # job-wide, by mxgitops (tests/planning/test_ttl.py)
    for obj in render_job(job_of(kubeflow_doc(run_policy={**policy, **ttl, "suspend": True})), CTX):
        if obj["kind"] == "Job":
            assert {k: obj["spec"][k] for k in [*policy, "suspend"]} == {**policy, "suspend": True}
            assert "ttlSecondsAfterFinished" not in obj["spec"]
    bare = render_job(job_of(kubeflow_doc(run_policy={"backoffLimit": 0})), CTX)[0]
    assert bare["spec"]["backoffLimit"] == 0
    for absent in ("activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend"):
        assert absent not in bare["spec"]


@pytest.mark.parametrize(
    ("restart", "limit", "expected"),
    [
        ("Never", None, 0),
        ("Never", 3, 0),
        ("OnFailure", None, 2**31 - 1),
        ("OnFailure", 3, 3),
        ("ExitCode", None, 2**31 - 1),
        ("ExitCode", 0, 0),
    ],
)
def test_each_batch_jobs_backoff_limit_follows_its_restart_policy(
    restart: str, limit: int | None, expected: int
) -> None:
    """Never: the first failure is final. OnFailure, ExitCode: the job's backoffLimit
    (counted job-wide by the status rules), else no limit, as the operator."""
    run_policy = {} if limit is None else {"backoffLimit": limit}
    for obj in render_job(job_of(kubeflow_doc(restart=restart, run_policy=run_policy)), CTX):
        if obj["kind"] == "Job":
            assert obj["spec"]["backoffLimit"] == expected
            assert obj["metadata"]["annotations"]["mxgitops.io/restart-policy"] == restart


# -- accelerators --------------------------------------------------------------------------


def test_accelerator_volumes_mounts_and_env_go_to_containers_using_the_resource() -> None:
    gpu = mxnet(resources={"requests": {"nvidia.com/gpu": 1}})
    job = job_of(seed_doc(worker_container=gpu))
    ctx = RenderContext("prod", accelerators=parse_accelerators(GPU))
    rendered = render_job(job, ctx)
    worker = by_name(rendered, "Job", f"mnist-worker-{job.runtime_id}-0")
    assert pod_spec(worker)["volumes"] == [
        {"name": "nvidia-libs", "hostPath": {"path": "/usr/lib/nvidia"}}
    ]
    container = pod_spec(worker)["containers"][0]
    # Read-only: the operator's accelerators file says `readOnly: false` for one to write.
    assert container["volumeMounts"] == [
        {"name": "nvidia-libs", "mountPath": "/usr/local/nvidia", "readOnly": True}
    ]
    assert container["env"][-1] == {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}
    server = by_name(rendered, "Job", f"mnist-server-{job.runtime_id}-0")
    assert "volumes" not in pod_spec(server)
    assert "volumeMounts" not in pod_spec(server)["containers"][0]


def test_accelerators_never_override_the_users_pod() -> None:
    gpu = mxnet(
        resources={"limits": {"nvidia.com/gpu": 2}},
        env=[{"name": "LD_LIBRARY_PATH", "value": "/mine"}],
        volumeMounts=[{"name": "nvidia-libs", "mountPath": "/opt/nvidia"}],
    )
    doc = seed_doc("local", worker_container=gpu)
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["volumes"] = [
        {"name": "nvidia-libs", "emptyDir": {}}
    ]
    obj = render_job(job_of(doc), RenderContext("p", accelerators=parse_accelerators(GPU)))[0]
    assert pod_spec(obj)["volumes"] == [{"name": "nvidia-libs", "emptyDir": {}}]
    container = pod_spec(obj)["containers"][0]
    assert container["volumeMounts"] == [{"name": "nvidia-libs", "mountPath": "/opt/nvidia"}]
    mine = [e for e in container["env"] if e["name"] == "LD_LIBRARY_PATH"]
    assert mine == [{"name": "LD_LIBRARY_PATH", "value": "/mine"}]
    assert_valid(obj)


def test_accelerator_config_parses_the_seeds_shape() -> None:
    parsed = parse_accelerators(GPU)
    config = parsed["nvidia.com/gpu"]
    assert isinstance(config, AcceleratorConfig)
    assert [(v.name, v.host_path, v.mount_path) for v in config.volumes] == [
        ("nvidia-libs", "/usr/lib/nvidia", "/usr/local/nvidia")
    ]
    assert [(e.name, e.value) for e in config.env_vars] == [
        ("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    ]
    assert parse_accelerators(None) == {}
    assert parse_accelerators({"x/y": {}})["x/y"] == AcceleratorConfig()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (["nvidia.com/gpu"], "expected a mapping of resource name"),
        ({"nvidia.com/gpu": []}, "expected a mapping with volumes and envVars"),
        ({"nvidia.com/gpu": {"volume": []}}, "unknown key(s) volume"),
        ({"nvidia.com/gpu": {"volumes": {}}}, "volumes: expected a list"),
        ({"nvidia.com/gpu": {"volumes": ["x"]}}, "volumes[0]: expected a mapping"),
        (
            {"nvidia.com/gpu": {"volumes": [{"name": "v", "hostPath": "/a"}]}},
            "volumes[0].mountPath: expected a non-empty string",
        ),
        (
            {"nvidia.com/gpu": {"volumes": [{"name": "V_1", "hostPath": "/a", "mountPath": "/b"}]}},
            "not a valid volume name",
        ),
        (
            {"nvidia.com/gpu": {"volumes": [{"name": "v", "hostPath": "a", "mountPath": "/b"}]}},
            "hostPath: 'a' must be an absolute path",
        ),
        ({"nvidia.com/gpu": {"envVars": [{"name": "A"}]}}, "envVars[0].value: expected a string"),
        ({"nvidia.com/gpu": {"envVars": [{"name": "A", "value": 1}]}}, "expected a string"),
        ({"nvidia.com/gpu": {"envVars": [{"value": "x"}]}}, "envVars[0].name"),
    ],
)
def test_accelerator_config_errors_say_where(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_accelerators(raw)
    assert message in str(caught.value)
    if isinstance(raw, dict) and isinstance(raw.get("nvidia.com/gpu"), dict):
        assert "accelerators['nvidia.com/gpu']" in str(caught.value)


# -- purity ----------------------------------------------------------------------------------


def test_rendering_is_deterministic_byte_for_byte() -> None:
    gpu = mxnet(resources={"limits": {"nvidia.com/gpu": 1}}, env=[{"name": "A", "value": "1"}])
    ctx = RenderContext("prod", "c0ffee", parse_accelerators(GPU))
    first = json.dumps(render_job(job_of(seed_doc(worker_container=gpu)), ctx))
    again = json.dumps(render_job(job_of(seed_doc(worker_container=gpu)), ctx))
    assert first == again
    job = job_of(seed_doc(worker_container=gpu))
    assert json.dumps(render_job(job, ctx)) == json.dumps(render_job(job, ctx))


def test_the_users_template_is_never_mutated() -> None:
    gpu = mxnet(resources={"limits": {"nvidia.com/gpu": 1}}, env=[{"name": "A", "value": "1"}])
    doc = seed_doc(worker_container=gpu)
    doc["spec"]["replicaSpecs"][2]["template"]["metadata"] = {"labels": {"team": "x"}}
    pristine = copy.deepcopy(doc)
    job = job_of(doc)
    rendered = render_job(job, RenderContext("prod", "c", parse_accelerators(GPU)))
    assert doc == pristine
    pod_spec(rendered[-2])["containers"][0]["env"].append({"name": "B", "value": "2"})
    assert doc == pristine


def test_a_changed_spec_renders_new_names_and_hash() -> None:
    old, new = job_of(seed_doc(workers=2)), job_of(seed_doc(workers=3))
    old_names = {o["metadata"]["name"] for o in render_job(old, CTX)}
    new_names = {o["metadata"]["name"] for o in render_job(new, CTX)}
    assert old_names.isdisjoint(new_names)
