"""Where in your code, drawn (lightx2v/trace_browser/flame.py), as pure logic on a frame tree made by hand, fast:
where each box lies and how wide (its share of the root's 1000 px), which boxes are too narrow to draw, the
differential colours (red slower, blue faster, stronger for larger changes), labels cut to fit, and which view
the Compare page's graph shows. tests/test_overview_flame.py checks the graphs on the H200 fixture in Chromium."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_compare_page import stray_text

from lightx2v.trace_browser import flame
from lightx2v.trace_summary.model import FrameTree

from helpers.html_tree import parse


def tree(own: dict[int, tuple[str, float, float]]) -> FrameTree:
    """root -> B (module, 0), root -> A (user, 1) -> C (user, 2): node -> (top-level op, GPU us, CPU us)."""
    names = ["", "nn.Module: Block_0", "model.py(10): forward", "model.py(20): attn"]
    return FrameTree(names=names, kinds=["", "module", "user", "user"], parent=[-1, 0, 0, 2],
                     calls=[0, 1, 1, 1], gpu_us=[0.0] * 4, kernel_us=[0.0] * 4, cpu_us=[0.0] * 4,
                     alloc_bytes=[0.0] * 4,
                     ops={(node, op): [gpu, 0.0, cpu, 0.0] for node, (op, gpu, cpu) in own.items()},
                     step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")


OWN = {1: ("aten::linear", 60.0, 600.0), 2: ("aten::mm", 10.0, 100.0), 3: ("aten::add", 30.0, 300.0)}


def boxes(t, column, min_px=flame.MIN_BOX_PX):
    found, hidden = flame.layout(t, column, min_px)
    return [(b.x, b.depth, b.width, b.name, b.kind, b.value, b.path) for b in found], hidden


def test_each_frames_box_spans_its_inclusive_share_under_its_caller_largest_first():
    got, hidden = boxes(tree(OWN), 2)  # CPU op time: 1000 us in all, 1 px a microsecond
    assert got == [
        (0.0, 0, 1000.0, "all", "root", 1000.0, ()),
        (0.0, 1, 600.0, "nn.Module: Block_0", "module", 600.0, ("nn.Module: Block_0",)),
        (0.0, 2, 600.0, "aten::linear", "op", 600.0, ("nn.Module: Block_0", "aten::linear")),
        (600.0, 1, 400.0, "forward (model.py:10)", "user", 400.0, ("forward (model.py:10)",)),
        (600.0, 2, 300.0, "attn (model.py:20)", "user", 300.0, ("forward (model.py:10)", "attn (model.py:20)")),
        (600.0, 3, 300.0, "aten::add", "op", 300.0, ("forward (model.py:10)", "attn (model.py:20)", "aten::add")),
        (900.0, 2, 100.0, "aten::mm", "op", 100.0, ("forward (model.py:10)", "aten::mm"))]
    assert hidden == 0


def test_the_gpu_view_uses_the_gpu_column_on_the_same_scale_of_1000_px():
    got, _ = boxes(tree(OWN), 0)  # 100 us of GPU time: 10 px a microsecond
    assert [(b[0], b[2], b[5]) for b in got[:2]] == [(0.0, 1000.0, 100.0), (0.0, 600.0, 60.0)]


def test_a_box_narrower_than_the_minimum_is_left_out_and_counted_its_space_kept():
    own = {1: ("aten::linear", 0.0, 999.6), 2: ("aten::mm", 0.0, 0.4)}  # 0.4 px: under half a pixel
    got, hidden = boxes(tree(own), 2)
    # A is left out, and with it what is under it (not looked at, not counted)
    assert [b[3] for b in got] == ["all", "nn.Module: Block_0", "aten::linear"] and hidden == 1
    got, hidden = boxes(tree(own), 2, min_px=0.0)
    assert [(b[3], b[0]) for b in got][-2:] == [("forward (model.py:10)", 999.6), ("aten::mm", 999.6)]
    assert hidden == 0


def test_a_box_of_exactly_the_minimum_width_is_drawn():
    own = {1: ("x", 0.0, 999.5), 2: ("y", 0.0, 0.5)}
    _, hidden = boxes(tree(own), 2)
    assert hidden == 0


def test_a_view_without_any_time_has_no_boxes():
    assert flame.layout(tree(OWN | {1: ("x", 0.0, 0.0)}), 1) == ([], 0)  # the kernel column: all zero


def test_an_op_row_without_a_name_is_no_op():
    got, _ = boxes(tree({1: ("", 0.0, 5.0)}), 2)
    assert got[-1][3] == "(no op)"


@pytest.mark.parametrize("delta,scale,colour", [
    (0.0, 10.0, "#ececec"),  # no change: grey
    (10.0, 10.0, "#d62728"), (20.0, 10.0, "#d62728"),  # the largest change (or more): full red
    (-10.0, 10.0, "#1f77b4"),  # full blue
    (5.0, 10.0, "#e18a8a"), (-5.0, 10.0, "#86b2d0"),  # half way from grey
    (5.0, 0.0, "#ececec"),  # no scale: no change anywhere
])
def test_the_differential_colour_runs_from_grey_to_red_for_slower_and_blue_for_faster(delta, scale, colour):
    assert flame._mix(delta, scale) == colour


def svg_texts(name: str, width: float) -> list[str]:
    box = flame.Box(10.0, 1, width, name, "user", 1.0, (name,))
    return [t.text() for t in parse(flame._svg([box], ["#fff"], ["tip"], "aria")).find_all("text")]


@pytest.mark.parametrize("width,shown", [(6.1 + 6.6 * 12, ["forward_pass"]),  # 12 characters fit
                                         (6.1 + 6.6 * 11, ["forward_pa…"]),
                                         (6.1 + 6.6 * 4, ["for…"]),
                                         (6.1 + 6.6 * 3.9, [])])  # under 4 characters: no label
def test_a_boxs_label_is_cut_to_fit_its_width_or_left_out(width, shown):
    assert svg_texts("forward_pass", width) == shown


def test_each_box_is_drawn_at_its_place_with_its_tip_and_the_graph_is_as_deep_as_its_boxes():
    found, _ = flame.layout(tree(OWN), 2)
    svg = parse(flame._svg(found, ["#111"] * len(found), [f"t{i}" for i in range(len(found))], "CPU"))
    root = svg.find("svg")
    assert (root.attrs["viewbox"], root.attrs["height"], root.attrs["aria-label"]) == ("0 0 1000 68", "68", "CPU")
    rects = [(r.attrs["x"], r.attrs["y"], r.attrs["width"], r.attrs["height"]) for r in svg.find_all("rect")]
    assert rects[4] == ("600.00", "34", "300.00", "16")
    assert [t.text() for t in svg.find_all("title")] == [f"t{i}" for i in range(7)]
    g = svg.find_all("g")[3]
    assert (g.attrs["data-name"], g.attrs["data-kind"], g.attrs["data-depth"], g.attrs["data-value"]) == (
        "forward (model.py:10)", "user", "1", "400.000")
    assert svg.find_all("text")[1].attrs == {"x": "3.00", "y": "29"}


def side(t, gpu=True):
    return SimpleNamespace(tables=SimpleNamespace(frames=t), gpu=object() if gpu else None)


def test_the_compare_graph_shows_gpu_time_when_both_sides_have_gpu_work_else_cpu_op_time():
    base, new = tree(OWN), tree(OWN | {3: ("aten::add", 130.0, 100.0)})
    gpu = parse(flame.diff_flame_section(side(base), side(new)))
    assert gpu.find("svg").attrs["aria-label"] == "GPU time by Python frame, NEW against BASE"
    assert gpu.find("title").text() == "all: NEW 0.200 ms, BASE 0.100 ms per step (+0.100 ms)"
    cpu = parse(flame.diff_flame_section(side(base), side(new, gpu=False)))
    assert cpu.find("svg").attrs["aria-label"] == "CPU op time by Python frame, NEW against BASE"
    assert cpu.find("title").text() == "all: NEW 0.800 ms, BASE 1.000 ms per step (-0.200 ms)"


def test_the_compare_graph_colours_each_box_by_its_change_the_largest_below_the_root_full():
    base, new = tree(OWN), tree(OWN | {3: ("aten::add", 130.0, 300.0)})
    doc = parse(flame.diff_flame_section(side(base), side(new)))
    fills = {g.attrs["data-name"]: g.find("rect").attrs["fill"] for g in doc.find_all("g")}
    # +100 us under attn (the largest change below the root): full red; the root's +100 too; Block_0 unchanged
    assert (fills["attn (model.py:20)"], fills["all"], fills["nn.Module: Block_0"]) == ("#d62728", "#d62728",
                                                                                         "#ececec")


def test_a_box_only_new_has_counts_as_all_new():
    base = tree({1: ("aten::linear", 60.0, 600.0)})
    doc = parse(flame.diff_flame_section(side(base), side(tree(OWN))))
    tips = [t.text() for t in doc.find_all("title")]
    assert "forward (model.py:10) > attn (model.py:20): NEW 0.030 ms, BASE 0.000 ms per step (+0.030 ms)" in tips


@pytest.mark.parametrize("which", ["base", "new"])
def test_without_frames_on_a_side_there_is_no_compare_graph(which):
    sides = {"base": side(tree(OWN)), "new": side(tree(OWN))}
    sides[which] = SimpleNamespace(tables=None, gpu=None)
    assert flame.diff_flame_section(sides["base"], sides["new"]) == ""
    assert flame.diff_flame_section(None, sides["new"]) == flame.diff_flame_section(sides["base"], None) == ""


def rank(t, gpu=True, folded=True):
    frames = SimpleNamespace(folded=folded, frames=[SimpleNamespace(
        gpu_us=100.0, gpu_self_us=10.0, cpu_us=1000.0, cpu_self_us=100.0, calls=3, location="model.py:10",
        function="forward", frame="model.py(10): forward", line="def", top_op="aten::mm")])
    return SimpleNamespace(tables=SimpleNamespace(frames=t), frames=frames, gpu=object() if gpu else None,
                           rank=1, worker="host 1")


def test_the_overview_graph_offers_the_gpu_view_first_when_there_is_gpu_work_and_the_cpu_view_always():
    doc = parse(flame.flame_section(rank(tree(OWN))))
    radios = [(i.attrs["id"], "checked" in i.attrs) for i in doc.find_all("input")]
    assert radios == [("flame-1-gpu", True), ("flame-1-cpu", False)]
    assert [lab.text() for lab in doc.find_all("label")] == ["GPU time", "CPU op time"]
    captions = [p.text() for p in doc.find_all("p", cls="flame-caption")][1:]
    assert captions == ["GPU time: 0.100 ms per step", "CPU op time: 1.000 ms per step"]
    tips = [t.text() for t in doc.find_all("title")]
    assert "forward (model.py:10): 0.040 ms per step (40.0%)" in tips and "all: 1.000 ms per step (100.0%)" in tips
    (row,) = doc.find("table", cls="frames").find("tbody").children_of("tr")
    assert [c.text() for c in row.children_of("td")] == ["0.100", "0.010", "1.000", "0.100", "3",
                                                          "model.py:10 forward", "aten::mm"]
    cpu_only = parse(flame.flame_section(rank(tree(OWN), gpu=False)))
    assert [(i.attrs["id"], "checked" in i.attrs) for i in cpu_only.find_all("input")] == [("flame-1-cpu", True)]


def test_a_view_without_time_says_so_and_a_rank_without_frames_has_no_graph():
    doc = parse(flame.flame_section(rank(tree({1: ("x", 0.0, 5.0)}))))
    assert [p.text() for p in doc.find_all("p", cls="none")] == ["No gpu time in the steps."]
    assert flame.flame_section(SimpleNamespace(tables=None, frames=None)) == ""
    assert flame.flame_section(SimpleNamespace(tables=SimpleNamespace(frames=tree(OWN)), frames=None)) == ""


def test_a_frame_with_two_top_level_ops_spans_both_and_an_op_without_time_has_no_box():
    t = tree(OWN)
    t.ops[(3, "aten::mul")] = [0.0, 0.0, 200.0, 0.0]
    t.ops[(3, "aten::idle")] = [0.0, 0.0, 0.0, 0.0]
    got, _ = boxes(t, 2)  # 1200 us: 1000/1200 px a microsecond
    attn = next(b for b in got if b[3] == "attn (model.py:20)")
    assert attn[5] == 500.0 and [b[3] for b in got if b[1] == 3] == ["aten::add", "aten::mul"]
    assert got[0][5] == 1200.0


def test_boxes_left_out_are_counted_and_the_next_one_keeps_its_place():
    own = {1: ("x", 0.0, 1000.0), 2: ("y", 0.0, 0.3), 3: ("z", 0.0, 0.3)}
    got, hidden = boxes(tree(own), 2)
    # root -> Block_0 (1000 us), forward (0.6 us: 0.6 px, drawn) -> its op y (0.3 px) and attn (0.3 px): left out
    assert hidden == 2 and [b[3] for b in got] == ["all", "nn.Module: Block_0", "x", "forward (model.py:10)"]
    own = {1: ("x", 0.0, 1000.0), 2: ("y", 0.0, 0.2), 3: ("z", 0.0, 0.7)}
    got, hidden = boxes(tree(own), 2)
    # under forward: attn (0.7 px) drawn at forward's start, then y (0.2 px) left out
    (attn,) = [b for b in got if b[3] == "attn (model.py:20)"]
    assert hidden == 1 and attn[0] == pytest.approx(1000 * 1000 / 1000.9)


def test_the_overview_colours_boxes_by_kind():
    t = tree(OWN)
    t.kinds[3] = "something else"
    doc = parse(flame.flame_section(rank(t, gpu=False)))
    fills = {g.attrs["data-name"]: g.find("rect").attrs["fill"] for g in doc.find_all("g")}
    assert fills == {"all": "#e6e6e6", "nn.Module: Block_0": "#8fb4e3", "aten::linear": "#9ccf8a",
                     "forward (model.py:10)": "#f0a35e", "attn (model.py:20)": "#ccc", "aten::add": "#9ccf8a",
                     "aten::mm": "#9ccf8a"}
    tips = [t.text() for t in doc.find_all("title")]
    assert "forward (model.py:10) > attn (model.py:20) > aten::add: 0.300 ms per step (30.0%)" in tips
    assert doc.find("svg").attrs["aria-label"] == "CPU op time by Python frame"


def test_the_overviews_caption_says_whether_library_frames_were_folded_and_how_many_boxes_were_left_out():
    folded = parse(flame.flame_section(rank(tree(OWN)))).find("p", cls="flame-caption").text()
    kept = parse(flame.flame_section(rank(tree(OWN), folded=False))).find("p", cls="flame-caption").text()
    assert "folded into the calling frame" in folded and "every frame kept" not in folded
    assert "every frame kept" in kept and "folded" not in kept
    own = {1: ("x", 0.0, 1000.0), 2: ("y", 0.0, 0.3), 3: ("z", 0.0, 0.3)}
    captions = [p.text() for p in parse(flame.flame_section(rank(tree(own), gpu=False))).find_all(
        "p", cls="flame-caption")]
    assert captions[-1] == "CPU op time: 1.001 ms per step; 2 boxes under 0.5 px left out"


def test_the_top_frames_table_names_each_by_location_and_function_else_as_the_trace_wrote_it():
    r = rank(tree(OWN))
    r.frames.frames[0].location = ""
    table = parse(flame.flame_section(r)).find("table", cls="frames")
    assert [th.text() for th in table.find_all("th")] == ["GPU ms", "GPU self", "CPU ms", "CPU self", "calls",
                                                          "frame", "top op"]
    assert table.find("tbody").find_all("td")[5].text() == "model.py(10): forward"


def test_a_worker_without_a_rank_names_the_views_by_its_worker_and_nothing_is_stray_text():
    r = rank(tree(OWN))
    r.rank = None
    doc = parse(flame.flame_section(r))
    assert [i.attrs["id"] for i in doc.find_all("input")] == ["flame-host_1-gpu", "flame-host_1-cpu"]
    assert {i.attrs["name"] for i in doc.find_all("input")} == {"flame-host_1"}
    for page in (flame.flame_section(r), flame.diff_flame_section(side(tree(OWN)), side(tree(OWN)))):
        assert stray_text(parse(page)) == []


# --- boundaries of the layout --------------------------------------------------------------------------------------

def test_a_view_whose_first_frame_has_no_time_draws_the_others():
    got, _ = boxes(tree({1: ("aten::linear", 0.0, 0.0), 2: ("aten::mm", 0.0, 100.0)}), 2)
    assert [b[3] for b in got] == ["all", "forward (model.py:10)", "aten::mm"]


def test_a_view_of_under_a_microsecond_in_all_is_drawn():
    got, _ = boxes(tree({2: ("aten::mm", 0.0, 0.8)}), 2)
    assert [(b[3], b[2]) for b in got] == [("all", 1000.0), ("forward (model.py:10)", 1000.0), ("aten::mm", 1000.0)]


def test_an_op_without_time_is_neither_drawn_nor_counted_as_left_out():
    t = tree(OWN)
    t.ops[(3, "aten::idle")] = [0.0, 0.0, 0.0, 0.0]
    got, hidden = boxes(t, 2)
    assert "aten::idle" not in [b[3] for b in got] and hidden == 0


def test_a_box_too_narrow_for_a_label_holds_only_its_rectangle_and_tip():
    box = flame.Box(10.0, 1, 20.0, "forward_pass", "user", 1.0, ("forward_pass",))
    (g,) = parse(flame._svg([box], ["#fff"], ["the tip"], "aria")).find_all("g")
    assert g.text() == "the tip" and [n.tag for n in g.elements()] == ["rect", "title"]


@pytest.mark.parametrize("delta,colour", [(0.5, "#e18a8a"), (-0.5, "#86b2d0")])
def test_a_change_under_a_microsecond_is_coloured_by_its_sign(delta, colour):
    assert flame._mix(delta, 1.0) == colour


# --- the Overview's section ----------------------------------------------------------------------------------------

FOLDED_CAPTION = ("Python frames of the capture (with_stack), per step over 1 step(s); torch, the standard library "
                  "and site-packages folded into the calling frame. Width: share of the view's time; hover a box for "
                  "its numbers. Colours: your code nn.Module top-level op.")


def test_the_overviews_heading_and_caption_read_exactly_with_the_legend_in_the_boxes_colours():
    doc = parse(flame.flame_section(rank(tree(OWN))))
    section = doc.find("section")
    assert section.attrs["class"] == "flame" and section.find("h3").text() == "Where in your code"
    caption = section.find("p", cls="flame-caption")
    assert caption.text() == FOLDED_CAPTION
    assert [(s.text(), s.attrs["style"]) for s in caption.find_all("span")] == [
        ("your code", "background:#f0a35e"), ("nn.Module", "background:#8fb4e3"),
        ("top-level op", "background:#9ccf8a")]
    kept = parse(flame.flame_section(rank(tree(OWN), folded=False))).find("p", cls="flame-caption").text()
    assert kept == FOLDED_CAPTION.replace("torch, the standard library and site-packages folded into the calling "
                                          "frame", "every frame kept")


def test_after_a_view_without_time_the_next_view_is_still_drawn():
    doc = parse(flame.flame_section(rank(tree({1: ("x", 0.0, 5.0)}))))
    assert [i.attrs["id"] for i in doc.find_all("input")] == ["flame-1-gpu", "flame-1-cpu"]
    assert [p.text() for p in doc.find_all("p", cls="flame-caption")][1:] == ["CPU op time: 0.005 ms per step"]
    assert len(doc.find_all("svg")) == 1


# --- the Compare page's section ------------------------------------------------------------------------------------

DIFF_HEAD = "Where in your code: NEW against BASE"


def diff_caption(largest: str, more: str = "") -> str:
    return (f"CPU op time per step by Python frame, NEW's shape; red: slower, blue: faster than the same stack in "
            f"BASE (the strongest colour: the largest change, {largest} ms){more}.")


def test_the_compare_caption_gives_the_largest_change_below_the_root_even_in_the_first_box():
    base = tree(OWN)
    # Block_0, the first box below the root: +1000 us, +500 in each of its two ops; attn +10 us
    new = tree(OWN | {1: ("aten::linear", 0.0, 1100.0)})
    new.ops[(1, "aten::relu")] = [0.0, 0.0, 500.0, 0.0]
    new.ops[(3, "aten::mul")] = [0.0, 0.0, 10.0, 0.0]
    doc = parse(flame.diff_flame_section(side(base), side(new, gpu=False)))
    assert doc.find("h3").text() == DIFF_HEAD
    assert doc.find("p", cls="flame-caption").text() == diff_caption("1.000")
    tips = [t.text() for t in doc.find_all("title")]
    assert tips[:2] == ["all: NEW 2.010 ms, BASE 1.000 ms per step (+1.010 ms)",
                        "nn.Module: Block_0: NEW 1.600 ms, BASE 0.600 ms per step (+1.000 ms)"]


def test_the_compare_caption_counts_the_boxes_too_narrow_to_draw():
    base = tree(OWN)
    new = tree({1: ("x", 0.0, 1000.0), 2: ("y", 0.0, 0.3), 3: ("z", 0.0, 0.3)})
    caption = parse(flame.diff_flame_section(side(base), side(new, gpu=False))).find("p", cls="flame-caption")
    # Block_0's op x (1000 us) is not in BASE (aten::linear is): all new, the largest change below the root
    assert caption.text() == diff_caption("1.000", "; 2 boxes under 0.5 px left out")


def test_a_compare_graph_of_only_boxes_too_narrow_to_draw_has_the_root_alone_and_no_largest_change():
    new = tree({})
    for i in range(2001):  # 1000 / 2001 px each: all under half a pixel
        new.ops[(0, f"op{i}")] = [0.0, 0.0, 1.0, 0.0]
    doc = parse(flame.diff_flame_section(side(new), side(new, gpu=False)))
    assert [g.attrs["data-name"] for g in doc.find_all("g")] == ["all"]
    assert doc.find("p", cls="flame-caption").text() == diff_caption("0.000", "; 2001 boxes under 0.5 px left out")


def test_base_boxes_too_narrow_to_draw_still_count_as_before():
    base = tree({1: ("aten::linear", 0.0, 3000.0), 3: ("aten::add", 0.0, 0.9)})  # add: 0.3 px in BASE
    new = tree({1: ("aten::linear", 0.0, 3000.0), 3: ("aten::add", 0.0, 300.0)})
    tips = [t.text() for t in parse(flame.diff_flame_section(side(base), side(new, gpu=False))).find_all("title")]
    assert "forward (model.py:10) > attn (model.py:20) > aten::add: NEW 0.300 ms, BASE 0.001 ms per step " \
           "(+0.299 ms)" in tips


def test_no_compare_graph_when_new_has_no_time_in_the_view():
    base = tree(OWN)
    assert flame.diff_flame_section(side(base), side(tree({1: ("x", 5.0, 0.0)}), gpu=False)) == ""
