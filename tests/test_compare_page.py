"""The Compare page's markup, read as a browser reads it (tests/helpers/html_tree.py), on a diff made by hand whose
every figure is chosen here: what each table shows, which cells read faster or slower, signs, bars, the links and
the sections a capture with one rank, several ranks or no GPU work gets. Fast, no server, no browser;
tests/test_compare_rules.py checks the same page on a diff of hand-made traces."""

from __future__ import annotations

import dataclasses
import urllib.parse
from types import SimpleNamespace

import pytest

from lightx2v.trace_browser import compare
from lightx2v.trace_summary.diff import (
    ADDED,
    CHANGED,
    KERNELS_CHANGED,
    REMOVED,
    SAME,
    CpuOpChange,
    Delta,
    KernelChange,
    MemoryChange,
    OpKernels,
    RankDiff,
    RunDiff,
    SideInfo,
)
from lightx2v.trace_summary.model import FrameTree, StepStats
from lightx2v.trace_summary.noise import NOISE, RANGES, REAL, UNTESTED, Noise

from helpers.html_tree import body_rows, cells, header, parse

RED, GREEN, MID = "#c0392b", "#2e8b57", "#999"
BUSY, IDLE, CPU = "#3b6fb6", "#d6dde8", "#4f9a6a"
NO = Delta(None, None, None, None)


def D(base, new, delta=None, pct=None) -> Delta:
    return Delta(base, new, delta, pct)


def kernel(name, status, calls, time, ops=(), short=None) -> KernelChange:
    return KernelChange(name, short or name, status, calls, time, list(ops))


def cpu_op(name, status, calls, self_us) -> CpuOpChange:
    return CpuOpChange(name, status, calls, self_us, NO)


def op(name, label, status, calls, gpu, removed=(), added=(), launchers=((), ())) -> OpKernels:
    return OpKernels(name, label, status, calls, gpu, list(removed), list(added), list(launchers[0]),
                     list(launchers[1]))


WALL = Delta(1000.0, 1200.0, 200.0, 20.0)


def pair(rank=0, base_rank=0, new_rank=0, *, kernels=(), cpu_ops=(), memory=(), ops=(), steps=(3, 4),
         wall=WALL, verdict="pair verdict", worker="0") -> RankDiff:
    return RankDiff(
        rank=rank, base_rank=base_rank, new_rank=new_rank, base_worker=f"hb{worker}", new_worker=f"hn{worker}",
        base_file=f"b{worker}.json", new_file=f"n{worker}.json", base_steps=steps[0], new_steps=steps[1],
        step_wall_us=wall,
        gpu_busy_us=D(600.0, 500.0, -100.0, -100 / 6),
        gpu_idle_us=D(400.0, 700.0, 300.0, 75.0),
        kernel_calls_per_step=D(10.0, 10.0, 0.0, 0.0),
        kernel_time_per_step_us=D(None, 500.0),
        cpu_self_per_step_us=D(2000.0, 1500.0, -500.0, -25.0),
        kernels=list(kernels), cpu_ops=list(cpu_ops), memory=list(memory), ops=list(ops), verdict=verdict)


GPU_PAIR = dict(
    kernels=[
        kernel("void big_gemm<float>(int)", ADDED, D(None, 2.0), D(None, 300.0), ["attn / aten::mm", "aten::bmm"],
               short="big_gemm"),
        kernel("old_gemm", REMOVED, D(3.0, None), D(150.0, None), ["aten::mm"]),
        kernel("softmax", CHANGED, D(1.0, 1.0, 0.0, 0.0), D(100.0, 130.0, 30.0, 30.0)),
        kernel("gelu", SAME, D(1.5, 1.5, 0.0, 0.0), D(40.0, 40.0, 0.0, 0.0)),
        kernel("ghost", SAME, NO, NO),
    ],
    cpu_ops=[cpu_op("aten::linear", CHANGED, D(4.0, 4.0, 0.0, 0.0), D(80.0, 50.0, -30.0, -37.5)),
             cpu_op("aten::view", SAME, D(2.0, 2.0, 0.0, 0.0), D(10.0, 10.0, 0.0, 0.0))],
    memory=[MemoryChange("memcpy", D(0.0, 1.0, 1.0), D(0.0, 20.0, 20.0), NO),
            MemoryChange("memset", D(2.0, 2.0, 0.0, 0.0), D(10.0, 5.0, -5.0, -50.0), NO)],
    ops=[op("aten::mm", "attn", KERNELS_CHANGED, D(1.0, 1.0, 0.0, 0.0), D(250.0, 430.0, 180.0, 72.0),
            removed=["old_gemm", "old_fill"], added=["big_gemm", "splitk"],
            launchers=(["aten::mm"], ["aten::bmm", "aten::addmm"])),
         op("", "", ADDED, D(0.0, 1.0, 1.0), D(0.0, 20.0, 20.0), launchers=([], ["aten::copy_"])),
         op("aten::gelu", "", SAME, D(1.0, 1.0, 0.0, 0.0), D(40.0, 40.0, 0.0, 0.0),
            launchers=(["aten::gelu"], ["aten::gelu"]))],
)


def step(name: str, wall: float, busy: float | None) -> StepStats:
    return StepStats(name, None, 0.0, wall, wall, busy, None, None, None)


def summary(files, steps=(), frames=None):
    """What the page reads of a RunSummary: its ranks' files, steps and Python frames (None: no flame graph)."""
    tables = SimpleNamespace(frames=frames) if frames is not None else None
    return SimpleNamespace(ranks=[SimpleNamespace(file=f, steps=list(steps), tables=tables, gpu=None)
                                  for f in files])


def frame_tree(cpu_us: float) -> FrameTree:
    """One user frame whose aten::mm takes ``cpu_us`` of CPU op time a step."""
    return FrameTree(names=["", "model.py(3): forward"], kinds=["", "user"], parent=[-1, 0], calls=[0, 1],
                     gpu_us=[0.0, 0.0], kernel_us=[0.0, 0.0], cpu_us=[0.0, cpu_us], alloc_bytes=[0.0, 0.0],
                     ops={(1, "aten::mm"): [0.0, 0.0, cpu_us, 0.0]}, step_gpu_us={}, step_cpu_us={}, steps=1,
                     memory_device="")


def run_diff(ranks, *, base_ranks=1, new_ranks=1, straggler=(None, None), notes=(), unmatched=((), ()),
             pairing="by rank") -> RunDiff:
    return RunDiff(base=SideInfo("base-run", "/r/b", base_ranks, straggler[0], 1200.0),
                   new=SideInfo("new-run", "/r/n", new_ranks, straggler[1], 800.0),
                   verdict="NEW is 20% slower", step_wall_us=D(1200.0, 800.0, -400.0, -100 / 3), pairing=pairing,
                   ranks=list(ranks), unmatched_base=list(unmatched[0]), unmatched_new=list(unmatched[1]),
                   notes=list(notes))


def render(diff, base=None, new=None, *, base_path="b/", new_path="n/", back_url="/"):
    base = base or summary([r.base_file for r in diff.ranks])
    new = new or summary([r.new_file for r in diff.ranks])
    return parse(compare.render_compare(diff, base, new, base_path=base_path, new_path=new_path,
                                        overview_url=lambda p: f"/overview?path={p}", back_url=back_url))


