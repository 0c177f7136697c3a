"""Pod Security admission has the last word, and mxgitops says what it said.

kube-apiserver's PodSecurity admission does not refuse a batch Job whose pod
template its namespace's enforced level forbids: it creates it, answering with a
`Warning` header (`would violate PodSecurity "restricted:latest": ...`), and
refuses the pods the job controller makes later. The job would never start and no
write failed; the sync reports that warning as one error line of the job, and the
other jobs go on. The operator's policy here is `privileged`, so mxgitops' own
check lets the job through and the admission judges it.

The API double has no Pod Security admission: this runs on the real control plane
(the `control_plane` fixture; the unit of it is in tests/state/test_apply.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mxgitops.commands.sync import sync
from mxgitops.outputs.report import render_plan
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import config_for
from tests.helpers.policy import RESTRICTED, manifest

NS = "pss-enforced"


def test_a_job_whose_pods_admission_will_refuse_is_reported_and_the_others_go_on(
    control_plane: Any, make_git_remote: Callable[..., GitRemote], tmp_path: Path
) -> None:
    control_plane.wipe()
    control_plane.ensure_namespace(NS)
    status, _, answer = control_plane.raw(
        "PATCH",
        f"/api/v1/namespaces/{NS}",
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        "application/merge-patch+json",
    )
    assert status == 200, answer
    remote = make_git_remote(
        "jobs",
        files={
            "jobs/plain.yaml": manifest("kubeflow", "plain"),
            "jobs/hardened.yaml": manifest("kubeflow", "hardened", container=RESTRICTED),
        },
    )
    permissive = tmp_path / "policy.yaml"
    permissive.write_text("policy:\n  podSecurity: privileged\n")
    config = config_for(
        remote.url, tmp_path / "cache", control_plane, namespace=NS, policy_file=permissive
    )

    outcome = sync(config)

    jobs = {j.name: j for j in outcome.summary.jobs}
    assert not outcome.ok and not outcome.summary.problems
    (line,) = jobs["plain"].errors
    assert line.startswith("create job/plain-"), line
    assert 'would violate PodSecurity "restricted:latest": ' in line
    assert "allowPrivilegeEscalation != false" in line
    assert line.endswith(
        " (and 2 more of its batch Jobs); its pods will be refused, so it will not start"
    )
    assert jobs["hardened"].errors == () and jobs["hardened"].action == "create"
    # Admission created the batch Jobs of both: only their pods are judged.
    names = [o["metadata"]["name"] for o in control_plane.objects("jobs", NS)]
    assert sorted(n.split("-")[0] for n in names) == ["hardened"] * 3 + ["plain"] * 3
    assert f"error: {line}" in render_plan(outcome.summary)
