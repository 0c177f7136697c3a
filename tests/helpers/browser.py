"""A real headless Chromium driven by Selenium: Debian's `chromium` and `chromium-driver`,
which the session's host set-up installs (tests/builds/hostsetup.py). Nothing is
downloaded: the driver and the browser are named by path, and Selenium Manager is told
to stay offline.

Tests marked `browser` run in every `pytest` run. Where the browser is missing they are
skipped on a laptop run with `--backend double` (which installs nothing), saying how to
install it; under CI=true a missing browser fails them.

Screenshots go to `ARTIFACTS` (`$MXGITOPS_ARTIFACTS/dashboard`, default
`.ci-artifacts/dashboard` in the checkout), kept for CI's artifacts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("MXGITOPS_ARTIFACTS") or CHECKOUT / ".ci-artifacts") / "dashboard"
PHONE_WIDTH = 375


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives a real headless Chromium (Debian's chromium, chromium-driver)"
    )


def _missing() -> list[str]:
    return [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium at 1280x900 that keeps its console's messages."""
    missing = _missing()
    if missing:
        why = (
            f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver "
            "(a run without --backend double installs them)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"the dashboard's browser tests cannot be skipped in CI: {why}")
        pytest.skip(why)
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not fetch a browser
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    for flag in (
        "--headless=new",
        "--no-sandbox",  # as root, in CI
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=str(shutil.which("chromedriver")))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def phone(driver: Any, on: bool) -> None:
    """Show pages as a phone 375 CSS pixels wide does (`on`), or as the desktop again."""
    if on:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": PHONE_WIDTH, "height": 812, "deviceScaleFactor": 1, "mobile": True},
        )
    else:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The console's errors since the last call (the browser log is read, and emptied)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def screenshot(driver: Any, name: str) -> Path:
    """A PNG of the window as it shows the page, under ARTIFACTS."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot of {name}"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


def visit(driver: Any, url: str) -> None:
    """`url` open in `driver`, whole (its footer there), the console's earlier lines
    read away: `console_errors` after it says this page's alone."""
    console_errors(driver)
    driver.get(url)
    driver.find_element("css selector", "footer")


def fits_a_phone(driver: Any, name: str) -> None:
    """The page open in `driver` (set to `phone`) is no wider than the phone's window,
    its job links, charts and heading within it, without console errors; a screenshot
    of it kept as `name`."""
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert driver.execute_script("return window.innerWidth") == PHONE_WIDTH
    assert width <= PHONE_WIDTH, f"{name}: {width} px wide"
    for element in driver.find_elements("css selector", "tr.job a, svg.chart, h1"):
        box = element.rect
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE_WIDTH + 0.5, name
    assert console_errors(driver) == []
    screenshot(driver, name)
