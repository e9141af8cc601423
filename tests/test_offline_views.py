"""The views that work with no internet in the browser, as a person sees them: Debian's headless Chromium with
every host but 127.0.0.1 unresolvable, asserting on what is drawn (the viewer's model and DOM, the page's text).

Trace browser: Timeline (torch-tb-profiler's trace viewer + the local polyfill) and Overview (trace_summary as
HTML) of the H200 fixture, a chrome-format trace and a real 2-rank torchrun run; the page without the assets.
TensorBoard (our launcher): the plugin's Trace view renders; its chart views show the notice, not a spinner.
One screenshot of each view is kept under the pytest tmp dir (`screenshots/`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from lightx2v.assets import INSTALL_COMMAND, WEBCOMPONENTS

from conftest import H200_TRACE, REPO_ROOT, free_port, subprocess_env
from helpers.browser import chromium_with_offline_views, external_requests
from helpers.kineto import GPU_TID, Kineto
from helpers.procs import get_json, land, launcher, runs, trace_browser, wait_until

pytestmark = pytest.mark.browser

TOP_KERNEL = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
FIXTURE_STEP_MS = "22.241"  # ProfilerStep#4's wall time, as `python -m lightx2v.trace_summary` reports it
H200_FILE = "torch_profile/h200_run/rank0_h200.pt.trace.json.gz"
STRAGGLER = REPO_ROOT / "tests" / "programs" / "summary_straggler.py"


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = tmp_path_factory.getbasetemp() / "screenshots"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def driver():
    with chromium_with_offline_views() as browser:
        yield browser


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results root with the H200 fixture and a real 2-rank torchrun capture (rank 1 the straggler)."""
    root = tmp_path_factory.mktemp("offline") / "save_results"
    land(H200_TRACE, root / H200_FILE)
    job = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(STRAGGLER), str(root / "ranks")], capture_output=True, text=True, timeout=300,
                         cwd=root, env=subprocess_env(OMP_NUM_THREADS="1"))
    assert job.returncode == 0, job.stdout + job.stderr
    return root


@pytest.fixture(scope="module")
def browser_port(results):
    with trace_browser(results) as (_, port):
        yield port


def open_timeline(driver, port: int, link_href: str, timeout: float = 120) -> dict:
    driver.get(f"http://127.0.0.1:{port}/")
    link = driver.find_element("css selector", f'a.timeline[href="{link_href}"]')
    driver.get(link.get_attribute("href"))  # the same page the link opens in a new tab
    state = wait_until(lambda: driver.execute_script("return window.lightx2vTimeline && "
                                                     "['drawn', 'failed'].includes(window.lightx2vTimeline.state) && "
                                                     "window.lightx2vTimeline.state"), timeout, interval=0.2,
                       what="the timeline to be drawn")
    assert state == "drawn", driver.execute_script("return window.lightx2vTimeline.error")
    return driver.execute_script("""
        const model = window.lightx2vTimeline.model, threads = [];
        for (const p of model.getAllProcesses())
            for (const t of Object.values(p.threads))
                threads.push({process: p.userFriendlyName.trim(), thread: t.userFriendlyName.trim(),
                              slices: t.sliceGroup.slices.map(s => s.title)});
        const headings = Array.prototype.slice.call(document.querySelectorAll('tr-ui-b-heading'))
            .map(h => (h.heading || '').trim()).filter(h => h);
        return {threads: threads, headings: headings};""")


def test_timeline_of_the_h200_trace_draws_the_gpu_stream(driver, browser_port, shots):
    drawn = open_timeline(driver, browser_port, "/timeline/" + urllib.parse.quote(H200_FILE))
    (stream,) = [t for t in drawn["threads"] if t["process"].endswith("GPU 0") and t["thread"] == "stream 7"]
    assert any(name.startswith("nvjet_sm90_tst_256x128") for name in stream["slices"])
    assert "ProfilerStep#4" in stream["slices"]
    assert "stream 7" in drawn["headings"] and any(h.startswith("thread ") for h in drawn["headings"])
    assert external_requests(driver) == []
    driver.save_screenshot(str(shots / "trace_browser_timeline_h200.png"))


