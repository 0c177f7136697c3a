#!/usr/bin/env python3
"""Time `mxgitops validate` on a jobs repository of 10,000 manifests.

Generates a realistic mix in a temporary directory, `jobs/<team>/<job>.yaml`:
local and dist jobs in both dialects (one in ten in an older API version of
its form: mlkube.io/v1beta1, kubeflow.org/v1alpha1, v1beta1), GPU limits, env,
volumes, a few ConfigMaps beside them; every job differs (image tag, arguments, resources),
so nothing is validated from a cache of identical templates. Then runs the
installed `mxgitops validate` in a subprocess and prints the wall time, beside
the floor: a process that only parses every file with PyYAML's C loader.

    .venv/bin/python bench/bench_validate.py [--jobs 10000] [--budget 10]

Exits 1 when validation takes longer than the budget (seconds) or does not
find every job valid.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TEAMS = [f"team-{name}" for name in ("vision", "speech", "nlp", "ranking", "ads", "research")]


def pod_spec(rng: random.Random, job: int, gpu: bool, indent: int) -> str:
    """The `spec:` body of a pod template, indented by `indent` spaces."""
    return textwrap.indent(_pod_spec(rng, job, gpu), " " * indent)


def _pod_spec(rng: random.Random, job: int, gpu: bool) -> str:
    resources = (
        f"""  resources:
    limits:
      nvidia.com/gpu: {rng.choice([1, 2, 4, 8])}
      memory: {rng.choice([8, 16, 32])}Gi
    requests:
      cpu: "{rng.choice([2, 4, 8])}"
"""
        if gpu
        else f"""  resources:
    requests:
      cpu: "{rng.choice([1, 2])}"
      memory: {rng.choice([2, 4])}Gi
"""
    )
    return f"""containers:
- name: mxnet
  image: registry.example.com/ml/mxnet:1.9.{job % 50}-{"gpu" if gpu else "cpu"}
  command: ["python3"]
  args: ["train.py", "--epochs={rng.randint(1, 90)}", "--lr={rng.random():.4f}",
         "--batch-size={rng.choice([32, 64, 128])}", "--seed={job}"]
  workingDir: /workspace
  env:
  - name: DATASET
    value: s3://datasets/imagenet/{job % 97}
  - name: LOG_LEVEL
    value: info
{resources}  volumeMounts:
  - name: data
    mountPath: /data
    readOnly: true
volumes:
- name: data
  persistentVolumeClaim:
    claimName: dataset-{job % 13}
"""


def seed_manifest(rng: random.Random, job: int, name: str, dist: bool) -> str:
    def replica(kind: str, replicas: int, gpu: bool, port: str = "") -> str:
        return f"""    - replicas: {replicas}
      mxReplicaType: {kind}
{port}      template:
        spec:
          restartPolicy: OnFailure
{pod_spec(rng, job, gpu, 10)}"""

    if dist:
        body = (
            replica("SCHEDULER", 1, False, "      PsRootPort: 9091\n")
            + replica("SERVER", rng.randint(1, 4), False)
            + replica("WORKER", rng.randint(1, 8), True)
        )
    else:
        body = replica("WORKER", 1, rng.random() < 0.5)
    return f"""apiVersion: mxnet.mlkube.io/v1beta1
kind: MxJob
metadata:
  name: {name}
  labels:
    team: {TEAMS[job % len(TEAMS)]}
spec:
  jobMode: {"dist" if dist else "local"}
  replicaSpecs:
{body}"""


def kubeflow_manifest(rng: random.Random, job: int, name: str, dist: bool) -> str:
    def replica(kind: str, replicas: int, gpu: bool) -> str:
        return f"""    {kind}:
      replicas: {replicas}
      restartPolicy: Never
      template:
        spec:
{pod_spec(rng, job, gpu, 10)}"""

    body = replica("Worker", rng.randint(1, 8) if dist else 1, True)
    if dist:
        body = replica("Scheduler", 1, False) + replica("Server", rng.randint(1, 4), False) + body
    return f"""apiVersion: kubeflow.org/v1
kind: MXJob
metadata:
  name: {name}
  annotations:
    mxgitops.io/on-change: {rng.choice(["replace", "wait"])}
spec:
  jobMode: MXTrain
  runPolicy:
    cleanPodPolicy: Running
    backoffLimit: 3
  mxReplicaSpecs:
{body}"""


def older(text: str, job: int) -> str:
    """The same job in an older API version of its form (read with a warning)."""
    if text.startswith("apiVersion: kubeflow.org/v1\n"):
        text = text.replace("apiVersion: kubeflow.org/v1\n", "apiVersion: kubeflow.org/v1beta1\n")
        return text.replace(
            "  runPolicy:\n    cleanPodPolicy: Running\n    backoffLimit: 3\n",
            "  cleanPodPolicy: Running\n",
        )
    if job % 2:
        return text.replace("mxnet.mlkube.io/v1beta1", "mlkube.io/v1beta1")
    return text.replace(
        "mxnet.mlkube.io/v1beta1\nkind: MxJob", "kubeflow.org/v1alpha1\nkind: MXJob"
    )


def generate(root: Path, count: int) -> None:
    rng = random.Random(2024)
    for job in range(count):
        team = TEAMS[job % len(TEAMS)]
        dist, kubeflow = rng.random() < 0.5, rng.random() < 0.4
        name = f"{'kf' if kubeflow else 'mx'}-{'dist' if dist else 'local'}-{job:05d}"
        make = kubeflow_manifest if kubeflow else seed_manifest
        path = root / "jobs" / team / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = make(rng, job, name, dist)
        path.write_text(older(text, job) if job % 10 == 0 else text)
    for team in TEAMS:
        (root / "jobs" / team / "settings.yaml").write_text(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {team}\ndata:\n  owner: {team}\n"
        )


def command() -> list[str]:
    script = Path(sys.executable).with_name("mxgitops")
    if script.exists():
        return [str(script)]
    found = shutil.which("mxgitops")
    return [found] if found else [sys.executable, "-m", "mxgitops.cli"]


_PARSE_ONLY = """
import sys, yaml
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*.yaml")):
    list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))
"""


def parse_floor(root: Path) -> float:
    """Wall seconds of a process that reads and parses every manifest, nothing more."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _PARSE_ONLY, str(root)], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mxgitops-bench-") as directory:
        root = Path(directory)
        generate(root, args.jobs)
        argv = [*command(), "validate", "--output", "json", str(root)]
        parse_floor(root)  # both then read files the page cache holds
        times, floors = [], []
        for _ in range(2):  # interleaved: a load that comes and goes hits both alike
            start = time.perf_counter()
            run = subprocess.run(argv, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - start)
            floors.append(parse_floor(root))
        elapsed, floor = min(times), min(floors)
    report = json.loads(run.stdout) if run.stdout.startswith("{") else {}
    valid = len(report.get("jobs", []))
    print(
        f"mxgitops validate: {args.jobs} manifests in {elapsed:.2f} s wall, the faster of 2 "
        f"({valid} valid)"
    )
    print(
        f"floor, a process that only parses every file with PyYAML's C loader: {floor:.2f} s "
        "(the faster of 2); "
        f"validate is {elapsed / floor:.2f}x the floor (target <= 1.3x)"
    )
    if run.returncode != 0 or valid != args.jobs:
        print(run.stdout[-2000:], run.stderr[-2000:], file=sys.stderr)
        return 1
    if elapsed > args.budget:
        print(f"over the budget of {args.budget:.0f} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
