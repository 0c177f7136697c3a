"""manualjob.py: the Job kubectl v1.34 makes from a CronJob (its createJobFromCronJob),
named after the push; which Jobs are the CronJob's, and which ended.
(tests/receiver/test_process.py compares it with the real kubectl's.)"""

from __future__ import annotations

from mxgitops.receiver.manualjob import (
    NAME_LIMIT,
    controlled_by,
    finished,
    job_from_cronjob,
    push_job_name,
)
from tests.forges.webhooks import cronjob


def test_the_job_is_the_templates_with_kubectls_metadata() -> None:
    source = cronjob()
    job = job_from_cronjob(source, "mxgitops-push-0123456789", "github delivery d-1")
    template = source["spec"]["jobTemplate"]
    assert job["spec"] == template["spec"]
    assert job["spec"] is not template["spec"]
    assert job["metadata"] == {
        "name": "mxgitops-push-0123456789",
        "namespace": "mxgitops",
        "labels": {"team": "ml"},
        "annotations": {
            "cronjob.kubernetes.io/instantiate": "manual",
            "note": "kept",
            "mxgitops.io/push": "github delivery d-1",
        },
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": "mxgitops",
                "uid": "uid-of-the-cronjob",
                "controller": True,
            }
        ],
    }


def test_the_templates_annotations_win_over_kubectls_as_in_kubectl() -> None:
    source = cronjob()
    source["spec"]["jobTemplate"]["metadata"] = {
        "annotations": {"cronjob.kubernetes.io/instantiate": "by-hand"}
    }
    job = job_from_cronjob(source, "x", "push")
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "by-hand"
    assert "labels" not in job["metadata"]


def test_the_name_says_push_is_stable_per_delivery_and_fits_a_label() -> None:
    name = push_job_name("mxgitops-example", "d-1")
    assert name.startswith("mxgitops-example-push-")
    assert name == push_job_name("mxgitops-example", "d-1")
    assert name != push_job_name("mxgitops-example", "d-2")
    long = push_job_name("a" * 52, "d-1")
    assert len(long) <= NAME_LIMIT and "-push-" in long


def test_only_the_cronjobs_runs_are_its_own_and_ended_means_complete_failed_or_deleted() -> None:
    job = job_from_cronjob(cronjob(), "x", "push")
    assert controlled_by(job, "mxgitops")
    assert not controlled_by(job, "other")
    assert not controlled_by({"metadata": {"name": "bare"}}, "mxgitops")
    assert not finished(job)
    for condition in ("Complete", "Failed"):
        done = {**job, "status": {"conditions": [{"type": condition, "status": "True"}]}}
        assert finished(done)
    suspended = {**job, "status": {"conditions": [{"type": "Suspended", "status": "True"}]}}
    assert not finished(suspended)
    assert finished({"metadata": {"deletionTimestamp": "2026-12-03T09:00:00Z"}})
