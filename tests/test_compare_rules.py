"""The Compare page's rules on hand-made traces whose figures are worked out by hand, fast and without a browser:
which cells read slower (red) or faster (green), what an added or removed kernel's row shows, how run folders pair
with the previous run of their label. tests/test_trace_browser_compare.py and tests/test_compare_ui.py check the
page on the real H200 trace, served and in Chromium."""

from __future__ import annotations

import html.parser
import re
from pathlib import Path

import pytest
from test_diff_rules import one_rank

from lightx2v.trace_browser import compare
from lightx2v.trace_browser.files import Trace
from lightx2v.trace_summary import summarize_paths
from lightx2v.trace_summary.diff import compare_runs

RED, GREEN = "#c0392b", "#2e8b57"


class Tables(html.parser.HTMLParser):
    """Each ``<table class=X>``'s body rows as [(the cell's classes, its text)], classes as a browser reads them
    (the first ``class`` attribute only), and each cell's SVG fills."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[tuple[set[str], str]]]] = {}
        self.fills: dict[str, list[list[list[str]]]] = {}
        self._table: str | None = None
        self._cell: list | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        first_class = next((v for k, v in attrs if k == "class"), "") or ""
        if tag == "table":
            self._table = first_class
            self.tables[first_class], self.fills[first_class] = [], []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
            self.fills[self._table].append([])
        elif tag == "td" and self._table:
            self._cell = [set(first_class.split()), ""]
            self.fills[self._table][-1].append([])
        elif tag == "rect" and self._cell is not None:
            self.fills[self._table][-1][-1].append(dict(attrs)["fill"])

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[self._table][-1].append((self._cell[0], self._cell[1]))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data

    def rows(self, table: str) -> list[list[tuple[set[str], str]]]:
        return [r for r in self.tables[table] if r]  # the header row has th cells only


@pytest.fixture
def page(tmp_path: Path) -> Tables:
    """BASE: gemm_a 100 us + gelu 40 us a step; NEW: gemm_b 150 us + gelu + a 20 us memcpy (2 steps a side)."""
    base = summarize_paths([one_rank(tmp_path, "b", "gemm_a", 100.0)])[0]
    new = summarize_paths([one_rank(tmp_path, "n", "gemm_b", 150.0, copy=True)])[0]
    text = compare.render_compare(compare_runs(base, new), base, new, base_path="b/", new_path="n/",
                                  overview_url=lambda p: f"/overview/{p}")
    return Tables(text)


def test_a_slower_figure_reads_red_a_faster_one_green_and_no_change_neither(page):
    kernels = {row[0][1]: row for row in page.rows("kernels")}
    # Δ ms, Δ % and the noise verdict (two steps a side, each the same: ranges apart, or equal)
    assert kernels["gemm_b"][-3:] == [({"num", "slower"}, "+0.150"), ({"num", "slower"}, "–"), ({"judged"}, "real")]
    assert kernels["gemm_a"][-3:] == [({"num", "faster"}, "-0.100"), ({"num", "faster"}, "-100.0%"),
                                      ({"judged"}, "real")]
    assert kernels["gelu"][-3:] == [({"num"}, "0.000"), ({"num"}, "+0.0%"), ({"judged"}, "noise")]
    # a figures row: its name (a th cell), then BASE, NEW, delta, delta % (td cells)
    assert [[c for c, _ in r[2:]] for r in page.rows("figures")] == [
        [{"num"}, {"num"}],  # steps: a count, never coloured
        [{"num"}, {"num"}],  # step wall: no change
        [{"num", "slower"}, {"num", "slower"}],  # GPU busy +0.070
        [{"num", "faster"}, {"num", "faster"}],  # GPU idle -0.070
        [{"num"}, {"num"}],  # kernel calls: same
        [{"num", "slower"}, {"num", "slower"}],  # kernel time +0.050
        [{"num", "slower"}, {"num", "slower"}],  # CPU self +0.050
    ]
    assert [r[-1] for r in page.rows("memory")] == [({"num", "slower"}, "+0.020")]


def test_the_change_bars_grow_right_in_red_for_slower_and_left_in_green_for_faster(page):
    bars = {page.rows("kernels")[i][0][1]: page.fills["kernels"][i + 1][6] for i in range(3)}
    assert bars == {"gemm_b": ["#999", RED], "gemm_a": ["#999", GREEN], "gelu": ["#999"]}


@pytest.mark.parametrize("cls,colour", [("faster", GREEN), ("added", GREEN), ("slower", RED), ("removed", RED)])
def test_the_pages_own_style_colours_faster_green_and_slower_red(cls, colour):
    style = compare.render_chooser([]).split("<style>")[1].split("</style>")[0]
    rule = next(line for line in style.splitlines() if re.search(rf"(^|[ ,])\.{cls}\b[^{{]*{{", line))
    assert re.search(rf"\.{cls}\b[^{{]*{{ color: {colour}; }}", rule), rule


def test_an_added_kernels_row_shows_news_calls_and_time_and_a_removed_ones_bases(page):
    assert [[text for _, text in row] for row in page.rows("added-removed")] == [
        ["+ added", "gemm_b", "1", "0.150", "aten::mm"],
        ["− removed", "gemm_a", "1", "0.100", "aten::mm"],
    ]


def test_the_ops_table_lists_the_kernels_an_op_stopped_and_started_launching(page):
    ops = page.rows("ops")
    assert [(row[0][1], row[1][1], row[-1][1]) for row in ops] == [
        ("aten::mm", "kernels changed", "− gemm_a+ gemm_b"),
        ("aten::copy_launched by – → aten::copy_", "added", ""),
        ("aten::gelu", "same", ""),
    ]
    assert [text for _, text in ops[0][2:6]] == ["1", "1", "0.100", "0.150"]


def trace(path: str, mtime: float) -> Trace:
    return Trace(path=path, size=1, mtime=mtime)


def test_each_run_folder_pairs_with_the_previous_run_of_its_label_beside_it():
    traces = [trace("a/20261201-100000_infer/r0.pt.trace.json", 1.0),
              trace("a/20261201-110000_infer/r0.pt.trace.json", 2.0),
              trace("a/20261201-110000_infer_2/r0.pt.trace.json", 3.0),
              trace("a/20261201-120000_other/r0.pt.trace.json", 4.0),
              trace("b/20261201-130000_infer/r0.pt.trace.json", 5.0),
              trace("a/20261201-140000_infer_job77/r0.pt.trace.json", 6.0)]
    assert compare.previous_runs(traces) == {
        "a/20261201-110000_infer": "a/20261201-100000_infer",
        "a/20261201-110000_infer_2": "a/20261201-110000_infer",
        "a/20261201-140000_infer_job77": "a/20261201-110000_infer_2",
    }


@pytest.mark.parametrize("folder,label", [("20261202-044934_infer_main", "infer_main"), ("x/20261202_a_b_2/", "a_b"),
                                          ("20261202-044934_infer_job123", "infer"), ("notes", None),
                                          ("2026120-044934_x", None)])
def test_the_run_label_is_the_folder_name_after_its_time(folder, label):
    assert compare.run_label(folder) == label


def test_the_form_offers_run_folders_newest_first_then_each_json_trace():
    traces = [trace("old/a.pt.trace.json", 1.0), trace("new/b.pt.trace.json.gz", 2.0), trace("c.pt.trace.json", 0.5),
              trace("new/memory.pickle", 9.0)]
    assert [(s.path, s.title) for s in compare.choices(traces)] == [
        ("new/", "run new/"), ("old/", "run old/"), ("", "run ./"),
        ("old/a.pt.trace.json", "old/a.pt.trace.json"), ("new/b.pt.trace.json.gz", "new/b.pt.trace.json.gz"),
        ("c.pt.trace.json", "c.pt.trace.json")]
