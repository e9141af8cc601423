"""One rule for "this file is a trace" (lightx2v.trace_files), on the demo's real output and on damaged runs.

The demo writes its PNG, latents and run-metadata JSON beside `torch_profile/` (and, in chrome format, beside
`trace.json`): the summary, the trace browser's list and the profiler notice must all take the traces, and only
them, from the same folder. A damaged rank file must not hide the readable ones.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.profiler_notice import find_original_traces
from lightx2v.trace_browser.files import list_traces, resolve_run
from lightx2v.trace_files import CHROME, FOREIGN, FOREIGN_REASON, PERFETTO, TENSORBOARD, classify
from lightx2v.trace_summary.discover import scan

from conftest import H200_TRACE, subprocess_env
from helpers.infer import FAST, run_infer

# The shape of a Chrome DevTools performance recording (its own categories, no kineto header or categories)
DEVTOOLS = (b'{"metadata": {"source": "DevTools", "startTime": "2026-12-06T01:02:03Z"}, "traceEvents": ['
            b'{"args": {"name": "CrRendererMain"}, "cat": "__metadata", "name": "thread_name", "ph": "M", "pid": 7, '
            b'"tid": 9, "ts": 0}, {"args": {}, "cat": "disabled-by-default-devtools.timeline", "name": "RunTask", '
            b'"ph": "X", "dur": 120, "pid": 7, "tid": 9, "ts": 1000}, {"args": {"data": {"url": "app.js"}}, '
            b'"cat": "devtools.timeline", "name": "EvaluateScript", "ph": "X", "dur": 80, "pid": 7, "tid": 9, '
            b'"ts": 1010}]}')


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=subprocess_env())


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """A real save_results: the tiny demo once in TensorBoard format, once in chrome format (same folder)."""
    cwd = tmp_path_factory.mktemp("demo")
    first = run_infer(cwd, *FAST)
    assert first.proc.returncode == 0, first.output
    assert len(first.traces()) == 1, first.output
    return cwd


@pytest.mark.slow
def test_the_summary_reads_the_demos_own_save_results(demo):
    results = demo / "save_results"
    assert {"qwen_image_t2i.png", "qwen_image_t2i.json", "qwen_image_t2i.pt", "torch_profile"} <= \
        {p.name for p in results.iterdir()}
    proc = cli("save_results", "--json", cwd=demo)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    (trace,) = [p for p in (results / "torch_profile").glob("*/*.pt.trace.json")]
    assert [r["file"] for r in run["ranks"]] == [str(trace)] and run["damaged_files"] == []
    assert sorted(Path(s["file"]).name for s in run["skipped_files"]) == \
        ["qwen_image_t2i.json", "qwen_image_t2i.png", "qwen_image_t2i.pt"]
    assert {s["reason"] for s in run["skipped_files"]} == {"JSON without traceEvents near its start",
                                                         "not a .json or .json.gz file"}
    # the note says how many, on stderr; the summary written beside the trace is not counted
    assert proc.stderr.splitlines() == [
        "trace_summary: note: skipped 3 files that are not traces: save_results/qwen_image_t2i.json (JSON without "
        "traceEvents near its start), save_results/qwen_image_t2i.png, save_results/qwen_image_t2i.pt (not a .json "
        "or .json.gz file)"]
    text = cli("save_results", cwd=demo)
    assert text.returncode == 0 and f"file      {trace} (" in text.stdout and "ProfilerStep#" in text.stdout
    # named explicitly, the metadata JSON and the PNG are still clear errors
    for name, problem in (("qwen_image_t2i.json", "not a trace: a JSON object without a traceEvents list"),
                          ("qwen_image_t2i.png", "not a trace: not JSON")):
        bad = cli(f"save_results/{name}", cwd=demo)
        assert bad.returncode == 1 and bad.stdout == "", bad.stdout
        (line,) = bad.stderr.splitlines()
        assert line.startswith(f"trace_summary: error: save_results/{name}: {problem}"), line


@pytest.mark.slow
def test_all_four_places_agree_on_the_demos_folder_with_a_chrome_trace(demo, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(demo, work)
    chrome = run_infer(work, *FAST, "--profile_format", "chrome")
    assert chrome.proc.returncode == 0, chrome.output
    results = work / "save_results"
    (tb_trace,) = (results / "torch_profile").glob("*/*.pt.trace.json")
    expected = {"trace.json", tb_trace.relative_to(results).as_posix()}
    # the trace browser lists exactly the traces
    assert {t.path for t in list_traces(str(results))} == expected
    # the summary: the folder holds a chrome trace itself, so it is the run; its neighbours are skipped
    traces, skipped = scan(str(results))
    assert [Path(t).name for t in traces] == ["trace.json"]
    assert sorted(Path(s.file).name for s in skipped) == ["qwen_image_t2i.json", "qwen_image_t2i.png",
                                                          "qwen_image_t2i.pt"]
    proc = cli("save_results", "--json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert [r["worker"] for r in json.loads(proc.stdout)["runs"][0]["ranks"]] == ["trace"]
    logdir = cli("save_results/torch_profile", "--json", cwd=work)
    assert logdir.returncode == 0 and logdir.stderr == ""
    assert [r["file"] for r in json.loads(logdir.stdout)["runs"][0]["ranks"]] == [str(tb_trace)]
    # the profiler notice: the fixed module's layout, nothing to say
    assert find_original_traces(str(results / "torch_profile")) is None
    # and the rule itself, by kind
    assert classify(str(results / "trace.json")).kind == CHROME
    assert classify(str(tb_trace)).kind == TENSORBOARD
    assert classify(str(results / "qwen_image_t2i.json")).kind is None


def test_the_rule_by_name_and_content(tmp_path):
    raw = gzip.decompress(H200_TRACE.read_bytes())
    files = {
        "rank0_h.pt.trace.json.gz": H200_TRACE.read_bytes(),
        "cut.pt.trace.json": raw[:200],  # a TensorBoard name is a trace even when damaged: readers say so
        "events.json": b'  [\n {"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 2}]',  # Chrome's array format
        "devtools.json": DEVTOOLS,  # a Chrome trace of another tool: viewable, not summarized
        "other_array.json": b'[{"ph": "X", "name": "a", "ts": 1, "dur": 2}]',
        "chrome.json.gz": gzip.compress(raw)[: len(raw) // 50],  # gzip cut off: its head still shows a trace
        "numbers.json": b"[1, 2, 3]",
        "meta.json": b'{"prompt": "a red fox"}',
        "empty.json": b"",
        "ui.pftrace": b"\x0a\x00",
        "notes.txt": b"hello",
        ".hidden.pt.trace.json": raw,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    kinds = {name: classify(str(tmp_path / name)).kind for name in files}
    assert kinds == {"rank0_h.pt.trace.json.gz": TENSORBOARD, "cut.pt.trace.json": TENSORBOARD,
                     "events.json": CHROME, "devtools.json": FOREIGN, "other_array.json": FOREIGN,
                     "chrome.json.gz": CHROME, "numbers.json": None, "meta.json": None, "empty.json": None,
                     "ui.pftrace": PERFETTO, "notes.txt": None, ".hidden.pt.trace.json": None}
    listed = {t.path for t in list_traces(str(tmp_path))}
    assert listed == {name for name, kind in kinds.items() if kind is not None}
    traces, skipped = scan(str(tmp_path))  # TensorBoard-named traces are the run; the chrome ones are named
    assert [Path(t).name for t in traces] == ["cut.pt.trace.json", "rank0_h.pt.trace.json.gz"]
    assert sorted(Path(s.file).name for s in skipped) == ["chrome.json.gz", "devtools.json", "empty.json",
                                                          "events.json", "meta.json", "notes.txt", "numbers.json",
                                                          "other_array.json", "ui.pftrace"]
    assert {Path(s.file).name: s.reason for s in skipped}["devtools.json"] == FOREIGN_REASON
    # the trace browser's run Overview takes the same ranks from the folder
    assert [Path(p).name for p in resolve_run(str(tmp_path), "")[1]] == [Path(t).name for t in traces]
    perfetto = cli(tmp_path / "ui.pftrace")
    assert perfetto.returncode == 1 and "Perfetto's binary format" in perfetto.stderr
    devtools = cli(tmp_path / "devtools.json")  # named: one line saying what it is, no torch advice
    assert devtools.returncode == 1 and devtools.stderr.strip().endswith(FOREIGN_REASON), devtools.stderr
    assert "profile_memory" not in devtools.stderr + devtools.stdout and devtools.stdout == ""


def damaged_run(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True)
    good = directory / "rank0_host.pt.trace.json.gz"
    good.write_bytes(H200_TRACE.read_bytes())
    data = H200_TRACE.read_bytes()
    cut = directory / "rank1_host.pt.trace.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    return good, cut


@pytest.mark.slow
def test_one_damaged_rank_leaves_the_others_reported(tmp_path):
    good, cut = damaged_run(tmp_path / "torch_profile" / "20261201-000000_run")
    alone = cli(good).stdout
    for path in (cut.parent, tmp_path / "torch_profile"):  # the run directory, and the logdir meaning it
        proc = cli(path)
        assert proc.returncode == 1, proc.stderr
        problem = "truncated gzip stream (the file was cut off while being written?)"
        assert proc.stderr.splitlines() == [f"trace_summary: error: {cut}: {problem}"]
        assert f"  damaged   {cut}: {problem} (left out of this report)" in proc.stdout
        assert proc.stdout.endswith(alone)  # the readable rank's full report
        doc = cli(path, "--json")
        assert doc.returncode == 1
        (run,) = json.loads(doc.stdout)["runs"]
        assert [r["file"] for r in run["ranks"]] == [str(good)]
        assert run["damaged_files"] == [{"file": str(cut), "problem": problem}]


def test_a_run_with_no_readable_rank_prints_only_errors(tmp_path):
    _, cut = damaged_run(tmp_path / "run")
    (tmp_path / "run" / "rank0_host.pt.trace.json.gz").write_bytes(b"")
    proc = cli(tmp_path / "run")
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and "rank0_host" in lines[0] and "empty file" in lines[0] and str(cut) in lines[1]
