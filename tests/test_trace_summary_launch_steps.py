"""Steps by launch and idle by cause, on small hand-made kineto traces whose answers are worked out by hand.

Each trace is what kineto writes for a pipelined GPU: CPU ``ProfilerStep#N`` spans, ops with runtime calls
(``cudaLaunchKernel`` and friends, with a correlation id) inside them, and kernels that carry that id and run
later than their launch. Older kineto writes the correlation id into the kernel's ``External id`` too, which
is what the ``old_kineto`` variants do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightx2v.trace_summary.analyze import analyze_trace

CPU, GPU = (1, 1), (0, 7)  # (pid, tid) of the host thread and of the GPU stream


class Trace:
    """Builds events: ``op`` and ``step`` on the host thread, ``launch`` = runtime call + its kernel."""

    def __init__(self, old_kineto: bool = False) -> None:
        self.events: list[dict] = []
        self.corr = 1000
        self.ext = 1
        self.old_kineto = old_kineto

    def _x(self, cat: str, name: str, where: tuple[int, int], ts: float, dur: float, **args) -> dict:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": where[0], "tid": where[1], "ts": ts, "dur": dur,
              "args": args}
        self.events.append(ev)
        return ev

    def step(self, n: int, ts: float, dur: float, gpu_span: tuple[float, float] | None = None) -> None:
        self._x("user_annotation", f"ProfilerStep#{n}", CPU, ts, dur)
        if gpu_span is not None:
            self._x("gpu_user_annotation", f"ProfilerStep#{n}", GPU, gpu_span[0], gpu_span[1] - gpu_span[0])

    def op(self, name: str, ts: float, dur: float) -> int:
        self.ext += 1
        self._x("cpu_op", name, CPU, ts, dur, **{"External id": self.ext})
        return self.ext

    def launch(self, op_ext: int, call_ts: float, kernel_ts: float, kernel_dur: float, kernel: str = "k",
               call: str = "cudaLaunchKernel", call_dur: float = 2.0) -> None:
        self.corr += 1
        self._x("cuda_runtime", call, CPU, call_ts, call_dur, correlation=self.corr, **{"External id": op_ext})
        ext = self.corr if self.old_kineto else op_ext
        self._x("kernel", kernel, GPU, kernel_ts, kernel_dur, correlation=self.corr, stream=7,
                **{"External id": ext})

    def sync(self, call: str, ts: float, dur: float) -> None:
        self.corr += 1
        self._x("cuda_runtime", call, CPU, ts, dur, correlation=self.corr)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": self.events}))
        return path


def pipelined(old_kineto: bool, gpu_spans: bool) -> Trace:
    """Three 100 us CPU steps, each launching two 40 us kernels; the GPU runs 60 us behind the host, so each
    step's second kernel finishes inside the next step's CPU span (and the last one after every CPU span)."""
    t = Trace(old_kineto)
    for i in range(3):
        lo = 1000.0 + 100 * i
        gpu_lo = lo + 60
        t.step(i + 1, lo, 100, (gpu_lo, gpu_lo + 80) if gpu_spans else None)
        ext = t.op("aten::mm", lo + 10, 20)
        t.launch(ext, lo + 12, gpu_lo, 40, kernel="gemm")
        ext = t.op("aten::gelu", lo + 40, 20)
        t.launch(ext, lo + 42, gpu_lo + 40, 40, kernel="gelu")
    return t


@pytest.mark.parametrize("old_kineto", [False, True], ids=["external_id_is_the_op", "external_id_is_correlation"])
@pytest.mark.parametrize("gpu_spans", [False, True], ids=["cpu_steps", "with_gpu_side_steps"])
def test_each_step_counts_the_kernels_it_launched_and_nothing_twice(tmp_path, old_kineto, gpu_spans):
    r = analyze_trace(str(pipelined(old_kineto, gpu_spans).write(tmp_path / "t.json")))
    assert [s.name for s in r.steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert [s.kernel_count for s in r.steps] == [2, 2, 2]  # by GPU time it would read 1, 2, 2 (+1 in none)
    assert [s.gpu_launched_us for s in r.steps] == [80.0, 80.0, 80.0]
    # the step's GPU work ends 40 us after its CPU span: its lag; the windows stop at the next step's start
    assert [s.gpu_lag_us for s in r.steps] == [40.0, 40.0, 40.0]
    assert [s.wall_us for s in r.steps] == [100.0, 100.0, 140.0]
    assert sum(s.wall_us for s in r.steps) <= r.trace_span_us == 340.0
    # and the launch chain names the right op for every kernel, whichever External id the trace writes
    launchers = {(x.launcher, x.name): x.calls for x in r.tables.launches}
    assert launchers == {("aten::mm", "gemm"): 3, ("aten::gelu", "gelu"): 3}
    links = r.launch_links
    assert (links.gpu_events, links.with_launch_record, links.by_launch_chain, links.unlinked) == (6, 6, 6, 0)
    assert ("not used" in links.external_id) == old_kineto


def test_a_kernel_whose_external_id_names_another_op_is_charged_to_the_op_around_its_launch(tmp_path):
    # old kineto: the kernel's External id is its correlation id, which here equals an unrelated op's id
    t = Trace(old_kineto=True)
    t.step(1, 0, 200)
    uniform = t.op("aten::uniform_", 10, 30)
    t.launch(uniform, 15, 100, 10, kernel="distribution_elementwise")
    t.ext = t.corr - 1  # the next op gets the id the kernel carries as its External id
    t.op("aten::add", 150, 20)
    r = analyze_trace(str(t.write(tmp_path / "t.json")))
    assert [(x.launcher, x.name) for x in r.tables.launches] == [("aten::uniform_", "distribution_elementwise")]


def test_idle_is_split_by_what_ended_each_gap(tmp_path):
    """One 1000 us step; kernels (k) and the host's calls, with the gaps they leave on the GPU:

    gap 1: [0, 100)    before the first kernel, launched at 90: host wait 100
    gap 2: [150, 400)  the next kernel launched at 380, the host in cudaStreamSynchronize 140-390 (inside .item()):
                       sync 250
    gap 3: [420, 430)  the next kernel launched at 300 (queued), 10 us gap: short gaps 10
    gap 4: [450, 600)  next launched at 310 (queued) but 150 us: other 150
    gap 5: [650, 1000) no more kernels: the GPU waits for a host that launches nothing more: host wait 350
    """
    t = Trace()
    t.step(1, 0, 1000)
    mm = t.op("aten::mm", 80, 20)
    t.launch(mm, 90, 100, 50)
    item = t.op("aten::item", 130, 270)
    t.op("aten::_local_scalar_dense", 135, 260)
    t.sync("cudaStreamSynchronize", 140, 250)
    add = t.op("aten::add", 375, 10)
    t.launch(add, 380, 400, 20)
    add2 = t.op("aten::add", 295, 20)  # launched earlier than it runs: queued behind the first
    t.launch(add2, 300, 430, 20)
    add3 = t.op("aten::add", 305, 10)
    t.launch(add3, 310, 600, 50)
    del item
    r = analyze_trace(str(t.write(tmp_path / "t.json")))
    idle = r.idle
    assert idle.idle_us == 860.0
    c = idle.causes
    assert (c.host_wait_us, c.sync_us, c.short_gaps_us, c.other_us, c.unknown_us) == (450.0, 250.0, 10.0, 150.0, 0)
    assert c.dominant == "host wait"
    assert [(w.op, w.call, w.idle_us, w.gaps) for w in c.syncs] == [("aten::item", "cudaStreamSynchronize",
                                                                      250.0, 1)]


def test_a_sync_names_the_line_of_the_users_code_it_sat_in(tmp_path):
    """With with_stack frames, the sync cause says where in the user's code the host waited: the innermost user
    frame around the call (``denoise.py:41 log_loss``), not the torch frame below it nor the caller above; the
    same call in another function is its own row. Without frames the line is empty (schema 4: SyncWait.line)."""
    from lightx2v.trace_summary.render import render_rank

    t = Trace()
    t.step(1, 0, 1000)
    t._x("python_function", "/home/me/proj/denoise.py(12): denoise_step", CPU, 1, 998)
    t._x("python_function", "/home/me/proj/denoise.py(41): log_loss", CPU, 100, 310)
    t._x("python_function", "/venv/lib/python3.11/site-packages/torch/_tensor.py(1100): item", CPU, 125, 280)
    mm = t.op("aten::mm", 80, 20)
    t.launch(mm, 90, 100, 50)
    t.op("aten::item", 130, 270)
    t.sync("cudaStreamSynchronize", 140, 250)
    add = t.op("aten::add", 415, 10)
    t.launch(add, 420, 430, 20)  # gap [150, 430): ended by a launch at 420, the host in a sync 140-390
    t._x("python_function", "/home/me/proj/denoise.py(57): report", CPU, 800, 150)
    t.op("aten::item", 810, 120)
    t.sync("cudaStreamSynchronize", 815, 110)
    add = t.op("aten::add", 935, 10)
    t.launch(add, 940, 950, 20)  # gap [450, 950): ended by a launch at 940, the host in a sync 815-925
    path = t.write(tmp_path / "t.json")
    c = analyze_trace(str(path)).idle.causes
    assert [(w.op, w.call, w.line, w.idle_us) for w in c.syncs] == [  # most idle first
        ("aten::item", "cudaStreamSynchronize", "proj/denoise.py:57 report", 500.0),
        ("aten::item", "cudaStreamSynchronize", "proj/denoise.py:41 log_loss", 280.0)]
    r = analyze_trace(str(path))
    assert "cudaStreamSynchronize at proj/denoise.py:41 log_loss" in render_rank(r)
    unfolded = analyze_trace(str(path), folded=False).idle.causes  # --all-frames: torch's frame is kept, skipped
    assert [w.line for w in unfolded.syncs] == ["proj/denoise.py:57 report", "proj/denoise.py:41 log_loss"]
    doc = json.loads(path.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "python_function"]
    path.write_text(json.dumps(doc))
    assert [w.line for w in analyze_trace(str(path)).idle.causes.syncs] == [""]


def test_a_gap_ended_by_work_whose_launch_is_not_recorded_is_unknown(tmp_path):
    t = Trace()
    t.step(1, 0, 200)
    t._x("kernel", "k", GPU, 0, 20, stream=7)  # no correlation id: kineto recorded no launch for it
    t._x("kernel", "k", GPU, 110, 90, stream=7)
    r = analyze_trace(str(t.write(tmp_path / "t.json")))
    c = r.idle.causes
    assert (r.idle.idle_us, c.unknown_us, c.dominant) == (90.0, 90.0, "unknown")
    assert r.launch_links.unlinked == 2


def test_the_advice_follows_the_dominant_cause(tmp_path):
    """Many short queued gaps: launch-bound. A long wait for the host: host wait, never 'launch-bound'."""
    from lightx2v.trace_summary.render import render_rank

    short = Trace()
    short.step(1, 0, 300)
    for i in range(10):  # ten 10 us kernels queued at once, each 15 us after the previous one ends
        ext = short.op("aten::add", 1 + i, 1)
        short.launch(ext, 1 + i, 100 + 25 * i, 10, call_dur=0.5)
    text = render_rank(analyze_trace(str(short.write(tmp_path / "short.json"))))
    assert "short gaps between queued kernels" in text and "launch-bound" in text

    slow_host = Trace()
    slow_host.step(1, 0, 3000)
    for i in range(3):  # each kernel launched 1 ms after the previous one finished
        ext = slow_host.op("aten::mm", 1000 * i + 900, 20)
        slow_host.launch(ext, 1000 * i + 905, 1000 * i + 910, 90)
    text = render_rank(analyze_trace(str(slow_host.write(tmp_path / "host.json"))))
    assert "the GPU waits for the host to launch work" in text and "launch-bound" not in text
