"""The step and idle rules as pure logic (`lightx2v.trace_summary.steps`), fast: a step's number from its name, all
steps' idle added up, the one line of advice each dominant cause gets, the idle flag at its threshold. Figures are
chosen by hand; tests/test_trace_summary_launch_steps.py checks the same on hand-made kineto traces."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.model import IdleCauses, IdleStats, StepStats, SyncWait
from lightx2v.trace_summary.steps import cause_times, idle_advice, idle_total, step_number

from helpers.kineto import Kineto


@pytest.mark.parametrize("name,number", [("ProfilerStep#4", 4), ("ProfilerStep#0", 0), ("ProfilerStep#123", 123),
                                         ("ProfilerStep#x", None), ("ProfilerStep#", None), ("(whole trace)", None),
                                         ("MyStep#4", None)])
def test_a_steps_number_is_what_follows_profilerstep_hash(name, number):
    assert step_number(name) == number


def causes(host=0.0, sync=0.0, short=0.0, other=0.0, unknown=0.0, dominant="", syncs=()) -> IdleCauses:
    return IdleCauses(host_wait_us=host, sync_us=sync, short_gaps_us=short, other_us=other, unknown_us=unknown,
                      dominant=dominant, syncs=list(syncs))


def idle(idle_us: float, c: IdleCauses | None, window: float = 1000.0, largest: float = 0.0, at: float = 0.0,
         step: str = "ProfilerStep#1", over_10: int = 0) -> IdleStats:
    return IdleStats(window_us=window, idle_us=idle_us, ratio=idle_us / window if window else 0.0,
                     largest_gap_us=largest, largest_gap_at_us=at, largest_gap_step=step, gaps_over_10us=over_10,
                     flagged=False, causes=c)


def test_cause_times_lists_the_five_causes_in_their_order():
    assert cause_times(causes(1, 2, 3, 4, 5)) == [("host wait", 1), ("sync", 2), ("short gaps", 3), ("other", 4),
                                                  ("unknown", 5)]


def test_the_sync_advice_names_the_op_and_call_that_held_the_gpu_longest():
    top = SyncWait(op="aten::item", call="cudaStreamSynchronize", idle_us=300.0, gaps=2)
    line = idle_advice(idle(400.0, causes(sync=300.0, host=100.0, dominant="sync",
                                          syncs=[top, SyncWait("", "cudaMemcpy", 50.0, 1)])))
    assert line == ("host syncs hold the GPU (75% of idle: aten::item -> cudaStreamSynchronize 0.300 ms); move "
                    ".item()/.cpu()/printing of GPU tensors out of the step")


def test_a_sync_outside_any_op_is_named_by_its_call_alone():
    line = idle_advice(idle(200.0, causes(sync=200.0, dominant="sync", syncs=[SyncWait("", "cudaMemcpy", 200.0, 1)])))
    assert line.startswith("host syncs hold the GPU (100% of idle: cudaMemcpy 0.200 ms); ")


def test_sync_advice_without_a_recorded_call_says_only_the_share():
    line = idle_advice(idle(100.0, causes(sync=50.0, host=50.0, dominant="sync")))
    assert line.startswith("host syncs hold the GPU (50% of idle); move ")


@pytest.mark.parametrize("c,line", [
    (causes(host=90.0, other=10.0, dominant="host wait"),
     "the GPU waits for the host to launch work (90% of idle): CPU time between launches (Python, CPU ops, data); "
     "see the CPU ops at the largest gap; CUDA graphs or torch.compile cut per-launch host cost"),
    (causes(short=60.0, host=40.0, dominant="short gaps"),
     "short gaps between queued kernels (60% of idle): launch-bound (many small kernels); CUDA graphs or "
     "torch.compile (fusion) may help"),
    (causes(other=100.0, dominant="other"),
     "long gaps with work already queued (100% of idle): waits on events or other streams (communication, copies)"),
    (causes(unknown=70.0, host=30.0, dominant="unknown"),
     "the trace records no launch for the work after most gaps (70% of idle): the cause cannot be told; look for a "
     "host sync, data loading or CPU work at the largest gap"),
])
def test_each_dominant_cause_gets_its_own_advice_with_its_share(c, line):
    assert idle_advice(idle(100.0, c)) == line


def test_no_advice_without_idle_time_or_a_dominant_cause():
    assert idle_advice(idle(0.0, causes(dominant="host wait"))) == ""
    assert idle_advice(idle(100.0, causes(host=100.0, dominant=""))) == ""
    assert idle_advice(idle(100.0, None)) == ""


def step(name: str, i: IdleStats | None) -> StepStats:
    return StepStats(name=name, number=step_number(name), start_us=0.0, wall_us=1000.0, cpu_us=1000.0,
                     gpu_busy_us=None, gpu_busy_pct=None, kernel_count=None, idle=i)


def test_all_steps_idle_adds_windows_idle_causes_and_syncs_and_keeps_the_largest_gap():
    item = SyncWait("aten::item", "cudaStreamSynchronize", 100.0, 1)
    one = idle(150.0, causes(host=50.0, sync=100.0, dominant="sync", syncs=[item]), window=1000.0, largest=100.0,
               at=200.0, step="ProfilerStep#1", over_10=3)
    two = idle(50.0, causes(host=10.0, short=40.0, dominant="short gaps",
                            syncs=[SyncWait("aten::item", "cudaStreamSynchronize", 30.0, 2),
                                   SyncWait("", "cudaDeviceSynchronize", 5.0, 4)]),
               window=500.0, largest=120.0, at=7.0, step="ProfilerStep#2", over_10=1)
    total = idle_total([step("ProfilerStep#1", one), step("ProfilerStep#2", two), step("ProfilerStep#3", None)])
    assert total == IdleStats(
        window_us=1500.0, idle_us=200.0, ratio=200.0 / 1500.0, largest_gap_us=120.0, largest_gap_at_us=7.0,
        largest_gap_step="ProfilerStep#2", gaps_over_10us=4, flagged=False,
        causes=IdleCauses(host_wait_us=60.0, sync_us=100.0, short_gaps_us=40.0, other_us=0.0, unknown_us=0.0,
                          dominant="sync",
                          syncs=[SyncWait("aten::item", "cudaStreamSynchronize", 130.0, 3),
                                 SyncWait("", "cudaDeviceSynchronize", 5.0, 4)]))  # by time, not gaps


def test_all_steps_idle_is_flagged_from_a_fifth_of_the_windows():
    at = idle_total([step("ProfilerStep#1", idle(200.0, causes(host=200.0, dominant="host wait")))])
    below = idle_total([step("ProfilerStep#1", idle(199.0, causes(host=199.0, dominant="host wait")))])
    assert at is not None and below is not None
    assert (at.flagged, below.flagged) == (True, False)


def test_all_steps_idle_without_a_measured_step_is_none_and_a_step_without_causes_adds_its_time():
    assert idle_total([step("ProfilerStep#1", None)]) is None
    assert idle_total([]) is None
    total = idle_total([step("ProfilerStep#1", idle(100.0, None, over_10=2)),
                        step("ProfilerStep#2", idle(0.0, causes(), window=0.0))])
    assert total is not None
    assert (total.window_us, total.idle_us, total.gaps_over_10us) == (1000.0, 100.0, 2)
    assert total.causes == causes()  # no cause known: nothing dominant
    empty = idle_total([step("ProfilerStep#1", idle(0.0, causes(), window=1.0))])
    assert empty is not None and (empty.ratio, empty.flagged) == (0.0, False)


def test_a_zero_length_window_has_no_idle_ratio():
    total = idle_total([step("ProfilerStep#1", IdleStats(0.0, 0.0, 0.0, 0.0, 0.0, "ProfilerStep#1", 0, False,
                                                         causes()))])
    assert total is not None and total.ratio == 0.0


def test_a_gap_of_exactly_10_us_counts_as_over_10_and_the_largest_gap_is_placed_in_its_step(tmp_path):
    """One 1000 us step from 0: kernels (launched 100 us before they run) at 100-110, 120-130 (a 10 us gap), 139-149
    (9 us), 400-500 (the largest gap, 251 us, starting 149 us into the step)."""
    from lightx2v.trace_summary.analyze import analyze_trace

    t = Kineto()
    t.step(1, 0.0)
    for ts, dur in ((0.0, 10.0), (20.0, 10.0), (39.0, 10.0), (300.0, 100.0)):
        t.op("aten::add", ts, [("kernel", "k", dur)], dur=5.0)
    r = analyze_trace(t.write(tmp_path / "w.pt.trace.json"))
    (s,) = r.steps
    assert s.idle is not None
    # gaps: 0-100, 110-120, 130-139, 149-400, 500-1000
    assert s.idle.gaps_over_10us == 4
    assert (s.idle.largest_gap_us, s.idle.largest_gap_at_us, s.idle.largest_gap_step) == (500.0, 500.0,
                                                                                         "ProfilerStep#1")
    assert s.idle.idle_us == 100 + 10 + 9 + 251 + 500


# ---------------------------------------------------------------------------------- idle by cause, per step
# Hand-made traces (tests/helpers/kineto.py: an op at ts launches its GPU work at ts + 1 and runs it from ts + 100).
# An op at 0 without GPU work makes the trace start there, so the steps start 1000 us into it.
def analyzed(tmp_path, t: Kineto, name: str = "w.pt.trace.json"):
    from lightx2v.trace_summary.analyze import analyze_trace

    return analyze_trace(t.write(tmp_path / name))


def trace_from_0() -> Kineto:
    t = Kineto()
    t.op("aten::empty", 0.0, [], dur=10.0)
    t.step(1, 1000.0)
    return t


def test_the_largest_gap_is_the_longest_one_placed_from_its_steps_start_and_the_flag_starts_at_a_fifth(tmp_path):
    t = trace_from_0()
    t.op("aten::mm", 1300.0, [("kernel", "a", 100.0)])  # GPU 1400-1500
    t.op("aten::mm", 1550.0, [("kernel", "b", 350.0)])  # GPU 1650-2000
    (s,) = analyzed(tmp_path, t).steps
    # gaps: 1000-1400 (400, the largest, at the step's start) and 1500-1650 (150)
    assert (s.idle.largest_gap_us, s.idle.largest_gap_at_us, s.idle.idle_us) == (400.0, 0.0, 550.0)

    exact = trace_from_0()
    exact.op("aten::mm", 1000.0, [("kernel", "a", 800.0)])  # GPU 1100-1900: idle 100 + 100 of 1000 us
    (s,) = analyzed(tmp_path, exact, "exact.pt.trace.json").steps
    assert (s.idle.ratio, s.idle.flagged) == (0.2, True)


def sync(t: Kineto, call: str, ts: float, dur: float) -> None:
    t.ids += 1
    t._x("cuda_runtime", call, 1, ts, dur, correlation=t.ids)


def syncing_trace() -> Kineto:
    """Step 1000-2000. Kernels 1100-1150, 1360-1410, 1620-1670, 1800-1810; between them the host sat in a sync:
    .item()'s cudaStreamSynchronize 1165-1255 and 1425-1515, a cudaDeviceSynchronize outside any op 1680-1785."""
    t = trace_from_0()
    t.op("aten::mm", 1000.0, [("kernel", "k", 50.0)], dur=20.0)
    t.op("aten::item", 1160.0, [], dur=100.0)
    sync(t, "cudaStreamSynchronize", 1165.0, 90.0)
    t.op("aten::mm", 1260.0, [("kernel", "k", 50.0)], dur=20.0)
    t.op("aten::item", 1420.0, [], dur=100.0)
    sync(t, "cudaStreamSynchronize", 1425.0, 90.0)
    t.op("aten::mm", 1520.0, [("kernel", "k", 50.0)], dur=20.0)
    sync(t, "cudaDeviceSynchronize", 1680.0, 20.0)
    t.op("aten::add", 1700.0, [("kernel", "k", 10.0)], dur=5.0)
    return t


