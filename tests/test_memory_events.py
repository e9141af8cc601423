"""The ``[memory]`` event rules of lightx2v/trace_summary/memory.py on its own, fast: events fed by hand to
``MemoryEvents`` and answered by ``summarize`` with ops and steps given as the analysis' arrays, every figure worked
out here. Which events are kept or reported malformed (and why), the device rows and their order, step windows,
which op an allocation belongs to (innermost on its thread), bytes with children, what is live at the peak, the
curve. tests/test_memory_rules.py checks the leak rule through the whole analysis, tests/test_trace_summary_memory.py
real captures."""

from __future__ import annotations

import sys

import pytest

from lightx2v.trace_summary import memory
from lightx2v.trace_summary.memory import MemoryEvents, device_label, summarize
from lightx2v.trace_summary.model import StepStats

CUDA0, CUDA1, CPU = (1, 0), (1, 1), (0, -1)
MIB = 1 << 20


class Events:
    """A MemoryEvents fed by hand; ``rejected`` gets what it reports malformed."""

    def __init__(self) -> None:
        self.rejected: list[tuple] = []
        self.events = MemoryEvents(lambda *why: self.rejected.append(why))
        self.total: dict[tuple[int, int], int] = {}

    def mem(self, ts, addr, nbytes, device=CUDA0, reserved: int | None = 64 * MIB, tid=1, total=None):
        """An allocation (``nbytes`` > 0) or free (< 0); the running total per device unless given."""
        self.total[device] = self.total.get(device, 0) + nbytes if total is None else total
        args = {"Addr": addr, "Bytes": nbytes, "Total Allocated": self.total[device], "Device Type": device[0],
                "Device Id": device[1]}
        if reserved is not None:
            args["Total Reserved"] = reserved
        self.feed({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts,
                   "args": args})

    def feed(self, ev):
        self.events.feed(ev)


def step(name, start, cpu, wall=None, number=None):
    return StepStats(name, number, start, wall if wall is not None else cpu, cpu, None, None, None, None)


WHOLE = [step("(whole trace)", 0.0, 0.0, 1.0)]


def answer(e: Events, steps=WHOLE, ops=(), top=10):
    """``summarize`` with ``ops``: (name, start, duration, tid) on pid 1, in the order given."""
    threads: dict[tuple, int] = {}
    names: list[str] = []
    op_thread, op_name, op_ts, op_dur = [], [], [], []
    for name, ts, dur, tid in ops:
        op_thread.append(threads.setdefault((1, tid), len(threads)))
        if name not in names:
            names.append(name)
        op_name.append(names.index(name))
        op_ts.append(float(ts))
        op_dur.append(float(dur))
    return summarize(e.events, steps, threads, op_thread, op_name, op_ts, op_dur, names, top)


def one_device(e: Events, **kw):
    (d,) = answer(e, **kw)
    return d


def ops_of(d):
    return [(o.name, o.allocations, o.self_bytes, o.total_bytes, o.live_at_peak_bytes) for o in d.top_ops]


# --- which events are kept ----------------------------------------------------------------------------------------

def good(**change):
    ev = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5.0,
          "args": {"Addr": 1, "Bytes": 8, "Total Allocated": 8, "Total Reserved": 16, "Device Type": 1,
                   "Device Id": 0}}
    args = change.pop("args", {})
    ev.update(change)
    for k, v in args.items():
        if v is None:
            del ev["args"][k]
        else:
            ev["args"][k] = v
    return ev