@pytest.fixture
def one_pair():
    """One rank a side, with GPU work: every change table filled."""
    return render(run_diff([pair(**GPU_PAIR)]))


def texts(row) -> list[str]:
    return [c.text() for c in cells(row)]


def classes(row) -> list[set[str]]:
    return [c.classes for c in cells(row)]


def rows_by_first_cell(doc, table_cls):
    return {texts(r)[0]: r for r in body_rows(doc.find("table", cls=table_cls))}


# elements whose text is all in their children: text of their own would be stray characters on the page
STRUCTURE = {"body", "section", "table", "thead", "tbody", "tr", "svg", "form", "select"}


def stray_text(doc) -> list[tuple[str, str]]:
    found = [(n.tag, n.own_text().strip()) for n in doc.elements()
             if (n.tag in STRUCTURE or "kernels" in n.classes and n.tag == "td") and n.own_text().strip()]
    return found + [("td.pair", c.own_text().strip()) for c in doc.find_all("td", cls="pair") if c.own_text().strip()]


def query(href: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(href).query)


# --- head, navigation, sides ------------------------------------------------------------------------------------

def test_the_title_and_heading_name_both_sides_base_first(one_pair):
    assert one_pair.find("title").text() == "base-run → new-run · Compare · LightX2V"
    assert one_pair.find("h1").text() == "Compare base-run → new-run"


def test_the_run_verdict_is_the_first_paragraph_under_the_heading(one_pair):
    assert one_pair.find(id="verdict").text() == "NEW is 20% slower"
    assert "verdict" in one_pair.find(id="verdict").classes


def test_the_swap_link_opens_the_page_with_base_and_new_exchanged(one_pair):
    swap = one_pair.find("a", cls="swap")
    assert urllib.parse.urlsplit(swap.attrs["href"]).path == compare.ROUTE
    assert query(swap.attrs["href"]) == {"base": ["n/"], "new": ["b/"]}
    assert swap.text() == "swap BASE and NEW"


def test_the_nav_links_back_to_the_list_and_to_the_chooser():
    doc = render(run_diff([pair(**GPU_PAIR)]), back_url="/list?x=1")
    nav = doc.find("p", cls="nav")
    links = nav.find_all("a")
    assert [(a.attrs["href"], a.text()) for a in links[:2]] == [("/list?x=1", "← all traces"),
                                                                (compare.ROUTE, "choose other captures")]
    assert "choose" in links[1].classes


def test_each_side_links_to_its_overview_and_says_its_ranks_step_and_straggler():
    diff = run_diff([pair(**GPU_PAIR)], base_ranks=2, straggler=("rank 1 (hb1)", None))
    rows = body_rows(render(diff, base_path="", new_path="runs/n/").find("table", cls="sides"))
    assert [texts(r) for r in rows] == [["BASE", "./", "2 ranks, step 1.200 ms, straggler rank 1 (hb1)"],
                                        ["NEW", "runs/n/", "1 rank, step 0.800 ms"]]
    assert [r.find("a").attrs["href"] for r in rows] == ["/overview?path=", "/overview?path=runs/n/"]


def test_each_note_and_each_sides_unmatched_ranks_get_a_note_line():
    diff = run_diff([pair(**GPU_PAIR)], notes=["rank counts differ: BASE 3, NEW 1"],
                    unmatched=(["rank 1 (hb1)", "rank 2 (hb2)"], []))
    assert [p.text() for p in render(diff).find_all("p", cls="note")] == [
        "rank counts differ: BASE 3, NEW 1", "BASE only, not compared: rank 1 (hb1), rank 2 (hb2)"]
    diff = run_diff([pair(**GPU_PAIR)], unmatched=([], ["rank 4 (hn4)"]))
    assert [p.text() for p in render(diff).find_all("p", cls="note")] == ["NEW only, not compared: rank 4 (hn4)"]


def test_the_page_without_a_back_url_links_back_to_the_root():
    diff = run_diff([pair(**GPU_PAIR)])
    page = compare.render_compare(diff, summary(["b0.json"]), summary(["n0.json"]), base_path="b/", new_path="n/",
                                  overview_url=str)
    assert parse(page).find("p", cls="nav").find("a").attrs["href"] == "/"


def test_the_compare_page_carries_its_own_colours_for_faster_and_slower(one_pair):
    style = one_pair.find("style").text()
    rules = {sel.strip(): body for sel_list, body in (r.split("{", 1) for r in style.split("}") if "{" in r)
             for sel in sel_list.split(",")}
    assert "color: " + GREEN in rules[".faster"] and "color: " + RED in rules[".slower"]


def test_nothing_on_the_page_is_stray_text_outside_its_cells_and_headings(one_pair, two_pairs):
    steps = [step("S", 100.0, 50.0)]
    shown_all = render(run_diff([pair(**GPU_PAIR)]), summary(["b0.json"], steps), summary(["n0.json"], steps))
    for doc in (one_pair, two_pairs, shown_all):
        assert stray_text(doc) == []


def test_names_on_the_page_are_escaped():
    diff = run_diff([pair(**GPU_PAIR, verdict="a<b>")])
    diff.base.label = "<i>x</i>"
    doc = render(diff)
    assert doc.find("h1").text() == "Compare <i>x</i> → new-run"
    assert doc.find_all("i") == []


# --- ranks ------------------------------------------------------------------------------------------------------

@pytest.fixture
def two_pairs():
    """Two rank pairs: rank 0 slower by 0.2 ms, BASE's rank 3 paired with NEW's rank 1 by file order, 0.9 ms
    faster."""
    diff = run_diff([pair(**GPU_PAIR),
                     pair(rank=1, base_rank=3, new_rank=1, wall=D(1500.0, 600.0, -900.0, -60.0), worker="1",
                          verdict="second verdict")],
                    base_ranks=2, new_ranks=2, straggler=("rank 0 (hb0)", "rank 1 (hn1)"), pairing="by file order")
    return render(diff)


def test_a_capture_of_one_rank_a_side_has_no_ranks_section(one_pair):
    assert one_pair.find_all(id="ranks") == []


@pytest.mark.parametrize("base_files,new_files", [(["b0.json", "bx.json"], ["n0.json"]),
                                                  (["b0.json"], ["n0.json", "nx.json"])])
def test_a_side_of_several_ranks_gets_the_ranks_section_even_with_one_pair(base_files, new_files):
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(base_files), summary(new_files))
    assert len(body_rows(doc.find(id="ranks").find("table", cls="ranks"))) == 1


def test_the_ranks_section_says_how_ranks_were_paired(two_pairs):
    assert two_pairs.find(id="ranks").find("h2").text() == "Ranks, paired by file order (mean step wall)"


