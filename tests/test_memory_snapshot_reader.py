"""The CUDA memory snapshot reader on snapshots built to ``torch.cuda.memory._snapshot``'s documented structure.

A snapshot is pickled beside a trace as ``rank<R>_<host>.memory_snapshot.pickle``; the summary finds it by the
trace's worker name (or rank), replays the allocator's history to the peak, and groups the blocks live there by
the innermost frame in the user's code.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_summary import write_capture_summary
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.render import render_rank
from lightx2v.trace_summary.snapshot import SnapshotError, read_snapshot, user_frame

from conftest import subprocess_env
from helpers.summary import cpu_op, step_events, trace_doc, write_json

MIB, GIB = 1 << 20, 1 << 30
TORCH = {"filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"}
STDLIB = {"filename": "/usr/lib/python3.11/contextlib.py", "line": 81, "name": "inner"}
FROZEN = {"filename": "<frozen importlib._bootstrap>", "line": 1, "name": "_call_with_frames_removed"}
CPP = {"filename": "/pytorch/c10/cuda/CUDACachingAllocator.cpp", "line": 1000, "name": "malloc"}
LOAD = {"filename": "/home/me/LightX2V/lightx2v/models/model.py", "line": 120, "name": "load_weights"}
ATTN = {"filename": "/home/me/LightX2V/lightx2v/models/transformer.py", "line": 87, "name": "attn"}
VAE = {"filename": "/home/me/LightX2V/lightx2v/models/vae.py", "line": 33, "name": "decode"}


def block(addr: int, size: int, frames: list, state: str = "active_allocated") -> dict:
    return {"address": addr, "size": size, "requested_size": size, "state": state, "frames": frames}


def segment(addr: int, total: int, blocks: list, device: int = 0) -> dict:
    return {"device": device, "address": addr, "total_size": total, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
            "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"), "blocks": blocks}


def entry(action: str, addr: int, size: int, frames: list, t: int) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames, "time_us": t}


def history_snapshot() -> dict:
    """Device 0: 31 GiB of weights loaded before recording began (still live), then per step a 5 GiB attention
    buffer and a 2 GiB VAE buffer, the attention one freed before the VAE one is made. Peak: 31 + 5 + 1 (a small
    transient from torch itself) = 37 GiB. At the end only the weights and the last VAE buffer are live."""
    weights = [TORCH, LOAD, STDLIB]  # innermost first: torch's own frame, then the user's load_weights
    attn, vae, tmp = [CPP, TORCH, ATTN, FROZEN], [CPP, VAE], [CPP, TORCH, STDLIB]
    trace = [entry("segment_alloc", 0x10_0000_0000, 8 * GIB, attn, 1),
             entry("alloc", 0xA000_0000, 5 * GIB, attn, 2),
             entry("alloc", 0xB000_0000, 1 * GIB, tmp, 3),
             entry("free_requested", 0xB000_0000, 1 * GIB, tmp, 4),
             entry("free_completed", 0xB000_0000, 1 * GIB, tmp, 4),
             entry("free_requested", 0xA000_0000, 5 * GIB, attn, 5),
             entry("free_completed", 0xA000_0000, 5 * GIB, attn, 5),
             entry("alloc", 0xC000_0000, 2 * GIB, vae, 6),
             entry("free_requested", 0xC000_0000, 2 * GIB, vae, 7),
             entry("free_completed", 0xC000_0000, 2 * GIB, vae, 7),
             entry("alloc", 0xA000_0000, 5 * GIB, attn, 8),
             entry("free_completed", 0xA000_0000, 5 * GIB, attn, 9),
             entry("alloc", 0xC000_0000, 2 * GIB, vae, 10)]
    segments = [segment(0x1_0000_0000, 31 * GIB, [block(0x1_0000_0000, 31 * GIB, weights)]),
                segment(0xA000_0000, 8 * GIB, [block(0xA000_0000, 5 * GIB, [], "inactive"),
                                               block(0xC000_0000, 2 * GIB, vae)])]
    return {"segments": segments, "device_traces": [trace, []]}


def write_pickle(path: Path, obj: object) -> Path:
    path.write_bytes(pickle.dumps(obj))
    return path


def test_the_peak_is_replayed_from_the_history_and_grouped_by_user_frame(tmp_path):
    (s,) = read_snapshot(str(write_pickle(tmp_path / "rank0_h.memory_snapshot.pickle", history_snapshot())))
    assert (s.device, s.source) == (0, "device_traces")
    assert s.peak_bytes == 37 * GIB and s.peak_at_us == 3  # the weights were live before the history began
    assert s.reserved_bytes == 39 * GIB
    assert [(site.location, site.function, site.bytes, site.blocks) for site in s.sites] == [
        ("models/model.py:120", "load_weights", 31 * GIB, 1), ("models/transformer.py:87", "attn", 5 * GIB, 1)]
    assert s.other_bytes == 1 * GIB  # torch's transient: no frame in the user's code


def test_without_history_the_segments_live_blocks_are_the_answer(tmp_path):
    doc = history_snapshot()
    doc["segments"].append(segment(0x5_0000_0000, 4 * GIB, [block(0x5_0000_0000, 3 * GIB, [ATTN])], device=1))
    del doc["device_traces"]
    by_device = {s.device: s for s in read_snapshot(str(write_pickle(tmp_path / "s.pickle", doc)))}
    assert set(by_device) == {0, 1}
    assert (by_device[0].source, by_device[0].peak_bytes, by_device[0].peak_at_us) == ("segments", 33 * GIB, None)
    assert [site.function for site in by_device[0].sites] == ["load_weights", "decode"]
    assert (by_device[1].peak_bytes, by_device[1].sites[0].location) == (3 * GIB, "models/transformer.py:87")


def test_user_frame_skips_torch_libraries_stdlib_frozen_and_cpp():
    assert user_frame([CPP, FROZEN, STDLIB, TORCH, {**TORCH, "filename": "/x/dist-packages/y.py"}, VAE]) == VAE
    assert user_frame([CPP, TORCH]) is None
    assert user_frame([{"filename": "C:\\venv\\Lib\\site-packages\\diffusers\\a.py", "line": 1, "name": "f"},
                       {"filename": "C:\\work\\run.py", "line": 2, "name": "main"}])["name"] == "main"


def test_the_summary_finds_each_ranks_snapshot_beside_its_trace(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 100), cpu_op("aten::mm", 10, 20)]
    for rank in (0, 1):
        write_json(tmp_path / f"rank{rank}_node7.pt.trace.json", trace_doc(events))
    doc1 = history_snapshot()
    doc1["device_traces"] = [[], doc1["device_traces"][0]]
    for seg in doc1["segments"]:
        seg["device"] = 1
    write_pickle(tmp_path / "rank0_node7.memory_snapshot.pickle", history_snapshot())
    write_pickle(tmp_path / "rank1_node7.memory_snapshot.pickle", doc1)
    r0 = analyze_trace(str(tmp_path / "rank0_node7.pt.trace.json"))
    r1 = analyze_trace(str(tmp_path / "rank1_node7.pt.trace.json"))
    assert r0.memory is not None and r0.memory.devices == []  # no [memory] events, a snapshot
    assert [(s.file, s.device) for s in r0.memory.snapshots] == [
        (str(tmp_path / "rank0_node7.memory_snapshot.pickle"), 0)]
    assert [(s.file, s.device) for s in r1.memory.snapshots] == [
        (str(tmp_path / "rank1_node7.memory_snapshot.pickle"), 1)]
    proc = subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", str(tmp_path / "rank0_node7.pt.trace.json")],
                          capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    assert ("Memory snapshot cuda:0 (from the allocator's history; rank0_node7.memory_snapshot.pickle): peak "
            "39.7 GB: 33.3 GB at models/model.py:120 load_weights, 5.4 GB at models/transformer.py:87 attn, "
            "1.1 GB elsewhere") in proc.stdout
    lines = write_capture_summary(str(tmp_path / "rank0_node7.pt.trace.json"))  # the capture log and .summary.txt
    assert ("memory snapshot cuda:0: peak 39.7 GB: 33.3 GB at models/model.py:120 load_weights, 5.4 GB at "
            "models/transformer.py:87 attn") in lines
    assert "Memory snapshot cuda:0" in (tmp_path / "rank0_node7.pt.trace.json.summary.txt").read_text()


class _Boom:
    def __reduce__(self):
        return (open, (os.environ["SNAPSHOT_MARKER"], "w"))


def test_a_pickle_that_names_any_global_is_refused_not_run(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setenv("SNAPSHOT_MARKER", str(marker))
    evil = write_pickle(tmp_path / "rank0_h.memory_snapshot.pickle", {"segments": [], "x": _Boom()})
    with pytest.raises(SnapshotError) as info:
        read_snapshot(str(evil))
    assert str(evil) in str(info.value) and "io.open" in str(info.value) and "can run code" in str(info.value)
    assert not marker.exists()
    # beside a trace, the summary says so in a note and still reports the trace
    trace = write_json(tmp_path / "rank0_h.pt.trace.json", trace_doc(step_events("ProfilerStep#1", 0, 100)))
    r = analyze_trace(str(trace))
    assert r.memory is None and any("memory snapshot left out" in n and str(evil) in n for n in r.notes)
    assert "io.open" in render_rank(r) and not marker.exists()


@pytest.mark.parametrize(("content", "problem"), [
    (pickle.dumps(history_snapshot())[:100], "truncated or corrupt"),
    (pickle.dumps([1, 2, 3]), "expected a dict with a 'segments' list"),
    (pickle.dumps({"segments": [{"blocks": "nope", "total_size": 1}]}), "unexpected structure"),
    (b"not a pickle at all", "not a"),
])
def test_damaged_snapshots_are_clear_errors_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "rank0_h.memory_snapshot.pickle"
    path.write_bytes(content)
    with pytest.raises(SnapshotError) as info:
        read_snapshot(str(path))
    assert str(path) in str(info.value) and problem in str(info.value)