@pytest.mark.parametrize("ev,why", [
    ({k: v for k, v in good().items() if k != "ts"}, ("ts", "missing")),
    (good(ts="5"), ("ts", "not a number")),
    (good(ts=float("inf")), ("ts", "not a finite number")),
    (good(ts=float("-inf")), ("ts", "not a finite number")),
    ({k: v for k, v in good().items() if k != "args"}, ("args", "missing")),
    (good() | {"args": [1, 2]}, ("args", "not an object")),
    (good(args={"Bytes": None}), ("args.Bytes", "missing")),
    (good(args={"Bytes": 8.0}), ("args.Bytes", "not an integer")),
    (good(args={"Total Allocated": "8"}), ("args.Total Allocated", "not an integer")),
    (good(args={"Addr": None}), ("args.Addr", "missing")),
    (good(args={"Device Type": None}), ("args.Device Type", "missing")),
    (good(args={"Device Id": 0.0}), ("args.Device Id", "not an integer")),
    (good(args={"Total Reserved": 1.5}), ("args.Total Reserved", "not an integer")),
    (good(args={"Bytes": 1 << 63}), ("args.Bytes", "out of range")),
    (good(args={"Addr": -(1 << 63) - 1}), ("args.Addr", "out of range")),
    (good(args={"Bytes": True}), ("args.Bytes", "not an integer")),  # a JSON true is no byte count
    (good(pid=[1]), ("pid/tid", "not a number or string")),
])
def test_a_memory_event_that_cannot_be_used_is_left_out_naming_its_first_bad_field(ev, why):
    e = Events()
    e.feed(ev)
    assert e.rejected == [(*why, True, "[memory]")]
    assert len(e.events) == 0 and answer(e) == []


def test_the_first_bad_field_is_reported_in_the_order_bytes_total_addr_device():
    e = Events()
    e.feed(good(args={"Addr": "x", "Total Allocated": "x", "Device Id": "x"}))
    e.feed(good(args={"Addr": "x", "Device Type": "x"}))
    e.feed(good(args={"Total Reserved": "x", "Device Type": None}))
    assert [r[0] for r in e.rejected] == ["args.Total Allocated", "args.Addr", "args.Device Type"]


@pytest.mark.parametrize("ev", [
    good(ts=sys.float_info.max, args={"Bytes": "8"}), good(ts=-sys.float_info.max, args={"Bytes": "8"})])
def test_the_largest_finite_timestamps_are_not_the_reason_an_event_is_left_out(ev):
    e = Events()
    e.feed(ev)
    assert e.rejected == [("args.Bytes", "not an integer", True, "[memory]")]


@pytest.mark.parametrize("args", [{"Total Reserved": None}, {"Addr": -(1 << 63)}, {"Bytes": (1 << 63) - 1}])
def test_a_missing_total_reserved_or_an_extreme_integer_is_not_the_reason_an_event_is_left_out(args):
    e = Events()
    e.feed(good(pid={"not": "hashable"}, args=args))
    assert e.rejected == [("pid/tid", "not a number or string", True, "[memory]")]


def test_the_extreme_64_bit_integers_and_finite_timestamps_are_kept():
    e = Events()
    e.feed(good(ts=-1e300, args={"Addr": -(1 << 63), "Total Reserved": (1 << 63) - 1}))
    e.feed(good(ts=1e300, args={"Addr": (1 << 63) - 1, "Bytes": -8, "Total Allocated": 0}))
    assert e.rejected == [] and len(e.events) == 2


def test_a_memory_event_without_total_reserved_is_kept_with_no_reserved_figure():
    e = Events()
    e.mem(1.0, 1, 100, reserved=None)
    e.mem(2.0, 1, -100, reserved=None)
    d = one_device(e)
    assert e.rejected == []
    assert (d.peak_reserved_bytes, d.curve.reserved_bytes, d.steps[0].peak_reserved_bytes) == (None, [None] * 2,
                                                                                              None)