def test_the_ranks_table_has_one_row_per_pair_with_signed_coloured_changes(two_pairs):
    table = two_pairs.find(id="ranks").find("table", cls="ranks")
    assert header(table) == ["rank", "BASE worker", "NEW worker", "BASE ms", "NEW ms", "BASE over NEW", "Δ ms", "Δ %"]
    rows = body_rows(table)
    assert [[t for i, t in enumerate(texts(r)) if i != 5] for r in rows] == [
        ["0", "hb0", "hn0", "1.000", "1.200", "+0.200", "+20.0%"],
        ["3 → 1", "hb1", "hn1", "1.500", "0.600", "-0.900", "-60.0%"]]
    assert [classes(r)[6:] for r in rows] == [[{"num", "slower"}] * 2, [{"num", "faster"}] * 2]
    assert [classes(r)[3:5] for r in rows] == [[{"num"}] * 2] * 2


def test_the_ranks_bars_put_base_over_new_on_one_scale_the_longest_step(two_pairs):
    rows = body_rows(two_pairs.find(id="ranks").find("table", cls="ranks"))
    # the longest: BASE's 1.5 ms of the second pair = the full 130 px
    assert [pair_bars(row) for row in rows] == [
        [("BASE 1.000 ms", [("86.7", IDLE)]), ("NEW 1.200 ms", [("104.0", BUSY)])],
        [("BASE 1.500 ms", [("130.0", IDLE)]), ("NEW 0.600 ms", [("52.0", BUSY)])]]
    assert {svg.attrs["width"] for row in rows for svg in cells(row)[5].find_all("svg")} == {"130"}


def pair_bars(row):
    return [(svg.attrs["aria-label"], [(r.attrs["width"], r.attrs["fill"]) for r in svg.find_all("rect")])
            for svg in cells(row)[5].find_all("svg")]


def test_the_ranks_bars_scale_to_the_longest_step_wall_however_short_and_a_missing_one_has_no_bar():
    diff = run_diff([pair(**GPU_PAIR, wall=D(None, 0.5)), pair(1, 1, 1, wall=D(0.25, None), worker="1")],
                    base_ranks=2, new_ranks=2)
    rows = body_rows(render(diff).find("table", cls="ranks"))
    assert [pair_bars(row) for row in rows] == [[("BASE – ms", []), ("NEW 0.001 ms", [("130.0", BUSY)])],
                                                [("BASE 0.000 ms", [("65.0", IDLE)]), ("NEW – ms", [])]]


def test_a_run_diff_without_rank_pairs_says_so_in_the_ranks_section():
    doc = render(run_diff([], base_ranks=2, new_ranks=2), summary(["b0.json", "b1.json"]), summary(["n0.json"]))
    section = doc.find(id="ranks")
    assert section.find_all("table") == [] and section.find("p", cls="none").text() == "no rank pairs"
    assert doc.find_all("section", cls="rank-pair") == []


@pytest.mark.parametrize("base_rank,new_rank,rank,shown", [(None, None, None, "–"), (None, 2, 2, "– → 2"),
                                                           (5, None, 5, "5 → –"), (2, 2, 2, "2")])
def test_a_rank_not_recorded_reads_as_a_dash(base_rank, new_rank, rank, shown):
    diff = run_diff([pair(rank, base_rank, new_rank, **GPU_PAIR), pair(9, 9, 9, worker="9")], base_ranks=2,
                    new_ranks=2)
    assert texts(body_rows(render(diff).find("table", cls="ranks"))[0])[0] == shown


def test_each_sides_straggler_is_named_under_the_ranks_table(two_pairs):
    lines = two_pairs.find(id="ranks").find_all("p", cls="straggler-line")
    assert [(p.text(), p.find("strong").text()) for p in lines] == [
        ("BASE straggler: rank 0 (hb0)", "rank 0 (hb0)"), ("NEW straggler: rank 1 (hn1)", "rank 1 (hn1)")]
    diff = run_diff([pair(**GPU_PAIR), pair(1, 1, 1, worker="1")], base_ranks=2, new_ranks=2,
                    straggler=(None, "rank 1 (hn1)"))
    assert [p.text() for p in render(diff).find_all("p", cls="straggler-line")] == ["NEW straggler: rank 1 (hn1)"]


def test_with_several_pairs_each_gets_its_heading_and_verdict(two_pairs):
    sections = two_pairs.find_all("section", cls="rank-pair")
    assert [s.id for s in sections] == ["pair-0", "pair-1"]
    assert [s.children_of("h2")[0].text() for s in sections] == ["Rank 0: hb0 → hn0",
                                                                 "Rank 3 (BASE) vs rank 1 (NEW): hb1 → hn1"]
    assert [[p.text() for p in s.children_of("p") if "verdict" in p.classes] for s in sections] == [
        ["pair verdict"], ["second verdict"]]


def test_a_pair_without_a_recorded_rank_is_named_by_its_worker_and_reads_rank_unknown():
    diff = run_diff([pair(None, None, None, **GPU_PAIR), pair(1, 1, 1, worker="1")], base_ranks=2, new_ranks=2)
    section = render(diff).find_all("section", cls="rank-pair")[0]
    assert section.id == "pair-hb0"
    assert section.children_of("h2")[0].text() == "Rank ?: hb0 → hn0"


def test_a_single_pair_has_no_heading_or_verdict_of_its_own(one_pair):
    section = one_pair.find("section", cls="rank-pair")
    assert section.children_of("h2") == []
    assert [p for p in section.children_of("p") if "verdict" in p.classes] == []
    assert len(one_pair.find_all(cls="verdict")) == 1


# --- a pair's figures and steps ---------------------------------------------------------------------------------

def test_the_figures_table_shows_each_mean_with_its_signed_change(one_pair):
    table = one_pair.find("table", cls="figures")
    assert header(table) == ["per step (mean)", "BASE", "NEW", "Δ", "Δ %"]
    assert [texts(r) for r in body_rows(table)] == [
        ["steps", "3", "4", "+1", "–"],
        ["step wall ms", "1.000", "1.200", "+0.200", "+20.0%"],
        ["GPU busy ms", "0.600", "0.500", "-0.100", "-16.7%"],
        ["GPU idle ms", "0.400", "0.700", "+0.300", "+75.0%"],
        ["kernel calls", "10", "10", "0", "+0.0%"],
        ["kernel time ms", "–", "0.500", "–", "–"],
        ["CPU self ms", "2.000", "1.500", "-0.500", "-25.0%"]]
    assert [cells(r)[0].tag for r in body_rows(table)] == ["th"] * 7


def test_a_figure_that_grew_reads_slower_one_that_shrank_faster_and_the_step_count_neither(one_pair):
    rows = body_rows(one_pair.find("table", cls="figures"))
    change = [classes(r)[3:] for r in rows]
    assert change == [[{"num"}] * 2, [{"num", "slower"}] * 2, [{"num", "faster"}] * 2, [{"num", "slower"}] * 2,
                      [{"num"}] * 2, [{"num"}] * 2, [{"num", "faster"}] * 2]
    assert [classes(r)[1:3] for r in rows] == [[{"num"}] * 2] * 7


def test_a_figure_without_a_change_reads_as_a_dash():
    rd = pair(**GPU_PAIR)
    rd.kernel_calls_per_step = D(None, 4.0)
    row = body_rows(render(run_diff([rd])).find("table", cls="figures"))[4]
    assert texts(row) == ["kernel calls", "–", "4", "–", "–"]


