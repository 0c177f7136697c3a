"""A job that fails on the real node (kubelet, containerd, runc; the real job
controller) is told once, with its exit code and its log's last lines, the mentions and
markup in its log inert; the syncs after tell nothing more.

The job is ``broken`` of the shared recorded run (``tests/helpers/recordedrun.py``),
whose five syncs each tell a loopback Slack of failed jobs: it fails in commit 1, and
at least two syncs follow the one that saw it fail (three once it fails before fit's
first epoch ends).
"""

from __future__ import annotations

import pytest

from tests.helpers.node import NS
from tests.helpers.recordedrun import BROKEN, BROKEN_EXIT, RecordedTraining

pytestmark = pytest.mark.timeout(600)  # the shared run may be made in this test's setup


def test_a_job_failing_on_the_real_node_is_told_once_with_its_exit_code_and_log(
    recorded_training: RecordedTraining,
) -> None:
    (told,) = recorded_training.told  # once, over every sync of the run
    assert told.path == "/slack"
    blocks = told.json["blocks"]
    assert blocks[0]["text"]["text"] == f"{NS}/{BROKEN} failed"
    assert f"*Exit code:* {BROKEN_EXIT}" in blocks[1]["text"]["text"]
    log = blocks[2]["text"]["text"]
    assert "Epoch[1] Validation-accuracy=0.52" in log
    assert "@\u2060channel &lt;!here&gt;" in log
    assert "&lt;script&gt;document.body.dataset.owned" in log
    assert "<!here>" not in log and "<script>" not in log