def test_other_instant_events_are_ignored_and_out_of_memory_ones_counted_per_device():
    e = Events()
    e.feed({"ph": "i", "cat": "cpu_instant_event", "name": "[something else]", "ts": 1.0, "args": {}})
    e.feed({"ph": "i", "name": "[OutOfMemory]", "ts": 2.0, "args": {"Device Type": 1, "Device Id": 1}})
    e.feed({"ph": "i", "name": "[OutOfMemory]", "ts": 3.0, "args": {"Device Type": 1, "Device Id": 1}})
    e.feed({"ph": "i", "name": "[OutOfMemory]", "ts": 4.0, "args": {"Device Type": "1", "Device Id": 1}})
    e.feed({"ph": "i", "name": "[OutOfMemory]", "ts": 4.0, "args": {"Device Type": 1, "Device Id": 1.0}})
    e.feed({"ph": "i", "name": "[OutOfMemory]", "ts": 5.0, "args": "?"})
    e.mem(6.0, 1, 10, device=CUDA1)
    e.mem(7.0, 2, 10, device=CUDA0)
    assert e.rejected == [] and len(e.events) == 2
    assert e.events.oom == {CUDA1: 2, (-1, -1): 3}
    assert [(d.device, d.out_of_memory_events) for d in answer(e)] == [("cuda:0", 0), ("cuda:1", 2)]


@pytest.mark.parametrize("key,label", [((1, 0), "cuda:0"), ((1, 3), "cuda:3"), ((0, -1), "cpu"), ((1, -1), "cuda"),
                                       ((0, 0), "cpu:0"), ((7, 2), "device-type-7:2")])
def test_a_device_is_named_by_its_type_and_id_and_the_cpu_without_one(key, label):
    assert device_label(*key) == label


# --- devices ------------------------------------------------------------------------------------------------------

def test_cuda_devices_come_first_by_id_then_the_cpu_then_other_types():
    e = Events()
    for k, device in enumerate([(7, 0), CPU, CUDA1, (0, 2), CUDA0]):
        e.mem(float(k), 100 + k, 10 * (k + 1), device=device)
    rows = answer(e)
    assert [(d.device, d.device_type, d.device_id, d.events, d.allocated_bytes) for d in rows] == [
        ("cuda:0", 1, 0, 1, 50), ("cuda:1", 1, 1, 1, 30), ("cpu", 0, None, 1, 20), ("cpu:2", 0, 2, 1, 40),
        ("device-type-7:0", 7, 0, 1, 10)]


def test_each_device_gets_only_its_own_events():
    e = Events()
    e.mem(1.0, 1, 100, device=CUDA0)
    e.mem(2.0, 2, 500, device=CUDA1)
    e.mem(3.0, 3, 200, device=CUDA0)
    e.mem(4.0, 2, -500, device=CUDA1)
    d0, d1 = answer(e)
    assert (d0.events, d0.allocations, d0.allocated_bytes, d0.peak_allocated_bytes, d0.peak_allocated_at_us) == (
        2, 2, 300, 300, 3.0)
    assert (d1.events, d1.allocations, d1.allocated_bytes, d1.peak_allocated_bytes, d1.peak_allocated_at_us) == (
        2, 1, 500, 500, 2.0)
    assert d0.curve.ts_us == [1.0, 3.0] and d1.curve.allocated_bytes == [500, 0]


def test_events_out_of_time_order_are_answered_in_time_order():
    """Fed at 20, 10, 30 us (the last in the file also the latest): the curve and the windows go by time."""
    e = Events()
    e.mem(20.0, 2, 100, total=200)
    e.mem(10.0, 1, 100, total=100)
    e.mem(30.0, 3, 100, total=300)
    d = one_device(e)
    assert (d.curve.ts_us, d.curve.allocated_bytes, d.curve.peak_index) == ([10.0, 20.0, 30.0], [100, 200, 300], 2)
    assert (d.steps[0].start_us, d.steps[0].end_us, d.steps[0].allocated_start_bytes) == (10.0, 30.0, 0)


def test_an_allocation_and_its_free_at_one_time_keep_their_file_order():
    e = Events()
    e.mem(5.0, 9, 50, total=150)
    e.mem(1.0, 1, 100, total=100)  # out of order: the events are sorted
    e.mem(5.0, 9, -50, total=100)
    d = one_device(e)
    assert d.curve.allocated_bytes == [100, 150, 100] and d.peak_allocated_bytes == 150


