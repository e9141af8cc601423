"""The plugin fixes of `python -m lightx2v.tensorboard`, through the plugin's HTTP API, against stock
TensorBoard on the same logdir (the stock answers show what each test would see without the fix)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse

import pytest

from lightx2v.tensorboard.__main__ import with_defaults
from lightx2v.tensorboard.callstack import attach_call_stacks

from conftest import H200_TRACE, free_port, subprocess_env
from helpers.kineto import GPU_TID, Kineto
from helpers.procs import (
    PLUGIN,
    Server,
    cpu_trace,
    get_json,
    http_get,
    land,
    launcher,
    runs,
    stock_tensorboard,
    wait_for,
    wait_until,
    workers,
)

H200_RUN, H200_WORKER = "h200", "h200_dit_stack"
STEPS_RUN, STEPS_WORKER = "steps", "rank0_steps"


def two_gpu_steps(path):
    """Two ProfilerSteps as torch >= 2 writes them on a GPU: each on the CPU thread and again on the GPU stream,
    each launching one 300 us kernel."""
    k = Kineto()
    for n in (1, 2):
        start = 10_000.0 + (n - 1) * 1000
        k.step(n, start, 1000)
        k.op("aten::mm", start + 100, [("kernel", "gemm", 300.0)])
        k._x("gpu_user_annotation", f"ProfilerStep#{n}", GPU_TID, start + 200, 300)
    return k.write(path)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One patched and one stock TensorBoard on one logdir holding the H200 trace and a CPU capture."""
    base = tmp_path_factory.mktemp("tb")
    logdir = base / "logdir"
    land(H200_TRACE, logdir / H200_RUN / H200_TRACE.name)
    land(cpu_trace(tmp_path_factory.getbasetemp()), logdir / "cpu" / "rank0_test.pt.trace.json")
    two_gpu_steps(logdir / STEPS_RUN / f"{STEPS_WORKER}.pt.trace.json")
    patched_port, stock_port = free_port(), free_port()
    patched, stock = launcher(logdir, patched_port), stock_tensorboard(logdir, stock_port)
    try:
        for port, server in ((patched_port, patched), (stock_port, stock)):
            wait_until(lambda port=port: {"h200", "cpu", STEPS_RUN} <= set(runs(port)), 90,
                       what=f"the three runs on {server.args[2]}")
        yield {"patched": patched_port, "stock": stock_port, "logdir": logdir, "server": patched, "stock_server": stock}
    finally:
        patched.stop()
        stock.stop()


def api(port: int, route: str, run: str = H200_RUN, worker: str = H200_WORKER, **params):
    query = urllib.parse.urlencode({"run": run, "worker": worker, "span": "default", **params})
    return f"http://127.0.0.1:{port}{PLUGIN}/{route}?{query}"


@pytest.mark.slow
def test_h200_operator_device_time(servers):
    """cuda_runtime/cuda_driver events count as runtime: GPU time lands on the operators that launched it."""
    def device_times(port):
        rows = get_json(api(port, "operation/table", group_by="Operation"))["data"]
        return {row["name"]: row.get("device_total_duration", 0) for row in rows}

    patched, stock = device_times(servers["patched"]), device_times(servers["stock"])
    assert patched["aten::addmm"] > 10_000 and patched["aten::_cudnn_attention_forward"] > 1_000
    assert sum(patched.values()) > 20_000
    assert sum(stock.values()) == 0  # the bug: 0.4.3 does not know cuda_runtime
    overview = get_json(api(servers["patched"], "overview"))
    runtime = next(c for c in overview["performance"][0]["children"] if c["name"] == "Runtime")
    assert runtime["value"] > 0


