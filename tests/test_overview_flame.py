"""Where in your code, drawn (``trace_browser.flame``), in Debian's headless Chromium with no internet: the Overview's
icicle graph of the H200 fixture (GPU and CPU views, switched without a script) and the Compare page's
differential graph against a copy with one GEMM slower and the attention kernel twice as fast.

The figures are the fixture's own, from its report (docs/trace_summary.md): 21.494 ms of GPU work in the step,
15.383 ms of it launched inside the ``nn.Linear`` modules (their GEMMs and cuBLAS's memsets), 4.418 ms of CPU op
self time.
"""

from __future__ import annotations

import pytest

from lightx2v.trace_browser.compare import render_compare
from lightx2v.trace_browser.overview import render_overview
from lightx2v.trace_summary import compare_runs
from lightx2v.trace_summary.summarize import summarize_paths

from helpers.browser import chromium, external_requests
from helpers.compare_root import fixture_doc, switched, write
from helpers.shaped_h200 import FIXTURE

pytestmark = pytest.mark.browser

BOXES = """
    const graph = document.querySelector(arguments[0]);
    const style = getComputedStyle(graph);
    const boxes = [...graph.querySelectorAll('g.box')].map(g => {
        const r = g.querySelector('rect').getBoundingClientRect();
        return {name: g.dataset.name, kind: g.dataset.kind, depth: +g.dataset.depth, x: r.x, w: r.width,
                h: r.height, fill: g.querySelector('rect').getAttribute('fill'),
                tip: g.querySelector('title').textContent};
    });
    return {shown: style.display !== 'none', boxes};
"""


def _width(boxes, prefix):
    return sum(b["w"] for b in boxes if b["name"].startswith(prefix))


def test_the_overview_draws_gpu_and_cpu_time_by_frame_offline(tmp_path):
    page = tmp_path / "overview.html"
    page.write_text(render_overview(summarize_paths([str(FIXTURE)])[0]), encoding="utf-8")
    with chromium(offline=True) as browser:
        browser.get(page.as_uri())
        gpu = browser.execute_script(BOXES, "section.flame div.g-gpu")
        cpu_before = browser.execute_script(BOXES, "section.flame div.g-cpu")
        browser.find_element("css selector", "section.flame label[for$='-cpu']").click()
        cpu = browser.execute_script(BOXES, "section.flame div.g-cpu")
        gpu_after = browser.execute_script(BOXES, "section.flame div.g-gpu")
        browser.save_screenshot(str(tmp_path / "flame.png"))
        assert external_requests(browser) == []
    assert gpu["shown"] and not cpu_before["shown"] and cpu["shown"] and not gpu_after["shown"]
    boxes = gpu["boxes"]
    root = boxes[0]
    assert root["name"] == "all" and "21.494 ms per step (100.0%)" in root["tip"] and root["w"] > 900
    # the Linear modules' boxes take their share of the width: 15.383 of 21.494 ms
    assert _width(boxes, "nn.Module: Linear_") / root["w"] == pytest.approx(15.383 / 21.494, abs=0.002)
    forwards = [b for b in boxes if b["name"] == "forward (gpu_anchor.py:21)"]
    assert len(forwards) == 12 and all(b["kind"] == "user" for b in forwards)
    # each box sits under its caller: children start inside their parent's span
    block0 = next(b for b in boxes if b["name"] == "nn.Module: Block_0")
    inside = [b for b in forwards if block0["x"] - 0.5 <= b["x"] < block0["x"] + block0["w"] - 0.5]
    assert len(inside) == 1 and inside[0]["depth"] == block0["depth"] + 1
    assert any(b["kind"] == "op" and b["name"] == "aten::scaled_dot_product_attention" for b in boxes)
    assert "4.418 ms per step (100.0%)" in cpu["boxes"][0]["tip"]
    assert not any("torch/" in b["name"] for b in boxes)  # folded


def test_the_compare_page_colours_the_slower_gemm_red_and_the_faster_attention_blue(tmp_path):
    write(tmp_path / "base" / "rank0_h200.pt.trace.json", fixture_doc(), 1.0)
    write(tmp_path / "new" / "rank0_h200.pt.trace.json", switched(fixture_doc()), 2.0)
    base, new = (summarize_paths([str(tmp_path / side)])[0] for side in ("base", "new"))
    page = tmp_path / "compare.html"
    page.write_text(render_compare(compare_runs(base, new), base, new, base_path="base", new_path="new",
                                   overview_url=lambda p: p), encoding="utf-8")
    with chromium(offline=True) as browser:
        browser.get(page.as_uri())
        found = browser.execute_script(BOXES, "section.flame-diff div.flame-graph")
        assert external_requests(browser) == []
    assert found["shown"]
    def tint(b):
        r, _, blue = (int(b["fill"][i:i + 2], 16) for i in (1, 3, 5))
        return "red" if r > blue + 20 else "blue" if blue > r + 20 else "grey"

    boxes = found["boxes"]
    # the 192x192 GEMM is the first Linear of each block (Linear_0, _4, ...): those 12 boxes are red
    red = {b["name"] for b in boxes if b["kind"] == "module" and tint(b) == "red"}
    assert red == {f"nn.Module: Linear_{4 * i}" for i in range(12)}
    sdpa = [b for b in boxes if b["name"] == "aten::scaled_dot_product_attention"]
    assert len(sdpa) == 12 and all(tint(b) == "blue" for b in sdpa)
    # half the attention kernel's 0.354 ms per block: the tip says NEW, BASE and the change
    assert all(b["tip"].endswith("ms per step (-0.177 ms)") or b["tip"].endswith("ms per step (-0.178 ms)")
               for b in sdpa)
    # a block: 0.164 ms slower GEMM, 0.177 ms faster attention, nearly grey; the whole model faster: blue
    assert {b["name"] for b in boxes if b["kind"] == "module" and tint(b) == "blue"} == {"nn.Module: Sequential_0"}
