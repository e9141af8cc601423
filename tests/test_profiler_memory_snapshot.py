"""memory_snapshot=True: the CUDA allocator's history over the active calls, written beside the trace.

A CPU has no CUDA allocator, so here: the switch (config field and environment variable) and its check; on a CPU
the one "CUDA only" line per process while the capture goes on (a real subprocess); the real writer fed a snapshot
dict of torch's documented structure (``torch.cuda.memory._snapshot``'s docstring); and the capture's sequencing
(recording starts at the first active call, always stops, on errors too) through a real capture in which only
torch's two CUDA allocator functions are replaced by recorders, as no CPU has them. ``benchmarks/gpu_check.sh``
(its memory step) makes a real snapshot on a GPU.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import textwrap

import pytest
import torch

from lightx2v.utils import torch_trace_profiler as dropin
from lightx2v.utils.torch_trace_profiler import (
    ENV_MEMORY_SNAPSHOT,
    TorchTraceProfileConfig,
    TorchTraceProfileContext,
    TorchTraceProfiler,
)

from conftest import subprocess_env
from helpers.traces import PLUGIN_TRACE_RE

pytestmark = pytest.mark.usefixtures("fresh_profiler_session")


def documented_snapshot() -> dict:
    """A snapshot as ``torch.cuda.memory._snapshot()`` documents it: segments with blocks, and device traces."""
    frames = [{"filename": "/app/model.py", "line": 120, "name": "load_weights"}]
    return {
        "segments": [{"device": 0, "address": 1 << 32, "total_size": 2 << 20, "stream": 0, "segment_type": "large",
                      "segment_pool_id": (0, 0), "allocated_size": 1 << 20, "active_size": 1 << 20,
                      "blocks": [{"size": 1 << 20, "requested_size": 1000000, "address": 1 << 32,
                                  "state": "active_allocated", "frames": frames},
                                 {"size": 1 << 20, "requested_size": 0, "address": (1 << 32) + (1 << 20),
                                  "state": "inactive", "frames": []}]}],
        "device_traces": [[{"action": "alloc", "addr": 1 << 32, "size": 1 << 20, "stream": 0, "frames": frames,
                            "time_us": 1}]],
    }


# ----------------------------------------------------------------------------------------------- the switch
def test_the_config_checks_memory_snapshot_like_the_other_switches():
    assert TorchTraceProfileConfig().memory_snapshot is False
    assert TorchTraceProfileConfig(memory_snapshot=True).memory_snapshot is True
    with pytest.raises(ValueError, match="memory_snapshot must be a bool, got str 'yes'"):
        TorchTraceProfileContext("x", memory_snapshot="yes")
    assert TorchTraceProfileContext("x", memory_snapshot=True).config.memory_snapshot is True


@pytest.mark.parametrize("word,config,on", [("", True, True), ("", False, False), ("1", False, True),
                                            ("on", False, True), ("0", True, False), ("off", True, False)])
def test_the_environment_switch_replaces_the_config(monkeypatch, word, config, on):
    monkeypatch.setenv(ENV_MEMORY_SNAPSHOT, word)
    monkeypatch.setattr(dropin, "_cuda_memory_history_available", lambda: True)
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig(memory_snapshot=config)) is on


CPU_CAPTURES = textwrap.dedent("""
    import glob, sys, torch
    from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler
    for n in range(3):
        TorchTraceProfiler.reset_session()
        out = TorchTraceProfileContext(f"c{n}", tb_dir="tb", wait=0, warmup=0, active=1,
                                       memory_snapshot=sys.argv[1] == "config").run(lambda: torch.ones(4) * 2)
        assert out.sum().item() == 8
    print(len(glob.glob("tb/*/*.pt.trace.json")), len(glob.glob("tb/**/*.pickle", recursive=True)))
""")


@pytest.mark.parametrize("how", ["config", "environment"])
@pytest.mark.slow
def test_on_a_cpu_it_says_cuda_only_once_and_the_captures_go_on(tmp_path, how):
    env = subprocess_env(LIGHTX2V_TORCH_PROFILE_REMOTE="0",
                         **({ENV_MEMORY_SNAPSHOT: "1"} if how == "environment" else {}))
    run = subprocess.run([sys.executable, "-c", CPU_CAPTURES, how], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count("CUDA only") == 1, run.stderr
    assert run.stdout.split() == ["3", "0"]  # three traces, no snapshot


# ----------------------------------------------------------------------------------------------- the writer
def test_the_writer_pickles_the_snapshot_under_a_name_tensorboard_ignores(tmp_path):
    trace = tmp_path / "rank0_node-1.pt.trace.json.gz"
    path = dropin._snapshot_path(str(trace))
    assert os.path.basename(path) == "rank0_node-1.memory_snapshot.pickle"
    assert not PLUGIN_TRACE_RE.match(os.path.basename(path))
    dropin.write_memory_snapshot(documented_snapshot(), path)
    with open(path, "rb") as f:
        assert pickle.load(f) == documented_snapshot()
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # no temporary left
    assert dropin._snapshot_path(str(tmp_path / "trace.rank1.json")) == str(tmp_path / "trace.rank1"
                                                                            ".memory_snapshot.pickle")


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    path = str(tmp_path / "rank0_h.memory_snapshot.pickle")
    with pytest.raises(Exception):  # noqa: B017 -- pickle's error for a lambda differs between versions
        dropin.write_memory_snapshot({"segments": [], "device_traces": [], "bad": lambda: None}, path)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- the capture's sequencing
class Allocator:
    """Stands in for torch's CUDA allocator functions, which a CPU build lacks; records what the drop-in asks."""

    def __init__(self, target_calls: list, snapshot_error: Exception | None = None) -> None:
        self.target_calls = target_calls
        self.events: list[tuple] = []
        self.snapshot_error = snapshot_error

    def record_memory_history(self, enabled="all", **kwargs) -> None:
        self.events.append(("record", enabled, len(self.target_calls), kwargs.get("stacks")))

    def snapshot(self, device=None) -> dict:
        self.events.append(("snapshot", len(self.target_calls)))
        if self.snapshot_error:
            raise self.snapshot_error
        return documented_snapshot()