@pytest.mark.slow
def test_h200_kernel_view(servers):
    """The kernel view lists the trace's kernels, each attributed to the operator that launched it."""
    def kernels(port):
        table = get_json(api(port, "kernel/table", group_by="KernelNameAndOpName"))["data"]
        op_column = [c["name"] for c in table["columns"]].index("Operator")
        return [(row[0], row[op_column]) for row in table["rows"]]

    patched, stock = kernels(servers["patched"]), kernels(servers["stock"])
    assert any(name.startswith("nvjet_sm90") and op == "aten::addmm" for name, op in patched)
    assert any("sdpa" in name and op == "aten::_cudnn_attention_forward" for name, op in patched)
    assert {op for _, op in stock} == {"CallTreeRoot"}  # stock cannot tie kernels to operators
    pie = get_json(api(servers["patched"], "kernel"))
    assert len(pie["total"]["rows"]) >= 5 and all(row[1] > 0 for row in pie["total"]["rows"])


def test_call_stack_view(servers):
    """No HTTP 500: operators get call stacks rebuilt from python_function events; others an empty table."""
    url = api(servers["patched"], "operation/stack", group_by="Operation", op_name="aten::addmm")
    table = get_json(url)
    stacks = [row["call_stack"] for row in table["data"]]
    assert stacks and all("torch/nn/modules/linear.py(" in s for s in stacks)
    assert stacks[0].split(";")[-1] == "gpu_anchor.py(86): <module>"  # innermost first, the script last
    rows = get_json(api(servers["patched"], "operation/table", group_by="Operation"))["data"]
    assert any(row["name"] == "aten::addmm" and row["has_call_stack"] for row in rows)

    missing = api(servers["patched"], "operation/stack", group_by="OperationAndInputShape",
                  op_name="no::such_op", input_shape="[]")
    assert get_json(missing)["data"] == []
    status, _, _ = http_get(api(servers["stock"], "operation/stack", group_by="Operation", op_name="aten::addmm"))
    assert status == 500  # the bug this fixes


def test_each_profiler_step_is_one_step_in_the_overview(servers):
    """torch >= 2 writes each ProfilerStep on the CPU and again on the GPU stream: one step each, with its kernel
    time (stock 0.4.3 lists every step twice; with device time counted it divided by zero and the run never
    loaded)."""
    def steps(port):
        rows = get_json(api(port, "overview", run=STEPS_RUN, worker=STEPS_WORKER))["steps"]["rows"]
        return [(row[0], row[1]) for row in rows]  # step name, kernel us

    assert steps(servers["patched"]) == [("1", 300.0), ("2", 300.0)]
    assert [name for name, _ in steps(servers["stock"])] == ["1", "1", "2", "2"]  # the bug this fixes


@pytest.mark.parametrize("view", ["overview", "operation", "operation/table", "trace", "module", "tree"])
def test_cpu_capture_views_answer_smoke(servers, view):
    """Smoke only: stock TensorBoard answers these too; test_cpu_capture_has_call_stacks_only_with_the_fix is
    what the fixes change on this machine's own (torch >= 2) capture."""
    status, headers, body = http_get(api(servers["patched"], view, run="cpu", worker="rank0_test",
                                         group_by="Operation"))
    assert status == 200, body[:300]
    assert headers["Content-Type"].startswith("application/json") and len(body) > 50


def test_cpu_capture_has_call_stacks_only_with_the_fix(servers):
    """A capture by the torch installed here (with_stack): operators carry the stacks rebuilt from its
    python_function events, down to the capturing script; stock 0.4.3 sees none and answers HTTP 500."""
    def call_stack_ops(port):
        rows = get_json(api(port, "operation/table", run="cpu", worker="rank0_test", group_by="Operation"))["data"]
        return {row["name"] for row in rows if row.get("has_call_stack")}

    patched = call_stack_ops(servers["patched"])
    assert "aten::addmm" in patched and call_stack_ops(servers["stock"]) == set()
    stack_url = api(servers["patched"], "operation/stack", run="cpu", worker="rank0_test", group_by="Operation",
                    op_name="aten::addmm")
    stacks = [row["call_stack"] for row in get_json(stack_url)["data"]]
    assert stacks and all("capture.py(" in s for s in stacks), stacks[:3]
    status, _, _ = http_get(stack_url.replace(f":{servers['patched']}/", f":{servers['stock']}/"))
    assert status == 500


