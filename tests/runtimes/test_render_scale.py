"""Rendering stays linear in a job's replicas, whatever one pull request asks for.

Every process of a dist job gets MX_CONFIG. Listing every replica's address in
each of them makes a job's objects grow as N²: a 5,000-worker job took over a
GiB and minutes to render. Small jobs keep Kubeflow's full listing; larger ones
list the scheduler (the only address ps-lite dials) and rely on DMLC_NUM_*.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mxgitops.manifests.spec import from_manifest
from mxgitops.model import MxJob, ReplicaType, scheduler_service_name
from mxgitops.runtimes.batch.render import render_job
from mxgitops.runtimes.shared.mxconfig import MAX_LISTED_REPLICAS, dmlc_env
from mxgitops.runtimes.shared.podtemplate import RenderContext

CTX = RenderContext(instance="scale")


def dist_job(servers: int, workers: int) -> MxJob:
    def replica(count: int) -> dict[str, Any]:
        template = {"spec": {"containers": [{"name": "mxnet", "image": "mxnet/python:1.9.1"}]}}
        return {"replicas": count, "template": template}

    return from_manifest(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": "big"},
            "spec": {
                "mxReplicaSpecs": {
                    "Scheduler": replica(1),
                    "Server": replica(servers),
                    "Worker": replica(workers),
                }
            },
        }
    )


def mx_config(job: MxJob, replica_type: ReplicaType, index: int) -> dict[str, Any]:
    (value,) = [e["value"] for e in dmlc_env(job, replica_type, index) if e["name"] == "MX_CONFIG"]
    parsed: dict[str, Any] = json.loads(value)
    return parsed


def test_a_process_of_a_large_job_gets_an_mx_config_of_constant_size() -> None:
    small, large = dist_job(16, 1_000), dist_job(16, 5_000)
    sizes = [len(json.dumps(mx_config(j, ReplicaType.WORKER, 7))) for j in (small, large)]
    assert sizes[0] == sizes[1] < 400, sizes
    config = mx_config(large, ReplicaType.WORKER, 4_999)
    scheduler = scheduler_service_name(large)
    assert config == {
        "cluster": {"scheduler": [{"url": f"{scheduler}.{scheduler}", "port": 9091}]},
        "labels": {"scheduler": "", "server": "", "worker": ""},
        "task": {"type": "worker", "index": 4_999},
    }


@pytest.mark.parametrize("extra", [0, 1])
def test_the_full_listing_stops_at_the_documented_size(extra: int) -> None:
    workers = MAX_LISTED_REPLICAS - 1 - 2 + extra  # with one scheduler and two servers
    config = mx_config(dist_job(2, workers), ReplicaType.SERVER, 1)
    listed = {role: len(addresses) for role, addresses in config["cluster"].items()}
    if extra:
        assert listed == {"scheduler": 1}
    else:
        assert listed == {"scheduler": 1, "server": 2, "worker": workers}


def test_a_5000_worker_job_renders_in_linear_size() -> None:
    job = dist_job(16, 5_000)
    rendered = render_job(job, CTX)
    assert len(rendered) == 1 + 16 + 5_000 + 1
    total = sum(len(json.dumps(o)) for o in rendered)
    # About 2.5 KB per object; N² growth made it over 1.7 GB.
    assert total < 5_018 * 3_000, total
