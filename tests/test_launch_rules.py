"""The launch chain, the charge of GPU work to ops and the GPU totals as pure logic, fast: hand-made kineto events
fed to the pass's ``Collected`` (no file), then ``launch_chain``, ``group_keys`` / ``launches`` and ``gpu_work``
on it, every answer worked out here. Which call launched a GPU event (its correlation id), the op and label
around that call, when ``External id`` is trusted instead, how the links are counted; per-name GPU totals, busy
time as a union, communication kernels. tests/test_trace_summary_attribution.py checks the same on the H200
fixture against the trace's other link, tests/test_trace_corpus.py on HTA's traces of every kineto schema."""

from __future__ import annotations

import math

import pytest

from lightx2v.trace_summary.attribution import group_keys, launches
from lightx2v.trace_summary.collect import Collected
from lightx2v.trace_summary.enclosing import NONE
from lightx2v.trace_summary.kernels import gpu_work
from lightx2v.trace_summary.launch import launch_chain
from lightx2v.trace_summary.optree import op_tree

HOST, GPU = 1, 0


class Trace:
    """Events on host thread (1, tid) and GPU streams (0, stream), times in us from 1000."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def add(self, cat, name, ts, dur, pid=HOST, tid=1, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": 1000.0 + ts,
                            "dur": dur, "args": args})

    def op(self, name, ts, dur, ext=None, tid=1):
        self.add("cpu_op", name, ts, dur, tid=tid, **({} if ext is None else {"External id": ext}))

    def label(self, name, ts, dur, tid=1):
        self.add("user_annotation", name, ts, dur, tid=tid)

    def call(self, ts, corr, tid=1, name="cudaLaunchKernel", dur=2.0):
        self.add("cuda_runtime", name, ts, dur, tid=tid, correlation=corr)

    def kernel(self, name, ts, dur, corr=None, ext=None, stream=7, pid=GPU, cat="kernel", **more):
        args = {k: v for k, v in (("correlation", corr), ("External id", ext)) if v is not None}
        self.add(cat, name, ts, dur, pid=pid, tid=stream, **args, **more)

    def collected(self) -> Collected:
        c = Collected()
        c.feed(self.events)
        return c


def ops_of(c, chain) -> list[str]:
    names = list(c.names)
    return [names[c.op_name[o]] if o != NONE else "" for o in chain.op]


def labels_of(c, chain) -> list[str]:
    names = list(c.label_names)
    return [names[c.lab_name[j]] if j != NONE else "" for j in chain.label]


def links(chain):
    x = chain.links
    return (x.gpu_events, x.with_launch_record, x.by_launch_chain, x.by_external_id, x.label_only, x.unlinked,
            x.external_id)


# --- the launch chain -------------------------------------------------------------------------------------------

def test_a_gpu_event_is_launched_by_the_innermost_op_around_the_call_with_its_correlation_id():
    t = Trace()
    t.label("attn", 0, 100)
    t.op("aten::sdpa", 10, 50, ext=1)
    t.op("aten::_flash_fwd", 20, 20, ext=2)
    t.call(25, corr=90)
    t.op("aten::add", 70, 10, ext=3)
    t.call(72, corr=91)
    t.kernel("flash", 200, 30, corr=90, ext=2)
    t.kernel("add", 260, 5, corr=91, ext=3)
    c = t.collected()
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["aten::_flash_fwd", "aten::add"]
    assert labels_of(c, chain) == ["attn", "attn"]
    assert list(chain.launch_ts) == [25.0, 72.0]  # the call's start (times from the trace's first us)
    assert list(chain.call) == [0, 1]
    assert links(chain) == (2, 2, 2, 0, 0, 0, "agrees with the launch chain on 2 of 2 events")


def test_a_call_on_another_thread_is_charged_to_that_threads_op():
    t = Trace()
    t.op("main_op", 0, 100, tid=1)
    t.op("worker_op", 10, 20, tid=2)
    t.call(15, corr=5, tid=2)
    t.kernel("k", 200, 10, corr=5)
    c = t.collected()
    assert ops_of(c, launch_chain(c)) == ["worker_op"]


def test_a_call_outside_every_op_keeps_the_label_around_it_and_counts_as_label_only():
    t = Trace()
    t.label("Optimizer.step#AdamW.step", 0, 100)
    t.call(50, corr=7)
    t.call(150, corr=8)  # outside the label too
    t.kernel("multi_tensor_apply", 300, 10, corr=7)
    t.kernel("other", 320, 10, corr=8)
    c = t.collected()
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["", ""] and labels_of(c, chain) == ["Optimizer.step#AdamW.step", ""]
    assert list(chain.launch_ts) == [50.0, 150.0]
    assert links(chain)[:6] == (2, 2, 0, 0, 1, 1)
    assert links(chain)[6] == "not recorded"


def test_a_gpu_event_without_a_matching_call_or_correlation_is_unlinked():
    t = Trace()
    t.op("aten::mm", 0, 10)
    t.call(2, corr=1)
    t.kernel("k_other_corr", 100, 5, corr=2)  # its call fell outside the capture
    t.kernel("k_no_corr", 110, 5)
    c = t.collected()
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["", ""] and list(chain.call) == [NONE, NONE]
    assert all(math.isnan(x) for x in chain.launch_ts)
    assert links(chain) == (2, 0, 0, 0, 0, 2, "not recorded")


def test_a_call_without_a_correlation_id_launches_nothing():
    t = Trace()
    t.op("aten::mm", 0, 10)
    t.add("cuda_runtime", "cudaLaunchKernel", 2, 1)  # no correlation
    t.kernel("k", 100, 5)  # none either
    c = t.collected()
    assert links(launch_chain(c))[:3] == (1, 0, 0)


def trusted_trace(agreeing: int, disagreeing: int, unrecorded_ext: int | None = 50) -> Trace:
    """``agreeing`` + ``disagreeing`` kernels with a launch record whose External id names the op around their
    call, or another op; one more kernel without a launch record whose External id is ``unrecorded_ext``."""
    t = Trace()
    t.op("aten::mm", 0, 10, ext=1)
    t.op("aten::other", 20, 10, ext=2)
    t.label("late", 45, 20)
    t.op("aten::late", 50, 10, ext=50)
    for i in range(agreeing + disagreeing):
        t.call(2, corr=100 + i)
        t.kernel("gemm", 100 + i, 1, corr=100 + i, ext=1 if i < agreeing else 2)
    t.kernel("lost", 500, 1, corr=999, ext=unrecorded_ext)
    return t


def test_external_id_links_an_event_without_a_launch_record_when_it_agrees_with_99_percent_of_the_chain():
    c = trusted_trace(99, 1).collected()
    chain = launch_chain(c)
    assert ops_of(c, chain)[-1] == "aten::late" and labels_of(c, chain)[-1] == "late"
    assert chain.launch_ts[-1] == 50.0  # the op's start: the launch's time as near as it is known
    assert links(chain) == (101, 100, 100, 1, 0, 0, "agrees with the launch chain on 99 of 100 events")


def test_external_id_agreeing_less_often_than_99_percent_is_not_used():
    c = trusted_trace(98, 2).collected()
    chain = launch_chain(c)
    assert ops_of(c, chain)[-1] == "" and math.isnan(chain.launch_ts[-1])
    assert links(chain) == (101, 100, 100, 0, 0, 1, "agrees with the launch chain on 98 of 100 events: not used")


def test_the_agreement_counts_are_written_with_thousands_separators():
    c = trusted_trace(1000, 0, unrecorded_ext=None).collected()
    assert links(launch_chain(c))[6] == "agrees with the launch chain on 1,000 of 1,000 events"


def test_a_trusted_external_id_naming_no_op_links_nothing():
    c = trusted_trace(3, 0, unrecorded_ext=77).collected()
    chain = launch_chain(c)
    assert ops_of(c, chain)[-1] == "" and links(chain)[3:6] == (0, 0, 1)


def no_records(exts_and_corrs) -> Trace:
    t = Trace()
    t.label("blk", 0, 100)
    t.op("aten::mm", 0, 10, ext=1)
    t.op("aten::add", 20, 10, ext=2)
    for i, (ext, corr) in enumerate(exts_and_corrs):
        t.kernel(f"k{i}", 100 + 10 * i, 1, corr=corr, ext=ext)
    return t


def test_without_launch_records_external_id_is_used_unless_it_repeats_the_correlation_id():
    c = no_records([(1, 11), (2, 12), (2, 2)]).collected()  # one of three repeats its correlation id
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["aten::mm", "aten::add", "aten::add"]
    assert labels_of(c, chain) == ["blk"] * 3
    assert list(chain.launch_ts) == [0.0, 20.0, 20.0]
    assert links(chain) == (3, 0, 0, 3, 0, 0, "no launch records to check it against")


@pytest.mark.parametrize("pairs", [[(1, 1), (2, 12)], [(1, 1), (2, 2), (2, 12)]])
def test_without_launch_records_an_external_id_that_repeats_the_correlation_id_half_the_time_is_not_used(pairs):
    c = no_records(pairs).collected()
    chain = launch_chain(c)
    assert set(ops_of(c, chain)) == {""}
    assert links(chain)[3] == 0 and links(chain)[6] == ("no launch records to check it against; it repeats the "
                                                        "correlation id: not used")


def test_a_label_around_the_op_is_preferred_to_one_around_the_call_only():
    t = Trace()
    t.label("outer", 0, 100)
    t.op("aten::mm", 10, 30, ext=1)
    t.label("inner_after_op_start", 15, 10)  # around the call, not around the op
    t.call(18, corr=3)
    t.kernel("k", 200, 1, corr=3)
    c = t.collected()
    assert labels_of(c, launch_chain(c)) == ["outer"]


def test_each_op_labels_all_its_events_and_an_unlabelled_op_none():
    t = Trace()
    t.label("blk", 0, 15)
    t.op("a", 0, 10, ext=1)
    t.call(1, corr=1)
    t.call(3, corr=2)
    t.op("b", 20, 10, ext=2)
    t.call(22, corr=3)
    for corr in (1, 2, 3):
        t.kernel(f"k{corr}", 100 + corr, 1, corr=corr)
    c = t.collected()
    assert labels_of(c, launch_chain(c)) == ["blk", "blk", ""]


# --- charging GPU work to ops -------------------------------------------------------------------------------------

def rows(t: Trace):
    c = t.collected()
    chain = launch_chain(c)
    return [(r.op, r.label, r.launcher, r.kind, r.name, r.calls, r.total_us)
            for r in launches(c, group_keys(c, op_tree(c), chain))]


def test_gpu_work_is_charged_to_its_top_level_op_label_and_launcher_most_time_first():
    t = Trace()
    t.label("attn", 0, 100)
    t.op("aten::sdpa", 0, 50, ext=1)
    t.op("aten::_flash_fwd", 10, 20, ext=2)
    t.call(12, corr=1)
    t.call(14, corr=2)
    t.op("aten::copy_", 60, 10, ext=3)
    t.call(62, corr=3, name="cudaMemcpyAsync")
    t.call(200, corr=4)  # no op, no label
    t.kernel("flash", 300, 30, corr=1)
    t.kernel("flash", 340, 25, corr=2)
    t.kernel("Memcpy HtoD", 400, 100, corr=3, cat="gpu_memcpy", bytes=64)
    t.kernel("orphan", 600, 1, corr=4)
    assert rows(t) == [("aten::copy_", "attn", "aten::copy_", "memcpy", "Memcpy HtoD", 1, 100.0),
                       ("aten::sdpa", "attn", "aten::_flash_fwd", "kernel", "flash", 2, 55.0),
                       ("", "", "", "kernel", "orphan", 1, 1.0)]


def test_the_same_kernel_under_two_ops_is_two_rows():
    t = Trace()
    t.op("a", 0, 10, ext=1)
    t.call(1, corr=1)
    t.op("b", 20, 10, ext=2)
    t.call(21, corr=2)
    t.call(23, corr=3)
    t.kernel("gemm", 100, 3, corr=1)
    t.kernel("gemm", 110, 4, corr=2)
    t.kernel("gemm", 120, 4, corr=3)
    assert rows(t) == [("b", "", "b", "kernel", "gemm", 2, 8.0), ("a", "", "a", "kernel", "gemm", 1, 3.0)]


def test_a_call_outside_any_op_still_charges_its_label():
    t = Trace()
    t.label("step", 0, 50)
    t.call(10, corr=1)
    t.kernel("k", 100, 2, corr=1)
    assert rows(t) == [("", "step", "", "kernel", "k", 1, 2.0)]


# --- GPU totals -----------------------------------------------------------------------------------------------------

def test_kernels_and_memory_ops_are_totalled_per_name_most_time_first():
    t = Trace()
    t.kernel("void at::native::gelu_kernel<float>(int)", 0, 10)
    t.kernel("gemm", 20, 30)
    t.kernel("gemm", 60, 20)
    t.kernel("Memset", 100, 15, cat="gpu_memset", bytes=4)
    t.kernel("Memcpy DtoD", 120, 15, cat="gpu_memcpy", bytes=100)
    t.kernel("Memcpy DtoD", 140, 10, cat="gpu_memcpy", bytes=28)
    w = gpu_work(t.collected())
    # GPU activity: 60 us of kernels + 40 us of copies and sets; memory ops most time first, not first seen
    assert [(k.name, k.short_name, k.calls, k.total_us, k.mean_us, k.pct_of_gpu_time) for k in w.kernels] == [
        ("gemm", "gemm", 2, 50.0, 25.0, 50.0),
        ("void at::native::gelu_kernel<float>(int)", "gelu_kernel", 1, 10.0, 10.0, 10.0)]
    assert [(m.kind, m.name, m.calls, m.total_us, m.bytes) for m in w.memory_ops] == [
        ("memcpy", "Memcpy DtoD", 2, 25.0, 128), ("memset", "Memset", 1, 15.0, 4)]
    assert w.is_kernel == [True, True, False, False]


def test_gpu_busy_time_is_the_union_of_all_gpu_activity_on_every_stream():
    t = Trace()
    t.kernel("a", 0, 10, stream=7)
    t.kernel("b", 5, 10, stream=8)  # overlaps a
    t.kernel("c", 30, 5, stream=7, pid=1)  # another device
    t.kernel("m", 40, 5, cat="gpu_memset", stream=9)
    w = gpu_work(t.collected())
    assert w.busy == [(0.0, 15.0), (30.0, 35.0), (40.0, 45.0)]
    totals = w.totals
    assert (totals.busy_us, totals.activity_us, totals.kernel_count, totals.kernel_us, totals.memcpy_us,
            totals.memset_us, totals.streams, totals.devices) == (25.0, 30.0, 3, 25.0, 0.0, 5.0, 4, 2)


def test_the_kernel_count_leaves_memory_ops_out():
    t = Trace()
    t.op("first", 0, 1)  # times count from the first event
    t.kernel("late", 50, 1)
    t.kernel("cpy", 10, 1, cat="gpu_memcpy")
    t.kernel("early", 20, 1)
    t.kernel("late", 60, 1)
    totals = gpu_work(t.collected()).totals
    assert totals is not None and totals.kernel_count == 3


def test_memcpy_time_is_totalled_apart_from_memset_time():
    t = Trace()
    t.kernel("Memcpy HtoD", 0, 7, cat="gpu_memcpy")
    t.kernel("Memcpy DtoH", 10, 3, cat="gpu_memcpy")
    t.kernel("Memset", 20, 2, cat="gpu_memset")
    totals = gpu_work(t.collected()).totals
    assert (totals.memcpy_us, totals.memset_us, totals.kernel_us, totals.kernel_count) == (10.0, 2.0, 0.0, 0)


def test_communication_kernels_are_the_nccl_and_rccl_ones_whatever_the_case():
    t = Trace()
    t.kernel("ncclDevKernel_AllReduce_Sum_f32", 0, 10)
    t.kernel("RCCL_AllGather", 5, 10)
    t.kernel("gemm", 30, 5)
    t.kernel("ncclMemcpy", 40, 5, cat="gpu_memcpy")  # a copy, not a communication kernel
    assert gpu_work(t.collected()).comm == [(0.0, 15.0)]


def test_a_trace_without_communication_kernels_has_no_communication_time():
    t = Trace()
    t.kernel("gemm", 0, 5)
    assert gpu_work(t.collected()).comm == []


def test_a_trace_without_gpu_activity_has_no_gpu_totals():
    t = Trace()
    t.op("aten::add", 0, 5)
    w = gpu_work(t.collected())
    assert (w.kernels, w.memory_ops, w.totals, w.busy, w.comm) == ([], [], None, [], [])


def test_a_kernel_shares_the_gpu_time_of_kernels_copies_and_sets_together():
    t = Trace()
    t.kernel("k", 0, 30)
    t.kernel("Memset", 40, 10, cat="gpu_memset")
    (k,) = gpu_work(t.collected()).kernels
    assert k.pct_of_gpu_time == 75.0


def test_a_kernel_that_took_no_time_has_no_share_of_the_gpu_time():
    t = Trace()
    t.kernel("k", 0, 10)
    t.kernel("instant", 20, 0)
    assert [(k.name, k.pct_of_gpu_time) for k in gpu_work(t.collected()).kernels] == [("k", 100.0), ("instant", 0.0)]


# --- more of the chain's cases --------------------------------------------------------------------------------------

def test_a_gpu_event_without_a_launch_record_does_not_stop_the_ones_after_it_being_linked():
    t = Trace()
    t.op("aten::mm", 0, 10, ext=1)
    t.call(2, corr=2)
    t.kernel("lost", 100, 1, corr=1)  # its call is not in the trace
    t.kernel("found", 110, 1, corr=2)
    c = t.collected()
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["", "aten::mm"] and links(chain)[:3] == (2, 1, 1)


def test_a_gpu_event_without_an_external_id_does_not_stop_the_ones_after_it_being_checked():
    t = Trace()
    t.op("aten::mm", 0, 10, ext=1)
    t.call(2, corr=5)
    t.call(3, corr=6)
    t.kernel("no_ext", 100, 1, corr=5)
    t.kernel("with_ext", 110, 1, corr=6, ext=1)
    c = t.collected()
    assert links(launch_chain(c))[6] == "agrees with the launch chain on 1 of 1 events"


def test_events_linked_by_external_id_get_their_ops_label_and_the_unlinked_ones_none():
    c = no_records([(1, 11), (5, 12)]).collected()  # External id 5 names no op
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["aten::mm", ""] and labels_of(c, chain) == ["blk", ""]
    assert links(chain)[3:6] == (1, 0, 1)


def test_external_ids_out_of_order_and_negative_still_name_their_ops():
    t = Trace()
    t.op("aten::mm", 0, 10, ext=5)
    t.op("aten::add", 20, 10, ext=-3)  # after a larger id, and below zero: a hand-written or odd writer's trace
    t.op("aten::mul", 40, 10, ext=9)  # no GPU event names it
    t.kernel("k0", 100, 1, corr=11, ext=-3)
    t.kernel("k1", 110, 1, corr=12, ext=5)
    c = t.collected()
    chain = launch_chain(c)
    assert ops_of(c, chain) == ["aten::add", "aten::mm"]
    assert links(chain)[3:6] == (2, 0, 0)


def test_a_label_that_ends_during_the_launch_call_does_not_hold_it():
    t = Trace()
    t.label("short", 0, 51)
    t.call(50, corr=1, dur=2)  # 50 to 52 us
    t.label("long", 60, 20)
    t.call(61, corr=2, dur=2)
    t.kernel("a", 100, 1, corr=1)
    t.kernel("b", 110, 1, corr=2)
    c = t.collected()
    assert labels_of(c, launch_chain(c)) == ["", "long"]