@pytest.mark.slow
def test_new_run_and_late_rank_appear_without_restart(servers, tmp_path_factory):
    port, logdir = servers["patched"], servers["logdir"]
    trace = cpu_trace(tmp_path_factory.getbasetemp())
    land(trace, logdir / "late" / "rank0_test.pt.trace.json")
    wait_until(lambda: "late" in runs(port), 30, what="the new run")
    assert workers(port, "late") == ["rank0_test"]

    land(trace, logdir / "late" / "rank1_test.pt.trace.json")  # a second file in a run already loaded
    wait_until(lambda: workers(port, "late") == ["rank0_test", "rank1_test"], 30, what="the late rank")
    assert servers["server"].proc.poll() is None


@pytest.mark.slow
def test_half_written_file_is_read_again(servers, tmp_path_factory):
    port, logdir = servers["patched"], servers["logdir"]
    complete = cpu_trace(tmp_path_factory.getbasetemp()).read_bytes()
    run = logdir / "partial"
    land(cpu_trace(tmp_path_factory.getbasetemp()), run / "rank0_test.pt.trace.json")
    wait_until(lambda: "partial" in runs(port), 30, what="the run")
    growing = run / "rank1_test.pt.trace.json"
    growing.write_bytes(complete[: len(complete) // 2])  # a writer that is not atomic, caught half-way
    # wait until a rescan has read the half file and failed on it (the plugin's parser logs it), then finish it:
    # the failed file must not be given up on
    failed = "run partial, worker rank1_test: cannot be parsed"  # the plugin logs it (fix parse_errors: one line)
    wait_until(lambda: failed in servers["server"].output(), 60, what="the half file to be read and fail")
    assert workers(port, "partial") == ["rank0_test"]
    with open(growing, "ab") as f:
        f.write(complete[len(complete) // 2:])
    wait_until(lambda: workers(port, "partial") == ["rank0_test", "rank1_test"], 30, what="the finished file")


@pytest.mark.slow
def test_removed_run_leaves_the_list(servers, tmp_path_factory):
    port, logdir = servers["patched"], servers["logdir"]
    land(cpu_trace(tmp_path_factory.getbasetemp()), logdir / "gone" / "rank0_test.pt.trace.json")
    wait_until(lambda: "gone" in runs(port), 30, what="the run")
    (logdir / "gone" / "rank0_test.pt.trace.json").unlink()
    wait_until(lambda: "gone" not in runs(port), 30, what="the run to be dropped")


@pytest.mark.slow
def test_the_run_list_is_newest_first(servers, tmp_path_factory):
    """By each run's newest trace file, not by name (stock: name order, so its page opened on the oldest)."""
    port, stock, logdir = servers["patched"], servers["stock"], servers["logdir"]
    trace = cpu_trace(tmp_path_factory.getbasetemp())
    future = time.time() + 3600  # newer than every run the other tests land
    for name, age in (("zz_oldest", 200), ("aa_newest", 0), ("mm_middle", 100)):
        land(trace, logdir / name / "rank0_test.pt.trace.json")
        os.utime(logdir / name / "rank0_test.pt.trace.json", (future - age, future - age))
    ours = ["aa_newest", "mm_middle", "zz_oldest"]
    wait_until(lambda: set(ours) <= set(runs(port)) and set(ours) <= set(runs(stock)), 60, what="the three runs")
    assert runs(port)[:3] == ours
    assert [r for r in runs(stock) if r in ours] == sorted(ours)


def test_the_plugins_missing_csp_header_is_explained_once_instead_of_warned_on_every_page(servers):
    from lightx2v.tensorboard.__main__ import CSP_NOTE

    for _ in range(3):
        for port in (servers["patched"], servers["stock"]):
            assert http_get(f"http://127.0.0.1:{port}{PLUGIN}/index.html")[0] == 200
    warning = "In 3.0, this warning will become an error"
    wait_until(lambda: servers["stock_server"].output().count(warning) >= 3, 30, what="stock's three warnings")
    wait_until(lambda: CSP_NOTE in servers["server"].output(), 30, what="the one line instead")
    assert servers["server"].output().count(CSP_NOTE) == 1 and warning + ":" not in servers["server"].output()


def test_newest_first_orders_by_time_then_name():
    from lightx2v.tensorboard.run_monitor import newest_first

    runs = {"b": 1, "a": 2, "c": 3, "d": 4}
    assert list(newest_first(runs, {"b": 30, "a": 10, "c": 30})) == ["b", "c", "a", "d"]


def test_every_fix_reports_and_warns_once_when_the_plugin_changed(tmp_path):
    """A plugin that no longer looks as expected: one warning per fix, TensorBoard's own code left alone.

    The asset folder is empty on purpose (whatever this machine has installed), so the offline Trace view's fix
    reports the missing polyfill too, and the GPU-steps fix the emptied category map: four warnings, each naming why."""
    script = """
import json, logging, sys
logging.basicConfig(stream=sys.stderr, format='%(message)s')
from torch_tb_profiler import consts, plugin
from torch_tb_profiler.profiler import trace
trace.EventTypeMap = {}                                    # renamed/restructured upstream
del plugin.TorchProfilerPlugin.operation_stack_route       # route gone
from lightx2v.tensorboard.patches import apply_fixes
results = apply_fixes()
print(json.dumps(results))
print(json.dumps({'interval': consts.MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS,
                  'runtime_mapped': 'cuda_runtime' in trace.EventTypeMap}))
"""
    empty_assets = tmp_path / "assets"
    empty_assets.mkdir()
    result = subprocess.run([sys.executable, "-c", script], env=subprocess_env(LIGHTX2V_ASSETS_DIR=str(empty_assets)),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    results, state = (json.loads(line) for line in result.stdout.strip().splitlines()[-2:])
    assert results["cuda_runtime"] and "EventTypeMap" in results["cuda_runtime"]
    assert results["stack_route"] and "operation_stack_route" in results["stack_route"]
    assert results["offline_trace"] and "lightx2v.assets install" in results["offline_trace"]
    assert results["gpu_steps"] and "gpu_user_annotation" in results["gpu_steps"]
    assert all(results[name] is None for name in ("rescan", "reload_runs", "call_stacks", "manager_exits",
                                                  "charts_notice"))
    warnings = [line for line in result.stderr.splitlines() if "not applied" in line]
    assert sorted(w.split("'")[1] for w in warnings) == ["cuda_runtime", "gpu_steps", "offline_trace",
                                                              "stack_route"], warnings
    assert state == {"interval": 1, "runtime_mapped": False}


@pytest.mark.slow
def test_launcher_defaults_and_skip_switch(tmp_path):
    """Default logdir is created under the cwd; LIGHTX2V_TB_SKIP_FIXES=all starts the stock plugin."""
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.tensorboard", "--host", "127.0.0.1"], cwd=tmp_path,
                    TENSORBOARD_PORT=str(port), LIGHTX2V_TB_SKIP_FIXES="all", LIGHTX2V_TORCH_PROFILE_DIR="")
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/")[0] == 200, 60, what="TensorBoard")
        assert (tmp_path / "save_results" / "torch_profile").is_dir()
        assert "plugin fixes applied: none" in server.output()
    finally:
        server.stop()


def test_with_defaults_fills_only_what_is_missing():
    env = {"TENSORBOARD_PORT": "17000", "LIGHTX2V_TORCH_PROFILE_DIR": "/data/tb", "LIGHTX2V_BIND_HOST": "0.0.0.0"}
    assert with_defaults([], env) == ["--logdir", "/data/tb", "--port", "17000", "--host", "0.0.0.0"]
    given = ["--logdir=x", "--port", "1", "--bind_all"]
    assert with_defaults(given, env) == given
    assert with_defaults(["--logdir_spec", "a:b"], {})[-2:] == ["--port", "16006"]


class Ev:
    def __init__(self, name, ts, dur, tid=1):
        self.name, self.ts, self.duration, self.tid, self.callstack = name, ts, dur, tid, None


def test_attach_call_stacks_innermost_first_per_thread():
    outer, inner = Ev("run.py(10): main", 0, 100), Ev("model.py(5): forward", 10, 50)
    builtin = Ev("<built-in method mm>", 20, 5)
    other_thread = Ev("worker.py(3): loop", 0, 100, tid=2)
    mm, after, lone = Ev("aten::mm", 21, 2), Ev("aten::add", 70, 5), Ev("aten::mul", 5, 1, tid=3)
    assert attach_call_stacks([outer, inner, builtin, other_thread], [mm, after, lone]) == 2
    assert mm.callstack == "model.py(5): forward;run.py(10): main"
    assert after.callstack == "run.py(10): main"
    assert lone.callstack is None


def test_the_gpu_steps_fix_drops_the_gpu_copy_of_each_profiler_step_and_no_other_event(monkeypatch):
    """The H200 fixture through the plugin's own parse, with the gpu_steps fix on the plugin's event factory
    (``trace.create_event``): of the trace's events, the factory is no longer handed the ProfilerStep#4 on the GPU
    stream, and is handed every other one, the CPU ProfilerStep#4 and the twelve GPU-side ``attn`` annotations
    among them; the Overview's steps are ['4'] (stock 0.4.3: ['4', '4'])."""
    trace = pytest.importorskip("torch_tb_profiler.profiler.trace")
    from torch_tb_profiler.profiler import data

    from lightx2v.tensorboard.patches import FIXES

    factory = trace.create_event
    handed: list[tuple] = []

    def spy(event, is_pytorch_lightning):
        handed.append((event.get("ph"), event.get("cat"), event.get("name"), event.get("ts")))
        return factory(event, is_pytorch_lightning)

    monkeypatch.setattr(trace, "create_event", spy)
    stock = data.RunProfileData.parse("w", "default", str(H200_TRACE), None)
    assert stock.steps_names == ["4", "4"]  # the bug: the GPU copy is a step of its own
    everything = list(handed)
    handed.clear()
    (fix,) = [f for f in FIXES if f.name == "gpu_steps"]
    assert fix.check() is None
    fix.apply()
    fixed = data.RunProfileData.parse("w", "default", str(H200_TRACE), None)
    assert fixed.steps_names == ["4"]
    dropped = [e for e in everything if e not in handed]
    assert [(ph, cat, name) for ph, cat, name, _ in dropped] == [("X", "gpu_user_annotation", "ProfilerStep#4")]
    assert len(handed) == len(everything) - 1
    kept = [(cat, name) for _, cat, name, _ in handed if cat in ("user_annotation", "gpu_user_annotation")]
    assert sorted(set(kept)) == [("gpu_user_annotation", "attn"), ("user_annotation", "ProfilerStep#4"),
                                 ("user_annotation", "attn")]
    assert kept.count(("gpu_user_annotation", "attn")) == 12


@pytest.mark.slow
def test_a_damaged_trace_is_one_log_line_not_a_traceback(tmp_path):
    """An empty file and a cut .gz: 0.4.3 logged 20-40 lines of traceback for each before the run monitor's line;
    now one line each says the run, the worker and the damage, and then what to do."""
    (tmp_path / "run_a").mkdir()
    (tmp_path / "run_a" / "w.1.pt.trace.json").write_bytes(b"")
    (tmp_path / "run_b").mkdir()
    (tmp_path / "run_b" / "w.2.pt.trace.json.gz").write_bytes(H200_TRACE.read_bytes()[:3000])
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(tmp_path), "--port", str(port),
                     "--host", "127.0.0.1"])
    try:
        wait_for(server, lambda: server.output().count("could be parsed yet") == 2, 120, "both runs tried")
        text = server.output()
    finally:
        server.stop()
    assert "Traceback" not in text, text
    said = sorted(line.split("] ", 1)[-1] for line in text.splitlines() if "cannot be parsed" in line)
    assert said == [
        f"lightx2v.tensorboard: run run_a, worker w: cannot be parsed: {tmp_path}/run_a/w.1.pt.trace.json: empty file, "
        "not a trace",
        f"lightx2v.tensorboard: run run_b, worker w: cannot be parsed: {tmp_path}/run_b/w.2.pt.trace.json.gz: "
        "truncated gzip stream (the file was cut off while being written?)"]
