"""benchmarks/gpu_check.sh for real in its CPU mode: every step runs (tiny sizes), the verdict and $OUT hold up.

The GPU mode is the same code with bigger sizes and the CUDA-only checks switched on; it runs on an H200 when a
session is lent one. Here nothing is mocked: bench_profiler, two `python -m lightx2v.infer` runs, trace_summary,
the patched TensorBoard and a 2-rank torchrun all run as processes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from conftest import H200_TRACE, REPO_ROOT, subprocess_env
from helpers.traces import PLUGIN_TRACE_RE, load_trace

pytestmark = pytest.mark.slow

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_check.sh"
STEPS = ["profiler capture", "infer", "trace_summary", "tensorboard", "torchrun 2 ranks", "memory"]
SEQ_PARALLEL = "seq parallel 2 GPUs"  # step 7: NCCL on two GPUs; SKIP on CPU unless --comm_backend gloo


def gpu_check(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO_ROOT, env=subprocess_env(**env))


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check_out")
    proc = gpu_check("--device", "cpu", OUT=str(out))
    return proc, out


def test_cpu_mode_passes_every_step_and_says_what_it_skipped(cpu_run):
    proc, out = cpu_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gpu_check: CPU, torch ")
    assert f"out: {out}" in lines
    assert any(line.startswith("CPU mode: tiny sizes;") and "need CUDA" in line for line in lines)
    for number, name in enumerate(STEPS, 1):
        assert re.search(rf"^\[PASS\] {number} {re.escape(name)} \(\d+ s\): \S", proc.stdout, re.M), proc.stdout
    assert proc.stdout.count("note: ") >= 6 and "need CUDA" in proc.stdout  # what CPU could not check, per step
    assert (f"[SKIP] 7 {SEQ_PARALLEL} (0 s): needs 2 GPUs: CPU mode (--comm_backend gloo runs it on CPU processes)"
            in lines)
    assert "VERDICT: PASS (6 passed, 0 failed, 1 skipped)" in proc.stdout
    assert re.search(r"\[PASS\] 6 memory .*[1-9]\d* \[memory\] events; cpu peak \d", proc.stdout), proc.stdout
    # the capture's extra seconds are a difference of two runs: signed, as a loaded machine can make it negative
    assert re.search(r"\[PASS\] 2 infer .*s/step, .*FLOP/s, capture [+-]\d+\.\d+ s .*latents bitwise",
                     proc.stdout), proc.stdout
    assert re.search(r"\[PASS\] 4 tensorboard .*/runs lists \S+_infer_main .*HTTP 200, [1-9]\d* stacks", proc.stdout)


def test_out_holds_the_figures_and_every_trace(cpu_run):
    proc, out = cpu_run
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["verdict"] == "PASS" and report["environment"]["device"] == "cpu"
    assert [(s["number"], s["name"], s["status"]) for s in report["steps"]] == [
        *((n, name, "PASS") for n, name in enumerate(STEPS, 1)), (7, SEQ_PARALLEL, "SKIP")]
    verdict = (out / "verdict.txt").read_text()
    assert verdict.splitlines()[-1].startswith("VERDICT: PASS") and "[PASS] 5 torchrun 2 ranks" in verdict

    bench = json.loads((out / "1_profiler" / "bench_profiler.json").read_text())
    assert len(bench["capture_s"]["bare"]) == len(bench["capture_s"]["module"]) == 2  # A/B pairs
    assert bench["first_capture_s"] > 0 and bench["capture_ratio"] > 0
    traces = [p for p in (out / "1_profiler" / "traces").rglob("*") if PLUGIN_TRACE_RE.match(p.name)]
    assert len(traces) == 5  # the first (warm) capture, 2 bare, 2 through the module

    infer = report["steps"][1]["figures"]
    assert infer["equality"] == "bitwise" and infer["s_per_step"] > 0 and infer["capture_calls"] == 5
    trace = Path(infer["trace"])
    assert trace.is_relative_to(out / "2_infer" / "profiled" / "tb")
    names = {e.get("name") for e in load_trace(trace)["traceEvents"]}
    assert {"ProfilerStep#4", "block_00"} <= names
    assert any(e.get("cat") == "python_function" for e in load_trace(trace)["traceEvents"])  # --with_stack
    assert json.loads((out / "2_infer" / "unprofiled" / "out.json").read_text())["capture"] is None

    summary = json.loads((out / "3_trace_summary" / "summary.json").read_text())
    assert summary["schema"] == "lightx2v.trace_summary/7"
    assert summary["runs"][0]["ranks"][0]["efficiency"]["shapes_recorded"]  # captured with --record_shapes
    assert report["steps"][2]["figures"]["efficiency"]["classes"]
    assert summary["runs"][0]["ranks"][0]["steps"][0]["name"] == "ProfilerStep#4"
    assert "ProfilerStep#4" in (out / "3_trace_summary" / "summary.txt").read_text()

    stacks = json.loads((out / "4_tensorboard" / "operation_stack.json").read_text())["data"]
    assert report["steps"][3]["figures"]["stack_op"] == "aten::addmm"  # a matmul, whatever the table's order
    assert any("torch/nn/modules/linear.py(" in (row.get("call_stack") or "") for row in stacks)
    assert any("lightx2v/models/networks/qwen_image/" in (row.get("call_stack") or "") for row in stacks)
    assert json.loads((out / "4_tensorboard" / "overview.json").read_text())["performance"]

    # Run directories only: the hidden `.capture` folder beside them is the profiler's remote-arming status.
    tb = out / "5_torchrun" / "gloo" / "tb"
    (run_dir,) = [p for p in tb.iterdir() if p.is_dir() and not p.name.startswith(".")]
    files = sorted(p for p in run_dir.iterdir() if PLUGIN_TRACE_RE.match(p.name))
    assert [p.name.split("_")[0] for p in files] == ["rank0", "rank1"]
    for rank, path in enumerate(files):
        trace = load_trace(path)
        assert trace["distributedInfo"]["rank"] == rank and trace["distributedInfo"]["world_size"] == 2
        assert "rank_work" in {e.get("name") for e in trace["traceEvents"]}

    memory = report["steps"][5]["figures"]
    assert memory["memory_events"] > 0 and memory["snapshots"] == []  # the snapshot is CUDA only
    (device,) = memory["summary"]["devices"]
    assert device["device"] == "cpu" and device["peak_allocated_bytes"] > 0
    assert "memory_snapshot: CUDA only" in (out / "6_memory" / "infer" / "cli.log").read_text()


def test_without_out_a_temp_dir_gets_the_results_and_a_failed_step_fails_the_run():
    env = subprocess_env()
    env.pop("OUT", None)
    proc = subprocess.run(["bash", str(SCRIPT), "--device", "cpu", "--budget_s", "0"], capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT, env=env)
    out = Path(re.search(r"^out: (.+)$", proc.stdout, re.M).group(1))
    try:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert out.name.startswith("gpu_check_") and out.parent == Path(tempfile.gettempdir())
        assert "[FAIL] 1 profiler capture (0 s): out of the time budget" in proc.stdout
        assert "VERDICT: FAIL (0 passed, 6 failed, 1 skipped)" in proc.stdout  # 7: SKIP, no GPU (no command)
        assert json.loads((out / "gpu_check.json").read_text())["verdict"] == "FAIL"
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_missing_tools_take_the_fallbacks_and_work_packs_into_out(tmp_path):
    """Without tqdm/pillow the inference runs through gpu_qwen_image.py and the summary through its Python API;
    without tensorboard that step is SKIP with the reason. With --work, $OUT gets three files only."""
    out, work = tmp_path / "out", tmp_path / "work"
    proc = gpu_check("--device", "cpu", "--steps", "2,3,4", "--work", str(work),
                     "--assume_missing", "tqdm,PIL,tensorboard", OUT=str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[SKIP] 1 profiler capture (0 s): not selected (--steps)" in proc.stdout
    assert re.search(r"^\[PASS\] 2 infer .*latents bitwise", proc.stdout, re.M), proc.stdout
    assert "ran benchmarks/gpu_qwen_image.py instead" in proc.stdout
    assert "[PASS] 3 trace_summary" in proc.stdout and "used its Python API" in proc.stdout
    assert "[SKIP] 4 tensorboard (0 s): tensorboard not installed" in proc.stdout
    assert "VERDICT: PASS (2 passed, 0 failed, 5 skipped)" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check_results.tar.gz", "verdict.txt"]
    with tarfile.open(out / "gpu_check_results.tar.gz") as tar:
        names = tar.getnames()
    assert "2_infer/gpu_qwen_image.json" in names and "3_trace_summary/summary.json" in names
    assert any(PLUGIN_TRACE_RE.match(Path(n).name) for n in names)  # the trace travels in the archive
    (run_work,) = work.iterdir()  # a new folder per run: a rerun never packs an earlier run's files
    assert len(names) == len([p for p in run_work.rglob("*") if p.is_file()])


def test_gpu_checks_of_summary_and_tensorboard_hold_on_the_h200_trace(tmp_path):
    """Steps 3 and 4 on a real H200 trace (--trace): GPU busy, top kernel, idle, device time and call stacks."""
    proc = gpu_check("--device", "cpu", "--steps", "3,4", "--trace", str(H200_TRACE), OUT=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\[PASS\] 3 trace_summary .*ProfilerStep#4 wall 22\.2 ms, GPU busy 96\.6%, idle 3\.4%",
                     proc.stdout), proc.stdout
    match = re.search(r"\[PASS\] 4 tensorboard .*overview Kernel (\d+) us, operator device time (\d+) us, "
                      r"call stacks of \S+: HTTP 200, [1-9]", proc.stdout)
    assert match and int(match.group(1)) > 20_000 and int(match.group(2)) > 20_000, proc.stdout
    assert "VERDICT: PASS (2 passed, 0 failed, 5 skipped)" in proc.stdout


def test_the_2_gpu_step_runs_on_cpu_processes_with_gloo_and_checks_the_communication(tmp_path):
    """Step 7's own code on CPU (--comm_backend gloo): 2 ranks of the embedded inference with --seq_p_size 2 under
    torchrun, rank 1 late in ProfilerStep#1 and #3; the summary names it there, the waits and exposed communication
    show the delay, the figures land in gpu_check.json and the summary beside them."""
    proc = gpu_check("--device", "cpu", "--steps", "7", "--comm_backend", "gloo", OUT=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"^\[PASS\] 7 {SEQ_PARALLEL} \(\d+ s\): gloo on 2 CPU processes, --seq_p_size 2 \(ulysses\), "
                     r"rank 1 late 300 ms in ProfilerStep#1, ProfilerStep#3: named there, rank 0 waited "
                     r"\d+\.\d/\d+\.\d ms at all_to_all; rank 0 exposed communication [\d./]+ ms per step; "
                     r"straggler rank 1 \(waits caused\)$", proc.stdout, re.M), proc.stdout
    assert "VERDICT: PASS (1 passed, 0 failed, 6 skipped)" in proc.stdout
    (step,) = [s for s in json.loads((tmp_path / "gpu_check.json").read_text())["steps"] if s["number"] == 7]
    f = step["figures"]
    assert (f["backend"], f["on_gpu"], f["ranks"], f["late_rank"]) == ("gloo", False, 2, 1)
    assert [(s["step"], s["late_rank"]) for s in f["steps"]] == [
        ("ProfilerStep#1", 1), ("ProfilerStep#2", None), ("ProfilerStep#3", 1)]
    for s in f["steps"]:
        if s["late_rank"] is not None:
            assert s["waited_ms"]["0"] >= 150 and s["exposed_ms"]["0"] >= 150 and s["collective"] == "all_to_all"
            assert "ulysses.py" in s["site"] and s["doing"] == "late_rank_delay"
    assert f["straggler"]["rank"] == 1 and f["straggler"]["criterion"] == "waits_caused"
    assert f["top"][0]["kind"] == "all_to_all"
    summary = (tmp_path / "7_seq_parallel" / "summary.txt").read_text()
    assert "Communication across 2 ranks (gloo on CPU" in summary
    assert json.loads((tmp_path / "7_seq_parallel" / "summary.json").read_text())["runs"][0]["communication"]


def step7_figures(extra_late_ms: float | None) -> dict:
    """Step 7's figures as comm_figures writes them: rank 1 late 300 ms in #1 and #3, and (extra_late_ms) rank 0
    named late in #2 too, as a rank held off a loaded CPU's core can be."""
    def step(k: int, late: int | None, wait: float) -> dict:
        return {"step": f"ProfilerStep#{k}", "late_rank": late, "late_wait_ms": wait if late is not None else 0.0,
                "collective": "all_to_all", "waited_ms": {"0": 310.0 if late == 1 else 1.0, "1": 1.0},
                "exposed_ms": {"0": 320.0 if late == 1 else 2.0, "1": 2.0}}
    steps = [step(1, 1, 300.0), step(2, None if extra_late_ms is None else 0, extra_late_ms or 0.0),
             step(3, 1, 300.0), step(4, None, 0.0)]
    return {"ranks": 2, "complete": 12, "collectives": 12, "notes": [], "on_gpu": False,
            "late_steps": ["ProfilerStep#1", "ProfilerStep#3"], "steps": steps,
            "straggler": {"rank": 1, "criterion": "waits_caused"}}


@pytest.mark.parametrize(("extra_late_ms", "backend", "passes"), [
    (None, "gloo", True), (40.0, "gloo", True), (160.0, "gloo", False), (40.0, "nccl", False)])
def test_step7_allows_a_cpu_rank_named_late_elsewhere_only_below_half_the_delay(extra_late_ms, backend, passes,
                                                                                 monkeypatch):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("gpu_check_module", REPO_ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    f = step7_figures(extra_late_ms)
    f["on_gpu"] = backend == "nccl"
    step = module.Step(7, SEQ_PARALLEL, figures=f)
    if passes:
        module.check_comm(step, backend, 300.0)
    else:
        with pytest.raises(module.CheckFailed, match="no rank late outside"):
            module.check_comm(step, backend, 300.0)
