"""Damaged captures as a person meets them, in Debian's headless Chromium with no internet and the real trace
browser: the trace list marks a 0-byte trace and a cut `.gz` with why, the Compare form preselects the newest two
captures whose traces are whole (not the newest, damaged ones), the Timeline of a damaged file says in its step
bar what the server answered (422) instead of "indexing …"; with one capture, the form says a second one is
needed, and a file compared with itself says so. The checks themselves: tests/test_files_rules.py."""

from __future__ import annotations

import gzip
import os
import time
import urllib.parse
import zlib

import pytest

from helpers.browser import chromium_with_offline_views, external_requests
from helpers.kineto import Kineto
from helpers.procs import trace_browser, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OLD, NEW = "torch_profile/20261202-100000_infer", "torch_profile/20261202-110000_infer"
EMPTY = "torch_profile/20261202-120000_infer/rank0_h.pt.trace.json"  # 0 bytes
CUT = "torch_profile/20261202-130000_infer/rank0_h.pt.trace.json.gz"  # the newest: a gzip cut in half
ONE = "torch_profile/20261202-100000_infer"  # the one capture of the second root


def capture(path, mtime: float, gemm_us: float = 100.0) -> bytes:
    """A two-step kineto trace at `path`, modified at `mtime`; its bytes."""
    k = Kineto()
    for n in range(2):
        k.step(n + 1, n * 1000.0, 1000.0)
        k.op("aten::mm", n * 1000.0 + 10, [("kernel", "gemm", gemm_us)])
    k.write(path)
    os.utime(path, (mtime, mtime))
    return path.read_bytes()


@pytest.fixture(scope="module")
def driver():
    with chromium_with_offline_views() as browser:
        yield browser


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """Two whole captures, then two newer damaged ones: the port of a trace browser on them, and how many bytes of
    JSON the cut gzip holds."""
    root = tmp_path_factory.mktemp("damaged") / "save_results"
    now = time.time()
    doc = capture(root / OLD / "rank0_h.pt.trace.json", now - 400)
    capture(root / NEW / "rank0_h.pt.trace.json", now - 300, gemm_us=150.0)
    (root / EMPTY).parent.mkdir(parents=True)
    (root / EMPTY).write_bytes(b"")
    os.utime(root / EMPTY, (now - 200, now - 200))
    (root / CUT).parent.mkdir(parents=True)
    whole = gzip.compress(doc)
    (root / CUT).write_bytes(whole[:len(whole) // 2])
    os.utime(root / CUT, (now - 100, now - 100))
    with trace_browser(root) as (_, port):
        yield port, len(zlib.decompressobj(wbits=31).decompress(whole[:len(whole) // 2]))


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One capture only."""
    root = tmp_path_factory.mktemp("single") / "save_results"
    capture(root / ONE / "rank0_h.pt.trace.json", time.time())
    with trace_browser(root) as (_, port):
        yield port


def list_rows(driver) -> dict[str, str]:
    """{trace path: its damaged label ("" when none)} of the trace list."""
    return driver.execute_script("""
        const out = {};
        for (const row of document.querySelectorAll('#traces tbody tr')) {
            const cell = row.querySelector('td.path'), mark = cell.querySelector('span.damaged');
            out[cell.firstChild.textContent.trim()] = mark ? mark.textContent : '';
        }
        return out;""")


def chosen(driver) -> dict[str, str]:
    return driver.execute_script("return {base: document.getElementById('base').value, "
                                 "new: document.getElementById('new').value};")


def test_the_list_marks_the_damaged_files_with_why(driver, damaged):
    port, cut_json = damaged
    driver.get(f"http://127.0.0.1:{port}/")
    assert list_rows(driver) == {CUT: f"damaged: cut off: its gzip stream stops after {cut_json:,} bytes of JSON",
                                 EMPTY: "damaged: empty file (0 bytes)",
                                 NEW + "/rank0_h.pt.trace.json": "", OLD + "/rank0_h.pt.trace.json": ""}
    colour = driver.execute_script("return getComputedStyle(document.querySelector('span.damaged')).color;")
    assert colour == "rgb(192, 57, 43)"  # the pages' warning red
    assert external_requests(driver) == []


def test_the_compare_form_preselects_the_newest_two_whole_captures(driver, damaged):
    driver.get(f"http://127.0.0.1:{damaged[0]}/")
    driver.get(driver.find_element("css selector", "a#compare").get_attribute("href"))
    assert chosen(driver) == {"base": OLD + "/", "new": NEW + "/"}
    titles = driver.execute_script(
        "return [...document.getElementById('new').options].map((o) => o.textContent);")
    assert "run torch_profile/20261202-120000_infer/ (damaged: rank0_h.pt.trace.json: empty file (0 bytes))" in titles
    driver.find_element("css selector", "form button[type=submit]").click()
    wait_until(lambda: driver.find_elements("css selector", "#verdict"), 60, what="the Compare page")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(driver.current_url).query)
    assert query == {"base": [OLD + "/"], "new": [NEW + "/"]}
    assert "aten::mm +0.050 ms" in driver.find_element("css selector", "#verdict").text  # the GEMM, 100 -> 150 µs
    assert driver.find_elements("css selector", "#same-file") == []


@pytest.mark.parametrize("trace, said", [
    (EMPTY, "empty file, not a trace"),
    (CUT, "truncated gzip stream (the file was cut off while being written?)"),
])
def test_a_damaged_files_timeline_says_in_its_step_bar_what_went_wrong(driver, damaged, trace, said):
    driver.get(f"http://127.0.0.1:{damaged[0]}/timeline/{trace}")
    wait_until(lambda: driver.execute_script("return window.lightx2vTimeline.state") == "failed", 60,
               interval=0.2, what="the Timeline to fail")
    bar = driver.execute_script("return document.getElementById('step-name').textContent;")
    assert bar.startswith("not indexed: HTTP 422: ") and bar.endswith(said), bar
    assert "indexing" not in bar


def test_with_one_capture_the_form_says_a_second_is_needed_and_a_file_against_itself_says_so(driver, single):
    from selenium.webdriver.support.ui import Select

    driver.get(f"http://127.0.0.1:{single}/compare")
    note = driver.find_element("css selector", "#second-capture").text
    assert note.startswith(f"A second capture is needed to compare: run {ONE}/ is the only one here")
    assert chosen(driver) == {"base": "", "new": ""}  # the placeholder, which the form does not send
    driver.find_element("css selector", "form button[type=submit]").click()
    assert driver.current_url.endswith("/compare")  # nothing sent: both selects are required
    # what the form once preselected: the run against its own file
    Select(driver.find_element("css selector", "select#base")).select_by_value(ONE + "/")
    Select(driver.find_element("css selector", "select#new")).select_by_value(ONE + "/rank0_h.pt.trace.json")
    driver.find_element("css selector", "form button[type=submit]").click()
    same = wait_until(lambda: driver.find_elements("css selector", "#same-file"), 60, what="the same-file note")[0]
    assert same.text == ("BASE and NEW are the same file (rank0_h.pt.trace.json): a trace compared with itself, so "
                         "nothing can differ. Choose two captures to compare.")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(driver.current_url).query)
    assert query == {"base": [ONE + "/"], "new": [ONE + "/rank0_h.pt.trace.json"]}
