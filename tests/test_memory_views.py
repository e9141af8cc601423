"""A capture with profile_memory=True as a person sees it, with no internet in the browser (Debian's headless
Chromium, every host but 127.0.0.1 unresolvable): TensorBoard's Memory view (our launcher) keeps its tables and
shows the notice where its Google-drawn curve would be; the trace browser's Overview draws the memory curve itself
(inline SVG: steps shaded, the peak marked), and says how to record one for a trace without memory events.

The capture is real: ``tests/programs/memory_capture.py`` through the drop-in on the CPU (4 MB, 8 MB, 2 MB per
call; the 4 MB freed before the 2 MB).
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse

import pytest
from test_offline_views import choose_view, plugin_frame

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.browser import chromium, external_requests
from helpers.procs import cpu_trace, http_get, land, launcher, runs, trace_browser, wait_until

pytestmark = pytest.mark.browser

PROGRAM = REPO_ROOT / "tests" / "programs" / "memory_capture.py"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory") / "save_results"
    run = subprocess.run([sys.executable, str(PROGRAM), str(root / "torch_profile")], capture_output=True, text=True,
                         timeout=300, cwd=root.parent, env=subprocess_env(LIGHTX2V_TORCH_PROFILE_REMOTE="0"))
    assert run.returncode == 0, run.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def browser_port(results):
    with trace_browser(results) as (_, port):
        yield port


@pytest.fixture(scope="module")
def driver():
    with chromium(offline=True) as browser:
        yield browser


def test_tensorboard_memory_view_keeps_its_tables_and_shows_the_notice_for_its_curve(driver, results, browser_port,
                                                                                     tmp_path):
    port = free_port()
    server = launcher(results / "torch_profile", port)
    try:
        wait_until(lambda: runs(port), 90, what="the memory run")
        plugin_frame(driver, port)
        choose_view(driver, "Memory")
        read = """return [(document.getElementById('lightx2v-charts-banner') || {}).innerText || '',
                          Array.from(document.querySelectorAll('main .lightx2v-offline-notice')).map(n => n.innerText),
                          (document.querySelector('main') || document.body).innerText]"""
        # the allocation table lists the 8 MB block (7812.5 KB) once the view has its data
        banner, notices, text = wait_until(lambda: (t := driver.execute_script(read))[1] and "7812.5" in t[2] and t,
                                           90, interval=0.3, what="the Memory view's notice and tables")
        assert "Memory View" in text and "3906.25" in text  # the 4 MB block too: the tables work offline
        assert "Operator, Kernel and Memory views need it" in banner
        assert f"http://127.0.0.1:{browser_port}/" in banner and "memory curve" in banner
        assert "www.gstatic.com" in notices[0] and f"http://127.0.0.1:{browser_port}/" in notices[0]
        assert driver.execute_script("return document.querySelectorAll('[role=progressbar]').length") == 0
        driver.switch_to.default_content()
        driver.save_screenshot(str(tmp_path / "tensorboard_memory_view.png"))
    finally:
        server.stop()


# --- the trace browser's Overview --------------------------------------------------------------------------

def overview_path(results) -> str:
    (trace,) = [p for p in (results / "torch_profile").rglob("*.pt.trace.json") if "memory_demo" in str(p)]
    return "/overview/" + urllib.parse.quote(trace.relative_to(results).as_posix())


def test_the_overview_page_draws_the_memory_curve_and_says_how_to_record_one(results, browser_port, tmp_path):
    status, _, body = http_get(f"http://127.0.0.1:{browser_port}{overview_path(results)}", timeout=60)
    assert status == 200
    page = body.decode()
    section = page[page.index("<h3>Device memory: cpu</h3>"):page.index("<h3>GPU kernels</h3>")]
    assert "peak 12.0 MB allocated in ProfilerStep#" in section  # 4 MB + 8 MB live together
    (svg,) = re.findall(r"<svg class=memory-curve .*?</svg>", section)
    assert len(re.findall(r"<rect class=step ", svg)) == 2  # active=2: two steps shaded
    assert svg.count("<polyline class=allocated ") == 1 and svg.count("<circle class=peak ") == 1
    assert "<script" not in page and "<link" not in page and "url(" not in page
    # a trace without memory events: the hint, no curve
    land(cpu_trace(tmp_path), results / "torch_profile" / "plain_run" / "rank0_plain.pt.trace.json")
    status, _, body = http_get(f"http://127.0.0.1:{browser_port}/overview/torch_profile/plain_run/"
                               "rank0_plain.pt.trace.json", timeout=60)
    plain = body.decode()
    assert status == 200 and "record them with profile_memory=True" in plain and "<svg class=memory-curve" not in plain


def test_the_memory_curve_renders_offline_in_chromium(driver, results, browser_port, tmp_path):
    driver.get(f"http://127.0.0.1:{browser_port}{overview_path(results)}")
    drawn = driver.execute_script("""
        const svg = document.querySelector('svg.memory-curve'), box = svg.getBoundingClientRect();
        const line = svg.querySelector('polyline.allocated'), peak = svg.querySelector('circle.peak');
        const ys = Array.from(line.points).map(p => p.y);
        return {width: box.width, height: box.height, points: ys.length, lowest_y: Math.min(...ys),
                peak_y: peak.cy.baseVal.value, line_width: line.getBBox().width,
                steps: svg.querySelectorAll('rect.step').length,
                label: svg.querySelector('text').textContent};""")
    assert drawn["width"] == 660 and drawn["height"] == 120 and drawn["steps"] == 2
    assert drawn["points"] >= 8 and drawn["line_width"] > 100
    assert drawn["peak_y"] == drawn["lowest_y"]  # the marker sits on the highest point of the curve
    assert drawn["label"] == "peak 12.0 MB"
    assert driver.find_elements("css selector", "script, link") == [] and external_requests(driver) == []
    driver.save_screenshot(str(tmp_path / "overview_memory_curve.png"))
