"""Histories of a job in a real bare repository: commits that change its manifest, and
notes that hold its runs' training records as a sync writes them (`report.render_note`
of a `Summary` whose job carries its `TrainingRecord`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from mxgitops.outputs import report
from mxgitops.outputs.summary import JobSummary, Summary
from mxgitops.record.resources import ResourceUse
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.settings.config import SyncConfig
from mxgitops.source.repository import Repository
from tests.gitrepos.fixtures import GitRemote

NS = "default"
NOTES_REF = "refs/notes/mxgitops"


def manifest(name: str, lr: str, *, image: str = "mxnet/python:1.9.1", **extra: Any) -> str:
    """A Kubeflow-dialect local MXJob whose worker trains with learning rate `lr`."""
    doc: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name, **extra},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "mxnet",
                                    "image": image,
                                    "args": ["train.py", "--lr", lr, "--num-epochs", "3"],
                                }
                            ]
                        }
                    },
                }
            },
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def record(accuracies: list[float], *, hours: float = 0.5, gpus: float = 1.0) -> TrainingRecord:
    """The record of a run whose log printed one validation accuracy per epoch, and which
    ran `hours` from 10:00 on `gpus` GPUs."""
    lines = "".join(
        f"Epoch[{epoch}] Train-accuracy={value}\nEpoch[{epoch}] Validation-accuracy={value}\n"
        f"Epoch[{epoch}] Time cost=10.0\n"
        for epoch, value in enumerate(accuracies)
    )
    minutes = round(hours * 60)
    use = ResourceUse(
        gpu_hours=gpus * hours,
        cpu_core_hours=4 * hours,
        pods=1,
        estimate=False,
        started="2026-01-01T10:00:00Z",
        finished=f"2026-01-01T{10 + minutes // 60:02d}:{minutes % 60:02d}:00Z",
    )
    return TrainingRecord(declared_epochs=len(accuracies), resources=use).with_chunk(
        lines, at_end=True
    )


def note_for(
    commit: str,
    name: str,
    run: TrainingRecord | None,
    state: str = "Succeeded",
    runtime_id: str = "r1",
) -> str:
    job = JobSummary(
        namespace=NS,
        name=name,
        action="create",
        reason="new job",
        state=state,
        commit=commit,
        runtime_id=runtime_id,
        record=run,
    )
    return report.render_note(Summary(commit=commit, instance="test", jobs=(job,)))


def add_note(remote: GitRemote, commit: str, text: str, ref: str = NOTES_REF) -> None:
    """A note on `commit` pushed to the remote, as a sync pushes its notes."""
    path = remote.work / ".git" / "mxgitops-note.txt"
    path.write_text(text)
    remote.git("notes", f"--ref={ref}", "add", "--force", "-F", str(path), commit)
    remote.git("push", "--quiet", "--force", "origin", f"{ref}:{ref}")


def repository_of(remote: GitRemote, cache: Path) -> Repository:
    return Repository(remote.url, cache_dir=cache)


def config_of(remote: GitRemote, cache: Path, **overrides: Any) -> SyncConfig:
    return SyncConfig(repo=remote.url, path="jobs", cache_dir=cache, **overrides)


def built_history(root: Path, runs: int, *, others: int = 20) -> Path:
    """A bare remote under `root` whose `main` has `runs` commits, each changing the
    learning rate of default/mnist and the image of one of `others` other jobs, every
    commit with a note holding mnist's run and its 10-epoch record: written with
    `git fast-import` (a second for hundreds of commits), as a sync would have left it."""
    bare = root / "remotes" / "history.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    subprocess.run(["git", "symbolic-ref", "HEAD", "refs/heads/main"], cwd=bare, check=True)
    stream = []
    when = 1_700_000_000
    for number in range(runs):
        files = {"jobs/mnist.yaml": manifest("mnist", f"0.{number + 1:05d}")}
        if others:
            other = f"job-{number % others:03d}"
            files[f"jobs/{other}.yaml"] = manifest(other, "0.1", image=f"mxnet/python:{number}")
        message = f"run {number}\n".encode()
        stream.append(
            b"commit refs/heads/main\nmark :%d\ncommitter Bench <b@example.com> %d +0000\n"
            b"data %d\n%s" % (number + 1, when + 60 * number, len(message), message)
        )
        for path, text in files.items():
            body = text.encode()
            stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(body), body))
        stream.append(b"\n")
    _fast_import(bare, b"".join(stream))
    shas = (
        subprocess.run(
            ["git", "rev-list", "--reverse", "main"], cwd=bare, check=True, capture_output=True
        )
        .stdout.decode()
        .split()
    )
    notes = [b"commit refs/notes/mxgitops\ncommitter Bench <b@example.com> %d +0000\n" % when]
    notes.append(b"data 6\nnotes\n")
    for number, sha in enumerate(shas):
        accuracies = [round(0.5 + 0.04 * epoch + 0.001 * (number % 7), 4) for epoch in range(10)]
        body = note_for(sha, "mnist", record(accuracies)).encode()
        notes.append(b"N inline %s\ndata %d\n%s\n" % (sha.encode(), len(body), body))
    _fast_import(bare, b"".join(notes) + b"\n")
    return bare


def _fast_import(bare: Path, stream: bytes) -> None:
    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, input=stream, check=True)
