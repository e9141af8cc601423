"""The one streaming pass (``Collected.feed``) as pure logic: hand-made kineto events in, the per-event arrays,
interned names, step spans, the trace's span and the malformed-event counts out, every value written here."""

from __future__ import annotations

import itertools
import json
import math
import pickle
import sys

import pytest

from lightx2v.trace_summary.collect import NO_ID, Collected, is_label_op, malformed_field
from lightx2v.trace_summary.reader import TraceStream


@pytest.fixture(autouse=True, params=["dicts", "typed records"])
def way_in(request, monkeypatch, tmp_path):
    """Every rule holds both ways in: ``feed`` (the generic reader's dicts) and ``feed_records`` (the typed
    reader's records, with the dicts it could not type), the events written to a file and read as the summary
    reads them."""
    if request.param == "dicts":
        monkeypatch.setattr(sys.modules[__name__], "FEED", Collected.feed)
        return
    files = itertools.count()

    def feed_records(c: Collected, events: list) -> None:
        path = tmp_path / f"batch{next(files)}.json"
        path.write_text(json.dumps({"traceEvents": [*events, SENTINEL]}))
        stream = TraceStream(str(path), typed=True)
        for batch in stream.batches():
            c.feed_records(batch, stream, stream.generic)
        c.events -= 1

    monkeypatch.setattr(sys.modules[__name__], "FEED", feed_records)


FEED = Collected.feed  # set per test by ``way_in``
# The reader decodes a file's last event on its own, exactly (a dict): after the sentinel, every event of a test goes
# through the typed records; the sentinel, metadata, changes nothing but the count of events, which is put back.
SENTINEL = {"ph": "M", "name": "sentinel"}


