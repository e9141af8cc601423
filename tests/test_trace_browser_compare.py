"""The trace browser's Compare page over real HTTP: what it shows for a known pair, the chooser, the list's
"compare with previous" link, and the same path and Host refusals as every other route."""

from __future__ import annotations

import http.client
import re
import sys
import urllib.parse

import pytest

from lightx2v.trace_summary.diff import compare_runs
from lightx2v.trace_summary.summarize import summarize_paths

from conftest import free_port
from helpers.compare_root import (
    BASE_RUN,
    CPU_BASE,
    CPU_NEW,
    NEW_RUN,
    RANKS_BASE,
    RANKS_NEW,
    SDPA_KERNEL,
    SWITCHED,
    make_compare_root,
)
from helpers.procs import Server, http_get, wait_until


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    root = make_compare_root(tmp_path_factory.mktemp("compare"))
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                     "--host", "127.0.0.1"])
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200, 60, what="the browser")
        yield {"port": port, "root": root}
    finally:
        server.stop()


def get(browser, path: str, host: str | None = None) -> tuple[int, str]:
    """Send `path` byte for byte (no client-side normalisation), optionally with another Host header."""
    conn = http.client.HTTPConnection("127.0.0.1", browser["port"], timeout=60)
    conn.putrequest("GET", path, skip_host=host is not None)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    return response.status, body


def compare_path(base: str, new: str) -> str:
    return "/compare?" + urllib.parse.urlencode({"base": base, "new": new})


def text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_the_page_shows_the_verdict_the_kernel_switch_and_the_paired_steps(browser):
    status, page = get(browser, compare_path(BASE_RUN + "/", NEW_RUN + "/"))
    assert status == 200, page
    root = browser["root"]
    (base,), (new,) = summarize_paths([str(root / BASE_RUN)]), summarize_paths([str(root / NEW_RUN)])
    diff = compare_runs(base, new)
    verdict = re.search(r"<p class=verdict id=verdict>(.*?)</p>", page).group(1)
    assert verdict == diff.verdict.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    added_removed = page[page.index("<table class=added-removed>"):]
    added_removed = added_removed[:added_removed.index("</table>")]
    assert f"+ added</td><td class=name title=\"{SWITCHED}\"" in added_removed
    assert "− removed</td><td class=name title=\"" + SDPA_KERNEL in added_removed
    ops = page[page.index("<table class=ops>"):]
    first_op = ops[ops.index("<tbody>"):ops.index("</tr>", ops.index("<tbody>"))]
    # the top change is the SDPA op launching another kernel, not an unrelated add plus remove
    assert "attn / aten::scaled_dot_product_attention" in first_op
    assert "<td>kernels changed</td>" in first_op and f"+ {SWITCHED}" in first_op
    # paired bars: each step a BASE row then a NEW row, on one scale
    assert page.count("<tr class=base-step>") == page.count("<tr class=new-step>") == 1
    assert "scaled_dot_product" in text(page)


def test_the_page_loads_nothing_from_elsewhere(browser):
    status, page = get(browser, compare_path(BASE_RUN + "/", NEW_RUN + "/"))
    assert status == 200 and "<svg class=bar" in page and "<svg class=delta" in page  # the bars are inline SVG
    assert "<script" not in page and "<link" not in page and "@import" not in page and "url(" not in page
    assert re.findall(r'(?:href|src)="(?!/|#)[^"]*"', page) == []  # every link stays on this server


