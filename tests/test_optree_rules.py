"""The CPU ops' nesting (``op_tree``) as pure logic: hand-made ``cpu_op`` events fed to the pass's ``Collected``,
each op's direct children's time, its top-level op and the runtime calls it made itself worked out here. The walk
trusts kineto's file order and checks it; ``_walk`` with the check on gives up (None) on an order that is not
(start, -duration) per thread."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.collect import Collected
from lightx2v.trace_summary.enclosing import Enclosing
from lightx2v.trace_summary.optree import _walk, op_tree, self_times


def collected(*ops: tuple[str, float, float] | tuple[str, float, float, int]) -> Collected:
    """Collected over cpu_op events (name, start, duration[, tid]), in the order given."""
    c = Collected()
    c.feed([{"ph": "X", "cat": "cpu_op", "name": op[0], "pid": 1, "tid": op[3] if len(op) > 3 else 1,
             "ts": 1000.0 + op[1], "dur": op[2], "args": {}} for op in ops])
    return c


def tree(*ops) -> tuple[list[float], list[int]]:
    """Each op's children's time and top-level op, by the walk and by the ops' nesting index: the two agree."""
    c = collected(*ops)
    t, by_index = op_tree(c), op_tree(c, Enclosing(c.op_thread, c.op_ts, c.op_dur))
    assert (t.child_us, t.root) == (by_index.child_us, by_index.root)
    return list(t.child_us), list(t.root)


# 0 = linear [0, 100] holds 1 = addmm [10, 90] (which holds 2 = mm [20, 60]) and 3 = view [92, 96]
LINEAR = (("aten::linear", 0.0, 100.0), ("aten::addmm", 10.0, 80.0), ("aten::mm", 20.0, 40.0),
          ("aten::view", 92.0, 4.0))


def test_an_op_sums_its_direct_children_only_and_each_op_knows_its_top_level_op():
    child, root = tree(*LINEAR)
    assert child == [80.0 + 4.0, 40.0, 0.0, 0.0]  # mm is addmm's child, not linear's
    assert root == [0, 0, 0, 0]


def test_an_op_outside_every_other_is_its_own_top_level_op():
    child, root = tree(("a", 0.0, 10.0), ("b", 20.0, 5.0), ("c", 21.0, 1.0))
    assert child == [0.0, 1.0, 0.0]
    assert root == [0, 1, 1]


def test_an_op_starting_where_another_ends_is_its_sibling_not_its_child():
    child, root = tree(("a", 0.0, 10.0), ("b", 10.0, 5.0))
    assert child == [0.0, 0.0] and root == [0, 1]


def test_ops_nest_only_within_their_own_thread():
    # the same times on thread 2: no child of thread 1's op
    child, root = tree(("a", 0.0, 100.0, 1), ("b", 10.0, 20.0, 2), ("c", 40.0, 10.0, 1), ("d", 12.0, 5.0, 2))
    assert child == [10.0, 5.0, 0.0, 0.0]
    assert root == [0, 1, 0, 1]


def test_ops_out_of_file_order_nest_as_in_order_with_their_own_indices():
    child, root = tree(*reversed(LINEAR))  # 3 = linear, 2 = addmm, 1 = mm, 0 = view
    assert child == [0.0, 0.0, 40.0, 84.0]
    assert root == [3, 3, 3, 3]


def test_of_two_ops_starting_together_the_longer_one_holds_the_shorter_whatever_the_file_order():
    assert tree(("outer", 0.0, 50.0), ("inner", 0.0, 10.0)) == ([10.0, 0.0], [0, 0])
    assert tree(("inner", 0.0, 10.0), ("outer", 0.0, 50.0)) == ([0.0, 10.0], [1, 1])


def test_a_trace_without_ops_has_an_empty_tree():
    assert tree() == ([], [])


THREAD = [1, 1, 2, 1]
TS = [0.0, 5.0, 1.0, 5.0]
DUR = [10.0, 4.0, 1.0, 2.0]


