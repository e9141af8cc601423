"""What a person sees: Debian's headless Chromium (via selenium + chromedriver) renders the plugin's sidebar
with our run, and the trace browser's list. No internet here, so the plugin's Google Charts panel never
draws; the sidebar (runs, views, workers) does, inside the plugin's iframe."""

from __future__ import annotations

import os
import sys
import time

import pytest

from conftest import H200_TRACE, free_port
from helpers.browser import chromium
from helpers.procs import Server, answers, cpu_trace, land, launcher, runs, wait_until

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def driver():
    with chromium(offline=False) as browser:
        yield browser


def test_tensorboard_sidebar_shows_our_run(driver, tmp_path_factory):
    from selenium.webdriver.common.by import By

    logdir = tmp_path_factory.mktemp("ui") / "logdir"
    land(H200_TRACE, logdir / "h200_run" / "rank0_h200.pt.trace.json.gz")
    ours = logdir / "20261129-101500_infer_main" / "rank0_host.pt.trace.json"
    land(cpu_trace(tmp_path_factory.getbasetemp()), ours)
    os.utime(ours, (time.time() + 60, time.time() + 60))  # the capture just made: the newest run, listed first
    port = free_port()
    server = launcher(logdir, port)
    try:
        wait_until(lambda: len(runs(port)) == 2, 90, what="both runs")
        driver.get(f"http://127.0.0.1:{port}/#pytorch_profiler")
        frame = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe"), 30, what="the plugin iframe")[0]
        driver.switch_to.frame(frame)
        sidebar = wait_until(lambda: "rank0_host" in (text := driver.find_element(By.TAG_NAME, "body").text) and text,
                             60, interval=0.5, what="the sidebar's worker list")
        assert "Runs\n20261129-101500_infer_main" in sidebar
        assert "Views\nOverview" in sidebar and "Workers\nrank0_host" in sidebar
        driver.switch_to.default_content()
    finally:
        server.stop()


def test_trace_browser_page_lists_traces(driver, tmp_path):
    from selenium.webdriver.common.by import By

    root = tmp_path / "save_results"
    land(H200_TRACE, root / "torch_profile" / "run" / "rank0.pt.trace.json.gz")
    (root / "trace.json").write_text('{"traceEvents": []}')
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                     "--host", "127.0.0.1"])
    try:
        wait_until(lambda: answers(port), 30, what="the trace browser")
        driver.get(f"http://127.0.0.1:{port}/")
        rows = driver.find_elements(By.CSS_SELECTOR, "#traces tbody tr")
        assert [r.find_element(By.CSS_SELECTOR, "td.path").text for r in rows] == \
            ["trace.json", "torch_profile/run/rank0.pt.trace.json.gz"]
        buttons = driver.find_elements(By.CSS_SELECTOR, "button.open")
        assert [b.text for b in buttons] == ["Open in Perfetto"] * 2
        fetched = driver.execute_async_script(
            "const done = arguments[0];"
            "fetch(document.querySelector('a.download').getAttribute('href'))"
            ".then(r => r.arrayBuffer()).then(b => done(b.byteLength));")
        assert fetched == len('{"traceEvents": []}')
    finally:
        server.stop()