def test_files_or_runs_either_side_and_the_sides_can_be_swapped(browser):
    trace_b, trace_n = BASE_RUN + "/rank0_h200.pt.trace.json", NEW_RUN + "/rank0_h200.pt.trace.json"
    status, page = get(browser, compare_path(trace_b, NEW_RUN + "/"))
    assert status == 200
    swap = re.search(r'<a class=swap href="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(swap).query) == {"base": [NEW_RUN + "/"], "new": [trace_b]}
    status, swapped = get(browser, swap)
    assert status == 200 and "slower" in re.search(r"id=verdict>(.*?)</p>", swapped).group(1)
    assert get(browser, compare_path(trace_b, trace_n))[0] == 200


def test_two_rank_runs_get_one_row_per_rank_pair_and_name_the_straggler(browser):
    status, page = get(browser, compare_path(RANKS_BASE + "/", RANKS_NEW + "/"))
    assert status == 200, page
    ranks = page[page.index("<table class=ranks>"):]
    ranks = ranks[:ranks.index("</table>")]
    assert ranks.count("<tr><td>") == 2 and "<tr><td>0</td>" in ranks and "<tr><td>1</td>" in ranks
    assert page.count("<section class=rank-pair") == 2
    assert "NEW straggler: <strong>rank 1" in page


def test_cpu_only_captures_lead_with_their_cpu_ops(browser):
    status, page = get(browser, compare_path(CPU_BASE + "/", CPU_NEW + "/"))
    assert status == 200, page
    assert "<p class=none id=no-gpu>" in page and "<table class=ops>" not in page
    cpu = page[page.index("<table class=cpu-ops>"):]
    cpu = cpu[:cpu.index("</table>")]
    assert "<td class=name>aten::gelu_tanh</td><td>added</td>" in cpu
    assert "<td class=name>aten::gelu</td><td>removed</td>" in cpu
    assert "<svg class=bar" in page  # the paired CPU step bars


def test_without_sides_the_chooser_offers_runs_and_traces_newest_against_previous(browser):
    status, page = get(browser, "/compare")
    assert status == 200
    assert '<form method=get action="/compare">' in page
    for name in ("base", "new"):
        select = re.search(rf"<select name={name} id={name}>(.*?)</select>", page).group(1)
        values = re.findall(r'<option value="([^"]*)"', select)
        assert values[:4] == [RANKS_NEW + "/", RANKS_BASE + "/", NEW_RUN + "/", BASE_RUN + "/"]
        assert BASE_RUN + "/rank0_h200.pt.trace.json" in values
    assert re.search(r'<select name=base[^>]*>.*?<option value="([^"]*)" selected', page).group(1) == RANKS_BASE + "/"
    assert re.search(r'<select name=new[^>]*>.*?<option value="([^"]*)" selected', page).group(1) == RANKS_NEW + "/"


def test_the_list_links_each_run_to_the_previous_run_of_its_label(browser):
    _, page = get(browser, "/")
    links = [html.replace("&amp;", "&") for html in re.findall(r'<a class=compare-previous href="([^"]+)"', page)]
    queries = sorted(tuple(urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)[k][0] for k in ("base", "new"))
                     for u in links)
    # the newer infer_main run once, each rank file of the newer dit run; never the oldest of a label
    assert queries == [(CPU_BASE + "/", CPU_NEW + "/")] + [(RANKS_BASE + "/", RANKS_NEW + "/")] * 2 + [
        (BASE_RUN + "/", NEW_RUN + "/")]
    assert 'href="/compare"' in page


@pytest.mark.parametrize("query, status", [
    ({"base": "../secret.json", "new": NEW_RUN + "/"}, 403),
    ({"base": BASE_RUN + "/", "new": "torch_profile/../../secret.json"}, 403),
    ({"base": "/etc/passwd", "new": NEW_RUN + "/"}, 403),
    ({"base": "escape.json", "new": NEW_RUN + "/"}, 403),  # a link inside the root pointing out of it
    ({"base": "../", "new": NEW_RUN + "/"}, 403),
    ({"base": "notes.txt", "new": NEW_RUN + "/"}, 404),
    ({"base": "nope.json", "new": NEW_RUN + "/"}, 404),
    ({"base": "torch_profile/nope/", "new": NEW_RUN + "/"}, 404),
    ({"base": BASE_RUN + "/"}, 400),
])
def test_sides_are_checked_like_every_other_path(browser, query, status):
    assert get(browser, "/compare?" + urllib.parse.urlencode(query))[0] == status


def test_the_host_check_applies(browser):
    status, body = get(browser, compare_path(BASE_RUN + "/", NEW_RUN + "/"), host="evil.example:80")
    assert status == 403 and "evil.example" in body
