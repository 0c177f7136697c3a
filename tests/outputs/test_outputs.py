"""The outputs seam: which sinks the settings ask for, and that one failing is reported
while the others still run (the sinks' own modules have their own tests)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from mxgitops.errors import ConfigError, GitError, OutputError
from mxgitops.manifests import repofile
from mxgitops.outputs import sinks as outputs
from mxgitops.outputs.summary import Summary
from mxgitops.settings.config import SyncConfig, read_token


def test_the_settings_choose_the_sinks(tmp_path: Path) -> None:
    kinds = [type(s).__name__ for s in outputs.sinks_for(SyncConfig())]
    assert kinds == ["Events"]  # Events are on by default; the rest need a setting
    config = SyncConfig(
        repo="https://github.com/org/jobs.git",
        status_provider="github",
        status_token="t",
        pushgateway="http://pushgateway:9091",
    )
    assert [type(s).__name__ for s in outputs.sinks_for(config)] == [
        "Statuses",
        "Events",
        "Metrics",
    ]
    assert outputs.sinks_for(SyncConfig(dry_run=True, pushgateway="http://p:9091")) == []
    # Every sink, the statuses too: a dry run is decided here, and no sink asks again.
    assert outputs.sinks_for(replace(config, dry_run=True)) == []
    [unusable, _] = outputs.sinks_for(SyncConfig(status_provider="gitlab"))
    with pytest.raises(OutputError, match="needs a token"):  # when asked to deliver, alone
        unusable.deliver(outputs.Record(Summary(commit="c"), 1.0, 0))


def test_the_status_token_file_is_read_once(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    config = SyncConfig(status_token_file=token)
    assert config.status_token == "s3cret" and "s3cret" not in repr(config)
    (tmp_path / "empty").write_text("")
    assert SyncConfig(status_token_file=tmp_path / "empty").status_token is None  # the sync runs
    with pytest.raises(ConfigError, match=r"status-token-file .*: is empty"):  # its statuses say
        read_token(tmp_path / "empty")


@pytest.mark.parametrize("key", ["statusProvider", "statusApiUrl", "pushgateway", "events"])
def test_the_jobs_repository_cannot_send_results_elsewhere(tmp_path: Path, key: str) -> None:
    (tmp_path / ".mxgitops.yaml").write_text(f"{key}: x\n")
    found = repofile.read(tmp_path)
    assert found.values == {}
    [refused] = found.refused
    assert "only the operator may set this" in str(refused)


@dataclass
class Recording:
    """A sink that records what it was told, and fails when asked to."""

    phase: str
    fails: bool = False
    told: list[outputs.Record] = field(default_factory=list)

    def deliver(self, record: outputs.Record) -> None:
        self.told.append(record)
        if self.fails:
            raise OutputError(f"{self.phase} not delivered")
        if self.phase == "buggy":
            raise KeyError("state")


def test_a_failing_sink_is_reported_and_the_next_still_runs() -> None:
    statuses = Recording("status", fails=True)
    events = Recording("events")
    metrics = Recording("metrics")
    record = outputs.Record(Summary(commit="c"), 1.0, 0, {"apply": 0})

    def exit_code(undelivered: bool) -> int:
        return 3 if undelivered else 0

    failures = outputs.deliver([statuses, events, metrics], record, exit_code)
    assert failures == ("status not delivered",)
    assert len(events.told) == 1
    [told] = metrics.told
    assert (told.exit_code, told.errors["status"]) == (3, 1)


def test_an_error_that_stops_a_sync_is_told_without_a_summary() -> None:
    metrics = Recording("metrics")
    outputs.failed([metrics], 1.0, GitError("cannot fetch"), 3)
    [told] = metrics.told
    assert (told.summary, told.exit_code, dict(told.errors)) == (None, 3, {"git": 1})


def test_a_sink_with_a_bug_is_reported_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Recording("metrics")
    record = outputs.Record(Summary(commit="c"), 1.0, 0)
    failures = outputs.deliver([Recording("buggy"), metrics], record, lambda bad: 3 if bad else 0)
    assert failures == ("buggy: unexpected KeyError",)  # its words may quote a header
    assert metrics.told[0].exit_code == 3
    assert "test_outputs.py" in caplog.text and "'state'" not in caplog.text  # where, not what
