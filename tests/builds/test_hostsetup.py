"""A fresh machine: the tests set up what they need from it, or stop at once saying
what is missing; a real part that does not build is one line on the tests that need
it, never an INTERNALERROR (issue: runc's build crashed pytest after 14 minutes of
Go builds, for want of libseccomp)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builds import hostsetup
from tests.builds.gobuild import first_error_line

ROOT = Path(__file__).resolve().parents[2]


def fake_go(bin_dir: Path, calls: Path, *, stderr: str = "") -> None:
    """A `go` on PATH that records each call and fails, printing `stderr`."""
    bin_dir.mkdir(exist_ok=True)
    script = f"#!/bin/sh\necho \"$*\" >> {calls}\nprintf '%b' '{stderr}' >&2\nexit 1\n"
    (bin_dir / "go").write_text(script)
    (bin_dir / "go").chmod(0o755)


# A pytest of its own imports the whole conftest: 3 s on an idle machine, 30 s and more
# beside the rest of the suite on two busy cores; the deadline leaves room for that.
SUBPROCESS_DEADLINE = 280


def pytest_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # CI=true refuses the --backend double of the build-failure test
    env = {name: value for name, value in env.items() if name != "CI"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=SUBPROCESS_DEADLINE,
    )  # fmt: skip


@pytest.mark.timeout(SUBPROCESS_DEADLINE + 20)
def test_a_missing_tool_that_cannot_be_installed_stops_the_run_at_once(tmp_path: Path) -> None:
    # A PATH with Python's own directory and a `go` that records being asked, and
    # neither apt-get nor pkg-config: nothing can be installed.
    bin_dir = tmp_path / "bin"
    calls = tmp_path / "go-calls"
    fake_go(bin_dir, calls)
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),  # an empty cache: any build would start
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}",
    }
    done = pytest_run(["tests/planning/test_plan.py"], env)
    output = done.stdout + done.stderr
    assert done.returncode == 4, output[-3000:]
    assert "INTERNALERROR" not in output and "Traceback" not in output, output[-3000:]
    said = [line for line in output.splitlines() if "this machine lacks" in line]
    assert len(said) == 1, output[-3000:]
    assert "pkg-config (runc's build" in said[0]
    assert "sudo apt-get install -y " in said[0] and " libseccomp-dev " in said[0]
    assert not calls.exists(), "a build started before the check"
    assert " passed" not in output and " failed" not in output, output[-3000:]  # no test ran


def test_the_advice_names_each_missing_tool_and_one_command_for_them() -> None:
    lacking = [need for need in hostsetup.NEEDS if need.what in ("conntrack", "libseccomp")]
    said = hostsetup.advice(lacking)
    assert "conntrack (kube-proxy)" in said
    assert "sudo apt-get install -y conntrack libseccomp-dev." in said
    assert "go.dev" not in said  # Go is not missing, so not mentioned
    assert "\n" not in said


def test_the_first_error_line_skips_a_go_builds_progress() -> None:
    printed = (
        "go: downloading github.com/seccomp/libseccomp-golang v0.10.0\n"
        "# pkg-config --cflags  -- libseccomp\n"
        "Package libseccomp was not found in the pkg-config search path.\n"
        "Perhaps you should add the directory containing `libseccomp.pc'\n"
    )
    assert first_error_line(printed) == (
        "Package libseccomp was not found in the pkg-config search path."
    )


@pytest.mark.timeout(SUBPROCESS_DEADLINE + 20)
def test_a_part_that_does_not_build_is_one_line_on_the_tests_that_need_it(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    calls = tmp_path / "go-calls"
    fake_go(bin_dir, calls, stderr="go: downloading x v1\\nmain.go:3: undefined: nothing\\n")
    home = tmp_path / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "MXGITOPS_PUSHGATEWAY_CACHE": str(tmp_path / "empty-cache"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    test = "tests/outputs/test_metrics_pushgateway.py::test_the_cli_pushes_its_exit_code"
    done = pytest_run(["--backend", "double", test], env)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]  # tests failed: the run went on, and ended
    assert "INTERNALERROR" not in output and "Traceback" not in output, output[-3000:]
    log = home / ".cache/mxgitops/logs/pushgateway.log"
    line = (
        "pushgateway: `go build … github.com/prometheus/pushgateway` failed (exit 1): "
        f"main.go:3: undefined: nothing (the rest: {log})"
    )
    # The error of the test that needs the part is that line alone, no traceback.
    lines = output.splitlines()
    header = next(i for i, text in enumerate(lines) if "ERROR at setup of" in text)
    assert lines[header + 1] == line, output[-3000:]
    assert f"ERROR {test}[double]" in output, output[-3000:]
    assert f"build failed: {line}" in output  # said once, as it happened
    assert "main.go:3: undefined: nothing" in log.read_text()
    builds = [call for call in calls.read_text().splitlines() if call.startswith("build ")]
    assert len(builds) == 1, builds  # the fixture did not build again
