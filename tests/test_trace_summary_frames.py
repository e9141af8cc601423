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

from lightx2v.trace_summary import compare_runs, diff_to_json, summarize_paths
from lightx2v.trace_summary.__main__ import main
from lightx2v.trace_summary.analyze import analyze_trace, summarize_collected
from lightx2v.trace_summary.collect import SKIP_HEAD_FRAMES, Collected
from lightx2v.trace_summary.diff import compare_ranks
from lightx2v.trace_summary.flops import MODELED
from lightx2v.trace_summary.frames import LIBRARY, MODULE, SKIP_HEAD_FOLDED, USER, frame_kind, keeps, location
from lightx2v.trace_summary.hook import log_lines
from lightx2v.trace_summary.noise import REAL
from lightx2v.trace_summary.reader import TraceStream

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
    # the frames kept: gpu_anchor.py's (1 + 1 + 12) and the nn.Module ones (1 + 12 + 72); the other 1,147 fold
    assert f.steps == 1 and f.frame_events == 99 and f.folded and f.gpu
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
    assert not everything.frames.folded and everything.frames.frame_events == 1246
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


@pytest.fixture(scope="module")
def walked_gpu():
    """Per GPU event (kernels and memsets): (dur, names of the frames around its launch): a plain walk."""
    ev = _events(FIXTURE)
    calls = {e["args"]["correlation"]: e for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    frames = [e for e in ev if e.get("cat") == "python_function"]
    out = []
    for k in ev:
        if k.get("cat") in ("kernel", "gpu_memset"):
            call = calls[k["args"]["correlation"]]
            out.append((k["dur"], {f["name"] for f in _around(frames, call["tid"], call["ts"],
                                                                 call["ts"] + call["dur"])}))
    return out


def _is_module(name: str) -> bool:
    return name.startswith("nn.Module: ") and not re.match(r"nn\.Module: (Sequential|Block)_", name)


def test_the_text_section_json_and_log_line(walked_gpu, capsys):
    forward = sum(d for d, names in walked_gpu if FORWARD in names)
    own = sum(d for d, names in walked_gpu if FORWARD in names and not any(_is_module(n) for n in names))
    assert main([str(FIXTURE), "--top", "3"]) == 0
    text = capsys.readouterr().out
    section = text[text.index("Where in your code"):]
    assert f"{forward / 1000:8.3f} {own / 1000:8.3f}  100.0" in section
    assert "gpu_anchor.py:21 forward  (aten::linear)" in section and "Frame tree" not in text
    linear_row = next(line for line in section.splitlines() if line.endswith("  Linear"))
    assert linear_row.split()[:2] == [f"{sum(d for d, n in walked_gpu if any('Linear_' in x for x in n)) / 1000:.3f}",
                                      "71.6"]
    assert main([str(FIXTURE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "lightx2v.trace_summary/7"
    f = doc["runs"][0]["ranks"][0]["frames"]
    assert f["frames"][0]["frame"] == FORWARD and f["frames"][0]["gpu_us"] == round(forward, 3)
    assert {m["module_class"]: m["instances"] for m in f["modules"]} == {"Sequential": 1, "Block": 12, "Linear": 48,
                                                                          "LayerNorm": 24}
    lines = log_lines(analyze_trace(str(FIXTURE)), "x")
    assert f"where in your code: gpu_anchor.py:21 forward {own / 1000:.3f} ms/step self" in lines[-2]


def test_frames_prints_the_tree_and_all_frames_unfolds_it(walked_gpu, capsys):
    assert main([str(FIXTURE), "--frames"]) == 0
    tree = capsys.readouterr().out.split("Frame tree", 1)[1]
    block0 = sum(d for d, names in walked_gpu if "nn.Module: Block_0" in names)
    assert f"{block0 / 1000:8.3f}    0.000" in tree and "nn.Module: Block_0" in tree
    assert "nn.Module: Linear_2  <- aten::linear" in tree and "torch/nn" not in tree
    assert main([str(FIXTURE), "--frames", "--all-frames"]) == 0
    out = capsys.readouterr().out
    assert "every frame" in out and "_call_impl (modules/module.py:1783)" in out.split("Frame tree", 1)[1]


def _read_collapsed(path: Path) -> list[tuple[list[str], int]]:
    """flamegraph.pl's input rule: the count after the last space, the frames split at ';'."""
    out = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        out.append((stack.split(";"), int(count)))
    return out


def test_collapsed_stacks_read_back(walked_gpu, tmp_path, capsys):
    out = tmp_path / "h200.collapsed"
    assert main([str(FIXTURE), "--collapsed", str(out)]) == 0
    assert f"wrote {out} (gpu collapsed stacks" in capsys.readouterr().err
    stacks = _read_collapsed(out)
    forward = sum(d for d, names in walked_gpu if FORWARD in names)
    total = sum(d for d, _ in walked_gpu)
    # values are integer nanoseconds per step: each line rounds by at most 0.5 ns
    assert abs(sum(v for s, v in stacks if "forward (gpu_anchor.py:21)" in s) - forward * 1000) <= len(stacks)
    assert abs(sum(v for _, v in stacks) - total * 1000) <= len(stacks)
    assert all(s[0] == "<module> (gpu_anchor.py:86, line running at start)" and s[-1].startswith("aten::")
               for s, _ in stacks)
    linear = sum(d for d, names in walked_gpu if any("Linear_" in n for n in names))
    assert abs(sum(v for s, v in stacks if s[-2].startswith("nn.Module: Linear_")) - linear * 1000) <= len(stacks)
    # a trace without frames is a data error, named
    assert main([str(REPO / "tests" / "fixtures" / "hta" / "cpu_only"), "--collapsed", str(tmp_path / "x")]) == 1
    assert "--collapsed: no Python frames in this trace" in capsys.readouterr().err


@pytest.mark.slow
def test_collapsed_memory_stacks_of_a_cpu_capture(cpu_capture, tmp_path):
    out = tmp_path / "mem.txt"
    assert main([str(cpu_capture), "--collapsed", str(out), "--collapsed-value", "memory"]) == 0
    f = analyze_trace(str(cpu_capture)).frames
    stacks = _read_collapsed(out)
    mlp = next(r for r in f.frames if r.function == "mlp")
    assert abs(sum(v for s, v in stacks if "mlp (two_functions.py:29)" in s) - mlp.alloc_bytes) <= len(stacks)
    assert any(s[-1] == "aten::mm" for s, _ in stacks)


@pytest.mark.slow
def test_the_diff_names_the_changed_function_first(tmp_path, capsys):
    """Two captures of the two-function script, ``mlp`` computing its matmul twice in NEW. Its self time moves,
    its callers' only inclusive: mlp's file:line is named first. The machine's load can make one pair's steps
    vary more than the change (then nothing is named beyond noise); such a pair is captured again (3 at most)."""
    for attempt in range(3):
        base = capture(tmp_path / str(attempt), "base", "--active", "8")
        new = capture(tmp_path / str(attempt), "new", "--active", "8", "--double-matmul")
        d = compare_runs(*(summarize_paths([str(p)])[0] for p in (base, new)))
        ch = d.ranks[0].frames
        assert ch is not None and ch.value == "cpu"
        first = ch.frames[0]
        if first.noise.verdict == REAL and first.function == "mlp":
            break
    assert (first.location, first.function) == ("two_functions.py:29", "mlp")
    assert first.self_per_step_us.delta > 0.3 * first.self_per_step_us.base  # one more GEMM per block
    assert ch.line.startswith("where in your code: two_functions.py:29 mlp +")
    callers = {c.function: c for c in ch.frames}
    assert callers["denoise_step"].inclusive_per_step_us.delta == pytest.approx(
        sum(c.self_per_step_us.delta for c in ch.frames if c.function in ("mlp", "attention", "denoise_step")))
    assert main(["--diff", str(base), str(new)]) == 0
    text = capsys.readouterr().out
    assert f"  {ch.line}" in text and "Where in your code: frames whose CPU op time changed" in text
    table = text.split("Where in your code: frames whose", 1)[1].splitlines()
    assert table[2].endswith("  two_functions.py:29 mlp") and " real  " in table[2]
    doc = diff_to_json(d)
    assert doc["schema"] == "lightx2v.trace_summary.diff/6"
    assert doc["ranks"][0]["frames"]["frames"][0]["frame"] == "two_functions.py(29): mlp"


def test_the_diff_says_when_a_side_has_no_frames(fixture_summary):
    plain = analyze_trace(str(FIXTURE), with_frames=False)
    assert plain.frames is None
    assert compare_ranks(plain, plain).frames is None
    line = compare_ranks(plain, fixture_summary).frames.line
    assert line.startswith("where in your code: BASE has no Python frames")
    same = compare_ranks(fixture_summary, fixture_summary).frames
    assert same.line == "where in your code: no frame's time changed" and same.value == "gpu"


def test_the_frames_skipped_undecoded_are_the_ones_folding_drops(tmp_path):
    """SKIP_HEAD_FOLDED drops most library frames before decoding: the same answers as decoding every frame and
    dropping them by their name, and each frame it skips is one ``frame_kind`` folds."""
    raw = gzip.decompress(FIXTURE.read_bytes())
    heads = [m.end() for m in re.finditer(rb"\{", raw)]
    skip = re.compile(SKIP_HEAD_FOLDED)
    skipped = [json.JSONDecoder().raw_decode(raw.decode(), pos - 1)[0] for pos in heads if skip.match(raw, pos)]
    frames = [e for e in skipped if e.get("cat") == "python_function"]
    assert len(frames) > 1000 and all(frame_kind(e["name"]) == LIBRARY for e in frames)

    def summary(skip_head):
        stream = TraceStream(str(FIXTURE), skip_head=skip_head)
        c = Collected(shapes_of=MODELED, frames=keeps(True))
        for batch in stream.batches():
            c.feed(batch)
        return summarize_collected(c, str(FIXTURE), stream, 10)

    fast, slow = summary(SKIP_HEAD_FOLDED), summary(SKIP_HEAD_FRAMES)
    assert fast.frames == slow.frames and fast.tables.frames == slow.tables.frames


EPOCH_NS = 1712195495505583047  # kineto's nanosecond traces: epoch microseconds with three decimals


def _as_written(ns: int) -> float:
    """A nanosecond time as kineto writes it (microseconds, three decimals), read back as a double."""
    return float(f"{ns // 1000}.{ns % 1000:03d}")


def _same_ns_ends(tmp_path: Path, name: str, main_after_ns: int, work_ns: int) -> Path:
    """``<module>`` and the ``main`` it calls end in the same nanosecond (``return main()``), at epoch times."""
    t, end = EPOCH_NS, EPOCH_NS + 48_875_123

    def frame(label: str, lo: int, hi: int, cat: str = "python_function") -> dict:
        return {"ph": "X", "cat": cat, "name": label, "pid": 1, "tid": 1, "ts": _as_written(lo),
                "dur": _as_written(hi - lo), "args": {}}

    events = [frame("myscript.py(21): <module>", t, end), frame("myscript.py(16): main", t + main_after_ns, end),
              frame("myscript.py(9): work", t + main_after_ns + 1000, t + main_after_ns + work_ns),
              frame("aten::mm", t + main_after_ns + 2000, t + main_after_ns + work_ns - 1000, "cpu_op")]
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


# main's start read as a double rounds up by up to 0.171 us more than <module>'s: its end comes out later
LATER_BY_ROUNDING = [79, 80, 81, 330, 331]


@pytest.mark.parametrize("after", LATER_BY_ROUNDING)
def test_a_frame_ending_in_the_same_nanosecond_as_its_callee_stays_its_parent(tmp_path, after):
    t = _as_written(EPOCH_NS)
    main_end = _as_written(EPOCH_NS + after) - t + _as_written(48_875_123 - after)
    assert main_end - _as_written(48_875_123) > 0.0005  # the float ends differ: the case this test is about
    frames = analyze_trace(str(_same_ns_ends(tmp_path, "t", after, 40_000_000))).frames
    cpu = {f.function: f.cpu_us for f in frames.frames}
    assert cpu["<module>"] == cpu["main"] == cpu["work"] > 38_000.0
    assert main(["--frames", str(tmp_path / "t.pt.trace.json")]) == 0


def test_the_diff_of_two_such_captures_names_no_fake_change_of_the_caller(tmp_path):
    base = _same_ns_ends(tmp_path, "base", 1000, 40_000_000)  # ends the same as floats too
    new = _same_ns_ends(tmp_path, "new", LATER_BY_ROUNDING[0], 40_000_000)
    ch = compare_runs(*(summarize_paths([str(p)])[0] for p in (base, new))).ranks[0].frames
    assert ch is not None
    moved = {c.function: c.inclusive_per_step_us for c in ch.frames}
    assert "<module>" not in moved or abs(moved["<module>"].delta) < 1.0, moved


def _source_line(frame: str) -> str:
    """The source line a frame name points at, where the file is ours or torch's (else "")."""
    m = re.match(r"(.*)\((\d+)\): ", frame)
    if m is None:
        return ""
    path = Path(m.group(1))
    if not path.is_absolute():
        import torch

        for root in (REPO / "tests" / "programs", Path(torch.__file__).parent.parent):
            if (root / path).is_file():
                path = root / path
                break
    if not path.is_file():
        return ""
    return path.read_text(encoding="utf-8").splitlines()[int(m.group(2)) - 1]


@pytest.mark.slow
def test_each_frames_line_is_the_kind_it_is_labelled(cpu_capture, capsys):
    """On a real capture of the two-function script: a frame labelled as running at the start points at a line
    that calls (its source holds a call, not a ``def``): main's ``profile.run(...)``, ``<module>``'s ``main()``;
    every other frame of our script points at its ``def`` line. The table and the tree say which is which."""
    (rank,) = summarize_paths([str(cpu_capture)])[0].ranks
    tree = rank.tables.frames
    assert {n.split(": ", 1)[1] for n in tree.running if "two_functions.py" in n} == {"<module>", "main"}
    for name in tree.names[1:]:
        source = _source_line(name)
        if "two_functions.py" not in name or not source:
            continue
        if name in tree.running:
            assert "(" in source and not source.lstrip().startswith("def "), (name, source)
        else:
            assert source.lstrip().startswith("def "), (name, source)
    lines = {f.function: f.line for f in rank.frames.frames}
    assert lines["main"] == "running" and lines["denoise_step"] == lines["mlp"] == "def"
    assert main([str(cpu_capture), "--frames"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"two_functions\.py:\d+ main \(line running at start\)", out)
    assert re.search(r"two_functions\.py:29 mlp(?! \()", out)
    assert re.search(r"main \(two_functions\.py:\d+, line running at start\)", out)