def test_the_peak_reserved_is_the_largest_total_reserved_and_none_when_only_zero_is_recorded():
    e = Events()
    for k, reserved in enumerate([2 * MIB, 8 * MIB, 4 * MIB, -1]):
        e.mem(float(k), k, 10, reserved=reserved)
    d = one_device(e)
    assert d.peak_reserved_bytes == 8 * MIB
    assert d.curve.reserved_bytes == [2 * MIB, 8 * MIB, 4 * MIB, None]  # -1: not recorded at that point
    cpu = Events()
    cpu.mem(1.0, 1, 10, device=CPU, reserved=0)
    d = one_device(cpu)
    assert (d.peak_reserved_bytes, d.curve.reserved_bytes, d.steps[0].peak_reserved_bytes) == (None, [None], None)


def test_the_first_of_two_equal_peaks_is_the_peak():
    e = Events()
    e.mem(1.0, 1, 100)
    e.mem(2.0, 1, -100)
    e.mem(3.0, 2, 100)
    d = one_device(e)
    assert (d.peak_allocated_at_us, d.curve.peak_index) == (1.0, 0)


# --- steps --------------------------------------------------------------------------------------------------------

def test_each_step_holds_the_events_in_its_cpu_span_ends_included():
    e = Events()
    e.mem(5.0, 1, 100, reserved=1000)  # before the first step
    e.mem(10.0, 2, 200, reserved=3000)  # at step 1's start
    e.mem(20.0, 3, 300, reserved=2000)  # at step 1's end
    e.mem(25.0, 2, -200, reserved=2000)  # between the steps
    e.mem(40.0, 4, 50, reserved=5000)  # in step 2
    steps = [step("ProfilerStep#1", 10.0, 10.0, number=1), step("ProfilerStep#2", 30.0, 20.0, number=2),
             step("ProfilerStep#3", 60.0, 5.0, number=3)]
    d = one_device(e, steps=steps)
    assert [(s.name, s.number, s.start_us, s.end_us, s.allocated_start_bytes, s.allocated_end_bytes,
             s.growth_bytes, s.peak_allocated_bytes, s.peak_reserved_bytes) for s in d.steps] == [
        ("ProfilerStep#1", 1, 10.0, 20.0, 100, 600, 500, 600, 3000),
        ("ProfilerStep#2", 2, 30.0, 50.0, 400, 450, 50, 450, 5000),  # the reserved total it started with counts
        ("ProfilerStep#3", 3, 60.0, 65.0, 450, 450, 0, 450, 5000)]  # no event: what was there
    assert d.peak_step == "ProfilerStep#1"


def test_a_step_without_a_cpu_span_is_as_long_as_its_wall():
    e = Events()
    e.mem(15.0, 1, 100)
    d = one_device(e, steps=[step("ProfilerStep#1", 10.0, 0.0, wall=10.0)])
    assert (d.steps[0].end_us, d.steps[0].allocated_end_bytes, d.peak_step) == (20.0, 100, "ProfilerStep#1")


def test_a_step_before_every_event_starts_and_ends_with_what_was_allocated_before_them():
    e = Events()
    e.mem(50.0, 1, 100, total=1100)  # 1000 bytes were allocated before the capture's first event
    d = one_device(e, steps=[step("ProfilerStep#1", 0.0, 10.0)])
    s = d.steps[0]
    assert (s.allocated_start_bytes, s.allocated_end_bytes, s.peak_allocated_bytes, s.peak_reserved_bytes) == (
        1000, 1000, 1000, None)
    assert d.peak_step is None  # the peak is outside every step


def test_a_capture_without_steps_is_one_window_from_its_first_to_its_last_event():
    e = Events()
    e.mem(-50.0, 1, 100)
    e.mem(3e9, 1, -100)
    (s,) = one_device(e).steps
    assert (s.name, s.start_us, s.end_us, s.allocated_start_bytes, s.allocated_end_bytes, s.peak_allocated_bytes) \
        == ("(whole trace)", -50.0, 3e9, 0, 0, 100)