def test_fewer_steps_in_new_read_with_a_minus_sign_and_no_colour():
    doc = render(run_diff([pair(**GPU_PAIR, steps=(5, 2))]))
    row = body_rows(doc.find("table", cls="figures"))[0]
    assert texts(row)[1:4] == ["5", "2", "-3"]
    assert classes(row)[3] == {"num"}


def paired(doc):
    return [(r.attrs.get("class"), texts(r)[:3],
             [(x.attrs["width"], x.attrs["fill"]) for x in r.find_all("rect")]) for r in
            body_rows(doc.find("table", cls="paired-steps"))]


def test_the_step_bars_pair_each_base_step_over_the_new_one_on_one_scale():
    base = summary(["b0.json"], [step("S1", 1000.0, 600.0), step("S2", 520.0, 520.0)])
    new = summary(["n0.json"], [step("S1", 1040.0, 260.0), step("S2", 800.0, None), step("S3", 1300.0, 1400.0)])
    doc = render(run_diff([pair(**GPU_PAIR)]), base, new)
    # the longest step (1.3 ms) is the bar's full 260 px: 0.2 px a microsecond
    assert paired(doc) == [
        ("base-step", ["BASE", "S1", "1.000"], [("120.0", BUSY), ("80.0", IDLE)]),
        ("new-step", ["NEW", "S1", "1.040"], [("52.0", BUSY), ("156.0", IDLE)]),
        ("base-step", ["BASE", "S2", "0.520"], [("104.0", BUSY)]),  # all busy: no idle part
        ("new-step", ["NEW", "S2", "0.800"], [("160.0", CPU)]),  # no GPU recorded: the CPU step
        ("base-step", ["BASE", "–", "–"], []),  # BASE has no third step
        ("new-step", ["NEW", "S3", "1.300"], [("260.0", BUSY)]),  # busy beyond the wall: no idle, clipped
    ]
    assert header(doc.find("table", cls="paired-steps")) == ["", "step", "wall ms", ""]
    labels = [svg.attrs["aria-label"] for svg in doc.find("table", cls="paired-steps").find_all("svg")]
    assert labels == ["BASE S1: 1.000 ms", "NEW S1: 1.040 ms", "BASE S2: 0.520 ms", "NEW S2: 0.800 ms",
                      "NEW S3: 1.300 ms"]
    assert doc.find_all(cls="meta", tag="p") == []  # all steps shown


def test_steps_shorter_than_a_microsecond_still_fill_the_bar_scale():
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(["b0.json"], [step("S", 0.5, None)]),
                 summary(["n0.json"], [step("S", 0.25, None)]))
    assert [r[2] for r in paired(doc)] == [[("260.0", CPU)], [("130.0", CPU)]]


def test_the_step_bars_legend_names_each_colour_it_uses():
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(["b0.json"], [step("S", 1.0, 1.0)]),
                 summary(["n0.json"], [step("S", 1.0, 1.0)]))
    legend = doc.find("p", cls="legend")
    assert [(s.attrs["style"], s.text()) for s in legend.find_all("span")] == [
        (f"color:{BUSY}", "■"), (f"color:{IDLE}", "■"), (f"color:{CPU}", "■")]
    assert [c.strip() for c in legend.children if isinstance(c, str)] == [
        "GPU busy", "GPU idle", "CPU step (no GPU work recorded); one scale for both"]


def test_a_long_capture_shows_its_first_32_step_pairs_and_says_so():
    base = summary(["b0.json"], [step(f"S{i}", 100.0, 50.0) for i in range(40)])
    new = summary(["n0.json"], [step(f"S{i}", 100.0, 50.0) for i in range(33)])
    doc = render(run_diff([pair(**GPU_PAIR)]), base, new)
    rows = body_rows(doc.find("table", cls="paired-steps"))
    assert len(rows) == 64 and texts(rows[-1])[1] == "S31"
    assert doc.find("p", cls="meta").text() == "first 32 of 40 steps shown; the figures above are means over all."


def test_a_capture_of_exactly_32_steps_shows_them_all_without_the_note():
    steps = [step(f"S{i}", 100.0, 50.0) for i in range(32)]
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(["b0.json"], steps), summary(["n0.json"], steps))
    assert len(body_rows(doc.find("table", cls="paired-steps"))) == 64
    assert doc.find_all("p", cls="meta") == []


def test_a_pair_without_steps_on_either_side_says_so():
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(["b0.json"]), summary(["n0.json"]))
    headings = [h.text() for h in doc.find_all("h3")]
    assert headings[0] == "Steps, BASE over NEW"
    assert doc.find_all("table", cls="paired-steps") == []
    assert "no steps" in [p.text() for p in doc.find_all("p", cls="none")]


def test_the_step_bars_need_both_sides_summaries():
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(["other.json"], [step("S", 1.0, 1.0)]),
                 summary(["n0.json"], [step("S", 1.0, 1.0)]))
    assert doc.find_all("table", cls="paired-steps") == []
    assert "Steps, BASE over NEW" not in [h.text() for h in doc.find_all("h3")]


def test_with_python_frames_on_both_sides_the_pair_shows_where_in_the_code_new_differs():
    doc = render(run_diff([pair(**GPU_PAIR)]), summary(["b0.json"], frames=frame_tree(100.0)),
                 summary(["n0.json"], frames=frame_tree(300.0)))
    flame = doc.find("section", cls="rank-pair").find("section", cls="flame-diff")
    # its root box: NEW's 0.3 ms of CPU op time against BASE's 0.1 ms
    assert flame.find("title").text().startswith("all: NEW 0.300 ms, BASE 0.100 ms")


@pytest.mark.parametrize("side", ["base", "new"])
def test_with_python_frames_on_one_side_only_there_is_no_flame_graph(side):
    frames = {side: summary([f"{side[0]}0.json"], frames=frame_tree(100.0))}
    doc = render(run_diff([pair(**GPU_PAIR)]), frames.get("base"), frames.get("new"))
    assert doc.find_all("section", cls="flame-diff") == []


# --- change tables ----------------------------------------------------------------------------------------------

def test_a_pair_with_gpu_work_shows_its_change_tables_in_order(one_pair):
    section = one_pair.find("section", cls="rank-pair")
    assert [h.text() for h in section.find_all("h3")] == [
        "Steps, BASE over NEW", "Top changes: ops by GPU time per step", "Kernels added and removed",
        "Kernels by change of time per step",
        "Memory copies and sets per step", "CPU ops by change of self time per step"]
    assert [t.attrs["class"] for t in section.find_all("table")] == [
        "figures", "ops", "added-removed", "kernels", "memory", "cpu-ops"]
    assert one_pair.find_all(id="no-gpu") == []


def test_a_pair_without_gpu_work_shows_its_cpu_ops_and_says_there_is_nothing_else():
    doc = render(run_diff([pair(cpu_ops=GPU_PAIR["cpu_ops"])]))
    section = doc.find("section", cls="rank-pair")
    assert [h.text() for h in section.find_all("h3")] == ["Steps, BASE over NEW",
                                                          "CPU ops by change of self time per step"]
    assert [t.attrs["class"] for t in section.find_all("table")] == ["figures", "cpu-ops"]
    no_gpu = doc.find("p", id="no-gpu")
    assert "none" in no_gpu.classes
    assert no_gpu.text() == "No GPU activity in either capture: no kernels, copies or sets to compare."


