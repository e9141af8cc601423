"""CPU ops' calls, self time and total time per op name (``cpu_op_stats``) as pure logic: hand-made ``cpu_op``
events fed to the pass's ``Collected`` and each op's children's and runtime calls' time given by hand (an
``OpTree``), every figure worked out here."""

from __future__ import annotations

from array import array

import pytest

from lightx2v.trace_summary.collect import Collected
from lightx2v.trace_summary.cpu_ops import cpu_op_stats
from lightx2v.trace_summary.model import CpuOpStat
from lightx2v.trace_summary.optree import OpTree


def stats(ops: list[tuple[str, float]], child_us: list[float], runtime_us: list[float] | None = None
          ) -> tuple[list[CpuOpStat], float]:
    """cpu_op_stats over ops (name, duration), one after another on one thread, with these children's times (and
    these times of the runtime calls each op made itself)."""
    c = Collected()
    c.feed([{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 1000.0 + 100.0 * i, "dur": dur,
             "args": {}} for i, (name, dur) in enumerate(ops)])
    return cpu_op_stats(c, OpTree(child_us=array("d", child_us), root=array("l", range(len(ops))),
                                  runtime_us=array("d", runtime_us) if runtime_us is not None else None))


def test_an_ops_self_time_is_its_duration_less_its_childrens_summed_per_name_with_its_calls_and_total():
    rows, total = stats([("aten::linear", 100.0), ("aten::mm", 40.0), ("aten::linear", 60.0)], [70.0, 0.0, 20.0])
    # linear: self 30 + 40 = 70 of 160 total in 2 calls; mm: self 40 of 40 in 1 call
    assert total == 110.0
    assert rows == [CpuOpStat(name="aten::linear", calls=2, self_us=70.0, total_us=160.0, mean_self_us=35.0,
                              pct_of_cpu_self=pytest.approx(100.0 * 70.0 / 110.0), self_with_runtime_us=70.0),
                    CpuOpStat(name="aten::mm", calls=1, self_us=40.0, total_us=40.0, mean_self_us=40.0,
                              pct_of_cpu_self=pytest.approx(100.0 * 40.0 / 110.0), self_with_runtime_us=40.0)]


def test_the_runtime_calls_an_op_made_itself_are_not_its_self_time_as_in_tensorboard_but_are_kept_beside_it():
    # copy_ 100 us holding cudaMemcpyAsync + cudaStreamSynchronize (90 us); linear 100 us: addmm 60, a launch 1
    rows, total = stats([("aten::copy_", 100.0), ("aten::linear", 100.0), ("aten::addmm", 60.0)],
                        [0.0, 60.0, 0.0], [90.0, 1.0, 5.0])
    assert total == 10.0 + 39.0 + 55.0
    assert rows == [CpuOpStat(name="aten::addmm", calls=1, self_us=55.0, total_us=60.0, mean_self_us=55.0,
                              pct_of_cpu_self=pytest.approx(100.0 * 55.0 / 104.0), self_with_runtime_us=60.0),
                    CpuOpStat(name="aten::linear", calls=1, self_us=39.0, total_us=100.0, mean_self_us=39.0,
                              pct_of_cpu_self=pytest.approx(100.0 * 39.0 / 104.0), self_with_runtime_us=40.0),
                    CpuOpStat(name="aten::copy_", calls=1, self_us=10.0, total_us=100.0, mean_self_us=10.0,
                              pct_of_cpu_self=pytest.approx(100.0 * 10.0 / 104.0), self_with_runtime_us=100.0)]


def test_runtime_calls_and_children_longer_than_their_op_leave_it_no_self_time_not_a_negative_one():
    rows, total = stats([("outer", 10.0), ("inner", 4.0)], [4.0, 0.0], [7.0, 0.0])
    assert total == 4.0 and [(r.name, r.self_us, r.self_with_runtime_us) for r in rows] == [
        ("inner", 4.0, 4.0), ("outer", 0.0, 6.0)]


def test_op_names_are_ranked_by_self_time_most_first_not_by_total_time_or_calls():
    rows, _ = stats([("a", 10.0), ("b", 100.0), ("c", 30.0), ("a", 10.0), ("a", 10.0)], [0.0, 95.0, 0.0, 0.0, 0.0])
    # self: a 30 in 3 calls, b 5 (total 100), c 30 in 1 call; a and c tie: first seen first
    assert [(r.name, r.self_us) for r in rows] == [("a", 30.0), ("c", 30.0), ("b", 5.0)]
    assert [r.calls for r in rows] == [3, 1, 1] and isinstance(rows[0].calls, int)


def test_children_longer_than_their_op_give_it_no_self_time_rather_than_a_negative_one():
    rows, total = stats([("outer", 10.0), ("inner", 15.0)], [15.0, 0.0])
    assert total == 15.0
    assert [(r.name, r.self_us, r.total_us, r.mean_self_us) for r in rows] == [("inner", 15.0, 15.0, 15.0),
                                                                             ("outer", 0.0, 10.0, 0.0)]
    assert [r.pct_of_cpu_self for r in rows] == [100.0, 0.0]


def test_a_self_time_under_a_microsecond_counts_in_full():
    rows, total = stats([("aten::view", 0.75), ("aten::t", 2.0)], [0.25, 1.5])
    assert total == 1.0 and [(r.name, r.self_us) for r in rows] == [("aten::view", 0.5), ("aten::t", 0.5)]


def test_ops_without_self_time_have_a_zero_share_not_none():
    rows, total = stats([("wrapper", 10.0)], [10.0])
    assert total == 0.0
    assert rows == [CpuOpStat(name="wrapper", calls=1, self_us=0.0, total_us=10.0, mean_self_us=0.0,
                              pct_of_cpu_self=0.0, self_with_runtime_us=0.0)]


def test_a_trace_without_ops_has_no_rows_and_no_self_time():
    assert stats([], []) == ([], 0.0)
