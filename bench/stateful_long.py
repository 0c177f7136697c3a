"""The state machine of tests/e2e/test_statemachine.py for as long as you give it.

    python -m bench.stateful_long [MINUTES] [--stop-on-failure]

Runs the `long` profile (random seeds, 30 steps an example) in batches of 10 examples
until MINUTES (default 10) have passed, and prints after each batch how many examples
and syncs (one a step) ran. A violation prints its shrunk sequence (as Hypothesis prints it:
paste it into a `replay(...)` test in the module) and, with --stop-on-failure, ends the
run; without it the run goes on with new seeds. Not a test: nothing here asserts.
"""

from __future__ import annotations

import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from mxgitops.runtimes.registry import install_hash_shapes
from tests.e2e.test_statemachine import Counts, Machine
from tests.gitrepos.fixtures import isolate_git
from tests.helpers.statemachine import shifted_clock

BATCH = 10


def main(argv: list[str]) -> int:
    minutes = next((float(a) for a in argv if not a.startswith("--")), 10.0)
    stop_on_failure = "--stop-on-failure" in argv
    started = time.monotonic()
    deadline = started + minutes * 60
    failures = 0
    with (
        tempfile.TemporaryDirectory(prefix="mxgitops-stateful-") as root,
        pytest.MonkeyPatch.context() as patch,
        shifted_clock(patch) as clock,
    ):
        home = Path(root) / "git-home"
        home.mkdir()
        isolate_git(patch, home)
        Machine.root, Machine.clock, Machine.counts = Path(root), clock, Counts()
        profile = settings(settings.get_profile("long"), max_examples=BATCH)
        while time.monotonic() < deadline:
            try:
                run_state_machine_as_test(Machine, settings=profile)
            except Exception:  # a violation, shrunk: say it, and go on or stop
                failures += 1
                traceback.print_exc()
                if stop_on_failure:
                    break
            counts = Machine.counts
            elapsed = (time.monotonic() - started) / 60
            print(
                f"{elapsed:6.1f} min: {counts.examples} examples, {counts.syncs} syncs "
                f"(one a step), {failures} failures",
                flush=True,
            )
    return 1 if failures else 0


if __name__ == "__main__":
    install_hash_shapes()  # this script is an entry point: see the registry
    sys.exit(main(sys.argv[1:]))