def test_a_pair_without_memory_copies_or_sets_says_so_under_their_heading():
    doc = render(run_diff([pair(kernels=GPU_PAIR["kernels"])]))
    section = doc.find("section", cls="rank-pair")
    assert section.find_all("table", cls="memory") == []
    assert "None on either side." in [p.text() for p in section.find_all("p", cls="none")]


@pytest.mark.parametrize("only", ["kernels", "memory", "ops"])
def test_any_gpu_change_shows_all_four_gpu_tables(only):
    doc = render(run_diff([pair(**{only: GPU_PAIR[only]})]))
    assert doc.find_all(id="no-gpu") == []
    assert len(doc.find("section", cls="rank-pair").find_all("h3")) == 6


def test_an_empty_change_table_is_a_sentence_instead():
    doc = render(run_diff([pair(memory=GPU_PAIR["memory"])]))
    section = doc.find("section", cls="rank-pair")
    assert [t.attrs["class"] for t in section.find_all("table")] == ["figures", "memory"]
    assert [p.text() for p in section.find_all("p", cls="none")] == [
        "no steps", "No GPU work attributed to ops on either side.", "None: both sides launch the same kernels.",
        "No kernels on either side.", "No CPU ops on either side."]


def test_the_kernels_table_shows_both_sides_and_the_change_against_zero_for_an_added_or_removed_kernel(one_pair):
    table = one_pair.find("table", cls="kernels")
    assert header(table) == ["kernel", "status", "calls BASE", "NEW", "ms BASE", "NEW", "", "Δ ms", "Δ %", "noise"]
    assert [[t for i, t in enumerate(texts(r)) if i != 6] for r in body_rows(table)] == [
        ["big_gemm", "added", "–", "2", "–", "0.300", "+0.300", "–", ""],  # BASE has none: no BASE figure
        ["old_gemm", "removed", "3", "–", "0.150", "–", "-0.150", "–", ""],  # no noise verdict made: none shown
        ["softmax", "changed", "1", "1", "0.100", "0.130", "+0.030", "+30.0%", ""],
        ["gelu", "same", "1.50", "1.50", "0.040", "0.040", "0.000", "+0.0%", ""],
        ["ghost", "same", "–", "–", "–", "–", "–", "–", ""]]


def test_a_kernel_that_takes_longer_reads_slower_shorter_faster_unchanged_neither(one_pair):
    rows = rows_by_first_cell(one_pair, "kernels")
    assert {name: classes(r)[7:9] for name, r in rows.items()} == {
        "big_gemm": [{"num", "slower"}] * 2, "old_gemm": [{"num", "faster"}] * 2,
        "softmax": [{"num", "slower"}] * 2, "gelu": [{"num"}] * 2, "ghost": [{"num"}] * 2}


def test_a_kernel_cell_shows_the_short_name_and_the_full_name_on_hover(one_pair):
    first = cells(body_rows(one_pair.find("table", cls="kernels"))[0])[0]
    assert (first.text(), first.attrs["title"], first.classes) == ("big_gemm", "void big_gemm<float>(int)", {"name"})


def bars(row_cell):
    svg = row_cell.find("svg")
    return svg.attrs["aria-label"], [(r.attrs["x"], r.attrs["width"], r.attrs["fill"]) for r in svg.find_all("rect")]


def test_the_change_bar_grows_from_the_middle_right_red_for_slower_left_green_for_faster(one_pair):
    rows = rows_by_first_cell(one_pair, "kernels")
    # the largest change of the table (+0.3 ms) is half the 120 px bar
    assert {name: bars(cells(r)[6]) for name, r in rows.items()} == {
        "big_gemm": ("+0.300 ms", [("59.5", "1", MID), ("60.0", "60.0", RED)]),
        "old_gemm": ("-0.150 ms", [("59.5", "1", MID), ("30.0", "30.0", GREEN)]),
        "softmax": ("+0.030 ms", [("59.5", "1", MID), ("60.0", "6.0", RED)]),
        "gelu": ("0.000 ms", [("59.5", "1", MID)]),
        "ghost": ("– ms", [("59.5", "1", MID)])}
    svg = cells(rows["gelu"])[6].find("svg")
    assert (svg.attrs["width"], svg.attrs["viewbox"], svg.attrs["class"]) == ("120", "0 0 120 12", "delta")


def test_a_change_of_one_microsecond_is_signed_coloured_and_drawn_on_its_side():
    doc = render(run_diff([pair(kernels=[kernel("k", CHANGED, D(1.0, 1.0), D(10.0, 11.0, 1.0, 10.0)),
                                         kernel("j", CHANGED, D(1.0, 1.0), D(10.0, 9.5, -0.5, -5.0))])]))
    rows = body_rows(doc.find("table", cls="kernels"))
    assert [(texts(r)[7], classes(r)[7]) for r in rows] == [("+0.001", {"num", "slower"}),
                                                            ("-0.001", {"num", "faster"})]
    assert [bars(cells(r)[6])[1][1:] for r in rows] == [[("60.0", "60.0", RED)], [("30.0", "30.0", GREEN)]]


def test_changes_under_a_microsecond_set_the_bar_scale_and_a_row_without_one_does_not():
    doc = render(run_diff([pair(cpu_ops=[cpu_op("a", CHANGED, D(1.0, 1.0), D(1.0, 0.5, -0.5, -50.0)),
                                         cpu_op("b", SAME, NO, NO)])]))
    rows = body_rows(doc.find("table", cls="cpu-ops"))
    assert [bars(cells(r)[6])[1][1:] for r in rows] == [[("0.0", "60.0", GREEN)], []]


def test_the_delta_bar_is_capped_at_half_its_width_and_empty_without_a_scale():
    def rects(svg):
        return [(r.attrs["x"], r.attrs["width"], r.attrs["fill"]) for r in parse(svg).find_all("rect")]

    assert rects(compare.delta_bar(-500.0, 100.0, "x", width=40)) == [("19.5", "1", MID), ("0.0", "20.0", GREEN)]
    assert rects(compare.delta_bar(500.0, 0.0, "x")) == [("59.5", "1", MID)]
    assert rects(compare.delta_bar(0.5, 0.5, "x")) == [("59.5", "1", MID), ("60.0", "60.0", RED)]
    assert parse(compare.delta_bar(-0.5, 1.0, "x")).find("svg").text() == ""
    assert parse(compare.delta_bar(1.0, 4.0, "a<b")).find("svg").attrs["aria-label"] == "a<b"


def test_the_added_and_removed_table_shows_news_figures_for_an_added_kernel_and_bases_for_a_removed_one(one_pair):
    table = one_pair.find("table", cls="added-removed")
    assert header(table) == ["", "kernel", "calls", "ms", "launched under"]
    rows = body_rows(table)
    assert [(r.attrs["class"], texts(r)) for r in rows] == [
        ("added", ["+ added", "big_gemm", "2", "0.300", "attn / aten::mm, aten::bmm"]),
        ("removed", ["− removed", "old_gemm", "3", "0.150", "aten::mm"])]
    assert cells(rows[0])[1].attrs["title"] == "void big_gemm<float>(int)"


