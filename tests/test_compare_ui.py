"""The Compare page as a person reaches it, in Debian's headless Chromium with no internet: from the trace list's
"Compare with previous" link, and by choosing both sides in the form. One screenshot of each under the pytest
tmp dir (`screenshots/`)."""

from __future__ import annotations

import sys
import urllib.parse

import pytest

from conftest import free_port
from helpers.browser import chromium, external_requests
from helpers.compare_root import BASE_RUN, NEW_RUN, RANKS_BASE, RANKS_NEW, SWITCHED, make_compare_root
from helpers.procs import Server, answers, wait_until

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = make_compare_root(tmp_path_factory.mktemp("compare_ui"))
    shots = tmp_path_factory.getbasetemp() / "screenshots"
    shots.mkdir(exist_ok=True)
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                     "--host", "127.0.0.1"])
    try:
        wait_until(lambda: answers(port), 60, what="the trace browser")
        with chromium(offline=True) as driver:
            yield {"port": port, "driver": driver, "shots": shots}
    finally:
        server.stop()


def sides_of(url: str) -> tuple[str, str]:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    return query["base"][0], query["new"][0]


def test_the_list_s_compare_link_opens_the_page_offline(site):
    driver = site["driver"]
    driver.get(f"http://127.0.0.1:{site['port']}/")
    (link,) = [a for a in driver.find_elements("css selector", "a.compare-previous")
               if sides_of(a.get_attribute("href")) == (BASE_RUN + "/", NEW_RUN + "/")]
    assert link.text == "Compare with previous infer_main"
    driver.get(link.get_attribute("href"))  # the page the link opens in a new tab
    verdict = driver.find_element("css selector", "#verdict").text
    # attention -2.12 ms (the switched kernel takes half the time), the 192x192 GEMM +1.97 ms (1.5x slower)
    assert verdict.startswith("NEW is 0.7% faster per step") and "attn -2.12 ms, aten::linear +1.97 ms" in verdict
    added = driver.find_elements("css selector", "table.added-removed tr.added td.name")
    assert [td.get_attribute("title") for td in added] == [SWITCHED]
    first_op = driver.find_element("css selector", "table.ops tbody tr").text
    assert first_op.startswith("attn / aten::scaled_dot_product_attention") and "kernels changed" in first_op
    assert SWITCHED in first_op
    bars = driver.find_elements("css selector", "table.paired-steps svg.bar")
    assert len(bars) == 2  # one step: BASE's bar over NEW's
    assert driver.find_elements("css selector", "script, link") == [] and external_requests(driver) == []
    driver.save_screenshot(str(site["shots"] / "trace_browser_compare.png"))


def test_choosing_both_sides_in_the_form_opens_a_url_that_names_them(site):
    from selenium.webdriver.support.ui import Select

    driver = site["driver"]
    driver.get(f"http://127.0.0.1:{site['port']}/")
    driver.get(driver.find_element("css selector", "a#compare").get_attribute("href"))
    Select(driver.find_element("css selector", "select#base")).select_by_value(RANKS_BASE + "/")
    Select(driver.find_element("css selector", "select#new")).select_by_value(RANKS_NEW + "/")
    driver.find_element("css selector", "form button[type=submit]").click()
    wait_until(lambda: driver.find_elements("css selector", "#verdict"), 60, what="the Compare page")
    assert sides_of(driver.current_url) == (RANKS_BASE + "/", RANKS_NEW + "/")
    rows = driver.find_elements("css selector", "table.ranks tbody tr")
    assert [r.text.split()[0] for r in rows] == ["0", "1"]
    lines = [p.text for p in driver.find_elements("css selector", ".straggler-line")]
    assert any(line.startswith("NEW straggler: rank 1") for line in lines), lines
    assert len(driver.find_elements("css selector", "section.rank-pair")) == 2
    assert external_requests(driver) == []
    driver.save_screenshot(str(site["shots"] / "trace_browser_compare_two_ranks.png"))