def test_a_single_numbered_step_is_a_window_of_its_own():
    e = Events()
    e.mem(5.0, 1, 100)
    e.mem(50.0, 2, 100)
    (s,) = one_device(e, steps=[step("ProfilerStep#7", 40.0, 20.0, number=7)]).steps
    assert (s.start_us, s.end_us, s.allocated_start_bytes, s.growth_bytes) == (40.0, 60.0, 100, 100)


def test_the_leak_flag_needs_two_steps_that_grew_by_the_threshold():
    """The threshold is 1 MiB here (1% of a 10 MiB peak is less): growths of 1 MiB, 1 MiB - 1, then 1 MiB."""
    e = Events()
    steps = []
    for k, nbytes in enumerate([MIB, MIB - 1, 8 * MIB - MIB + 1, -(8 * MIB - MIB + 1), MIB]):
        e.mem(10.0 * k + 1, k, nbytes)
        steps.append(step(f"S{k}", 10.0 * k, 5.0))
    d = one_device(e, steps=steps)
    assert d.leak_threshold_bytes == MIB
    assert [s.grew for s in d.steps] == [True, False, True, False, True] and d.leak is True
    one = Events()
    one.mem(1.0, 1, 5 * MIB)
    d = one_device(one, steps=[step("S0", 0.0, 5.0), step("S1", 10.0, 5.0)])
    assert [s.grew for s in d.steps] == [True, False] and d.leak is False


# --- ops ----------------------------------------------------------------------------------------------------------

def test_an_allocation_belongs_to_the_innermost_op_around_it_and_its_parents_count_it_with_children():
    e = Events()
    e.mem(5.0, 1, 1)  # outside every op
    e.mem(15.0, 2, 10)  # in outer only
    e.mem(25.0, 3, 100)  # in inner
    e.mem(35.0, 4, 1000)  # in outer again, after inner ended
    e.mem(60.0, 5, 10000)  # in a later sibling op
    ops = [("outer", 10, 30, 1), ("inner", 20, 10, 1), ("sibling", 50, 20, 1)]
    d = one_device(e, ops=ops)
    assert sorted(ops_of(d)) == [("inner", 1, 100, 100, 100), ("outer", 2, 1010, 1110, 1010),
                                 ("sibling", 1, 10000, 10000, 10000)]
    assert d.unattributed_bytes == 1


def test_between_two_sibling_ops_an_allocation_belongs_to_none():
    e = Events()
    e.mem(15.0, 1, 100)
    d = one_device(e, ops=[("a", 0, 10, 1), ("b", 20, 10, 1)])
    assert d.unattributed_bytes == 100 and ops_of(d) == []


def test_an_op_nested_in_an_op_of_its_own_name_counts_its_bytes_once():
    e = Events()
    e.mem(25.0, 1, 100)
    e.mem(45.0, 2, 10)  # in a second, separate aten::to
    d = one_device(e, ops=[("aten::to", 10, 20, 1), ("aten::to", 20, 5, 1), ("aten::copy_", 22, 5, 1),
                           ("aten::to", 40, 10, 1)])
    assert sorted(ops_of(d)) == [("aten::copy_", 1, 100, 100, 100), ("aten::to", 1, 10, 110, 10)]


def test_an_op_that_only_calls_allocating_ops_is_listed_with_no_self_bytes_after_them():
    e = Events()
    e.mem(15.0, 1, 400)
    d = one_device(e, ops=[("aten::ones", 10, 20, 1), ("aten::empty", 12, 5, 1)])
    assert ops_of(d) == [("aten::empty", 1, 400, 400, 400), ("aten::ones", 0, 0, 400, 0)]