def test_the_ops_table_names_each_op_with_its_label_and_the_kernels_it_changed(one_pair):
    table = one_pair.find("table", cls="ops")
    assert header(table) == ["label / op", "status", "kernels BASE", "NEW", "GPU ms BASE", "NEW", "", "Δ ms", "Δ %",
                             "noise", "kernels changed"]
    rows = body_rows(table)
    assert [[t for i, t in enumerate(texts(r)) if i not in (0, 6)] for r in rows] == [
        ["kernels changed", "1", "1", "0.250", "0.430", "+0.180", "+72.0%", "",
         "− old_gemm− old_fill+ big_gemm+ splitk"],
        ["added", "0", "1", "0.000", "0.020", "+0.020", "–", "", ""],
        ["same", "1", "1", "0.040", "0.040", "0.000", "+0.0%", "", ""]]
    names = [cells(r)[0] for r in rows]
    assert [n.own_text() for n in names] == ["attn / aten::mm", "(no launching op)", "aten::gelu"]
    kernels = cells(rows[0])[-1]
    assert [(d.attrs["class"], d.text()) for d in kernels.find_all("div")] == [
        ("removed", "− old_gemm"), ("removed", "− old_fill"), ("added", "+ big_gemm"), ("added", "+ splitk")]
    assert [classes(r)[7:9] for r in rows] == [[{"num", "slower"}] * 2, [{"num", "slower"}] * 2, [{"num"}] * 2]


def test_an_op_whose_launching_ops_changed_says_which_launched_its_kernels_before_and_after(one_pair):
    names = [cells(r)[0] for r in body_rows(one_pair.find("table", cls="ops"))]
    assert [[d.text() for d in n.find_all("div", cls="meta")] for n in names] == [
        ["launched by aten::mm → aten::bmm, aten::addmm"], ["launched by – → aten::copy_"], []]


@pytest.mark.parametrize("label,name,shown", [("attn", "", "attn"), ("", "aten::mm", "aten::mm")])
def test_an_op_with_only_a_label_or_only_an_op_shows_that_one(label, name, shown):
    doc = render(run_diff([pair(ops=[op(name, label, SAME, D(1.0, 1.0), D(1.0, 1.0))])]))
    assert cells(body_rows(doc.find("table", cls="ops"))[0])[0].own_text() == shown


def test_an_op_that_stopped_launching_anything_shows_a_dash_for_news_launchers():
    doc = render(run_diff([pair(ops=[op("aten::mm", "", REMOVED, D(1.0, 0.0), D(5.0, 0.0),
                                        launchers=(["aten::mm", "aten::bmm"], []))])]))
    name = cells(body_rows(doc.find("table", cls="ops"))[0])[0]
    assert name.find("div", cls="meta").text() == "launched by aten::mm, aten::bmm → –"


def test_the_memory_table_shows_calls_time_and_the_signed_change_of_each_kind(one_pair):
    table = one_pair.find("table", cls="memory")
    assert header(table) == ["kind", "calls BASE", "NEW", "ms BASE", "NEW", "Δ ms"]
    rows = body_rows(table)
    assert [texts(r) for r in rows] == [["memcpy", "0", "1", "0.000", "0.020", "+0.020"],
                                        ["memset", "2", "2", "0.010", "0.005", "-0.005"]]
    assert [classes(r)[-1] for r in rows] == [{"num", "slower"}, {"num", "faster"}]


def test_a_memory_kind_only_new_has_reads_as_added_time_against_zero():
    doc = render(run_diff([pair(memory=[MemoryChange("memset", D(None, 1.0), D(None, 8.0), NO),
                                        MemoryChange("memcpy", D(1.0, None), D(4.0, None), NO)])]))
    rows = body_rows(doc.find("table", cls="memory"))
    assert [(texts(r), classes(r)[-1]) for r in rows] == [
        (["memset", "–", "1", "–", "0.008", "+0.008"], {"num", "slower"}),
        (["memcpy", "1", "–", "0.004", "–", "-0.004"], {"num", "faster"})]


def test_the_cpu_ops_table_shows_self_time_changes(one_pair):
    table = one_pair.find("table", cls="cpu-ops")
    assert header(table) == ["op", "status", "calls BASE", "NEW", "self ms BASE", "NEW", "", "Δ ms", "Δ %", "noise"]
    rows = body_rows(table)
    assert [[t for i, t in enumerate(texts(r)) if i != 6] for r in rows] == [
        ["aten::linear", "changed", "4", "4", "0.080", "0.050", "-0.030", "-37.5%", ""],
        ["aten::view", "same", "2", "2", "0.010", "0.010", "0.000", "+0.0%", ""]]
    assert [classes(r)[7:9] for r in rows] == [[{"num", "faster"}] * 2, [{"num"}] * 2]
    assert bars(cells(rows[0])[6]) == ("-0.030 ms", [("59.5", "1", MID), ("0.0", "60.0", GREEN)])
    assert cells(rows[0])[0].classes == {"name"} and "title" not in cells(rows[0])[0].attrs


def numbered(n, make):
    return [make(i) for i in range(n)]


def test_each_change_table_shows_its_first_15_rows_and_the_added_and_removed_table_30():
    kernels = numbered(20, lambda i: kernel(f"k{i}", CHANGED, D(1.0, 1.0), D(10.0, 10.0 + i, i)))
    kernels += numbered(35, lambda i: kernel(f"a{i}", ADDED, D(None, 1.0), D(None, 1.0)))
    doc = render(run_diff([pair(
        kernels=kernels,
        cpu_ops=numbered(16, lambda i: cpu_op(f"c{i}", SAME, D(1.0, 1.0), D(1.0, 1.0))),
        ops=numbered(17, lambda i: op(f"o{i}", "", SAME, D(1.0, 1.0), D(1.0, 1.0))),
        memory=[MemoryChange("memcpy", D(1.0, 1.0), D(1.0, 1.0), NO)])]))
    shown = {cls: [texts(r)[0] for r in body_rows(doc.find("table", cls=cls))]
             for cls in ("kernels", "cpu-ops", "ops", "added-removed")}
    assert shown["kernels"] == [f"k{i}" for i in range(15)]
    assert shown["cpu-ops"] == [f"c{i}" for i in range(15)]
    assert shown["ops"] == [f"o{i}" for i in range(15)]
    assert len(shown["added-removed"]) == 30 and texts(body_rows(doc.find("table", cls="added-removed"))[-1])[1] \
        == "a29"


def test_the_bar_scale_is_the_largest_change_among_the_rows_shown():
    # the 16th kernel's change (1 ms) is not shown, so it does not set the scale: the largest shown (0.2 ms) does
    kernels = numbered(15, lambda i: kernel(f"k{i}", CHANGED, D(1.0, 1.0), D(100.0, 300.0, 200.0)))
    kernels.append(kernel("big", CHANGED, D(1.0, 1.0), D(0.0, 1000.0, 1000.0)))
    doc = render(run_diff([pair(kernels=kernels)]))
    assert bars(cells(body_rows(doc.find("table", cls="kernels"))[0])[6])[1][1] == ("60.0", "60.0", RED)


