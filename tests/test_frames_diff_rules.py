"""Where in your code, before and after (`lightx2v.trace_summary.frames_diff`), fast: two hand-made frame trees
(per-step self times chosen here) and the frames ``--diff`` lists, their deltas, status and noise verdict, their
order and the one line it prints, each worked out by hand: with three steps a side a change is beyond noise when
the sides' ranges do not overlap and it is at least 5 us and 2% of BASE's median."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lightx2v.trace_summary.frames import LIBRARY, USER
from lightx2v.trace_summary.frames_diff import FrameDelta, _signed_ms, frame_name, frames_change
from lightx2v.trace_summary.model import FrameTree
from lightx2v.trace_summary.noise import NOISE, REAL, UNTESTED

MODULE_ = "main.py(1): <module>"
FORWARD = "model.py(21): forward"
ATTN = "model.py(30): attn"


def tree(frames: list[tuple[str, int, str, list[float], list[float]]], steps: int = 3) -> FrameTree:
    """``frames``: (name, parent node, kind, GPU self per step, CPU self per step), node 1 on; values per step are
    the means of the per-step lists."""
    names, parents, kinds = [""], [-1], [""]
    gpu, cpu, step_gpu, step_cpu = [0.0], [0.0], {}, {}
    for node, (name, parent, kind, g, c) in enumerate(frames, start=1):
        names.append(name)
        parents.append(parent)
        kinds.append(kind)
        gpu.append(sum(g) / steps)
        cpu.append(sum(c) / steps)
        step_gpu[node], step_cpu[node] = g, c
    return FrameTree(names=names, kinds=kinds, parent=parents, calls=[1] * len(names), gpu_us=gpu, kernel_us=gpu,
                     cpu_us=cpu, alloc_bytes=[0.0] * len(names), ops={}, step_gpu_us=step_gpu, step_cpu_us=step_cpu,
                     steps=steps, memory_device="")


def rank(t: FrameTree | None, folded: bool | None = True):
    """What frames_change reads of a rank: its frame tree and whether its frames were folded."""
    return SimpleNamespace(tables=SimpleNamespace(frames=t), frames=None if folded is None else
                           SimpleNamespace(folded=folded))


Z = [0.0, 0.0, 0.0]


def base_tree() -> FrameTree:
    return tree([(MODULE_, 0, USER, Z, [10.0] * 3), (FORWARD, 1, USER, [1000.0, 1010.0, 990.0], [100.0] * 3),
                 (ATTN, 2, USER, [3000.0, 3010.0, 2990.0], [50.0] * 3), ("model.py(60): gone", 1, USER, [500.0] * 3,
                                                                           Z)])


def new_tree() -> FrameTree:
    return tree([(MODULE_, 0, USER, Z, [10.0] * 3), (FORWARD, 1, USER, [1000.0, 1010.0, 990.0], [100.0] * 3),
                 (ATTN, 2, USER, [4000.0, 4010.0, 3990.0], [50.0] * 3), ("model.py(50): extra", 1, USER, [20.0] * 3,
                                                                           Z)])


# --- which frames, their figures and order ------------------------------------------------------------------------

def test_frames_beyond_noise_come_first_by_self_change_then_the_rest_by_self_change_and_name():
    ch = frames_change(rank(base_tree()), rank(new_tree()))
    assert ch.value == "gpu"
    assert [(c.function, c.status, c.noise.verdict) for c in ch.frames] == [
        ("attn", "changed", REAL), ("gone", "removed", REAL), ("extra", "added", REAL),
        ("<module>", "changed", NOISE), ("forward", "changed", NOISE)]


def test_each_frame_has_its_inclusive_and_self_gpu_time_per_step_on_both_sides():
    by = {c.function: c for c in frames_change(rank(base_tree()), rank(new_tree())).frames}
    # inclusive: forward 1000 + attn; <module> forward + gone / extra
    assert by["attn"].self_per_step_us == FrameDelta(base=3000.0, new=4000.0, delta=1000.0,
                                                     delta_pct=pytest.approx(100 / 3))
    assert by["forward"].inclusive_per_step_us == FrameDelta(base=4000.0, new=5000.0, delta=1000.0, delta_pct=25.0)
    assert by["forward"].self_per_step_us == FrameDelta(base=1000.0, new=1000.0, delta=0.0, delta_pct=0.0)
    assert by["<module>"].inclusive_per_step_us == FrameDelta(base=4500.0, new=5020.0, delta=520.0,
                                                              delta_pct=pytest.approx(520 / 45))
    assert by["gone"].self_per_step_us == FrameDelta(base=500.0, new=0.0, delta=-500.0, delta_pct=-100.0)
    assert by["extra"].inclusive_per_step_us == FrameDelta(base=0.0, new=20.0, delta=20.0, delta_pct=None)
    assert by["gone"].inclusive_per_step_us == FrameDelta(base=500.0, new=0.0, delta=-500.0, delta_pct=-100.0)
    assert by["extra"].self_per_step_us == FrameDelta(base=0.0, new=20.0, delta=20.0, delta_pct=None)
    # a side without the frame counts 0 a step: the change is the other side's whole median
    assert (by["gone"].noise.effect_us, by["extra"].noise.effect_us) == (-500.0, 20.0)


def test_a_frame_is_named_by_its_place_in_the_code_and_kind():
    attn = frames_change(rank(base_tree()), rank(new_tree())).frames[0]
    assert (attn.frame, attn.location, attn.function, attn.kind) == (ATTN, "model.py:30", "attn", USER)
    assert frame_name(attn) == "model.py:30 attn"
    module = SimpleNamespace(location="", function="Linear_0", frame="nn.Module: Linear_0", line="")
    assert frame_name(module) == "nn.Module: Linear_0"


def test_the_noise_of_a_frame_is_the_spread_of_its_self_time_per_step():
    by = {c.function: c for c in frames_change(rank(base_tree()), rank(new_tree())).frames}
    # BASE: (3010 - 2990) / 2 of 3000; NEW: 20 / 2 of 4000: the larger, 1/3 %
    assert by["attn"].noise.noise_pct == pytest.approx(1 / 3) and by["attn"].noise.effect_us == 1000.0


def test_a_change_under_half_a_microsecond_is_the_same_and_one_of_half_is_changed():
    b = tree([(FORWARD, 0, USER, [100.0] * 3, Z), (ATTN, 0, USER, [10.0] * 3, Z)])
    n = tree([(FORWARD, 0, USER, [100.4] * 3, Z), (ATTN, 0, USER, [10.5] * 3, Z)])
    assert {c.function: c.status for c in frames_change(rank(b), rank(n)).frames} == {"attn": "changed",
                                                                                      "forward": "same"}


def test_library_frames_are_left_out_when_folded_and_kept_when_every_frame_was_kept():
    b = tree([("torch/nn/functional.py(9): linear", 0, LIBRARY, [50.0] * 3, Z), (FORWARD, 0, USER, [100.0] * 3, Z)])
    kept = [c.kind for c in frames_change(rank(b, folded=False), rank(b, folded=False)).frames]
    assert kept == [USER, LIBRARY]  # both unchanged: by name
    assert [c.kind for c in frames_change(rank(b), rank(b)).frames] == [USER]
    assert [c.kind for c in frames_change(rank(b, folded=None), rank(b, folded=None)).frames] == [USER]


def test_a_change_of_a_frames_own_or_inclusive_time_of_half_a_microsecond_is_a_change():
    # pairs of a frame and its child: (parent self, child self) BASE -> NEW
    pairs = {"p1": ((100.0, 10.0), (101.0, 9.25)), "p2": ((100.0, 10.0), (100.5, 9.75)),
             "p3": ((100.0, 10.0), (100.25, 10.25)), "p4": ((100.0, 10.0), (100.0, 11.0))}

    def side(k: int) -> FrameTree:
        frames = []
        for name, values in pairs.items():
            parent, child = values[k]
            frames.append((f"{name}.py(1): {name}", 0, USER, [parent] * 3, Z))
            frames.append((f"c{name[1]}.py(1): c{name[1]}", len(frames), USER, [child] * 3, Z))
        return tree(frames)

    ch = frames_change(rank(side(0)), rank(side(1)))
    # self: p1 +1 (inclusive +0.25), p2 +0.5 (+0.25), p3 +0.25 (+0.5), p4 0 (+1); c1 -0.75, c2 -0.25, c3 +0.25, c4 +1
    assert {c.function: c.status for c in ch.frames} == {"p1": "changed", "p2": "changed", "p3": "changed",
                                                          "p4": "changed", "c1": "changed", "c2": "same",
                                                          "c3": "same", "c4": "changed"}
    # none beyond noise: most self change first, then by name
    assert [c.function for c in ch.frames] == ["c4", "p1", "c1", "p2", "c2", "c3", "p3", "p4"]


def test_a_change_of_the_mean_with_steady_medians_is_named_by_its_mean():
    b = tree([(FORWARD, 0, USER, [0.0] * 9 + [100.0], Z)], steps=10)  # mean 10, median 0
    n = tree([(FORWARD, 0, USER, [10.0] * 10, Z)], steps=10)  # mean 10, median 10
    ch = frames_change(rank(b), rank(n))
    assert ch.frames[0].noise.verdict == REAL
    assert ch.line == "where in your code: model.py:21 forward +0.000 ms GPU per step (self, beyond noise ±0.0%)"


def test_without_a_change_beyond_noise_a_frame_whose_inclusive_time_moved_is_named_with_its_self_change():
    b = tree([(FORWARD, 0, USER, [100.0] * 3, Z), ("torch/nn/functional.py(9): linear", 1, LIBRARY, [10.0] * 3, Z)])
    n = tree([(FORWARD, 0, USER, [100.0] * 3, Z), ("torch/nn/functional.py(9): linear", 1, LIBRARY, [12.0] * 3, Z)])
    assert frames_change(rank(b), rank(n)).line == \
        "where in your code: no frame changed beyond noise; most: model.py:21 forward +0.000 ms GPU per step (self)"


def test_gpu_time_is_compared_when_both_sides_have_some_however_little():
    little = tree([(FORWARD, 0, USER, [0.5] * 3, [100.0] * 3)])
    none = tree([(FORWARD, 0, USER, Z, [100.0] * 3)])
    assert frames_change(rank(little), rank(little)).value == "gpu"
    assert frames_change(rank(base_tree()), rank(none)).value == "cpu"
    assert frames_change(rank(none), rank(none)).value == "cpu"


def test_a_side_without_gpu_work_in_its_frames_compares_cpu_op_time():
    b = tree([(FORWARD, 0, USER, Z, [100.0, 101.0, 99.0])])
    n = tree([(FORWARD, 0, USER, [5.0] * 3, [200.0, 201.0, 199.0])])
    ch = frames_change(rank(b), rank(n))
    assert ch.value == "cpu"
    (c,) = ch.frames
    assert c.self_per_step_us == FrameDelta(base=100.0, new=200.0, delta=100.0, delta_pct=100.0)
    assert ch.line == "where in your code: model.py:21 forward +0.100 ms CPU per step (self, beyond noise ±1.0%)"


# --- the line -----------------------------------------------------------------------------------------------------

def test_the_line_names_the_first_two_frames_beyond_noise_with_their_self_change_and_spread():
    assert frames_change(rank(base_tree()), rank(new_tree())).line == (
        "where in your code: model.py:30 attn +1.00 ms GPU per step (self, beyond noise ±0.3%); model.py:60 gone "
        "-0.500 ms GPU per step (self, beyond noise ±0.0%)")


def test_without_a_change_beyond_noise_the_line_gives_the_largest_change():
    b = tree([(FORWARD, 0, USER, [100.0, 200.0, 300.0], Z), (ATTN, 0, USER, [50.0] * 3, Z)])
    n = tree([(FORWARD, 0, USER, [150.0, 250.0, 320.0], Z), (ATTN, 0, USER, [50.0] * 3, Z)])  # +40 a step
    assert frames_change(rank(b), rank(n)).line == \
        "where in your code: no frame changed beyond noise; most: model.py:21 forward +0.040 ms GPU per step (self)"


def test_with_one_step_a_side_the_line_says_it_cannot_tell():
    b = tree([(FORWARD, 0, USER, [100.0], Z)], steps=1)
    n = tree([(FORWARD, 0, USER, [2100.0], Z)], steps=1)
    ch = frames_change(rank(b), rank(n))
    assert ch.frames[0].noise.verdict == UNTESTED
    assert ch.line == ("where in your code: no frame changed beyond noise; most: model.py:21 forward +2.00 ms GPU "
                       "per step (self, one step a side: cannot tell)")


def test_without_any_change_the_line_says_no_frame_changed():
    assert frames_change(rank(base_tree()), rank(base_tree())).line == "where in your code: no frame's time changed"


def test_a_side_without_frames_is_named_and_neither_side_with_them_gives_nothing():
    t = base_tree()
    assert frames_change(rank(None), rank(t)).line == \
        "where in your code: BASE has no Python frames (capture both with with_stack=True to compare them)"
    only_base = frames_change(rank(t), SimpleNamespace(tables=None, frames=None))
    assert (only_base.value, only_base.frames, only_base.line) == \
        ("", [], "where in your code: NEW has no Python frames (capture both with with_stack=True to compare them)")
    assert frames_change(rank(None), SimpleNamespace(tables=None, frames=None)) is None
    assert frames_change(SimpleNamespace(tables=None, frames=None), rank(t)).line.startswith(
        "where in your code: BASE has no Python frames")


@pytest.mark.parametrize("us, text", [(123_456.0, "+123"), (-100_000.0, "-100"), (99_950.0, "+100.0"),
                                      (12_345.0, "+12.3"), (10_000.0, "+10.0"), (-1000.0, "-1.00"),
                                      (999.0, "+0.999"), (0.0, "+0.000")])
def test_a_change_in_ms_has_fewer_decimals_the_larger_it_is(us, text):
    assert _signed_ms(us) == text