@pytest.mark.parametrize("reverse", [False, True], ids=["time_order", "reverse_file_order"])
def test_gaps_ended_after_a_sync_add_up_per_op_and_call_in_any_file_order(tmp_path, reverse):
    t = syncing_trace()
    if reverse:
        t.events.reverse()
    (s,) = analyzed(tmp_path, t).steps
    c = s.idle.causes
    # 1000-1100 and 1810-2000: host wait (100 + 190); 1150-1360, 1410-1620: item's syncs; 1670-1800: the device sync
    assert (c.host_wait_us, c.sync_us, c.short_gaps_us, c.other_us) == (290.0, 550.0, 0.0, 0.0)
    assert [(w.op, w.call, w.idle_us, w.gaps) for w in c.syncs] == [
        ("aten::item", "cudaStreamSynchronize", 420.0, 2), ("", "cudaDeviceSynchronize", 130.0, 1)]


def test_an_item_without_a_recorded_runtime_call_is_a_sync_too(tmp_path):
    t = trace_from_0()
    t.op("aten::mm", 1000.0, [("kernel", "k", 50.0)], dur=20.0)  # GPU 1100-1150
    t.op("aten::item", 1160.0, [], dur=100.0)  # .item() 1160-1260, no cudaStreamSynchronize recorded
    t.op("aten::mm", 1270.0, [("kernel", "k", 730.0)], dur=20.0)  # GPU 1370-2000
    (s,) = analyzed(tmp_path, t).steps
    assert (s.idle.causes.sync_us, [(w.op, w.call) for w in s.idle.causes.syncs]) == (
        220.0, [("aten::item", "aten::item")])


