"""What the policy counts and checks, as Kubernetes counts it (issue 24): quantities
in every suffix Kubernetes knows and none it refuses, GPUs held by native sidecars,
images that come as image volumes or in any container list, and mounts that name a
volume the pod does not have (an accelerator's host-path driver volume)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mxgitops.commands.sync import sync
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.accelerators import parse_accelerators
from mxgitops.runtimes.shared.podtemplate import RenderContext
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import config_for, job_names
from tests.helpers.policy import checked, gpus, manifest, policy_messages

ONE_POD_EACH = {"workers": 1}  # scheduler, server, worker: three pods


@pytest.mark.parametrize(
    ("amount", "per_pod"),
    [("8000000u", 8), ("8000000000n", 8), ("8000m", 8), ("8", 8), (8, 8), ("1e1", 10),
     ("1k", 1000), ("1Ki", 1024), ("1P", 10**15), ("1Pi", 2**50), ("1E", 10**18),
     ("1Ei", 2**60)],
)  # fmt: skip
def test_gpus_count_in_every_suffix_kubernetes_knows(
    tmp_path: Path, amount: object, per_pod: int
) -> None:
    container = {"resources": {"limits": {"nvidia.com/gpu": amount}}}
    result = checked(
        tmp_path,
        manifest("kubeflow", container=container, **ONE_POD_EACH),
        {"maxGpusPerJob": 7},
        {},
    )
    assert policy_messages(result) == [
        f"policy: maxGpusPerJob: {3 * per_pod} GPUs in all replicas, more than 7 "
        "(the operator's policy)"
    ]


@pytest.mark.parametrize(
    ("resource", "amount", "why"),
    [
        ("nvidia.com/gpu", "eight", "is not a Kubernetes quantity"),
        ("nvidia.com/gpu", " 8", "is not a Kubernetes quantity"),
        ("nvidia.com/gpu", "1_0", "is not a Kubernetes quantity"),
        ("nvidia.com/gpu", "NaN", "is not a Kubernetes quantity"),
        ("nvidia.com/gpu", "8ki", "is not a Kubernetes quantity"),
        ("nvidia.com/gpu", "500m", "must be a whole number"),
        ("nvidia.com/gpu", "-8", "must not be negative"),
        ("example.com/fpga", "1500m", "must be a whole number"),
        ("cpu", "2 cores", "is not a Kubernetes quantity"),
        ("memory", "-1Gi", "must not be negative"),
    ],
)
def test_a_quantity_kubernetes_refuses_is_refused(
    tmp_path: Path, resource: str, amount: str, why: str
) -> None:
    """Unparsable used to count as zero GPUs: it passed maxGpusPerJob."""
    container = {"resources": {"limits": {resource: amount}}}
    result = checked(tmp_path, manifest("seed", container=container), {}, {})
    messages = policy_messages(result)
    assert messages and all(why in m for m in messages), messages
    fields = {p.field for p in result.problems}
    assert any(f.endswith(f"containers[0].resources.limits.{resource}") for f in fields), fields


def test_a_gpu_request_must_equal_its_limit(tmp_path: Path) -> None:
    container = {"resources": {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 1}}}
    messages = policy_messages(checked(tmp_path, manifest("seed", container=container), {}, {}))
    assert any("must equal its limit" in m for m in messages), messages


def sidecar(count: int, *, always: bool = True, name: str = "helper") -> dict[str, Any]:
    init: dict[str, Any] = {"name": name, "image": "mxnet:1.9", **gpus(count)}
    if always:
        init["restartPolicy"] = "Always"
    return init


def test_gpus_held_by_native_sidecars_add_to_the_containers(tmp_path: Path) -> None:
    """A sidecar (restartPolicy: Always) runs beside the containers: Kubernetes reserves
    both. A plain init container finishes first: the larger of the two."""
    pod = {"initContainers": [sidecar(4)]}
    result = checked(
        tmp_path,
        manifest("kubeflow", container=gpus(4), pod=pod, **ONE_POD_EACH),
        {"maxGpusPerJob": 16},
        {},
    )
    assert policy_messages(result) == [
        "policy: maxGpusPerJob: 24 GPUs in all replicas, more than 16 (the operator's policy)"
    ]
    plain = {"initContainers": [sidecar(4, always=False)]}
    result = checked(
        tmp_path,
        manifest("kubeflow", container=gpus(4), pod=plain, **ONE_POD_EACH),
        {"maxGpusPerJob": 12},
        {},
    )
    assert result.ok, result.problems
    # A plain init container after a sidecar runs beside it.
    order = {"initContainers": [sidecar(2), sidecar(8, always=False, name="fetch")]}
    result = checked(
        tmp_path,
        manifest("kubeflow", container=gpus(1), pod=order, **ONE_POD_EACH),
        {"maxGpusPerJob": 29},
        {},
    )
    assert policy_messages(result) == [
        "policy: maxGpusPerJob: 30 GPUs in all replicas, more than 29 (the operator's policy)"
    ]


ALLOWED = {"allowedImages": ["registry.example.com/ml/"]}


def test_an_image_volume_is_an_image_the_policy_checks(tmp_path: Path) -> None:
    pod = {
        "volumes": [{"name": "tools", "image": {"reference": "evil.example/miner:1"}}],
    }
    mounted = {"volumeMounts": [{"name": "tools", "mountPath": "/tools"}]}
    good = "registry.example.com/ml/mxnet:1"
    result = checked(
        tmp_path, manifest("kubeflow", image=good, container=mounted, pod=pod), ALLOWED, {}
    )
    assert not result.ok
    fields = {p.field for p in result.problems}
    assert any(f.endswith("template.spec.volumes[0].image.reference") for f in fields), fields
    assert all("evil.example/miner:1" in m for m in policy_messages(result))


def test_every_container_list_is_checked_for_images(tmp_path: Path) -> None:
    good = "registry.example.com/ml/mxnet:1"
    pod = {"ephemeralContainers": [{"name": "debug", "image": "evil.example/shell:1"}]}
    result = checked(tmp_path, manifest("seed", image=good, pod=pod), ALLOWED, {})
    fields = {p.field for p in result.problems}
    assert any(f.endswith("template.spec.ephemeralContainers[0].image") for f in fields), fields


def test_a_mount_must_name_a_volume_of_the_pod(tmp_path: Path) -> None:
    """The accelerators' host-path volume is added at render time, beside the container
    that uses the accelerator: a manifest naming it in another container's mounts would
    get the host's driver directory, writable, where it likes."""
    steal = {"volumeMounts": [{"name": "nvidia-driver", "mountPath": "/host"}]}
    pod = {"initContainers": [{"name": "helper", "image": "mxnet:1.9", **steal}]}
    result = checked(tmp_path, manifest("kubeflow", pod=pod), {}, {})
    fields = {p.field for p in result.problems}
    assert any(f.endswith("initContainers[0].volumeMounts[0].name") for f in fields), fields
    assert all("names no volume of the pod" in m for m in policy_messages(result))
    own = {"volumes": [{"name": "scratch", "emptyDir": {}}]}
    fine = {"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
    assert checked(tmp_path, manifest("kubeflow", container=fine, pod=own), {}, {}).ok


def test_driver_mounts_are_read_only_unless_the_operator_says_otherwise(tmp_path: Path) -> None:
    accelerators = parse_accelerators(
        {
            "nvidia.com/gpu": {
                "volumes": [
                    {"name": "nvidia-driver", "hostPath": "/usr/lib/nvidia", "mountPath": "/d"},
                    {"name": "cuda", "hostPath": "/opt/cuda", "mountPath": "/c", "readOnly": False},
                ]
            }
        }
    )
    (job,) = checked(tmp_path, manifest("kubeflow", container=gpus(1)), {}, {}).jobs
    objects = render_job(job, RenderContext(instance="t", accelerators=accelerators))
    for obj in objects:
        if obj["kind"] != "Job":
            continue
        spec = obj["spec"]["template"]["spec"]
        (mxnet,) = spec["containers"]
        mounts = {m["name"]: m for m in mxnet["volumeMounts"]}
        assert mounts["nvidia-driver"]["readOnly"] is True
        assert mounts["cuda"]["readOnly"] is False


def test_a_job_whose_gpus_are_written_in_micro_units_is_held_at_sync(
    make_git_remote: Callable[..., GitRemote], kubeapi: Any, tmp_path: Path
) -> None:
    """End to end: 64 GPUs a pod to Kubernetes, however written, past maxGpusPerJob: the
    job is held and nothing of it is written; its neighbour with sidecar GPUs too."""
    micro = {"resources": {"limits": {"nvidia.com/gpu": "64000000u"}}}
    sidecars = {"initContainers": [sidecar(40)]}
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/micro.yaml": manifest("kubeflow", "micro", container=micro, **ONE_POD_EACH),
            "jobs/side.yaml": manifest(
                "kubeflow", "side", container=gpus(1), pod=sidecars, **ONE_POD_EACH
            ),
            "jobs/fine.yaml": manifest("kubeflow", "fine", container=gpus(1), **ONE_POD_EACH),
        },
    )
    outcome = sync(config_for(remote.url, tmp_path / "cache", kubeapi))
    jobs = {j.name: j for j in outcome.summary.jobs}
    assert jobs["micro"].action == "hold" and "192 GPUs" in jobs["micro"].reason
    assert jobs["side"].action == "hold" and "123 GPUs" in jobs["side"].reason
    assert jobs["fine"].action == "create"
    names = job_names(kubeapi)
    assert names and all(n.startswith("fine-") for n in names), names
