"""The forge sink against a hostile tenant, forge and operator's typo (issue 37): a
commit annotation hand-set on a live Job steering the forge's API, a token printed in
an error, a forge that drips its answer a byte a second, credentials in a URL."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mxgitops import objects
from mxgitops.commands.sync import sync
from mxgitops.errors import ConfigError, OutputError
from mxgitops.kube import cluster as kube
from mxgitops.outputs.forge.api import Api
from mxgitops.outputs.forge.post import StatusSettings, post
from mxgitops.outputs.summary import Summary
from tests.forges import servers as forgeservers
from tests.gitrepos.fixtures import GitRemote
from tests.helpers.gitsync import checked_settings
from tests.helpers.sync import files, git_config, mxjob
from tests.kubeapi.harness import KubeAPI

FORGED_COMMITS = (
    "../../../../evil/other/statuses/" + "c" * 40,  # another repository, same token
    "d" * 40,  # a commit mxgitops never synced: hex, but not one of this repository's
    "E" * 40,
    "a" * 40 + "?x=1",
)


def forge_config(remote: GitRemote, api: KubeAPI, tmp_path: Path, forge: forgeservers.Forge) -> Any:
    return git_config(
        remote,
        api,
        tmp_path,
        status_provider="github",
        status_api_url=forge.base,
        status_repository="org/jobs",
        status_token=forge.token,
        status_url="https://ci.example/{commit}",
    )


def set_commit_annotation(api: KubeAPI, value: str) -> None:
    """What a tenant with `update` on Jobs can do to every Job of a job."""
    client = kube.connect(kubeconfig=api.kubeconfig)
    for job in api.objects("jobs", "ml"):
        job["metadata"].setdefault("annotations", {})[objects.COMMIT_ANNOTATION] = value
        client.replace(job)


def test_a_hand_set_commit_annotation_does_not_steer_the_forge(
    make_git_remote: Callable[..., GitRemote], kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """Statuses go only to commits mxgitops synced, of the configured repository: a
    commit annotation is a tenant's to write, and it went into the API path and the
    link verbatim."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    first = remote.rev()
    with forgeservers.serving("github") as forge:
        config = forge_config(remote, kubeapi, tmp_path, forge)
        assert sync(config).undelivered == ()
        for forged in FORGED_COMMITS:
            set_commit_annotation(kubeapi, forged)
            second = remote.commit(files(mxjob("b", servers=0)), f"b after {forged[:8]}")
            outcome = sync(config)
            assert outcome.undelivered == (), outcome.undelivered
            touched = {path for _, path in forge.requests}
            assert all(
                path.startswith("/repos/org/jobs/") and (first in path or second in path)
                for path in touched
            ), touched
            assert not any(job.commit == forged for job in outcome.summary.jobs)
            remote.commit({"jobs/b.yaml": None}, "b gone")
            sync(config)
            forge.requests.clear()
        set_commit_annotation(kubeapi, first)  # the genuine one still gets its status
        remote.commit(files(mxjob("b", servers=0)), "b again")
        assert sync(config).undelivered == ()
        assert forge.latest("org/jobs", first, "mxgitops/t1") is not None
        assert any(first in path for _, path in forge.requests)  # read back, unchanged


def test_a_status_repository_with_a_dot_segment_is_refused() -> None:
    for name in ("org/..", "../org/jobs", "org/./jobs"):
        with pytest.raises(ConfigError, match="--status-repository"):
            checked_settings(repository=name)


TOKEN = "forge-token"


def test_a_status_token_with_a_trailing_newline_is_stripped_and_never_printed(
    make_git_remote: Callable[..., GitRemote],
    kubeapi: KubeAPI,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Secret made from a file (`kubectl create secret --from-file`) ends in a newline;
    MXGITOPS_STATUS_TOKEN from it was sent as is, and http.client's `Invalid header
    value b'Bearer forge-token\\n'` printed the token in the summary and the log."""
    remote = make_git_remote("jobs", files=files(mxjob("a", servers=0)))
    with forgeservers.serving("github", token=TOKEN) as forge:
        config = replace(forge_config(remote, kubeapi, tmp_path, forge), status_token=TOKEN + "\n")
        outcome = sync(config)
        assert outcome.undelivered == ()
        assert forge.latest("org/jobs", remote.rev(), "mxgitops/t1") is not None
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("token", [f"{TOKEN}\x00x", f"{TOKEN}\nX-Evil: 1", "tökën"])
def test_a_status_token_no_header_can_carry_is_refused_without_printing_it(token: str) -> None:
    with pytest.raises(ConfigError, match="status token") as refused:
        checked_settings(provider="gitlab", token=token)
    assert TOKEN not in str(refused.value) and "ökë" not in str(refused.value)


def test_a_request_that_cannot_be_sent_is_an_error_without_its_headers() -> None:
    """Whatever http.client says of a header (`Invalid header value ...`) holds it."""
    with forgeservers.serving("github") as forge:
        api = Api(forge.base, {"Authorization": "Bearer s3cr\net"}, deadline=time.monotonic() + 10)
        with pytest.raises(OutputError) as failed:
            api.call("GET", "/repos/org/jobs/commits/" + "a" * 40 + "/status")
    assert "s3cr" not in str(failed.value) and "GET" in str(failed.value)


def test_the_status_timeout_bounds_a_forge_that_drips_its_answer() -> None:
    """A forge answering a byte now and then: no socket read times out, and urllib3's
    `total` bounds only the connect and each read. The timeout is the whole call's."""
    with forgeservers.dripping() as url:
        settings = StatusSettings("github", url, "org/jobs", TOKEN, "", 2.0)
        started = time.monotonic()
        with pytest.raises(OutputError, match=r"no answer within"):
            post(Summary(commit="a" * 40, instance="t1"), settings)
        assert time.monotonic() - started < 2.0 + 1.5
