"""Attribution (which op launched each kernel) against the trace's other link, and the pass's collector hook.

The summary charges a GPU event to the op whose ``External id`` it carries. Kineto also links each kernel to its
CUDA API call by ``correlation`` (the ``cuda_runtime`` / ``cuda_driver`` events the summary skips undecoded):
the op around that call on its thread is the launcher. Both links must give the same rows on the H200 fixture.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from lightx2v.trace_summary.analyze import analyze_trace, summarize_collected
from lightx2v.trace_summary.collect import SKIP_HEAD, Collected
from lightx2v.trace_summary.flops import MODELED
from lightx2v.trace_summary.reader import TraceStream

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
EVENTS = json.loads(gzip.decompress(FIXTURE.read_bytes()))["traceEvents"]
KINDS = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}


def around(event: dict, cats: set[str]) -> list[dict]:
    """The events of ``cats`` on the same thread whose span contains ``event``'s, outermost first."""
    lo, hi = event["ts"], event["ts"] + event["dur"]
    found = [e for e in EVENTS if e.get("cat") in cats and e.get("ph") == "X" and e["tid"] == event["tid"]
             and e["ts"] <= lo and e["ts"] + e["dur"] >= hi and not e["name"].startswith("ProfilerStep#")]
    return sorted(found, key=lambda e: (-e["dur"], e["ts"]))


def by_correlation() -> dict[tuple, list]:
    """(op, label, launcher, kind, name) -> [calls, total_us] from the runtime calls, without External ids."""
    calls = {e["args"]["correlation"]: e for e in EVENTS
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    rows: dict[tuple, list] = defaultdict(lambda: [0, 0.0])
    for e in EVENTS:
        if e.get("cat") not in KINDS:
            continue
        launch = calls[e["args"]["correlation"]]
        ops = around(launch, {"cpu_op"})
        labels = around(launch, {"user_annotation"})
        key = (ops[0]["name"], labels[-1]["name"] if labels else "", ops[-1]["name"], KINDS[e["cat"]], e["name"])
        rows[key][0] += 1
        rows[key][1] += e["dur"]
    return rows


def test_every_gpu_event_is_charged_to_the_op_around_its_launch_call():
    expected = by_correlation()
    assert sum(calls for calls, _ in expected.values()) == 180  # 120 kernels + 60 memsets, every one linked
    tables = analyze_trace(str(FIXTURE)).tables
    got = {(r.op, r.label, r.launcher, r.kind, r.name): [r.calls, r.total_us] for r in tables.launches}
    assert got.keys() == expected.keys()
    for key, (calls, total) in expected.items():
        assert got[key][0] == calls and got[key][1] == pytest.approx(total, rel=1e-12), key
    assert ("aten::scaled_dot_product_attention", "attn", "aten::_cudnn_attention_forward", "kernel") in {
        k[:4] for k in got}


class MemoryEvents:
    """A collector for one more question: it sees the events of its categories the core pass does not use."""

    categories = frozenset({"cpu_instant_event"})

    def __init__(self) -> None:
        self.bytes: list[int] = []

    def feed(self, event: dict) -> None:
        self.bytes.append(event["args"]["Bytes"])


def test_one_more_collector_gets_its_events_and_changes_nothing_else(tmp_path):
    doc = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    ts = next(e["ts"] for e in EVENTS if e.get("cat") == "kernel")
    doc["traceEvents"] += [{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 416,
                            "tid": 416, "ts": ts + i,
                            "args": {"Bytes": b, "Total Allocated": t, "Addr": 1 << 20, "Device Type": 1,
                                     "Device Id": 0}}
                           for i, (b, t) in enumerate(((4096, 4096), (-4096, 0)))]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps(doc))
    extra = MemoryEvents()
    stream = TraceStream(str(path), skip_head=SKIP_HEAD)
    collected = Collected(extra=[extra], shapes_of=MODELED)  # as analyze_trace builds it, shapes kept
    for batch in stream.batches():
        collected.feed(batch)
    assert extra.bytes == [4096, -4096]
    full = analyze_trace(str(path))  # the real memory collector is attached: it answers the memory question
    assert full.memory is not None and [d.peak_allocated_bytes for d in full.memory.devices] == [4096]
    plain = dataclasses.replace(full, memory=None)  # ... and that is all the events change
    assert summarize_collected(collected, str(path), stream, 10) == plain
    assert plain == dataclasses.replace(analyze_trace(str(FIXTURE)), file=plain.file, size_bytes=plain.size_bytes,
                                        compressed=False, worker="w", event_count=plain.event_count)
