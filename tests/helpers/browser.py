"""Debian's headless Chromium (selenium + chromedriver); by default with no internet: every host but 127.0.0.1
unresolvable, as on an air-gapped cluster or a network that blocks Google."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

from conftest import missing_tool

OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


@contextmanager
def chromium(offline: bool = True, width: int = 1400, height: int = 1000, extra_args: tuple[str, ...] = ()):
    try:
        from selenium import webdriver
    except ImportError:
        missing_tool("needs selenium (scripts/install_test_deps.sh)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver_path):
        missing_tool("needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)")
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--no-first-run",
                f"--window-size={width},{height}", *([OFFLINE] if offline else []), *extra_args):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(driver_path), options=options)
    browser.set_page_load_timeout(120)
    browser.set_script_timeout(120)
    try:
        yield browser
    finally:
        browser.quit()


@contextmanager
def chromium_with_offline_views():
    """Offline Chromium for the pages that load the offline views' polyfill: first an error that says how to install
    it when it is missing (a page without it would fail in a less telling way)."""
    from lightx2v.assets import INSTALL_COMMAND, WEBCOMPONENTS, find

    assert find(WEBCOMPONENTS), f"the offline views' polyfill is not installed: run `{INSTALL_COMMAND}`"
    with chromium(offline=True) as browser:
        yield browser


def external_requests(driver) -> list[str]:
    """URLs the current page (top frame) asked for from anywhere but this machine."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(u => !u.startsWith('http://127.0.0.1') && !u.startsWith('data:') && !u.startsWith('blob:'));")
