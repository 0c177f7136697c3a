"""The metrics, Events and the sinks together, against a hostile Pushgateway and an
operator's slip (issue 37): a push answered a byte a second, credentials in a URL, a
status-token Secret that is missing, Events of held jobs in a namespace the policy
forbids."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from mxgitops.commands.sync import sync
from mxgitops.errors import ConfigError, OutputError
from mxgitops.outputs import metrics
from tests.forges import servers as forgeservers
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import checked_settings
from tests.helpers.sync import NS, Syncer, files, git_config, mxjob, write
from tests.kubeapi.harness import KubeAPI

PUSH = metrics.SyncMetrics("t1", 1.0, 2.0, 0)


def test_the_push_timeout_bounds_a_pushgateway_that_drips_its_answer() -> None:
    with forgeservers.dripping() as url:
        started = time.monotonic()
        with pytest.raises(OutputError, match=r"no answer within 2 s"):
            metrics.push(url, PUSH, timeout=2.0)
        assert time.monotonic() - started < 2.0 + 1.5


def test_credentials_in_the_pushgateway_url_are_basic_auth_and_never_printed() -> None:
    with forgeservers.recording() as gateway:
        url = gateway.url.replace("://", "://pusher:pa55word@")
        metrics.push(url, PUSH)
        [(method, path, headers)] = gateway.requests
        assert (method, path) == ("POST", "/metrics/job/mxgitops/instance/t1")
        assert headers["Authorization"] == "Basic " + base64.b64encode(b"pusher:pa55word").decode()
    with forgeservers.recording(status=500) as gateway:
        url = gateway.url.replace("://", "://pusher:pa55word@")
        with pytest.raises(OutputError) as failed:
            metrics.push(url, PUSH)
    assert "pa55word" not in str(failed.value) and "pusher:***@" in str(failed.value)


def test_credentials_in_the_status_api_url_are_refused_unprinted() -> None:
    with pytest.raises(ConfigError, match="status-api-url") as refused:
        checked_settings(api_url="https://bot:s3cret@github.example/api/v3")
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("token_file", [False, True])
def test_a_missing_status_token_stops_neither_the_apply_nor_the_metrics(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path, token_file: bool
) -> None:
    """The CronJob reads the token from an optional Secret: one not made yet (or deleted)
    must not stop the jobs, nor keep the alert on the metrics from hearing of it."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    missing = {"status_token_file": tmp_path / "not-mounted" / "token"} if token_file else {}
    with forgeservers.recording() as gateway:
        config = git_config(
            remote,
            kubeapi,
            tmp_path,
            status_provider="github",
            status_repository="org/jobs",
            pushgateway=gateway.url,
            **missing,
        )
        outcome = sync(config)
        assert outcome.summary.counts() == {"create": 1} and kubeapi.objects("jobs", "ml")
        [undelivered] = outcome.undelivered
        assert ("cannot be read" if token_file else "needs a token") in undelivered
        # The sync's group, POSTed; the training records' group is PUT beside it.
        methods = [method for method, _, _ in gateway.requests]
        assert sorted(methods) == ["POST", "PUT"]
        sync_group = gateway.bodies[methods.index("POST")]
        assert b'mxgitops_sync_errors{phase="status"} 1.0' in sync_group


def test_a_job_held_out_of_a_forbidden_namespace_gets_no_event_there(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """allowedNamespaces keeps the repository out of a namespace: a Warning Event of the
    job held there would be one write into it all the same, on every change of reason."""
    repo = tmp_path / "repo"
    other = mxjob("b", servers=0)
    other["metadata"]["namespace"] = "other"
    write(repo, mxjob("a", servers=0), other)
    operator = tmp_path / "policy.yaml"
    operator.write_text(yaml.safe_dump({"policy": {"allowedNamespaces": [NS]}}))
    if hasattr(kubeapi, "ensure_namespace"):  # the real API server needs the namespace
        kubeapi.ensure_namespace("other")
    outcome = Syncer(kubeapi, repo)(events=True, policy_file=operator)
    jobs = {j.qualified_name: j for j in outcome.summary.jobs}
    assert jobs["other/b"].action == "hold" and "allowedNamespaces" in jobs["other/b"].reason
    assert outcome.undelivered == ()
    posts = [e for e in kubeapi.request_log if e["resource"] == "events" and e["method"] == "POST"]
    assert posts and all(f"/namespaces/{NS}/" in e["path"] for e in posts), posts