def test_timeline_of_a_plain_chrome_format_trace(driver, browser_port, shots):
    drawn = open_timeline(driver, browser_port, "/timeline/ranks/chrome/trace.rank1.json")
    assert any("aten::mm" in t["slices"] for t in drawn["threads"])
    driver.save_screenshot(str(shots / "trace_browser_timeline_chrome_rank1.png"))


def test_overview_of_the_h200_trace(driver, browser_port, shots):
    driver.get(f"http://127.0.0.1:{browser_port}/")
    driver.get(driver.find_element("css selector", f'a.overview[href="/overview/{H200_FILE}"]').get_attribute("href"))
    first_kernel = driver.find_element("css selector", "table.kernels tbody tr td.name").text
    assert first_kernel == TOP_KERNEL
    step = driver.find_element("css selector", "table.steps tbody tr").text
    assert step.startswith(f"ProfilerStep#4 {FIXTURE_STEP_MS}")
    body = driver.find_element("tag name", "body").text
    assert "Memory copies and sets" in body and "Memset (Device)" in body and "aten::addmm" in body
    assert "GPU idle gaps" in body and "NVIDIA H200" in body
    bars = driver.find_elements("css selector", "table.steps svg.bar rect")
    assert len(bars) == 2 and float(bars[0].get_attribute("width")) > 200  # 96.6% busy of a 220 px bar
    assert driver.find_elements("css selector", "script, link") == [] and external_requests(driver) == []
    driver.save_screenshot(str(shots / "trace_browser_overview_h200.png"))


def test_overview_of_a_two_rank_run_names_the_straggler(driver, browser_port, results, shots):
    # The run directory, not the hidden `.capture` folder (the profiler's remote-arming status) beside it.
    (run_dir,) = [p for p in (results / "ranks" / "tb").iterdir() if not p.name.startswith(".")]
    driver.get(f"http://127.0.0.1:{browser_port}/")
    href = f"/overview/ranks/tb/{urllib.parse.quote(run_dir.name)}/"
    driver.get(driver.find_element("css selector", f'#runs a.run-overview[href="{href}"]').get_attribute("href"))
    straggler = driver.find_element("css selector", ".straggler-line").text
    assert straggler.startswith("Straggler: rank 1 (")
    row = driver.find_element("css selector", "table.ranks tr.straggler").text
    assert row.startswith("1 ")
    assert len(driver.find_elements("css selector", "section.rank")) == 2
    driver.save_screenshot(str(shots / "trace_browser_overview_two_ranks.png"))


def test_without_the_assets_the_page_names_the_install_command(driver, tmp_path, shots):
    land(H200_TRACE, tmp_path / "save_results" / H200_FILE)  # its own root: one trace browser per root
    with trace_browser(tmp_path / "save_results", LIGHTX2V_ASSETS_DIR=str(tmp_path / "no-assets")) as (_, port):
        driver.get(f"http://127.0.0.1:{port}/")
        notice = driver.find_element("css selector", "#offline-notice").text
        assert INSTALL_COMMAND in notice and WEBCOMPONENTS.spec in notice
        assert driver.find_elements("css selector", "a.timeline") == []
        assert driver.find_elements("css selector", "span.timeline.disabled")
        assert driver.find_elements("css selector", "a.overview")  # the Overview needs no asset
        driver.save_screenshot(str(shots / "trace_browser_list_without_assets.png"))
        driver.get(f"http://127.0.0.1:{port}/timeline/{H200_FILE}")
        assert INSTALL_COMMAND in driver.find_element("tag name", "body").text


# --- TensorBoard ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tensorboard(results, browser_port):
    port = free_port()
    server = launcher(results / "torch_profile", port)
    try:
        wait_until(lambda: "h200_run" in runs(port), 90, what="the H200 run")
        yield port
    finally:
        server.stop()


def plugin_frame(driver, port: int):
    from selenium.webdriver.common.by import By

    driver.get(f"http://127.0.0.1:{port}/#pytorch_profiler")
    frame = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe"), 60, what="the plugin frame")[0]
    driver.switch_to.frame(frame)
    wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "[role=button][aria-haspopup=listbox]"), 60,
               what="the plugin's sidebar")


