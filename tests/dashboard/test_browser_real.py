"""The dashboard in a real headless Chromium over jobs that ran on the real node.

The repository is the shared recorded run's (``tests/helpers/recordedrun.py``): ``fit``
trained twice with MXNet's ``Module.fit`` (two commits), ``loop`` once, ``broken``
failed after two epochs with hostile lines in its log, and Kueue kept ``waiting``
queued; every note was written by ``mxgitops sync`` from what the node did. The
expected values are read here from what the node printed (worker 0's logs, parsed by
this module), not from mxgitops' own parser.

``test_browser.py`` keeps the forged notes: it runs without a node, and judges what a
real run cannot make hostile (a failure message, a note's own fields).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.gitrepos.fixtures import isolate_git
from tests.helpers.browser import console_errors, fits_a_phone, phone, screenshot, visit
from tests.helpers.dashboard import serving
from tests.helpers.node import NS
from tests.helpers.recordedrun import (
    BROKEN,
    BROKEN_EPOCHS,
    BROKEN_EXIT,
    EPOCHS,
    FIT,
    FULL_QUEUE,
    HOSTILE_LINES,
    LOOP,
    WAITING,
    RecordedTraining,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]  # the shared run's setup

VALIDATION = re.compile(r"Epoch\[(\d+)\] Validation-accuracy=([0-9.]+)$", re.MULTILINE)


def validation_of(log: str) -> dict[int, float]:
    """Epoch (from 1) -> validation accuracy, as the log printed them."""
    return {int(epoch) + 1: float(value) for epoch, value in VALIDATION.findall(log)}


@pytest.fixture(scope="module")
def site(
    recorded_training: RecordedTraining, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The base URL of a dashboard over the recorded run's remote."""
    root = tmp_path_factory.mktemp("dashboard-real")
    (root / "home").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        isolate_git(patch, root / "home")
        with serving(recorded_training.remote, root / "cache") as (server, _):
            yield server.url


def test_the_jobs_page_shows_the_real_runs_states_and_progress(
    browser: Any, site: str, recorded_training: RecordedTraining
) -> None:
    visit(browser, site)
    rows = {
        row.get_attribute("data-job"): row
        for row in browser.find_elements("css selector", "tr.job")
    }
    shown = [
        (
            job,
            row.find_element("css selector", ".state").text,
            row.find_element("css selector", ".state").get_attribute("class"),
        )
        for job, row in rows.items()
    ]
    assert shown == [  # what needs attention first
        (f"{NS}/{BROKEN}", "Failed", "state failed"),
        (f"{NS}/{WAITING}", "Queued", "state waiting"),
        (f"{NS}/{FIT}", "Succeeded", "state succeeded"),
        (f"{NS}/{LOOP}", "Succeeded", "state succeeded"),
    ]
    bars = {
        job: row.find_element("css selector", "progress")
        for job, row in rows.items()
        if row.find_elements("css selector", "progress")
    }
    assert {job: float(bar.get_attribute("value")) for job, bar in bars.items()} == {
        f"{NS}/{BROKEN}": 100.0 * 2 / BROKEN_EPOCHS,  # two epochs printed, then it failed
        f"{NS}/{FIT}": 100.0,
        f"{NS}/{LOOP}": 100.0,
    }
    assert all(bar.is_displayed() and bar.size["width"] > 50 for bar in bars.values())
    fit = rows[f"{NS}/{FIT}"].text
    final = validation_of(recorded_training.fit_second.worker0_log)[EPOCHS]  # the latest run
    assert f"epoch {EPOCHS}/{EPOCHS}" in fit, fit
    assert f"validation-accuracy {final:.4g}" in fit, (fit, final)
    assert f"epoch 2/{BROKEN_EPOCHS}" in rows[f"{NS}/{BROKEN}"].text
    assert FULL_QUEUE in rows[f"{NS}/{WAITING}"].text
    assert console_errors(browser) == []
    screenshot(browser, "real-jobs")


def test_the_job_page_draws_each_run_at_the_values_worker_0_printed(
    browser: Any, site: str, recorded_training: RecordedTraining
) -> None:
    run = recorded_training
    visit(browser, f"{site}jobs/{NS}/{FIT}?metric=validation-accuracy")
    runs = browser.find_elements("css selector", "svg.chart g.run")
    assert [g.get_attribute("data-run") for g in runs] == [run.second[:7], run.first[:7]]
    ticks = [
        (float(t.get_attribute("y")), float(t.get_attribute("data-value")))
        for t in browser.find_elements("css selector", "svg.chart text.tick.y")
    ]
    (y0, v0), (y1, v1) = ticks[0], ticks[-1]
    for group, ended in zip(runs, (run.fit_second, run.fit_first), strict=True):
        printed = validation_of(ended.worker0_log)
        assert list(printed) == list(range(1, EPOCHS + 1)), ended.worker0_log
        circles = group.find_elements("css selector", "circle")
        assert len(circles) == len(printed)
        for circle, (epoch, value) in zip(circles, printed.items(), strict=True):
            assert int(circle.get_attribute("data-epoch")) == epoch
            assert float(circle.get_attribute("data-value")) == value
            # Where it is drawn says the same value, read against the value axis.
            drawn = v0 + (float(circle.get_attribute("cy")) - y0) * (v1 - v0) / (y1 - y0)
            assert drawn == pytest.approx(value, abs=abs(v1 - v0) / 200)
            assert circle.is_displayed()
    assert console_errors(browser) == []
    screenshot(browser, "real-job")


def test_the_failed_jobs_hostile_log_is_shown_as_text_and_nothing_runs(
    browser: Any, site: str
) -> None:
    visit(browser, f"{site}jobs/{NS}/{BROKEN}")
    log = browser.find_element("css selector", "pre.log").text
    for line in HOSTILE_LINES:
        assert line in log, (line, log)
    reason = browser.find_element("css selector", ".failure .reason").text
    assert f"WORKER 0 exited {BROKEN_EXIT}" in reason, reason
    assert browser.execute_script("return document.body.dataset.owned") is None
    assert browser.execute_script("return document.scripts.length") == 0
    assert browser.find_elements("css selector", "pre.log *") == []  # text, no markup
    assert browser.find_elements("css selector", "main a[href^=javascript]") == []
    assert console_errors(browser) == []
    screenshot(browser, "real-job-failed")


def test_the_queued_jobs_page_says_why_kueue_holds_it(
    browser: Any, site: str, recorded_training: RecordedTraining
) -> None:
    visit(browser, f"{site}jobs/{NS}/{WAITING}")
    assert browser.find_element("css selector", ".state").text == "Queued"
    waits = browser.find_element("css selector", "dd.waits").text
    assert recorded_training.waiting_said in waits, (waits, recorded_training.waiting_said)
    assert console_errors(browser) == []
    screenshot(browser, "real-job-queued")


def test_a_375_pixel_wide_phone_shows_each_page_of_the_real_run(
    browser: Any, site: str, recorded_training: RecordedTraining
) -> None:
    phone(browser, True)
    try:
        for name, path in (
            ("real-jobs-375", ""),
            ("real-job-375", f"jobs/{NS}/{FIT}"),
            ("real-job-failed-375", f"jobs/{NS}/{BROKEN}"),
            ("real-job-queued-375", f"jobs/{NS}/{WAITING}"),
            ("real-commit-375", f"commits/{recorded_training.first}"),
        ):
            visit(browser, site + path)
            fits_a_phone(browser, name)
    finally:
        phone(browser, False)
