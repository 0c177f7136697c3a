"""What the CronJob's sync imports that it does not use: the Pushgateway's client
(prometheus_client) when no Pushgateway is configured, and rich's progress display
when stderr is no terminal (a pod's log). Each cost a no-op sync about a tenth of a
second of CPU at every start (docs/guides/scale.md). The sync runs in a fresh
interpreter, without a terminal, which then reports what it imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "jobs-repo-example" / "jobs" / "vision"

_PROBE = """
import json, sys
from mxgitops.cli import main
code = 0
try:
    main(sys.argv[1:], prog_name="mxgitops")
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}))
"""


def imported(*args: str, home: Path) -> tuple[int, set[str], str]:
    """Exit code, the top-level packages imported, and what the command printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "MXGITOPS_"))}
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,  # stderr is a pipe, as in a pod
        text=True,
        env=env,
        cwd=home,
        check=False,
        timeout=120,
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], {m.split(".")[0] for m in last["loaded"]}, done.stdout + done.stderr


def test_a_sync_without_a_pushgateway_nor_a_terminal_imports_neither_client(
    tmp_path: Path,
) -> None:
    jobs = Path(shutil.copytree(EXAMPLE, tmp_path / "jobs"))
    code, loaded, printed = imported("sync", "--dry-run", "--repo", str(jobs), home=tmp_path)
    assert code == 0 and "2 to create" in printed, printed
    assert "mxgitops" in loaded  # the probe sees what was imported
    assert not {"prometheus_client", "rich"} & loaded, {"prometheus_client", "rich"} & loaded