def test_work_queued_exactly_when_the_gpu_went_idle_or_a_30_us_gap_is_not_launch_overhead(tmp_path):
    t = trace_from_0()
    t.op("aten::mm", 1000.0, [("kernel", "k", 50.0)], dur=10.0)  # GPU 1100-1150
    t.op("aten::add", 1149.0, [("kernel", "k", 10.0)], dur=5.0)  # launched at 1150: GPU 1249-1259
    t.op("aten::add", 1189.0, [("kernel", "k", 741.0)], dur=5.0)  # launched at 1190: GPU 1289-2030
    (s,) = analyzed(tmp_path, t).steps
    c = s.idle.causes
    # 1150-1249: queued at the gap's very start, 99 us: other; 1259-1289: queued, exactly 30 us: other too
    assert (c.other_us, c.short_gaps_us, c.host_wait_us) == (129.0, 0.0, 100.0)


def test_sub_microsecond_idle_still_has_a_dominant_cause_and_advice():
    total = idle_total([step("ProfilerStep#1", idle(0.5, causes(host=0.5, dominant="host wait")))])
    assert total is not None and total.causes is not None and total.causes.dominant == "host wait"
    assert idle_advice(total).startswith("the GPU waits for the host to launch work (100% of idle)")


def test_the_sync_advice_gives_the_calls_time_in_ms_to_the_microsecond():
    top = SyncWait(op="", call="cudaDeviceSynchronize", idle_us=1500.0, gaps=3)
    line = idle_advice(idle(1500.0, causes(sync=1500.0, dominant="sync", syncs=[top])))
    assert "(100% of idle: cudaDeviceSynchronize 1.500 ms)" in line
