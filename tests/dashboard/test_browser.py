"""The dashboard in a real headless Chromium (Debian's, through Selenium): the jobs page's
states and progress bars, the job page's curve read back from the SVG, hostile text shown
as text with nothing run, no console errors, a 375-pixel-wide phone. Screenshots of each
page go to the CI artifacts directory (`tests/helpers/browser.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gitrepos.fixtures import isolate_git, new_git_remote
from tests.helpers.browser import console_errors, fits_a_phone, phone, screenshot, visit
from tests.helpers.dashboard import FIRST_RUN, SECOND_RUN, Commits, serving, three_jobs

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Commits]]:
    """The base URL of a dashboard over the three jobs, and their commits."""
    root = tmp_path_factory.mktemp("dashboard")
    (root / "home").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        isolate_git(patch, root / "home")
        remote = new_git_remote(root, "jobs", {"README.md": "jobs\n"})
        commits = three_jobs(remote)
        with serving(remote, root / "cache") as (server, _):
            yield server.url, commits


def test_the_jobs_page_shows_the_three_jobs_with_their_states_and_progress(
    browser: Any, site: tuple[str, Commits]
) -> None:
    base, _ = site
    visit(browser, base)
    rows = browser.find_elements("css selector", "tr.job")
    shown = [
        (
            row.get_attribute("data-job"),
            row.find_element("css selector", ".state").text,
            row.find_element("css selector", ".state").get_attribute("class"),
        )
        for row in rows
    ]
    assert shown == [
        ("default/broken", "Failed", "state failed"),
        ("default/waiting", "Queued", "state waiting"),
        ("default/mnist", "Succeeded", "state succeeded"),
    ]
    bars = {
        row.get_attribute("data-job"): row.find_element("css selector", "progress")
        for row in rows
        if row.find_elements("css selector", "progress")
    }
    assert {job: float(bar.get_attribute("value")) for job, bar in bars.items()} == {
        "default/broken": 33.3,
        "default/mnist": 100.0,
    }
    assert all(bar.is_displayed() and bar.size["width"] > 50 for bar in bars.values())
    mnist = rows[2].text
    assert "epoch 3/3" in mnist and "validation-accuracy 0.7422" in mnist
    assert console_errors(browser) == []
    screenshot(browser, "jobs")


def test_the_job_page_draws_one_point_per_recorded_epoch_at_the_recorded_values(
    browser: Any, site: tuple[str, Commits]
) -> None:
    base, commits = site
    visit(browser, f"{base}jobs/default/mnist?metric=validation-accuracy")
    runs = browser.find_elements("css selector", "svg.chart g.run")
    assert [g.get_attribute("data-run") for g in runs] == [commits.second[:7], commits.first[:7]]
    ticks = [
        (float(t.get_attribute("y")), float(t.get_attribute("data-value")))
        for t in browser.find_elements("css selector", "svg.chart text.tick.y")
    ]
    (y0, v0), (y1, v1) = ticks[0], ticks[-1]
    for group, record in zip(runs, (SECOND_RUN, FIRST_RUN), strict=True):
        expected = record.log.series["validation-accuracy"]
        circles = group.find_elements("css selector", "circle")
        assert len(circles) == len(expected) == 3
        for circle, (epoch, value) in zip(circles, expected.items(), strict=True):
            assert int(circle.get_attribute("data-epoch")) == epoch
            assert float(circle.get_attribute("data-value")) == value
            # Where it is drawn says the same value, read against the value axis.
            drawn = v0 + (float(circle.get_attribute("cy")) - y0) * (v1 - v0) / (y1 - y0)
            assert drawn == pytest.approx(value, abs=abs(v1 - v0) / 200)
            assert circle.is_displayed()
    # The metric is chosen from a list: another one drawn, without any script.
    select = browser.find_element("css selector", "section.curves select[name=metric]")
    select.find_element("css selector", "option[value=train-accuracy]").click()
    browser.find_element("css selector", "section.curves button").click()
    browser.find_element("css selector", "svg.chart[data-metric=train-accuracy]")
    assert console_errors(browser) == []
    screenshot(browser, "job")


def test_hostile_text_is_shown_as_text_and_nothing_runs(
    browser: Any, site: tuple[str, Commits]
) -> None:
    base, _ = site
    visit(browser, f"{base}jobs/default/broken")
    log = browser.find_element("css selector", "pre.log").text
    assert "<script>document.body.dataset.owned='yes'</script>" in log
    assert "**not bold**" in log and "# Not a heading" in log
    reason = browser.find_element("css selector", ".failure .reason").text
    assert "<script>document.title='owned'</script> **bold** [x](javascript:alert(1))" in reason
    assert browser.execute_script("return document.body.dataset.owned") is None
    assert browser.title != "owned"
    assert browser.execute_script("return document.scripts.length") == 0
    assert browser.find_elements("css selector", "main img, main a[href^=javascript]") == []
    assert console_errors(browser) == []
    screenshot(browser, "job-failed")


def test_the_commit_page_shows_its_sync(browser: Any, site: tuple[str, Commits]) -> None:
    base, commits = site
    visit(browser, f"{base}commits/{commits.second}")
    cells = [r.text for r in browser.find_elements("css selector", "table.plan tbody tr")]
    assert any("default/mnist" in c and "replace" in c for c in cells)
    assert any("default/waiting" in c and "create" in c for c in cells)
    browser.find_element("link text", "default/mnist").click()
    assert browser.current_url.endswith("/jobs/default/mnist")
    assert console_errors(browser) == []
    screenshot(browser, "commit")


def test_a_375_pixel_wide_phone_shows_every_page_without_sideways_scrolling(
    browser: Any, site: tuple[str, Commits]
) -> None:
    base, commits = site
    phone(browser, True)
    try:
        for name, path in (
            ("jobs-375", ""),
            ("job-375", "jobs/default/mnist"),
            ("job-failed-375", "jobs/default/broken"),
            ("commit-375", f"commits/{commits.second}"),
        ):
            visit(browser, base + path)
            fits_a_phone(browser, name)
        visit(browser, base)
        assert len(browser.find_elements("css selector", "tr.job")) == 3
    finally:
        phone(browser, False)
