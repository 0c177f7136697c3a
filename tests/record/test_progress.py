"""Progress, ETA and the epochs a job declares (mxgitops/record/progress.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mxgitops.manifests.spec import from_manifest
from mxgitops.model import JobMode, MxJob, ReplicaSpec, ReplicaType, RestartPolicy
from mxgitops.record.progress import EPOCHS_ANNOTATION, declared_epochs, progress
from mxgitops.record.progressline import progress_line
from mxgitops.record.reading import TrainingLog, read


def _job(container: dict[str, Any], annotations: dict[str, str] | None = None) -> MxJob:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "mxnet", **container}]}}
    if annotations is not None:
        template["metadata"] = {"annotations": annotations}
    worker = ReplicaSpec(ReplicaType.WORKER, 1, RestartPolicy.NEVER, template)
    return MxJob(name="j", namespace="ns", mode=JobMode.LOCAL, replica_specs=(worker,))


def test_progress_and_eta_from_module_fit_lines() -> None:
    log = read(
        TrainingLog(),
        "Epoch[0] Time cost=10.000\nEpoch[1] Time cost=20.000\n"
        "Epoch[2] Batch [0-50]\tSpeed: 100.00 samples/sec\taccuracy=0.5\n",
    )
    shown = progress(log, declared=10)
    assert (shown.epochs_done, shown.epochs, shown.epoch, shown.step) == (2, 10, 3, 50)
    assert shown.percent == 20.0
    assert shown.eta_seconds == 8 * 15.0  # 8 epochs left at the mean 15 s


def test_the_logs_own_total_wins_and_steps_add_the_fraction() -> None:
    log = read(TrainingLog(), progress_line(3, epochs=20, step=250, steps=500) + "\n")
    shown = progress(log, declared=99)
    assert shown.epochs == 20
    assert shown.percent == 12.5  # 2.5 of 20
    assert shown.eta_seconds is None  # no epoch's time seen


def test_no_total_no_percentage_and_a_finished_run_is_100() -> None:
    log = read(TrainingLog(), "Epoch[0] Time cost=1.0\n")
    assert progress(log).percent is None
    done = progress(read(log, "Epoch[1] Time cost=1.0\n"), declared=2)
    assert (done.percent, done.eta_seconds) == (100.0, 0.0)


@pytest.mark.parametrize(
    ("container", "annotations", "expected"),
    [
        ({"args": ["--num-epochs", "20"]}, None, 20),
        ({"command": ["python", "train.py", "--epochs=7"]}, None, 7),
        ({"command": ["sh", "-c", "python train.py --num_epochs 12 --lr 0.1"]}, None, 12),
        ({"args": ["--epochs", "5", "--epochs", "6"]}, None, 6),  # argparse: the last
        ({"args": ["--num-epochs", "20"]}, {EPOCHS_ANNOTATION: "30"}, 30),
        ({"args": ["--num-epochs", "20"]}, {EPOCHS_ANNOTATION: "many"}, 20),
        ({"args": ["--num-epochs"]}, None, None),
        ({"args": ["--num-epochs", "0"]}, None, None),
        ({"args": ["--num-epochs", "99999999999"]}, None, None),
        ({"args": ["--num-epochs", "٣"]}, None, None),  # a digit, not ASCII
        ({"args": ["--epochs-per-save", "3"]}, None, None),
        ({"args": "--epochs 3"}, None, None),  # not a list: not what Kubernetes runs
    ],
)
def test_declared_epochs(
    container: dict[str, Any], annotations: dict[str, str] | None, expected: int | None
) -> None:
    assert declared_epochs(_job(container, annotations)) == expected


def test_only_the_mxnet_container_declares() -> None:
    job = _job({"args": []})
    template = job.replica_specs[0].template
    template["spec"]["containers"].append({"name": "sidecar", "args": ["--epochs", "9"]})
    assert declared_epochs(job) is None


def test_declared_epochs_of_a_manifest_as_sync_reads_it() -> None:
    manifest = yaml.safe_load(
        """
apiVersion: kubeflow.org/v1
kind: MXJob
metadata: {name: resnet, namespace: ml}
spec:
  jobMode: MXTrain
  mxReplicaSpecs:
    Scheduler:
      replicas: 1
      template:
        spec:
          containers: [{name: mxnet, image: mxnet:1.9.1}]
    Server:
      replicas: 1
      template:
        spec:
          containers: [{name: mxnet, image: mxnet:1.9.1}]
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {mxgitops.io/epochs: "40"}
        spec:
          containers:
            - name: mxnet
              image: mxnet:1.9.1
              command: [python, train.py, --num-epochs, "20"]
"""
    )
    job = from_manifest(manifest)
    assert declared_epochs(job) == 40
    del manifest["spec"]["mxReplicaSpecs"]["Worker"]["template"]["metadata"]
    assert declared_epochs(from_manifest(manifest)) == 20
