"""Debian's headless Chromium through selenium + chromium-driver, as tests/test_browser_ui.py drives it."""

from __future__ import annotations

import contextlib
import shutil


@contextlib.contextmanager
def headless_chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and chromedriver, "needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--no-first-run",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(chromedriver), options=options)
    browser.set_page_load_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()
