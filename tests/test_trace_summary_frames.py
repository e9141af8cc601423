"""Where in your code: work charged to the Python frames of a with_stack capture (``frames``), on the real H200
fixture and on real CPU captures of a user's two-function script (tests/programs/two_functions.py).

The fixture's figures (issue "Where in my code"), recounted here by a plain walk of the JSON: each kernel's
correlation id names its runtime call; the frames around that call (same thread, start <= call start, end >= call
end) are its stack. ``gpu_anchor.py(21): forward`` launched 21.439 ms of kernels in the one step, its
``nn.Module: Linear_*`` frames 15.337 ms, the ``aten::scaled_dot_product_attention`` op under it 4.243 ms.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.frames import LIBRARY, MODULE, USER, frame_kind, location

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
PROGRAM = REPO / "tests" / "programs" / "two_functions.py"
FORWARD = "gpu_anchor.py(21): forward"


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _around(spans: list[dict], tid, lo: float, hi: float) -> list[dict]:
    return [s for s in spans if s["tid"] == tid and s["ts"] <= lo and s["ts"] + s["dur"] >= hi]


@pytest.fixture(scope="module")
def walked():
    """Per kernel: (dur, names of the frames around its launch, the outermost cpu_op around it): a plain walk."""
    ev = _events(FIXTURE)
    calls = {e["args"]["correlation"]: e for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    frames = [e for e in ev if e.get("cat") == "python_function"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    out = []
    for k in ev:
        if k.get("cat") != "kernel":
            continue
        call = calls[k["args"]["correlation"]]
        lo, hi = call["ts"], call["ts"] + call["dur"]
        around = _around(ops, call["tid"], lo, hi)
        top = min(around, key=lambda o: o["ts"])["name"] if around else ""
        out.append((k["dur"], {f["name"] for f in _around(frames, call["tid"], lo, hi)}, top))
    return out


@pytest.fixture(scope="module")
def fixture_summary():
    return analyze_trace(str(FIXTURE))


def test_the_issue_figures_on_the_h200_fixture(walked, fixture_summary):
    forward = sum(d for d, names, _ in walked if FORWARD in names)
    linear = sum(d for d, names, _ in walked if any(re.fullmatch(r"nn\.Module: Linear_\d+", n) for n in names))
    sdpa = sum(d for d, names, top in walked if FORWARD in names and top == "aten::scaled_dot_product_attention")
    assert (round(forward / 1000, 3), round(linear / 1000, 3), round(sdpa / 1000, 3)) == (21.439, 15.337, 4.243)

    f = fixture_summary.frames
    assert f.steps == 1 and f.frame_events == 1246 and f.folded and f.gpu
    row = next(r for r in f.frames if r.frame == FORWARD)
    assert row.kernel_us == pytest.approx(forward) and row.calls == 12
    assert (row.location, row.function, row.kind, row.top_op) == ("gpu_anchor.py:21", "forward", USER, "aten::linear")
    (lin,) = [m for m in f.modules if m.module_class == "Linear"]
    assert lin.kernel_us == pytest.approx(linear) and lin.instances == 48 and lin.calls == 48
    tree = fixture_summary.tables.frames
    assert sum(row[1] for (node, op), row in tree.ops.items()
               if op == "aten::scaled_dot_product_attention" and tree.names[node] == FORWARD) == pytest.approx(sdpa)
    # the user's frames come first: forward holds the most self time of the three frames holding all of it
    assert [r.frame for r in f.frames[:3]] == [FORWARD, "gpu_anchor.py(34): infer", "gpu_anchor.py(86): <module>"]
    assert f.unattributed_gpu_us == 0.0 and all(r.kind == USER for r in f.frames)


def test_cpu_self_time_per_frame_on_the_fixture(fixture_summary):
    """Each op's self time (duration minus its direct child ops') charged to the innermost frame around it."""
    ev = _events(FIXTURE)
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op" and not e["name"].startswith("ProfilerStep#")),
                 key=lambda e: (e["ts"], -e["dur"]))
    frames = [e for e in ev if e.get("cat") == "python_function"]
    in_forward = 0.0
    for o in ops:
        children = [c for c in ops if c is not o and c["tid"] == o["tid"] and c["ts"] >= o["ts"]
                    and c["ts"] + c["dur"] <= o["ts"] + o["dur"]]
        direct = [c for c in children if not any(p is not c and p["ts"] <= c["ts"] and
                                                 p["ts"] + p["dur"] >= c["ts"] + c["dur"] for p in children)]
        self_us = max(0.0, o["dur"] - sum(c["dur"] for c in direct))
        if any(f["name"] == FORWARD for f in _around(frames, o["tid"], o["ts"], o["ts"] + o["dur"])):
            in_forward += self_us
    row = next(r for r in fixture_summary.frames.frames if r.frame == FORWARD)
    assert row.cpu_us == pytest.approx(in_forward, abs=1e-6) and in_forward > 4000


def test_folding_keeps_the_users_frames_and_shows_the_rest_on_request(fixture_summary):
    tree = fixture_summary.tables.frames
    assert not any(k == LIBRARY for k in tree.kinds) and "torch/nn/modules/linear.py(130): forward" not in tree.names
    everything = analyze_trace(str(FIXTURE), folded=False)
    assert not everything.frames.folded
    rows = {r.frame: r for r in everything.frames.frames}
    # unfolded, torch's Linear.forward is a frame of its own and takes the GEMMs from the user's forward's self
    assert rows["torch/nn/modules/linear.py(130): forward"].kind == LIBRARY
    folded_forward = next(r for r in fixture_summary.frames.frames if r.frame == FORWARD)
    assert rows[FORWARD].gpu_us == pytest.approx(folded_forward.gpu_us)
    assert rows[FORWARD].gpu_self_us < folded_forward.gpu_self_us


@pytest.mark.parametrize("name, kind, where", [
    ("gpu_anchor.py(21): forward", USER, ("gpu_anchor.py:21", "forward")),
    ("lightx2v/models/networks/wan/infer/transformer_infer.py(88): infer_block", USER,
     ("infer/transformer_infer.py:88", "infer_block")),
    ("nn.Module: Linear_3", MODULE, ("", "Linear_3")),
    ("torch/nn/modules/module.py(1783): _call_impl", LIBRARY, ("modules/module.py:1783", "_call_impl")),
    ("typing.py(392): inner", LIBRARY, ("typing.py:392", "inner")),
    ("<frozen os>(680): __getitem__", LIBRARY, ("<frozen os>:680", "__getitem__")),
    ("/usr/lib/python3.12/contextlib.py(141): __exit__", LIBRARY, ("python3.12/contextlib.py:141", "__exit__")),
    ("/opt/venv/lib/python3.12/site-packages/diffusers/models/attention.py(70): forward", LIBRARY,
     ("models/attention.py:70", "forward")),
    ("<built-in method view of Tensor object at 0x7f54ac28d810>", LIBRARY,
     ("", "<built-in method view of Tensor object>")),
    ("lightx2v/utils/torch_trace_profiler.py(560): run", LIBRARY, ("utils/torch_trace_profiler.py:560", "run")),
])
def test_frame_kinds_and_locations(name, kind, where):
    assert frame_kind(name) == kind and location(name) == where


def capture(tmp_path: Path, name: str, *flags: str) -> Path:
    out = tmp_path / name
    tmp_path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(PROGRAM), str(out), "--with-stack", *flags], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    (trace,) = out.glob("*/*.pt.trace.json")
    return trace


@pytest.fixture(scope="module")
def cpu_capture(tmp_path_factory):
    return capture(tmp_path_factory.mktemp("frames"), "mem", "--active", "3", "--profile-memory")


@pytest.mark.slow
def test_a_cpu_capture_charges_op_time_and_allocations_to_the_users_functions(cpu_capture):
    """Recounted by a walk: per user function, the bytes of the [memory] events inside its frames in the steps."""
    ev = _events(cpu_capture)
    steps = [e for e in ev if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    frames = [e for e in ev if e.get("cat") == "python_function"]
    allocated: dict[str, float] = defaultdict(float)
    for m in ev:
        if m.get("name") != "[memory]" or m["args"]["Bytes"] <= 0:
            continue
        if not any(s["ts"] <= m["ts"] <= s["ts"] + s["dur"] for s in steps):
            continue
        for name in {f["name"] for f in _around(frames, m["tid"], m["ts"], m["ts"])}:
            allocated[name] += m["args"]["Bytes"] / len(steps)
    f = analyze_trace(str(cpu_capture)).frames
    assert f.memory_device == "cpu" and not f.gpu and f.steps == 3
    rows = {r.function: r for r in f.frames}
    for function in ("attention", "mlp", "denoise_step"):
        (name,) = {n for n in allocated if n.endswith(f": {function}")}
        assert rows[function].alloc_bytes == pytest.approx(allocated[name]) and allocated[name] > 0
    assert rows["mlp"].top_op == "aten::mm" and rows["mlp"].cpu_self_us > 0
    assert "run" not in rows  # the profiler's own wrapper is folded