# --- the chooser and the trace list's link ----------------------------------------------------------------------

def sides(*paths: str) -> list[compare.Side]:
    return [compare.Side(p, f"title {p}") for p in paths]


def selects(doc) -> dict[str, tuple[list[tuple[str, str]], list[str]]]:
    return {s.attrs["name"]: ([(o.attrs["value"], o.text()) for o in s.find_all("option")],
                              [o.attrs["value"] for o in s.find_all("option") if "selected" in o.attrs])
            for s in doc.find_all("select")}


def test_the_chooser_offers_every_side_and_picks_the_newest_against_the_one_before():
    doc = parse(compare.render_chooser(sides("new/", "old/", "a.json")))
    options = [("new/", "title new/"), ("old/", "title old/"), ("a.json", "title a.json")]
    assert selects(doc) == {"base": (options, ["old/"]), "new": (options, ["new/"])}
    form = doc.find("form")
    assert (form.attrs["method"], form.attrs["action"]) == ("get", compare.ROUTE)
    assert [(lab.attrs["for"], lab.text()) for lab in form.find_all("label")] == [("base", "BASE"), ("new", "NEW")]
    assert [s.id for s in form.find_all("select")] == ["base", "new"]
    assert form.find("button").attrs["type"] == "submit"


def test_the_chooser_of_two_sides_picks_the_newest_as_new_and_the_other_as_base():
    doc = parse(compare.render_chooser(sides("new/", "old/")))
    assert {k: v[1] for k, v in selects(doc).items()} == {"base": ["old/"], "new": ["new/"]}
    assert doc.find("p", cls="nav").find("a").attrs["href"] == "/"


def test_the_chooser_has_no_stray_text():
    for page in (compare.render_chooser(sides("new/", "old/", "a.json")), compare.render_chooser([]),
                 compare.render_chooser(sides("a/"), message="bad")):
        assert stray_text(parse(page)) == []


def test_the_chooser_keeps_the_sides_it_was_given():
    doc = parse(compare.render_chooser(sides("new/", "old/", "a.json"), base="a.json", new="old/"))
    assert {k: v[1] for k, v in selects(doc).items()} == {"base": ["a.json"], "new": ["old/"]}


PLACEHOLDER = ("", "choose a capture")


@pytest.mark.parametrize("given", [("only/",), ("only/", "only/r0.json", "only/r1.json"), ("",)])
def test_with_one_capture_the_chooser_says_a_second_is_needed_and_selects_nothing(given):
    """A run and its own files (or two ranks of it) are one capture: never preselected as BASE and NEW."""
    doc = parse(compare.render_chooser(sides(*given)))
    options = [PLACEHOLDER] + [(p, f"title {p}") for p in given]
    assert selects(doc) == {"base": (options, [""]), "new": (options, [""])}
    assert all("required" in s.attrs for s in doc.find_all("select"))
    assert [o.attrs.get("disabled") for o in doc.find_all("option") if o.attrs["value"] == ""][0] == ""
    assert doc.find("p", id="second-capture").text() == (
        f"A second capture is needed to compare: title {given[0]} is the only one here whose traces are whole. "
        "Capture again, then reload this page.")


def test_the_chooser_preselects_the_newest_two_runs_whose_traces_are_whole_and_marks_damaged_sides():
    given = [compare.Side("newest/", "run newest/", "r0.pt.trace.json: empty file (0 bytes)"),
             compare.Side("new/", "run new/"), compare.Side("old/", "run old/"),
             compare.Side("newest/r0.pt.trace.json", "newest/r0.pt.trace.json", "empty file (0 bytes)")]
    doc = parse(compare.render_chooser(given))
    options, chosen = selects(doc)["base"]
    assert chosen == ["old/"] and selects(doc)["new"][1] == ["new/"]
    assert options == [("newest/", "run newest/ (damaged: r0.pt.trace.json: empty file (0 bytes))"),
                       ("new/", "run new/"), ("old/", "run old/"),
                       ("newest/r0.pt.trace.json", "newest/r0.pt.trace.json (damaged: empty file (0 bytes))")]
    assert doc.find_all("p", id="second-capture") == []


def test_with_no_run_whose_traces_are_whole_the_chooser_says_so():
    doc = parse(compare.render_chooser([compare.Side("a/", "run a/", "r0.json: empty file (0 bytes)"),
                                        compare.Side("b/", "run b/", "r0.json: empty file (0 bytes)")]))
    assert doc.find("p", id="second-capture").text().startswith(
        "A second capture is needed to compare: no run here has whole traces (the trace list says which file")
    assert selects(doc)["base"][1] == [""]


def test_a_run_folder_is_damaged_by_its_damaged_ranks_only():
    traces = [compare.Trace("r/rank0.pt.trace.json", 1, 3.0, "tensorboard", "empty file (0 bytes)"),
              compare.Trace("r/rank1.pt.trace.json", 1, 3.0, "tensorboard"),
              compare.Trace("r/other.json", 1, 3.0, "chrome", "cut off"),  # beside ranks: not one of them
              compare.Trace("s/other.json", 1, 2.0, "chrome", "cut off")]
    assert [(s.path, s.damaged) for s in compare.choices(traces)] == [
        ("r/", "rank0.pt.trace.json: empty file (0 bytes)"), ("s/", "other.json: cut off"),
        ("r/rank0.pt.trace.json", "empty file (0 bytes)"), ("r/rank1.pt.trace.json", ""),
        ("r/other.json", "cut off"), ("s/other.json", "cut off")]


def test_the_chooser_without_traces_says_so_and_has_no_form():
    doc = parse(compare.render_chooser([]))
    assert doc.find_all("form") == []
    assert doc.find("p", cls="none").text() == "No JSON traces under the root yet."


def test_the_chooser_shows_an_error_message_and_links_back():
    doc = parse(compare.render_chooser(sides("a/"), message="BASE <x> is no trace", back_url="/home"))
    assert doc.find("p", cls="error").text() == "BASE <x> is no trace"
    assert doc.find("p", cls="nav").find("a").attrs["href"] == "/home"
    assert doc.find("h1").text() == "Compare two captures"
    assert doc.find("title").text() == "Compare · Compare · LightX2V"
    assert parse(compare.render_chooser(sides("a/"))).find_all("p", cls="error") == []


def test_the_chooser_tells_the_terminals_equivalent():
    doc = parse(compare.render_chooser(sides("a/")))
    assert "python -m lightx2v.trace_summary --diff BASE NEW" in [c.text() for c in doc.find_all("code")]


def test_a_trace_in_a_run_with_a_previous_run_links_to_their_comparison():
    previous = {"runs/20261201-110000_infer": "runs/20261201-100000_infer"}
    link = parse(compare.previous_link(compare.Trace("runs/20261201-110000_infer/r0.pt.trace.json", 1, 1.0),
                                       previous)).find("a")
    assert query(link.attrs["href"]) == {"base": ["runs/20261201-100000_infer/"],
                                         "new": ["runs/20261201-110000_infer/"]}
    assert urllib.parse.urlsplit(link.attrs["href"]).path == compare.ROUTE
    assert link.text() == "Compare with previous infer"
    assert (link.attrs["class"], link.attrs["target"]) == ("compare-previous", "_blank")
    assert link.attrs["title"] == "runs/20261201-100000_infer/ → runs/20261201-110000_infer/"