def choose_view(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    def views_select():
        selects = driver.find_elements(By.CSS_SELECTOR, "[role=button][aria-haspopup=listbox]")
        return len(selects) >= 2 and selects[1]  # Runs, Views, Workers

    def click(find) -> bool:  # the plugin's React UI may replace an element between finding and clicking it
        element = find()
        if element:
            element.click()  # a replaced element raises StaleElementReferenceException: wait_until looks again
        return bool(element)

    def chosen() -> bool:  # the selector shows the view it holds: a click a re-render swallowed is made again
        select = views_select()
        if select and select.text.strip() == name:
            return True
        wait_until(lambda: click(views_select), 60, what="the Views selector")
        wait_until(lambda: click(lambda: next((o for o in driver.find_elements(By.CSS_SELECTOR, "[role=option]")
                                               if o.text == name), None)), 30, what=f"the {name} option")
        return False

    wait_until(chosen, 120, interval=1.0, what=f"the {name} view chosen")


def test_tensorboard_trace_view_renders_offline(driver, tensorboard, shots):
    from selenium.webdriver.common.by import By

    plugin_frame(driver, tensorboard)
    choose_view(driver, "Trace")
    inner = wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe[src*='trace_embedding.html']"), 60,
                       what="the Trace view's frame")[0]
    driver.switch_to.frame(inner)
    headings = wait_until(lambda: (h := driver.execute_script(
        "return Array.prototype.slice.call(document.querySelectorAll('tr-ui-b-heading'))"
        ".map(e => (e.heading || '').trim())")) and "stream 7" in h and h, 120, interval=0.3,
        what="the GPU stream's track in the Trace view")
    assert any(h.startswith("thread ") for h in headings)
    scripts = driver.execute_script("return Array.prototype.slice.call(document.scripts).map(s => s.src)")
    assert [s for s in scripts if s] == [f"http://127.0.0.1:{tensorboard}/data/plugin/pytorch_profiler/webcomponents.min.js"]
    driver.switch_to.default_content()
    driver.save_screenshot(str(shots / "tensorboard_trace_view.png"))


def test_tensorboard_opens_on_the_newest_run(driver, tmp_path):
    """Two runs whose name order is the reverse of their time order: the page selects the newest."""
    from selenium.webdriver.common.by import By

    logdir = tmp_path / "torch_profile"
    for name, mtime in (("a_older", 1_700_000_000), ("z_newest", 1_700_000_060)):
        land(H200_TRACE, logdir / name / "rank0_h200.pt.trace.json.gz")
        os.utime(logdir / name / "rank0_h200.pt.trace.json.gz", (mtime, mtime))
    port = free_port()
    server = launcher(logdir, port)
    try:
        wait_until(lambda: runs(port) == ["z_newest", "a_older"], 90, what="both runs, newest first")
        plugin_frame(driver, port)
        selected = wait_until(lambda: (text := driver.find_elements(
            By.CSS_SELECTOR, "[role=button][aria-haspopup=listbox]")[0].text.strip()) and text, 60,
            what="the Runs selector's choice")
        assert selected == "z_newest"
    finally:
        driver.switch_to.default_content()
        server.stop()


@pytest.mark.parametrize("view", ["Overview", "Operator", "GPU Kernel"])
def test_tensorboard_chart_views_show_the_notice_not_a_spinner(driver, tensorboard, browser_port, shots, view):
    from selenium.webdriver.common.by import By

    plugin_frame(driver, tensorboard)
    choose_view(driver, view)
    # The plugin's React views re-render their chart boxes (and the notice with them) while data arrives, so the
    # texts are read in one script call: an element found in one call may be gone by the next.
    read = """return [(document.getElementById('lightx2v-charts-banner') || {}).innerText || '',
                      Array.from(document.querySelectorAll('main .lightx2v-offline-notice')).map(n => n.innerText)]"""
    banner, notices = wait_until(lambda: (texts := driver.execute_script(read))[1] and texts, 60, interval=0.3,
                                 what=f"the notice in the {view} view's charts")
    assert "cannot reach www.gstatic.com" in banner and f"http://127.0.0.1:{browser_port}/" in banner
    assert "www.gstatic.com" in notices[0] and f"http://127.0.0.1:{browser_port}/" in notices[0]
    assert driver.find_elements(By.CSS_SELECTOR, "[role=progressbar]") == []
    driver.switch_to.default_content()
    driver.save_screenshot(str(shots / f"tensorboard_{view.lower().replace(' ', '_')}_view.png"))