def test_ops_are_ranked_by_self_bytes_then_bytes_with_children_then_name_and_cut_at_top():
    e = Events()
    e.mem(1.0, 1, 50)  # b
    e.mem(11.0, 2, 50)  # a
    e.mem(21.0, 3, 50)  # c, then its child d
    e.mem(23.0, 4, 7)
    e.mem(31.0, 5, 80)  # z
    ops = [("b", 0, 5, 1), ("a", 10, 5, 1), ("c", 20, 5, 1), ("d", 22, 2, 1), ("z", 30, 5, 1)]
    assert [o[0] for o in ops_of(one_device(e, ops=ops))] == ["z", "c", "a", "b", "d"]
    assert [o[0] for o in ops_of(one_device(e, ops=ops, top=2))] == ["z", "c"]


def test_allocations_on_another_thread_belong_to_that_threads_ops_only():
    e = Events()
    e.mem(15.0, 1, 100, tid=2)  # inside "main" in time, but on thread 2
    e.mem(16.0, 2, 30, tid=2)  # inside thread 2's op
    e.mem(17.0, 3, 5, tid=3)  # a thread without ops
    ops = [("main", 10, 20, 1), ("worker", 16, 5, 2)]
    d = one_device(e, ops=ops)
    assert ops_of(d) == [("worker", 1, 30, 30, 30)] and d.unattributed_bytes == 105


def test_ops_listed_children_first_are_nested_by_their_times():
    e = Events()
    e.mem(12.0, 1, 100)
    e.mem(25.0, 2, 10)
    # not in (start, -duration) order: the child first, then a parent of the same start
    d = one_device(e, ops=[("child", 10, 5, 1), ("parent", 10, 20, 1)])
    assert sorted(ops_of(d)) == [("child", 1, 100, 100, 100), ("parent", 1, 10, 110, 10)]


def test_ops_of_equal_start_in_kineto_order_keep_the_longer_as_parent():
    e = Events()
    e.mem(12.0, 1, 100)
    d = one_device(e, ops=[("parent", 10, 20, 1), ("child", 10, 5, 1), ("after", 40, 5, 1)])
    assert sorted(ops_of(d)) == [("child", 1, 100, 100, 100), ("parent", 0, 0, 100, 0)]


def test_ops_of_two_threads_out_of_time_order_are_each_nested_by_time():
    e = Events()
    e.mem(12.0, 1, 100, tid=1)
    e.mem(52.0, 2, 7, tid=2)
    ops = [("late", 50, 10, 2), ("child", 10, 5, 1), ("parent", 5, 20, 1), ("inner", 51, 3, 2)]
    d = one_device(e, ops=ops)
    assert sorted(ops_of(d)) == [("child", 1, 100, 100, 100), ("inner", 1, 7, 7, 7), ("late", 0, 0, 7, 0),
                                 ("parent", 0, 0, 100, 0)]


def test_bytes_with_children_are_counted_per_device():
    e = Events()
    e.mem(11.0, 1, 100, device=CUDA0)
    e.mem(12.0, 2, 900, device=CUDA1)
    d0, d1 = answer(e, ops=[("aten::empty", 10, 5, 1)])
    assert ops_of(d0) == [("aten::empty", 1, 100, 100, 100)] and ops_of(d1) == [("aten::empty", 1, 900, 900, 900)]


def test_what_is_live_at_the_peak_replays_frees_up_to_it_and_not_after():
    e = Events()
    e.mem(11.0, 0xA, 100)  # freed before the peak
    e.mem(12.0, 0xA, -100)
    e.mem(21.0, 0xB, 300)
    e.mem(22.0, 0xC, 200)  # the peak: 500
    e.mem(30.0, 0xB, -300)  # after the peak: B was live at it
    e.mem(41.0, 0xD, 50)  # allocated after the peak
    e.mem(42.0, 0xE, 10, tid=5)  # no op: not in any op's figures
    d = one_device(e, ops=[("a", 10, 5, 1), ("b", 20, 5, 1), ("d", 40, 5, 1)])
    assert d.peak_allocated_bytes == 500 and d.peak_allocated_at_us == 22.0
    assert ops_of(d) == [("b", 2, 500, 500, 500), ("a", 1, 100, 100, 0), ("d", 1, 50, 50, 0)]
    assert (d.allocations, d.allocated_bytes, d.unattributed_bytes) == (5, 660, 10)