@pytest.mark.parametrize("path", ["runs/20261201-100000_infer/r0.pt.trace.json",  # the first run of its label
                                  "runs/20261201-110000_infer/memory.pickle"])  # not a JSON trace
def test_a_trace_without_a_previous_run_or_a_file_that_is_no_trace_gets_no_link(path):
    previous = {"runs/20261201-110000_infer": "runs/20261201-100000_infer"}
    assert compare.previous_link(compare.Trace(path, 1, 1.0), previous) == ""


@pytest.mark.parametrize("folder,label", [("20261202_FIX/", "FIX"), ("20261202_X", "X")])
def test_a_label_ending_in_x_keeps_it_only_the_slash_is_dropped(folder, label):
    assert compare.run_label(folder) == label


def test_a_folders_newest_trace_sets_its_place_in_the_list():
    traces = [compare.Trace("a/x.pt.trace.json", 1, 5.0), compare.Trace("b/y.pt.trace.json", 1, 3.0),
              compare.Trace("a/z.pt.trace.json", 1, 1.0)]
    assert compare.run_folders(traces) == ["a", "b"]


def test_runs_of_one_time_are_ordered_by_their_number_not_as_text():
    traces = [compare.Trace(f"r/20261201-100000_infer{n}/w.pt.trace.json", 1, 1.0) for n in ("_10", "", "_2")]
    assert compare.previous_runs(traces) == {"r/20261201-100000_infer_2": "r/20261201-100000_infer",
                                             "r/20261201-100000_infer_10": "r/20261201-100000_infer_2"}


def test_a_run_folder_named_otherwise_links_without_a_label():
    link = parse(compare.previous_link(compare.Trace("b/r.pt.trace.json", 1, 1.0), {"b": "a"})).find("a")
    assert link.text() == "Compare with previous "


@pytest.mark.parametrize("verdict,expected", [(NOISE, {"num"}), (UNTESTED, {"num"}), (REAL, {"num", "slower"})])
def test_the_step_wall_change_is_coloured_only_beyond_noise(verdict, expected):
    """Within noise the verdict says "no change" or "inconclusive": a red step time would say "slower"."""
    judged = Noise(verdict=verdict, test=RANGES, p_value=None, effect_us=200.0, noise_pct=53.0)
    rd = dataclasses.replace(pair(), step_noise=judged)
    wall = body_rows(render(run_diff([rd])).find("table", cls="figures"))[1]
    assert classes(wall)[3:] == [expected, expected]
    second = dataclasses.replace(pair(1, 1, 1, worker="1"), step_noise=judged)
    rank_row = body_rows(render(run_diff([rd, second])).find("table", cls="ranks"))[0]
    assert classes(rank_row)[6:] == [expected, expected]


def judged(verdict: str) -> Noise:
    return Noise(verdict=verdict, test=RANGES, p_value=None, effect_us=30.0, noise_pct=4.0)


def test_the_step_walls_noise_verdict_is_said_under_the_figures_as_the_terminal_says_it():
    rd = dataclasses.replace(pair(), step_noise=Noise(REAL, RANGES, None, 200.0, 53.0))
    doc = render(run_diff([rd]))
    assert doc.find("p", cls="noise-line").text() == ("step wall: beyond noise (3 vs 4 steps, ranges apart, steps "
                                                      "vary ±53.0%)")
    assert render(run_diff([pair()])).find_all("p", cls="noise-line") == []  # no verdict made: no line


@pytest.mark.parametrize("table, make", [
    ("kernels", lambda n: dataclasses.replace(kernel("k", CHANGED, D(1.0, 1.0), D(100.0, 130.0, 30.0, 30.0)),
                                              noise=n)),
    ("cpu-ops", lambda n: dataclasses.replace(cpu_op("k", CHANGED, D(1.0, 1.0), D(100.0, 130.0, 30.0, 30.0)),
                                              noise=n)),
    ("ops", lambda n: dataclasses.replace(op("k", "", CHANGED, D(1.0, 1.0), D(100.0, 130.0, 30.0, 30.0)), noise=n)),
])
@pytest.mark.parametrize("verdict, word, row_class, coloured", [
    (REAL, "real", "real", True), (NOISE, "noise", "noise", False), (UNTESTED, "?", "untested", False)])
def test_a_change_row_says_the_terminals_noise_word_and_is_coloured_only_beyond_noise(table, make, verdict, word,
                                                                                      row_class, coloured):
    field = {"kernels": "kernels", "cpu-ops": "cpu_ops", "ops": "ops"}[table]
    doc = render(run_diff([pair(**{field: [make(judged(verdict))]})]))
    (row,) = body_rows(doc.find("table", cls=table))
    label = cells(row)[9]
    assert (row.attrs["class"], label.text(), label.classes) == (row_class, word, {"judged"})
    assert label.attrs["title"] == compare.JUDGED_TITLE[verdict]
    delta = {"num", "slower"} if coloured else {"num"}
    assert classes(row)[7:9] == [delta, delta]
    assert bars(cells(row)[6])[1][1][2] == (RED if coloured else compare.NOT_JUDGED_BAR)


def test_the_pages_style_greys_the_rows_within_noise():
    style = compare.render_chooser([]).split("<style>")[1].split("</style>")[0]
    assert "tr.noise td, tr.untested td, .noise-line { color: #777; }" in style


def same(rd, file: str | None = None):
    return dataclasses.replace(rd, new_file=file or rd.base_file)


def test_a_file_compared_with_itself_says_so_under_the_verdict():
    doc = render(run_diff([same(pair())]))
    note = doc.find("p", id="same-file")
    assert note.text() == ("BASE and NEW are the same file (b0.json): a trace compared with itself, so nothing can "
                           "differ. Choose two captures to compare.")
    paragraphs = doc.find_all("p")
    assert paragraphs[paragraphs.index(doc.find("p", id="verdict")) + 1] is note
    two = render(run_diff([same(pair()), same(pair(1, 1, 1, worker="1"))]))
    assert two.find("p", id="same-file").text().startswith("BASE and NEW are the same 2 files (b0.json, b1.json): ")


def test_a_file_and_another_path_to_it_are_the_same_file(tmp_path):
    (tmp_path / "t.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "t.json")
    rd = dataclasses.replace(pair(), base_file=str(tmp_path / "link.json"), new_file=str(tmp_path / "t.json"))
    assert render(run_diff([rd])).find("p", id="same-file").text().startswith(
        "BASE and NEW are the same file (link.json): ")


def test_some_pairs_of_one_file_say_which():
    doc = render(run_diff([same(pair()), pair(1, 1, 1, worker="1")]))
    assert doc.find("p", id="same-file").text() == (
        "1 of the 2 pairs compare a file with itself (b0.json): nothing in them can differ.")
    lone = render(run_diff([same(pair())], unmatched=((), ("rank 1 (hn1)",))))
    assert lone.find("p", id="same-file").text().startswith("1 of the 1 pairs compare a file with itself")
    assert render(run_diff([pair()])).find_all("p", id="same-file") == []
