"""The Overview's "How far from the limit" section in Debian's headless Chromium with no internet: the roofline
chart of the shaped H200 copy (one dot per op and shape, the memory and bf16 roofs) and the ranked classes."""

from __future__ import annotations

import pytest

from lightx2v.trace_browser.overview import render_overview
from lightx2v.trace_summary.summarize import summarize_paths

from helpers.browser import chromium, external_requests
from helpers.shaped_h200 import FIXTURE, shaped_h200

pytestmark = pytest.mark.browser


def _page(path, out):
    page = out / "overview.html"
    page.write_text(render_overview(summarize_paths([str(path)])[0]), encoding="utf-8")
    return page


def test_roofline_chart_places_each_op_under_its_roof(tmp_path):
    page = _page(shaped_h200(tmp_path), tmp_path)
    with chromium(offline=True) as browser:
        browser.get(page.as_uri())
        chart = browser.execute_script("""
            const svg = document.querySelector('svg.roofline'), box = svg.getBoundingClientRect();
            const roof = document.querySelector('polyline.roof[data-roof="bf16"]');
            const flat = roof.points.getItem(2).y;  // the compute roof's height
            const dots = [...svg.querySelectorAll('circle.op')].map(c => {
                const r = c.getBoundingClientRect();
                return {cls: c.dataset.class, x: r.x + r.width / 2, y: r.y + r.height / 2,
                        cy: c.cy.baseVal.value, tip: c.querySelector('title').textContent};
            });
            return {box: [box.x, box.y, box.width, box.height], dots, flat,
                    roofs: [...svg.querySelectorAll('polyline.roof')].map(p => p.dataset.roof),
                    headline: document.querySelector('p.headline').textContent,
                    classes: [...document.querySelectorAll('table.classes tbody tr td:first-child')]
                             .map(td => td.textContent)};
        """)
        browser.save_screenshot(str(tmp_path / "roofline.png"))
        assert external_requests(browser) == []
    x, y, w, h = chart["box"]
    assert w == 660 and h == 300
    assert len(chart["dots"]) == 8 and all(x <= d["x"] <= x + w and y <= d["y"] <= y + h for d in chart["dots"])
    assert "bf16" in chart["roofs"] and "fp32 (vector)" in chart["roofs"]
    # every dot is below (a larger y than) the bf16 compute roof: nothing beats the peak
    assert all(d["cy"] > chart["flat"] for d in chart["dots"])
    gelu = next(d for d in chart["dots"] if "aten::gelu" in d["tip"])
    gemm = next(d for d in chart["dots"] if d["cls"] == "GEMM")
    assert gelu["x"] < gemm["x"] and gelu["y"] > gemm["y"]  # low intensity, low TFLOP/s: left and below
    assert "64.0% of its roofline" in gelu["tip"]
    assert chart["headline"].startswith("GEMM: 15.383 ms per step at 73% of its roofline")
    assert chart["classes"][:2] == ["GEMM", "attention"]


def test_without_shapes_the_section_says_how_to_record_them(tmp_path):
    page = _page(FIXTURE, tmp_path)
    with chromium(offline=True) as browser:
        browser.get(page.as_uri())
        found = browser.execute_script("""
            return {headline: document.querySelector('p.headline').textContent,
                    charts: document.querySelectorAll('svg.roofline').length,
                    rows: document.querySelectorAll('table.classes tbody tr').length};""")
    assert "record_shapes=True" in found["headline"] and "--record_shapes" in found["headline"]
    assert found["charts"] == 0 and found["rows"] == 5