def many_steps(path, steps: int) -> str:
    """A trace of `steps` ProfilerSteps, each with an op and its kernel (about 0.7 KB of JSON a step)."""
    k = Kineto()
    for n in range(1, steps + 1):
        start = 10_000.0 + n * 1000
        k.step(n, start, 1000)
        k.op("aten::mm", start + 100, [("kernel", "gemm", 300.0)])
        k._x("gpu_user_annotation", f"ProfilerStep#{n}", GPU_TID, start + 200, 300)
    return k.write(path)


def test_tensorboard_trace_view_past_its_limit_says_so_and_links_the_timeline(driver, results, browser_port, shots):
    """Past LIGHTX2V_TB_TRACE_VIEW_MAX_MB the Trace view shows our notice (the trace's size, the limit) with a link
    to this trace's Timeline in the trace browser serving the results folder, and that link opens it; the other
    views still have the whole trace."""
    from selenium.webdriver.common.by import By

    trace = Path(many_steps(results / "large_logdir" / "big" / "rank0_big.pt.trace.json", 2000))
    assert trace.stat().st_size > 10**6
    port = free_port()
    server = launcher(results / "large_logdir", port, LIGHTX2V_TB_TRACE_VIEW_MAX_MB="1")
    try:
        wait_until(lambda: "big" in runs(port), 90, what="the large run")
        plugin_frame(driver, port)
        choose_view(driver, "Trace")

        def notice():  # from the top each time: the plugin's React view may replace the Trace view's frame
            driver.switch_to.default_content()
            driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe"))
            driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe[src*='trace_embedding.html']"))
            return driver.execute_script("""const box = document.getElementById('lightx2v-trace-notice');
                return box && [box.innerText, box.querySelector('a').href];""")

        text, href = wait_until(notice, 60, interval=0.3, what="the notice in the Trace view")
        size_mb = f"{trace.stat().st_size / 1e6:,.0f} MB of JSON"
        assert size_mb in text and "(1 MB, LIGHTX2V_TB_TRACE_VIEW_MAX_MB)" in text, text
        assert href == f"http://127.0.0.1:{browser_port}/timeline/large_logdir/big/rank0_big.pt.trace.json"
        driver.switch_to.default_content()
        driver.save_screenshot(str(shots / "tensorboard_trace_view_past_its_limit.png"))
        overview = get_json(f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/overview?"
                            "run=big&worker=rank0_big&span=default")
        assert len(overview["steps"]["rows"]) >= 1999  # 0.4.3 may leave out the last step (kernels still running)
    finally:
        server.stop()
    driver.get(href)
    state = wait_until(lambda: driver.execute_script("return window.lightx2vTimeline && "
                                                     "['drawn', 'failed'].includes(window.lightx2vTimeline.state) && "
                                                     "window.lightx2vTimeline.state"), 120, interval=0.2,
                       what="the linked Timeline to be drawn")
    assert state == "drawn", driver.execute_script("return window.lightx2vTimeline.error")


def test_tensorboard_fixes_warn_once_when_the_plugin_pages_changed(tmp_path):
    """A plugin whose pages no longer load what the fixes replace: each reports it, one warning each."""
    script = f"""
import json, logging, pathlib, shutil, sys
logging.basicConfig(stream=sys.stderr, format='%(message)s')
from lightx2v.tensorboard import offline
static = pathlib.Path({str(tmp_path)!r})
shutil.copytree(offline.static_file('.'), static, dirs_exist_ok=True)
for name, tag in (('trace_embedding.html', offline.CDN_POLYFILL_TAG), ('index.html', offline.CHARTS_LOADER_TAG)):
    (static / name).write_text((static / name).read_text().replace(tag, '<script src="elsewhere.js"></script>'))
offline.static_file = lambda name: static / name
from lightx2v.tensorboard.patches import apply_fixes
print(json.dumps(apply_fixes()))
"""
    result = subprocess.run([sys.executable, "-c", script], env=subprocess_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert "cdnjs" in results["offline_trace"] and "Google Charts" in results["charts_notice"]
    warnings = [line for line in result.stderr.splitlines() if "not applied" in line]
    assert len(warnings) == 2 and {"'offline_trace'", "'charts_notice'"} == {w.split()[2] for w in warnings}