def test_an_address_reused_before_the_peak_is_live_with_its_latest_allocation():
    e = Events()
    e.mem(11.0, 0xA, 100)
    e.mem(12.0, 0xA, -100)
    e.mem(21.0, 0xA, 400)  # the same address again, in b: the peak
    d = one_device(e, ops=[("a", 10, 5, 1), ("b", 20, 5, 1)])
    assert [(o.name, o.live_at_peak_bytes) for o in d.top_ops] == [("b", 400), ("a", 0)]


def test_a_free_at_an_address_never_allocated_changes_no_op():
    e = Events()
    e.mem(5.0, 0xF, -10, total=90)
    e.mem(11.0, 0xA, 100)
    d = one_device(e, ops=[("a", 10, 5, 1)])
    assert ops_of(d) == [("a", 1, 100, 100, 100)] and d.unattributed_bytes == 0


# --- the curve ----------------------------------------------------------------------------------------------------

def test_a_curve_of_up_to_512_points_keeps_every_point():
    e = Events()
    for k in range(memory.CURVE_POINTS):
        e.mem(float(k), k, 1)
    curve = one_device(e).curve
    assert curve.ts_us == [float(k) for k in range(512)] and curve.allocated_bytes == list(range(1, 513))
    assert curve.peak_index == 511


def test_a_longer_curve_keeps_each_time_buckets_lowest_and_highest_point_and_the_peak():
    """1024 events 1 us apart: 256 buckets of 4 points, each going (0, +5, -5, 0) around a slow rise, and one
    spike (the peak) at 601 us."""
    e = Events()
    level = 0
    for k in range(1024):
        target = 1000 + k + (5 if k % 4 == 1 else -5 if k % 4 == 2 else 0) + (10**6 if k == 601 else 0)
        e.mem(float(k), k, target - level)
        level = target
    curve = one_device(e).curve
    # 256 buckets' highest and lowest points are 512: the first and the last point, no extreme, are left out
    assert len(curve.ts_us) == memory.CURVE_POINTS and curve.ts_us == sorted(curve.ts_us)
    assert curve.ts_us[curve.peak_index] == 601.0 and curve.allocated_bytes[curve.peak_index] == 10**6 + 1601 + 5
    kept = set(curve.ts_us)
    assert {1.0, 2.0, 5.0, 6.0, 1021.0, 1022.0} <= kept  # highest and lowest of the first buckets and the last
    assert not {0.0, 3.0, 4.0, 7.0, 1020.0, 1023.0} & kept  # neither highest nor lowest of their bucket
    assert curve.allocated_bytes[:4] == [1006, 997, 1010, 1001]


def test_a_single_event_is_a_curve_of_one_point_at_the_peak():
    e = Events()
    e.mem(7.0, 1, 10)
    d = one_device(e)
    assert (d.curve.ts_us, d.curve.allocated_bytes, d.curve.peak_index) == ([7.0], [10], 0)


# --- the rank's memory section --------------------------------------------------------------------------------------

def test_a_trace_without_memory_events_or_snapshot_has_no_memory_section(tmp_path):
    notes: list[str] = []
    assert memory.section(str(tmp_path / "w.pt.trace.json"), 0, notes, []) is None and notes == []


def test_a_trace_with_memory_events_has_a_section_of_its_devices(tmp_path):
    e = Events()
    e.mem(1.0, 1, 10)
    devices = answer(e)
    s = memory.section(str(tmp_path / "w.pt.trace.json"), 0, [], devices)
    assert s is not None and s.devices == devices and s.snapshots == []