def ev(cat, name, ts, dur, pid=1, tid=1, ph="X", **args):
    return {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def fed(*events, **kwargs) -> Collected:
    c = Collected(**kwargs)
    FEED(c, list(events))
    return c


def test_cpu_ops_of_every_category_name_keep_thread_name_times_and_external_id_in_file_order():
    c = fed(ev("cpu_op", "aten::mm", 1000.5, 10.0, **{"External id": 7}),
            ev("operator", "aten::add", 1020.0, 5.0, tid=2),
            ev("Operator", "aten::mm", 1030.0, 2.0, **{"External id": 9}))
    assert c.names == {"aten::mm": 0, "aten::add": 1}
    assert list(c.op_name) == [0, 1, 0] and list(c.op_thread) == [0, 1, 0]
    assert c.threads == {(1, 1): 0, (1, 2): 1}
    assert c.base == 1000.0  # the whole microsecond at or before the first event
    assert list(c.op_ts) == [0.5, 20.0, 30.0] and list(c.op_dur) == [10.0, 5.0, 2.0]
    assert list(c.op_ext) == [7, NO_ID, 9]
    assert (c.span_lo, c.span_hi) == (0.5, 32.0) and c.events == 3


def test_an_external_id_that_is_missing_no_integer_or_beyond_64_bits_is_no_id():
    c = fed(ev("cpu_op", "a", 0, 1, **{"External id": "7"}), ev("cpu_op", "a", 1, 1, **{"External id": 2**64}),
            {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 2, "dur": 1},
            ev("cpu_op", "a", 3, 1, **{"External id": 2**63 - 1}),
            ev("kernel", "k", 4, 1, pid=0, tid=7, **{"External id": "x", "correlation": 2**64}),
            ev("kernel", "k", 5, 1, pid=0, tid=7, **{"External id": 5, "correlation": 6}))
    assert list(c.op_ext) == [NO_ID, NO_ID, NO_ID, 2**63 - 1]
    assert list(c.g_ext) == [NO_ID, 5] and list(c.g_corr) == [NO_ID, 6]


def test_kernels_keep_their_stream_name_times_and_both_ids():
    c = fed(ev("kernel", "gemm", 100.0, 4.0, pid=0, tid=7, correlation=11, **{"External id": 3}),
            ev("Kernel", "gelu", 110.0, 2.0, pid=0, tid=8, correlation=12),
            ev("kernel", "gemm", 120.0, 4.0, pid=0, tid=7))
    assert c.gpu_names == {"gemm": 0, "gelu": 1} and list(c.g_name) == [0, 1, 0]
    assert list(c.g_lo) == [0.0, 10.0, 20.0] and list(c.g_dur) == [4.0, 2.0, 4.0]
    assert list(c.g_corr) == [11, 12, NO_ID] and list(c.g_ext) == [3, NO_ID, NO_ID]
    assert c.streams == {(0, 7), (0, 8)} and (c.span_lo, c.span_hi) == (0.0, 24.0)


@pytest.mark.parametrize("cat, kind", [("gpu_memcpy", "memcpy"), ("Memcpy", "memcpy"), ("memcpy", "memcpy"),
                                       ("gpu_memset", "memset"), ("Memset", "memset"), ("memset", "memset")])
def test_a_memory_op_is_keyed_by_its_kind_and_name(cat, kind):
    c = fed(ev(cat, "Memcpy HtoD", 0, 3, pid=0, tid=7, correlation=4, bytes=100, **{"External id": 2}))
    assert c.gpu_names == {(kind, "Memcpy HtoD"): 0} and list(c.g_name) == [0]
    assert list(c.g_corr) == [4] and list(c.g_ext) == [2] and list(c.g_dur) == [3.0] and c.streams == {(0, 7)}
    assert c.mem_bytes == {0: 100}


def test_a_memory_op_s_bytes_are_summed_per_name_and_unknown_once_any_is():
    c = fed(ev("gpu_memcpy", "HtoD", 0, 1, pid=0, tid=7, bytes=100),
            ev("gpu_memcpy", "HtoD", 2, 1, pid=0, tid=7, bytes=50),
            ev("gpu_memset", "set", 4, 1, pid=0, tid=7, bytes=8),
            ev("gpu_memset", "set", 6, 1, pid=0, tid=7),
            ev("gpu_memset", "set", 8, 1, pid=0, tid=7, bytes=8),
            ev("gpu_memcpy", "DtoH", 10, 1, pid=0, tid=7))
    assert c.mem_bytes == {0: 150, 1: None, 2: None}
    assert list(c.g_ext) == [NO_ID] * 6 and list(c.g_corr) == [NO_ID] * 6


@pytest.mark.parametrize("bad", [-1, 1.5, "8", True])
def test_a_memory_op_s_bytes_that_are_no_non_negative_integer_are_unknown_and_said_but_the_op_is_kept(bad):
    c = fed(ev("gpu_memcpy", "HtoD", 0, 1, pid=0, tid=7, bytes=bad),
            ev("gpu_memcpy", "HtoD", 2, 1, pid=0, tid=7, bytes=bad))
    assert c.mem_bytes == {0: None} and len(c.g_lo) == 2
    assert c.malformed == {("args.bytes", "not a non-negative integer (size left unknown)", False): [2, "HtoD"]}


def test_runtime_calls_keep_thread_name_times_and_correlation_and_do_not_widen_the_span():
    c = fed(ev("cpu_op", "aten::mm", 10, 10),
            ev("cuda_runtime", "cudaLaunchKernel", 12, 2, correlation=5),
            ev("cuda_driver", "cuLaunchKernel", 14, 100, tid=3),
            ev("Runtime", "cudaMemcpy", 15, 1, correlation="x"),
            ev("runtime", "hipLaunchKernel", 16, 1, correlation=6),
            ev("driver", "hipModuleLaunchKernel", 17, 1, correlation=7))
    assert c.rt_names == {"cudaLaunchKernel": 0, "cuLaunchKernel": 1, "cudaMemcpy": 2, "hipLaunchKernel": 3,
                          "hipModuleLaunchKernel": 4}
    assert list(c.rt_name) == [0, 1, 2, 3, 4] and list(c.rt_thread) == [0, 1, 0, 0, 0]
    assert list(c.rt_corr) == [5, NO_ID, NO_ID, 6, 7]
    assert list(c.rt_ts) == [2.0, 4.0, 5.0, 6.0, 7.0] and list(c.rt_dur) == [2.0, 100.0, 1.0, 1.0, 1.0]
    assert c.threads == {(1, 1): 0, (1, 3): 1}
    assert (c.span_lo, c.span_hi) == (0.0, 10.0)  # the op's only


def test_labels_keep_thread_name_and_times_and_widen_the_span():
    c = fed(ev("user_annotation", "forward", 0, 50), ev("user_annotation", "attn", 10, 20, tid=4),
            ev("user_annotation", "forward", 60, 50))
    assert c.label_names == {"forward": 0, "attn": 1} and list(c.lab_name) == [0, 1, 0]
    assert list(c.lab_thread) == [0, 1, 0] and list(c.lab_ts) == [0.0, 10.0, 60.0]
    assert list(c.lab_dur) == [50.0, 20.0, 50.0] and (c.span_lo, c.span_hi) == (0.0, 110.0)
    assert len(c.op_ts) == 0


def test_labels_older_kineto_wrote_as_ops_are_labels_and_the_ops_inside_them_stay_ops():
    c = fed(ev("Operator", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 50),
            ev("Operator", "aten::copy_", 10, 5),
            ev("Operator", "Optimizer.zero_grad#SGD.zero_grad", 60, 10),
            ev("cpu_op", "Optimizer.step#SGD.step", 80, 40, tid=2),
            ev("cpu_op", "aten::add_", 90, 5, tid=2),
            ev("operator", "DistributedDataParallel.forward", 130, 20),
            ev("Operator", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 160, 50))
    assert c.label_names == {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0,
                             "Optimizer.zero_grad#SGD.zero_grad": 1, "Optimizer.step#SGD.step": 2,
                             "DistributedDataParallel.forward": 3}
    assert list(c.lab_name) == [0, 1, 2, 3, 0] and list(c.lab_thread) == [0, 0, 1, 0, 0]
    assert list(c.lab_ts) == [0.0, 60.0, 80.0, 130.0, 160.0] and list(c.lab_dur) == [50.0, 10.0, 40.0, 20.0, 50.0]
    assert c.names == {"aten::copy_": 0, "aten::add_": 1} and list(c.op_ts) == [10.0, 90.0]
    assert (c.span_lo, c.span_hi) == (0.0, 210.0)  # labels widen the span, as user_annotation ones do


@pytest.mark.parametrize("name, label", [
    ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", True), ("enumerate(DataPipe)#Mapper", True),
    ("Optimizer.step#AdamW.step", True), ("Optimizer.zero_grad#SGD.zero_grad", True),
    ("DataParallel.forward", True), ("DistributedDataParallel.forward", True),
    ("aten::copy_", False), ("DataParallel.forward_pre", False), ("Optimizer", False), ("enumerate", False)])
def test_a_label_written_as_an_op_is_known_by_tensorboards_names(name, label):
    assert is_label_op(name) is label


def test_profiler_steps_are_spans_cpu_and_gpu_side_merged_per_name_not_ops_or_labels():
    c = fed(ev("user_annotation", "ProfilerStep#1", 0, 100),
            ev("cpu_op", "ProfilerStep#1", 5, 100),
            ev("gpu_user_annotation", "ProfilerStep#1", 20, 150, pid=0, tid=7),
            ev("user_annotation", "ProfilerStep#2", 200, 100))
    assert c.cpu_steps == {"ProfilerStep#1": [0.0, 105.0], "ProfilerStep#2": [200.0, 300.0]}
    assert c.gpu_steps == {"ProfilerStep#1": [20.0, 170.0]}
    assert len(c.op_ts) == 0 and len(c.lab_ts) == 0 and c.names == {} and c.label_names == {}
    assert (c.span_lo, c.span_hi) == (0.0, 300.0)


def test_a_step_seen_again_earlier_and_shorter_keeps_the_widest_span():
    c = fed(ev("user_annotation", "ProfilerStep#1", 10, 100), ev("user_annotation", "ProfilerStep#1", 0, 20))
    assert c.cpu_steps == {"ProfilerStep#1": [-10.0, 100.0]}  # times from the first event's 10


def test_the_base_is_the_first_timed_events_whole_microsecond_and_stays_for_later_batches():
    c = Collected()
    FEED(c, [{"ph": "M", "name": "process_name", "ts": 5, "args": {}},  # no X event: not the base
            {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": True, "dur": 1},  # no number
            ev("cpu_op", "a", 1712195495505583.75, 2.0)])
    assert c.base == 1712195495505583.0 and list(c.op_ts) == [0.75]
    FEED(c, [ev("cpu_op", "b", 1712195495505580.5, 1.0)])  # earlier, in a later batch: the base stays
    assert c.base == 1712195495505583.0 and list(c.op_ts) == [0.75, -2.5]
    assert (c.span_lo, c.span_hi) == (-2.5, 2.75) and c.events == 4


def test_a_negative_first_timestamp_floors_down():
    c = fed(ev("cpu_op", "a", -3.25, 1.0))
    assert c.base == -4.0 and list(c.op_ts) == [0.75]


def test_a_batch_without_a_timed_event_leaves_the_base_unset():
    c = Collected()
    FEED(c, [{"ph": "M", "name": "x", "ts": 3}, {"ph": "X", "ts": "1"}, {"ph": "X", "ts": float("inf")}])
    assert c.base is None and c.events == 3
    FEED(c, [ev("cpu_op", "a", 7.5, 1.0)])
    assert c.base == 7.0


def test_skipped_categories_are_neither_kept_nor_counted_as_malformed():
    c = fed(ev("python_function", "f", 0, 1), ev("ac2g", "flow", 1, 1, ph="s"), ev("Trace", "t", 0, 1000),
            ev("python", "p", 0, 1), ev("fwdbwd", "fb", 0, 1), ev("overhead", "o", 0, 1),
            ev("cuda_profiler_range", "r", 0, 1), {"ph": "X", "cat": "python_function", "ts": "bad"})
    assert c.malformed == {} and c.span_lo == math.inf and c.events == 8 and len(c.fr_ts) == 0


def test_with_a_frame_rule_the_frames_it_keeps_are_collected_and_do_not_widen_the_span():
    c = fed(ev("python_function", "model.py(21): forward", 10, 5), ev("python_function", "torch/nn.py(1): x", 11, 1),
            ev("python_function", "model.py(21): forward", 20, 5, tid=2), ev("cpu_op", "a", 100, 1),
            frames=lambda name: name.startswith("model.py"))
    assert c.frame_kept == ["model.py(21): forward"]
    assert c.frame_names == {"model.py(21): forward": 0, "torch/nn.py(1): x": -1}
    assert list(c.fr_name) == [0, 0] and list(c.fr_thread) == [0, 1] and list(c.fr_ts) == [0.0, 10.0]
    assert list(c.fr_dur) == [5.0, 5.0] and (c.span_lo, c.span_hi) == (90.0, 91.0)
    assert c.threads == {(1, 1): 0, (1, 2): 1}


def test_events_other_collectors_asked_for_go_to_them_x_or_not():
    class Memory:
        categories = frozenset({"cpu_instant_event", "[memory]"})

        def __init__(self):
            self.got = []

        def feed(self, event):
            self.got.append(event["name"])

    memory = Memory()
    c = fed(ev("[memory]", "alloc", 0, 0, ph="i"), ev("cpu_instant_event", "inst", 1, 0), ev("other", "o", 2, 1),
            ev("[memory]", "free", 3, 0, ph="i"), ev("cpu_op", "a", 4, 1), extra=[memory])
    assert memory.got == ["alloc", "inst", "free"]
    # the base is the first X event's (the instant at 1); a collector's events widen no span
    assert c.names == {"a": 0} and (c.span_lo, c.span_hi) == (3.0, 4.0)


def test_an_event_of_an_unused_category_or_phase_is_passed_over():
    c = fed(ev("other", "o", 2, 1), ev("cpu_op", "a", 4, 1, ph="i"), ev("kernel", "k", 5, 1, ph="B"))
    assert c.names == {} and c.gpu_names == {} and c.malformed == {} and c.span_lo == math.inf


BAD = [
    ({"ts": "1"}, ("ts", "not a number")), ({"ts": True}, ("ts", "not a number")),
    ({"ts": math.inf}, ("ts", "not a finite number")), ({"ts": -math.inf}, ("ts", "not a finite number")),
    ({"ts": math.nan}, ("ts", "not a finite number")), ({"ts": None}, ("ts", "not a number")),
    ({"dur": -1}, ("dur", "negative")), ({"dur": "2"}, ("dur", "not a number")),
    ({"dur": math.inf}, ("dur", "not a finite number")), ({"dur": False}, ("dur", "not a number")),
    ({"name": 5}, ("name", "not a string")), ({"name": None}, ("name", "not a string")),
    ({"pid": [1]}, ("pid/tid", "not a number or string")), ({"tid": {"a": 1}}, ("pid/tid", "not a number or string")),
]


@pytest.mark.parametrize("cat", ["cpu_op", "kernel", "gpu_memcpy", "cuda_runtime", "user_annotation"])
@pytest.mark.parametrize("change, why", BAD)
def test_an_event_with_a_field_the_summary_cannot_use_is_dropped_counted_under_it_and_leaves_nothing(cat, change,
                                                                                                      why):
    good = ev(cat, "good", 0, 1, pid=0, tid=7)
    bad = {**ev(cat, "bad", 10, 1, pid=0, tid=7), **change}
    c = fed(good, bad, bad)
    kept = {"cpu_op": c.op_ts, "kernel": c.g_lo, "gpu_memcpy": c.g_lo, "cuda_runtime": c.rt_ts,
            "user_annotation": c.lab_ts}[cat]
    assert list(kept) == [0.0]
    if why[0] == "pid/tid" and cat in ("kernel", "gpu_memcpy"):
        assert c.streams == {(0, 7)}
    assert c.malformed == {(*why, True): [2, "bad" if "name" not in change else ""]}
    assert c.events == 3 and (c.span_lo, c.span_hi) == ((0.0, 1.0) if cat != "cuda_runtime" else (math.inf,
                                                                                                  -math.inf))


def test_a_big_but_finite_time_is_kept():
    c = fed(ev("cpu_op", "a", 1.0, 1e300))
    assert list(c.op_dur) == [1e300] and c.malformed == {}


def test_an_event_with_an_unhashable_category_is_dropped_and_said():
    c = fed({"ph": "X", "cat": ["cpu_op"], "name": "a", "ts": 0, "dur": 1})
    assert c.malformed == {("cat", "not a string", True): [1, "a"]}


def test_a_frame_or_a_step_with_an_unusable_pid_is_dropped_and_said():
    c = fed(ev("python_function", "model.py(1): f", 0, 1, pid=[1]), frames=lambda name: True)
    assert c.malformed == {("pid/tid", "not a number or string", True): [1, "model.py(1): f"]}
    assert len(c.fr_ts) == 0 and c.frame_kept == ["model.py(1): f"]


@pytest.mark.parametrize("event, expected", [
    ({"cat": {}}, ("cat", "not a string")),
    ({"cat": "x", "dur": 1, "name": "a"}, ("ts", "missing")),
    ({"cat": "x", "ts": 1, "name": "a"}, ("dur", "missing")),
    ({"cat": "x", "ts": 1, "dur": 1}, ("name", "missing")),
    ({"cat": "x", "ts": -1e300, "dur": 0, "name": "a"}, ("pid/tid", "not a number or string")),
    ({"cat": "x", "ts": 1, "dur": -0.5, "name": "a"}, ("dur", "negative")),
    ({"cat": "x", "ts": 1.7976931348623157e308, "dur": 1.7976931348623157e308, "name": 3}, ("name", "not a string")),
])
def test_the_reason_an_event_is_dropped_is_its_first_unusable_field(event, expected):
    assert malformed_field(event) == expected


def test_the_first_example_name_of_a_problem_is_kept_and_later_ones_counted():
    c = fed({**ev("cpu_op", "first", 0, 1), "dur": -1}, {**ev("cpu_op", "second", 0, 1), "dur": -2})
    assert c.malformed == {("dur", "negative", True): [2, "first"]}


SHAPES = {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}


def test_the_recorded_shapes_of_the_ops_asked_for_are_kept_once_per_distinct_set():
    c = fed(ev("cpu_op", "aten::mm", 0, 1, **SHAPES), ev("cpu_op", "aten::add", 1, 1, **SHAPES),
            ev("cpu_op", "aten::mm", 2, 1, **SHAPES, flops=48),
            ev("cpu_op", "aten::mm", 3, 1, **{**SHAPES, "Input Dims": [[2, 3], [3, 5]]}, flops=60.0),
            ev("cpu_op", "aten::mm", 4, 1, **{k: v for k, v in SHAPES.items() if k != "Input Dims"}),
            ev("cpu_op", "aten::mm", 5, 1),
            shapes_of=frozenset({"aten::mm"}))
    assert c.shaped == {0}
    assert c.shape_args == [([[2, 3], [3, 4]], ["float", "float"], ["", ""]),
                            ([[2, 3], [3, 5]], ["float", "float"], ["", ""])]
    assert c.op_shape == {0: 0, 2: 0, 3: 1}  # not the add, nor the mm without Input Dims or args
    assert c.shape_ids == {(0, "[[2, 3], [3, 4]]", "['float', 'float']", "['', '']"): 0,
                           (0, "[[2, 3], [3, 5]]", "['float', 'float']", "['', '']"): 1}
    assert c.op_flops == {2: 48}  # an integer only


def test_an_op_s_args_that_are_no_object_keep_no_shapes_and_no_external_id():
    c = fed({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": [1]},
            shapes_of=frozenset({"aten::mm"}))
    assert c.op_shape == {} and list(c.op_ext) == [NO_ID] and len(c.op_ts) == 1


def test_a_frame_the_fold_drops_is_never_checked_nor_the_base_and_a_kept_one_is_both():
    keep = lambda name: name.startswith("model.py")  # noqa: E731
    c = fed(ev("python_function", "lib.py(1): g", 5.5, -1), ev("python_function", "lib.py(2): h", "x", 1),
            ev("cpu_op", "a", 100.5, 1), frames=keep)
    assert c.malformed == {} and c.base == 100.0 and list(c.op_ts) == [0.5]
    c = fed(ev("python_function", "model.py(1): f", 7.5, 1), ev("python_function", "model.py(2): g", 8, -1),
            ev("cpu_op", "a", 100.5, 1), frames=keep)
    assert c.base == 7.0 and list(c.fr_ts) == [0.5]
    assert c.malformed == {("dur", "negative", True): [1, "model.py(2): g"]}
    c = fed(ev("python_function", "model.py(1): f", 7.5, 1), ev("cpu_op", "a", 100.5, 1))  # frames not asked for
    assert c.base == 100.0


def test_events_after_a_skipped_a_passed_over_or_a_dropped_frame_event_are_still_read():
    c = fed(ev("python_function", "f", 0, 1), ev("cpu_op", "a", 1, 1), {"ph": "M", "name": "process_name"},
            ev("cpu_op", "b", 2, 1), ev("python_function", "lib.py(1): g", 3, 1), ev("cpu_op", "c", 4, 1),
            frames=lambda name: name.startswith("model.py"))
    assert c.names == {"a": 0, "b": 1, "c": 2} and c.frame_names == {"f": -1, "lib.py(1): g": -1}
    c = fed(ev("ac2g", "flow", 0, 0, ph="f"), ev("cpu_op", "a", 1, 1))
    assert c.names == {"a": 0}


def test_an_event_no_collector_asked_for_is_passed_over_while_collectors_are_attached():
    class Memory:
        categories = frozenset({"[memory]"})

        def feed(self, event):
            pass

    c = fed(ev("cpu_instant_event", "inst", 1, 0, ph="i"), ev("cpu_op", "a", 2, 1), extra=[Memory()])
    assert c.names == {"a": 0}


def test_a_repeated_runtime_call_name_keeps_its_id():
    c = fed(ev("cuda_runtime", "cudaLaunchKernel", 0, 1), ev("cuda_runtime", "cudaMemcpy", 1, 1),
            ev("cuda_runtime", "cudaLaunchKernel", 2, 1))
    assert c.rt_names == {"cudaLaunchKernel": 0, "cudaMemcpy": 1} and list(c.rt_name) == [0, 1, 0]


BIG = 1.7976931348623157e308  # the largest finite double


@pytest.mark.parametrize("ts, dur", [(-BIG, 1.0), (BIG, 0.0), (0.0, BIG)])
def test_times_at_the_largest_finite_double_are_kept(ts, dur):
    c = fed(ev("cpu_op", "a", ts, dur))
    assert len(c.op_ts) == 1 and c.malformed == {} and c.base == math.floor(ts)
    assert list(c.op_dur) == [dur]


def test_the_largest_finite_times_are_usable_so_only_the_pid_is_to_blame():
    assert malformed_field({"cat": "x", "ts": -BIG, "dur": BIG, "name": "a"}) == ("pid/tid", "not a number or string")
    assert malformed_field({"cat": "x", "ts": BIG, "dur": 0, "name": "a"}) == ("pid/tid", "not a number or string")


@pytest.mark.parametrize("args", [None, [], "x"])
def test_a_memory_op_without_an_args_object_has_unknown_bytes(args):
    c = fed({"ph": "X", "cat": "gpu_memset", "name": "set", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": args})
    assert c.mem_bytes == {0: None} and len(c.g_lo) == 1 and c.malformed == {}


def test_a_memory_op_of_zero_bytes_is_zero_not_unknown():
    c = fed(ev("gpu_memset", "set", 0, 1, pid=0, tid=7, bytes=0), ev("gpu_memset", "set", 1, 1, pid=0, tid=7, bytes=0))
    assert c.mem_bytes == {0: 0} and c.malformed == {}


def test_events_after_one_with_an_unhashable_category_or_a_frame_with_an_unusable_pid_are_still_read():
    c = fed({"ph": "X", "cat": ["cpu_op"], "name": "a", "ts": 0, "dur": 1}, ev("cpu_op", "b", 1, 1),
            ev("python_function", "model.py(1): f", 2, 1, pid=[1]), ev("cpu_op", "c", 3, 1),
            frames=lambda name: True)
    assert c.names == {"b": 0, "c": 1} and sum(n for n, _ in c.malformed.values()) == 2


# --- a pass in two halves (``extend``), sent from a child (pickled) -------------------------------------------

RULES = ("args_of", "keep_frame", "_extra", "_extra_records")
TWO_STEPS = [
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},  # a first half with no base
    ev("cpu_op", "aten::mm", 1000.5, 10, **{"External id": 7}, **SHAPES),
    ev("user_annotation", "nccl:broadcast", 1000.7, 3, group=1),
    ev("gpu_user_annotation", "ProfilerStep#1", 1005, 90, pid=0, tid=7),
    ev("kernel", "ncclDevKernel_Broadcast", 1006, 2, pid=0, tid=7, correlation=4, device=0, group=1),
    ev("python_function", "model.py(21): forward", 1001, 5), ev("python_function", "lib.py(1): x", 1002, 1),
    ev("user_annotation", "ProfilerStep#1", 1000, 100), ev("cuda_runtime", "cudaLaunchKernel", 1003, 2, correlation=5),
    ev("kernel", "gemm", 1010, 4, pid=0, tid=7, correlation=5, **{"External id": 7}),
    ev("gpu_memcpy", "Memcpy HtoD", 1020, 3, pid=0, tid=7, correlation=6, bytes=100),
    ev("cpu_op", "nccl:all_reduce", 1030, 2, tid=2, collective=1),
    ev("python_function", "model.py(21): forward", 1040, 5, tid=2),
    ev("user_annotation", "ProfilerStep#2", 1100, 100), ev("cuda_runtime", "cudaMemcpyAsync", 1101, 2, correlation=6),
    ev("user_annotation", "attn", 1102, 20, tid=4),
    ev("kernel", "gelu", 1110, 2, pid=0, tid=8, correlation=8, device=2**64),  # a device beyond 64 bits: none
    ev("cpu_op", "aten::mm", 1120, 10, **SHAPES, flops=48),
    ev("cpu_op", "aten::mm", 1130, 10, **{**SHAPES, "Input Dims": [[5, 3], [3, 4]]}),
    ev("gpu_memcpy", "Memcpy HtoD", 1140, 3, pid=0, tid=7, bytes=50),
    ev("python_function", "model.py(9): run", 1150, 1),
    ev("user_annotation", "ProfilerStep#1", 999, 171),  # a step's window widened both ways by a later event
    ev("gpu_user_annotation", "ProfilerStep#1", 1050, 125, pid=0, tid=7),  # ... at its end only
    ev("cuda_runtime", "cudaLaunchKernel", 1170, 2), ev("user_annotation", "nccl:all_gather", 1171, 3, group=2),
    ev("kernel", "ncclDevKernel_AllGather", 1172, 2, pid=0, tid=7, correlation=9, device=0, group=2),
    ev("gpu_memcpy", "Memcpy DtoH", 1175, 3, pid=0, tid=7, correlation=10, bytes=8, device=0, **{"External id": 11}),
    ev("cpu_op", "nccl:all_gather", 1180, 2, tid=2, collective=2),
    ev("cpu_op", "Optimizer.step#SGD.step", 1182, 1, group=3),  # a label older kineto wrote as an op
]
PASS_RULES = {"shapes_of": frozenset({"aten::mm"}), "frames": lambda name: name.startswith("model.py"),
              "args_of": lambda name: name.startswith(("nccl", "Optimizer."))}


def data_of(c: Collected) -> dict:
    return {k: v for k, v in vars(c).items() if k not in RULES}


def test_a_pass_cut_anywhere_and_its_halves_extended_is_the_one_pass():
    one = Collected(**PASS_RULES)
    FEED(one, TWO_STEPS)
    assert one.frame_kept and one.lab_ts and one.rt_ts and one.shape_args and one.mem_bytes
    # the args of the events args_of names, by their index in their kind's arrays; each GPU event's device
    assert one.op_args == {1: {"collective": 1}, 4: {"collective": 2}}
    assert one.lab_args == {0: {"group": 1}, 2: {"group": 2}, 3: {"group": 3}}
    assert one.g_args == {0: {"correlation": 4, "device": 0, "group": 1},
                          5: {"correlation": 9, "device": 0, "group": 2}}
    assert list(one.g_dev) == [0, NO_ID, NO_ID, NO_ID, NO_ID, 0, 0]
    for cut in range(1, len(TWO_STEPS)):
        first, later = Collected(**PASS_RULES), Collected(**PASS_RULES)
        FEED(first, TWO_STEPS[:cut])
        later.base = first.base
        FEED(later, TWO_STEPS[cut:])
        first.extend(pickle.loads(pickle.dumps(later)))  # as a child sends it
        assert data_of(first) == data_of(one), cut


def test_a_pass_sent_from_a_child_holds_its_data_and_none_of_its_rules():
    class Memory:  # a collector defined here cannot be pickled: its methods must stay behind
        categories = frozenset({"[memory]"})

        def feed(self, event):
            pass

    c = Collected(extra=[Memory()], **PASS_RULES)
    FEED(c, TWO_STEPS)
    sent = pickle.loads(pickle.dumps(c))
    assert (sent.args_of, sent.keep_frame, sent._extra, sent._extra_records) == (None, None, {}, {})
    assert data_of(sent) == data_of(c)
