"""The opt-in timeline of a session (``tests/session/timeline.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.session.timeline import ENV, NESTED, PHASES, read, summary

TESTS = Path(__file__).parents[1]


def run_session(directory: Path, *args: str, timeline: Path, nested: bool = False) -> str:
    """A session of ``pytest`` in ``directory`` recording to ``timeline`` (unless
    ``nested``: as if inside a recording session)."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV, NESTED)}
    env |= {"PYTHONPATH": str(TESTS.parent), "PYTEST_ADDOPTS": "", ENV: str(timeline)}
    if nested:
        env[NESTED] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def write_suite(directory: Path) -> None:
    (directory / "pytest.ini").write_text("[pytest]\n")
    (directory / "conftest.py").write_text(
        'pytest_plugins = ["tests.session.timeline"]\n'
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def made():\n"
        "    yield [i * i for i in range(1000)]\n"
    )
    inner = directory / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text("def test_inside_a_test(): pass\n")
    (directory / "test_some.py").write_text(
        textwrap.dedent("""
        import os, subprocess, sys
        import pytest

        @pytest.mark.xdist_group("things")
        def test_grouped(made):
            assert made[3] == 9

        def test_plain():
            pass

        def test_runs_a_session_of_its_own():
            # as the suite's tests of its own plugins do: a session inside a test
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "inner"],
                capture_output=True, text=True,
            )
            assert done.returncode == 0, done.stdout
        """)
    )


def test_each_test_of_each_worker_is_one_line_with_its_group_and_phases(tmp_path: Path) -> None:
    write_suite(tmp_path)
    timeline = tmp_path / "timeline.jsonl"
    run_session(tmp_path, "-n", "2", "--dist", "loadgroup", "test_some.py", timeline=timeline)
    entries = read(timeline)
    by_name = {e["test"].split("::")[1].split("@")[0]: e for e in entries}
    # the session a test ran inside its own is not the suite's: not recorded
    assert sorted(by_name) == ["test_grouped", "test_plain", "test_runs_a_session_of_its_own"]
    assert len(entries) == 3
    assert by_name["test_grouped"]["group"] == "things"
    assert by_name["test_plain"]["group"] == ""
    for entry in entries:
        assert entry["worker"] in ("gw0", "gw1"), entry
        assert entry["start"] <= entry["end"], entry
        assert all(entry[phase] >= 0 for phase in PHASES), entry
        assert sum(entry[phase] for phase in PHASES) <= entry["end"] - entry["start"] + 0.01
    assert by_name["test_runs_a_session_of_its_own"]["call"] > 0


def test_a_session_inside_a_recording_one_records_nothing(tmp_path: Path) -> None:
    write_suite(tmp_path)
    timeline = tmp_path / "timeline.jsonl"
    run_session(tmp_path, "-p", "no:xdist", "test_some.py", timeline=timeline, nested=True)
    assert not timeline.exists()


def test_the_summary_names_the_worker_that_ends_last_last_with_its_groups_in_order() -> None:
    def entry(worker: str, group: str, start: float, end: float, call: float) -> dict[str, object]:
        return {
            "worker": worker,
            "group": group,
            "test": f"t_{worker}_{start}",
            "start": start,
            "end": end,
            "setup": 0.0,
            "call": call,
            "teardown": 0.0,
        }

    entries = [
        entry("gw1", "node", 100.0, 400.0, 290.0),
        entry("gw0", "", 100.0, 110.0, 10.0),
        entry("gw1", "", 400.0, 420.0, 20.0),
        entry("gw0", "", 110.0, 130.0, 20.0),
    ]
    lines = summary(json.loads(json.dumps(entries))).splitlines()
    workers = [line.split(":")[0] for line in lines if not line.startswith(" ")]
    assert workers == ["gw0", "gw1"]  # gw1 ends last: the critical path
    assert lines[0] == "gw0: ends at    30.0 s, 2 tests, busy 30.0 s"
    gw1 = lines[next(i for i, x in enumerate(lines) if x.startswith("gw1")) :]
    assert gw1[0] == "gw1: ends at   320.0 s, 2 tests, busy 320.0 s"
    runs = [line.strip() for line in gw1[1:] if " .. " in line]
    assert runs[0].endswith("node: 1 tests") and runs[1].endswith("-: 1 tests")
    assert any("290.0 s call" in line for line in gw1)