@pytest.fixture
def allocator(monkeypatch):
    calls: list = []
    fake = Allocator(calls)
    monkeypatch.setattr(dropin, "_cuda_memory_history_available", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", fake.record_memory_history)
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", fake.snapshot)
    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE_REMOTE", "0")
    return fake


def test_recording_covers_the_active_calls_and_the_snapshot_lands_beside_the_trace(tmp_path, allocator):
    def target():
        allocator.target_calls.append(1)
        return torch.ones(8)

    out = TorchTraceProfileContext("snap", tb_dir="tb", wait=1, warmup=2, active=2, memory_snapshot=True).run(target)
    assert out.sum().item() == 8
    # started before call 4 (wait 1 + warmup 2 done), snapshot after the fifth, then stopped
    assert allocator.events == [("record", "all", 3, "python"), ("snapshot", 5), ("record", None, 5, None)]
    (trace,) = TorchTraceProfiler.last_capture().trace_paths
    run_dir = os.path.dirname(trace)
    worker = f"rank0_{dropin._slug(socket.gethostname(), 40) or 'host'}"
    assert sorted(n for n in os.listdir(run_dir) if not n.endswith(".summary.txt")) == [
        f"{worker}.memory_snapshot.pickle", f"{worker}.pt.trace.json"]
    with open(os.path.join(run_dir, f"{worker}.memory_snapshot.pickle"), "rb") as f:
        assert pickle.load(f) == documented_snapshot()
    assert TorchTraceProfiler.last_capture().error is None


def test_a_target_error_stops_recording_and_propagates_unchanged(tmp_path, allocator):
    raised = RuntimeError("CUDA out of memory, say")

    def target():
        allocator.target_calls.append(1)
        if len(allocator.target_calls) == 2:
            raise raised
        return 1

    with pytest.raises(RuntimeError) as info:
        TorchTraceProfileContext("fails", tb_dir="tb", wait=0, warmup=0, active=3, memory_snapshot=True).run(target)
    assert info.value is raised
    assert allocator.events == [("record", "all", 0, "python"), ("record", None, 2, None)]  # no snapshot taken
    assert list((tmp_path / "tb").rglob("*.pickle")) == []


def test_a_snapshot_failure_is_reported_and_the_result_and_trace_kept(tmp_path, allocator):
    allocator.snapshot_error = RuntimeError("allocator says no")

    def target():
        allocator.target_calls.append(1)
        return 42

    context = TorchTraceProfileContext("x", tb_dir="tb", wait=0, warmup=0, active=1, memory_snapshot=True)
    assert context.run(target) == 42
    assert allocator.events[-1] == ("record", None, 1, None)  # stopped all the same
    capture = TorchTraceProfiler.last_capture()
    assert len(capture.trace_paths) == 1 and "allocator says no" in capture.error
    assert list((tmp_path / "tb").rglob("*.pickle")) == [] and list((tmp_path / "tb").rglob("*.tmp")) == []


def test_off_by_default_nothing_is_recorded(tmp_path, allocator):
    TorchTraceProfileContext("plain", tb_dir="tb", wait=0, warmup=0, active=1).run(lambda: 1)
    assert allocator.events == []


def test_a_typo_in_the_switch_does_not_turn_it_on_and_is_said_once(tmp_path, allocator, monkeypatch, caplog):
    monkeypatch.setattr(dropin, "_FLAGS_WARNED", set())  # nothing warned about yet, as in a new process
    monkeypatch.setenv(ENV_MEMORY_SNAPSHOT, "ture")
    with caplog.at_level("WARNING", logger=dropin.__name__):
        for n in range(2):
            TorchTraceProfiler.reset_session()
            TorchTraceProfileContext(f"typo{n}", tb_dir="tb", wait=0, warmup=1, active=1).run(lambda: 1)
    assert allocator.events == []  # the config's default (off) kept: nothing recorded
    assert TorchTraceProfiler.last_capture().trace_paths  # the captures themselves went on
    warned = [r.getMessage() for r in caplog.records if ENV_MEMORY_SNAPSHOT in r.getMessage()]
    assert len(warned) == 1 and "'ture'" in warned[0] and warned[0].endswith("keeping the default: off"), warned


def test_the_summary_reads_the_snapshot_the_capture_wrote(tmp_path, allocator):
    """Writer and reader agree on the name and the place: the stack's summary of the trace finds the snapshot
    beside it and names the user's line that holds the peak."""
    from lightx2v.trace_summary import summarize_paths

    TorchTraceProfileContext("both", tb_dir="tb", wait=0, warmup=0, active=1, memory_snapshot=True).run(lambda: 1)
    (trace,) = TorchTraceProfiler.last_capture().trace_paths
    (run,) = summarize_paths([trace], top=5)
    (snap,) = run.ranks[0].memory.snapshots
    assert snap.peak_bytes == 1 << 20 and snap.sites[0].function == "load_weights" and snap.sites[0].line == 120