def test_the_checked_walk_accepts_start_then_longest_first_order_per_thread():
    result = _walk(range(4), True, THREAD, TS, DUR)  # thread 2's op starts before thread 1's last: fine
    assert result is not None
    assert list(result[0]) == [4.0, 2.0, 0.0, 0.0] and list(result[1]) == [0, 0, 2, 0]  # 3 inside 1, 1 in 0


def test_the_checked_walk_accepts_two_ops_alike_in_either_order():
    for order in ([0, 1], [1, 0]):  # the same start and duration: the second inside the first
        result = _walk(order, True, [1, 1], [0.0, 0.0], [5.0, 5.0])
        assert result is not None and sorted(result[0]) == [0.0, 5.0]


@pytest.mark.parametrize("order", [[1, 0, 2, 3], [0, 3, 1, 2]])
def test_the_checked_walk_gives_up_on_a_start_going_back_or_a_longer_op_after_a_shorter_at_one_start(order):
    assert _walk(order, True, THREAD, TS, DUR) is None


def test_the_unchecked_walk_takes_the_order_given():
    result = _walk([0, 3, 1, 2], False, THREAD, TS, DUR)  # 3 before 1 at the same start: 1 is put inside 3
    assert result is not None and list(result[0]) == [2.0, 0.0, 0.0, 4.0] and list(result[1]) == [0, 0, 2, 0]


def with_calls(ops, calls) -> Collected:
    """Collected over cpu_op events (name, start, duration, tid) and runtime calls (name, start, duration, tid)."""
    c = Collected()
    c.feed([{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": t, "ts": 1000.0 + ts, "dur": d, "args": {}}
            for n, ts, d, t in ops]
           + [{"ph": "X", "cat": "cuda_runtime", "name": n, "pid": 1, "tid": t, "ts": 1000.0 + ts, "dur": d,
               "args": {"correlation": i}} for i, (n, ts, d, t) in enumerate(calls)])
    return c


def test_a_runtime_call_belongs_to_the_innermost_op_around_it_on_its_thread_and_leaves_its_self_time():
    c = with_calls([("aten::to", 0.0, 100.0, 1), ("aten::copy_", 10.0, 80.0, 1), ("aten::mm", 0.0, 50.0, 2)],
                   [("cudaMemcpyAsync", 20.0, 40.0, 1),  # inside copy_ (and to): copy_'s
                    ("cudaStreamSynchronize", 60.0, 20.0, 1),
                    ("cudaLaunchKernel", 95.0, 2.0, 1),  # after copy_ ends, inside to: to's
                    ("cudaLaunchKernel", 10.0, 1.0, 2),  # thread 2: mm's
                    ("cudaMalloc", 200.0, 5.0, 1),  # outside every op: nobody's
                    ("cudaLaunchKernel", 85.0, 10.0, 1)])  # runs past copy_'s end: to's, the op holding all of it
    t = op_tree(c)
    assert list(t.runtime_us) == [2.0 + 10.0, 60.0, 1.0]
    # to: 100 - copy_ 80 - 12; copy_: 80 - 60; mm: 50 - 1
    assert list(self_times(c, t)) == [8.0, 20.0, 49.0]


def test_runtime_calls_longer_than_what_their_op_has_left_give_it_no_self_time_not_a_negative_one():
    # the sync overlaps inner's end, so it is outer's: 10 - 5 - (4.5 + 1.5) < 0 (timestamps that do not nest)
    c = with_calls([("outer", 0.0, 10.0, 1), ("inner", 1.0, 5.0, 1)], [("cudaDeviceSynchronize", 5.5, 4.5, 1),
                                                                     ("cudaLaunchKernel", 0.0, 1.5, 1)])
    t = op_tree(c)
    assert list(t.runtime_us) == [6.0, 0.0] and list(self_times(c, t)) == [0.0, 5.0]


def test_a_trace_without_runtime_calls_has_no_runtime_times_and_self_is_duration_less_children():
    c = collected(*LINEAR)
    t = op_tree(c)
    assert t.runtime_us is None and list(self_times(c, t)) == [100.0 - 84.0, 80.0 - 40.0, 40.0, 4.0]
