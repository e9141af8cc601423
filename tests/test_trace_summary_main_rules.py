"""`python -m lightx2v.trace_summary` (`lightx2v.trace_summary.__main__`), fast and in-process: main(argv) on small
hand-made traces (tests/helpers/small_trace.py): the report and --json, --top, --peak, --frames, --all-frames,
--collapsed, --diff, the notes and errors on stderr and the exit status (0, 1 for a data error, 2 for a usage
error); each expected line written by hand. tests/test_trace_summary_cli.py runs the command itself."""

from __future__ import annotations

import functools
import io
import json
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

import pytest
import tqdm.std

from lightx2v.trace_summary import __main__ as cli
from lightx2v.trace_summary import parallel
from lightx2v.trace_summary.__main__ import main, skipped_note
from lightx2v.trace_summary.model import SkippedFile

from conftest import subprocess_env
from helpers.cli import in_process
from helpers.replica import FIXTURE, replicate
from helpers.small_trace import LIBRARY_FRAME, USER_FRAME, small_trace, tqdm_without_threads

TRUNCATED = "truncated trace: the JSON ends early (the file was cut off while being written?)"
NOT_JSON = "not a .json or .json.gz file"

MAIN = "main (app.py:3, line running at start)"  # small_trace's user frame: the first recorded, on the stack


@pytest.fixture(autouse=True)
def no_tqdm_threads(monkeypatch):
    tqdm_without_threads(monkeypatch)


run = functools.partial(in_process, main)  # run(capsys, *argv): status, stdout, stderr


def trace(tmp_path: Path, name: str = "rank0_a.pt.trace.json", **kw) -> str:
    return small_trace(tmp_path / name, **kw)


def json_of(out: str) -> dict:
    return json.loads(out)


# ------------------------------------------------------------------------------------------------------ arguments
@pytest.mark.parametrize("value,error", [("0", "argument --top: must be at least 1: 0"),
                                         ("-2", "argument --top: must be at least 1: -2"),
                                         ("x", "argument --top: not an integer: 'x'"),
                                         ("1.5", "argument --top: not an integer: '1.5'")])
def test_top_must_be_a_whole_number_of_at_least_one(tmp_path, capsys, value, error):
    status, out, err = run(capsys, trace(tmp_path), "--top", value)
    assert status == 2 and out == "" and err.splitlines()[-1].endswith(f"error: {error}")


def test_top_one_gives_one_row_and_the_default_ten(tmp_path, capsys):
    path = trace(tmp_path, ops=12)
    status, out, _ = run(capsys, path, "--top", "1")
    assert status == 0 and "Top 1 GPU kernels by total time" in out and "Top 1 CPU ops by self time" in out
    status, out, _ = run(capsys, path, "--json")
    (rank,) = json_of(out)["runs"][0]["ranks"]
    assert len(rank["top_kernels"]) == 10 and len(rank["top_cpu_ops"]) == 10


def test_a_bad_peak_is_a_usage_error_saying_what_it_wants(tmp_path, capsys):
    status, out, err = run(capsys, trace(tmp_path), "--peak", "abc")
    assert status == 2 and out == ""
    assert err.splitlines()[-1].endswith("error: argument --peak: --peak wants TFLOPS,TBps (two numbers, e.g. "
                                         "989,4.8), got 'abc'")


def test_no_path_and_an_unknown_collapsed_value_are_usage_errors(tmp_path, capsys):
    assert run(capsys)[0] == 2
    status, _, err = run(capsys, trace(tmp_path), "--collapsed-value", "wall")
    assert status == 2 and "argument --collapsed-value: invalid choice: 'wall'" in err


def test_help_lists_every_option_with_what_it_does(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "3000")  # one line per option and paragraph: no wrapping to undo
    status, out, _ = run(capsys, "--help")
    assert status == 0
    text = " ".join(out.split())
    assert text.startswith("usage: python -m lightx2v.trace_summary [-h] [--diff] [--top N] [--peak TFLOPS,TBPS] "
                           "[--frames] [--all-frames] [--collapsed FILE] [--collapsed-value {auto,gpu,cpu,memory}] "
                           "[--json] PATH [PATH ...] ")
    for line in (
            "Summarize torch.profiler traces: steps, GPU busy/idle time, top kernels and CPU ops, slowest rank.",
            "--diff compare two captures: PATH is BASE NEW, or one logdir (its two newest runs: older is BASE) or "
            "run directory of spans (its two newest spans); the verdict line comes first",
            "--top N rows in the kernel and CPU-op tables (default 10)",
            "--peak TFLOPS,TBPS the device's dense peak TFLOP/s and memory TB/s for the efficiency answers (e.g. "
            "989,4.8), instead of the peak table's row for the trace's GPU; for CPUs and GPUs not in the table",
            "--frames with_stack traces: also print the tree of your code's frames (per step, inclusive and self, "
            "each frame's top-level ops last)",
            "--all-frames keep torch's, the standard library's and site-packages' frames instead of folding them "
            "into the calling frame of your code",
            "--collapsed FILE write the frames as collapsed stacks ('frame;frame;op value' lines, read by "
            "flamegraph.pl, inferno and speedscope) to FILE; several traces: one FILE per trace, named FILE with "
            "the worker before its extension",
            "--collapsed-value {auto,gpu,cpu,memory} the value of --collapsed lines: gpu or cpu (nanoseconds per "
            "step), memory (bytes allocated per step); auto (default): gpu when the trace has GPU work, else cpu",
            "--json print JSON (schema lightx2v.trace_summary/7, with --diff lightx2v.trace_summary.diff/6; see "
            "docs/trace_summary.md) instead of text",
            "PATH: a trace file (.json or .json.gz, TensorBoard or chrome format), a run directory (one file per "
            "rank), or a TensorBoard logdir (its newest run). Files given together from one directory are treated "
            "as the ranks of one run (its spans when none overlaps another in time and they record no ranks). "
            "--diff BASE NEW: compare two captures (each a PATH), per profiled step: step "
            "time, GPU busy and idle, kernels and CPU ops added, removed and changed, each op's kernels, "
            "memcpy/memset, rank to rank; --diff LOGDIR compares its two newest runs. Exit status (both modes): 0 "
            "when everything was read (--diff: both sides read and compared); 1 for a data error: a PATH or trace "
            "file missing, not a trace, truncated or corrupt, a directory without traces, a --diff logdir with "
            "fewer than two runs (each named on stderr; the summary still prints what it could read); 2 for a "
            "usage error: an unknown option, a bad value (--top 0), --diff with more than two paths."):
        assert line in text, line


# -------------------------------------------------------------------------------------------------------- reports
def test_a_trace_prints_its_report_and_exits_0(tmp_path, capsys):
    status, out, err = run(capsys, trace(tmp_path, ops=2))
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "Trace summary: rank0_a (rank 0)"
    assert "Top 2 GPU kernels by total time (GPU activity 0.021 ms, busy 0.021 ms, 2 kernels on 1 stream(s))" in lines
    # self 19.5 us, and the op's launch call, 0.5 us, under CUDA API
    assert lines[-1] == "    48.8      0.019       0.001      0.020       1  aten::op00" and out.endswith("0\n")
    assert "Frame tree (" not in out


def test_json_gives_the_schema_and_each_runs_ranks(tmp_path, capsys):
    status, out, err = run(capsys, trace(tmp_path, ops=2), "--json")
    assert status == 0 and err == "" and out.endswith("}\n")
    doc = json_of(out)
    assert doc["schema"] == "lightx2v.trace_summary/7"
    (summary,) = doc["runs"]
    assert summary["label"] == "rank0_a.pt.trace.json" and [r["worker"] for r in summary["ranks"]] == ["rank0_a"]
    assert out.startswith('{\n  "schema"')  # indented by two


def test_a_given_peak_gives_the_mfu(tmp_path, capsys):
    # one 512x512 float matmul (268,435,456 FLOPs) per 2 ms step at 989 TFLOP/s: 0.014% MFU
    path = trace(tmp_path, ops=1, matmuls=1)
    status, out, _ = run(capsys, path, "--json")
    assert json_of(out)["runs"][0]["ranks"][0]["efficiency"]["mfu_pct"] is None  # no GPU named in the trace
    status, out, _ = run(capsys, path, "--json", "--peak", "989,4.8")
    efficiency = json_of(out)["runs"][0]["ranks"][0]["efficiency"]
    assert status == 0 and efficiency["mfu_pct"] == 0.014 and efficiency["peak"]["gpu"] == "--peak"


def test_frames_adds_the_frame_tree(tmp_path, capsys):
    status, out, _ = run(capsys, trace(tmp_path, ops=2), "--frames")
    assert status == 0
    assert ("Frame tree (GPU ms (inclusive, self), CPU ms per step; the top-level ops under each frame last; below "
            "0.05% left out)\n     0.021    0.021    0.041  main (app.py:3, line running at start)\n") in out


def test_all_frames_keeps_the_library_frames(tmp_path, capsys):
    path = trace(tmp_path, ops=2)
    _, out, _ = run(capsys, path, "--json")
    frames = json_of(out)["runs"][0]["ranks"][0]["frames"]
    assert frames["folded"] is True and [f["frame"] for f in frames["frames"]] == [USER_FRAME]
    _, out, _ = run(capsys, path, "--json", "--all-frames")
    frames = json_of(out)["runs"][0]["ranks"][0]["frames"]
    assert frames["folded"] is False and LIBRARY_FRAME in [f["frame"] for f in frames["frames"]]


def test_undecodable_bytes_in_a_name_print_as_a_replacement(tmp_path, capsys):
    path = Path(trace(tmp_path, ops=1, gpu=False, frames=False))
    path.write_bytes(path.read_bytes().replace(b"aten::op00", b"aten::op\xff0"))
    status, out, _ = run(capsys, str(path))
    assert status == 0 and out.splitlines()[-1] == "   100.0      0.020      0.020       1  aten::op?0"


# --------------------------------------------------------------------------------------------- notes and errors
def test_a_missing_path_is_named_on_stderr_and_the_rest_still_reported(tmp_path, capsys):
    good = trace(tmp_path, ops=1)
    _, alone, _ = run(capsys, good)
    missing = str(tmp_path / "missing.json")
    status, out, err = run(capsys, good, missing)
    assert status == 1 and out == alone
    assert err == f"trace_summary: error: {missing}: no such file or directory\n"


def test_nothing_readable_prints_nothing_but_the_errors(tmp_path, capsys):
    missing = str(tmp_path / "missing.json")
    for extra in ([], ["--json"]):
        status, out, err = run(capsys, missing, *extra)
        assert (status, out) == (1, "") and err == f"trace_summary: error: {missing}: no such file or directory\n"


def test_files_that_are_not_traces_in_a_folder_get_a_note(tmp_path, capsys):
    trace(tmp_path, ops=1)
    (tmp_path / "notes.txt").write_text("x")
    status, out, err = run(capsys, str(tmp_path))
    assert status == 0 and out.startswith("Trace summary: rank0_a (rank 0)\n")
    assert err == f"trace_summary: note: skipped 1 file that is not a trace: {tmp_path / 'notes.txt'} ({NOT_JSON})\n"


def test_a_damaged_rank_file_is_an_error_and_the_other_ranks_are_reported(tmp_path, capsys):
    (tmp_path / "rank0_a.pt.trace.json").write_text('{"traceEvents": [')
    trace(tmp_path, "rank1_a.pt.trace.json", ops=1)
    status, out, err = run(capsys, str(tmp_path))
    assert status == 1 and "\nTrace summary: rank1_a (rank 1)\n" in out
    assert f"  damaged   {tmp_path / 'rank0_a.pt.trace.json'}: {TRUNCATED} (left out of this report)\n" in out
    assert err == f"trace_summary: error: {tmp_path / 'rank0_a.pt.trace.json'}: {TRUNCATED}\n"


def test_ctrl_c_while_reading_exits_130(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "summarize_runs", interrupted)
    path = trace(tmp_path, ops=1)
    assert run(capsys, path) == (130, "", "")
    assert run(capsys, "--diff", path, path) == (130, "", "")


class BrokenPipe:
    """A stdout whose reader has gone (`... | head`)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError

    def flush(self) -> None:
        raise BrokenPipeError


def test_a_closed_pipe_ends_quietly_and_keeps_the_exit_status(tmp_path, capsys, monkeypatch):
    good = trace(tmp_path, ops=1)
    missing = str(tmp_path / "missing.json")
    for argv, status in (([good], 0), ([good, "--json"], 0), ([good, missing], 1), (["--diff", good, good], 0),
                         (["--diff", good, good, "--json"], 0)):
        monkeypatch.setattr("sys.stdout", BrokenPipe())
        assert main(argv) == status
        assert cli.sys.stdout is None  # so the interpreter's last flush has no pipe to fail on
    assert capsys.readouterr().err == f"trace_summary: error: {missing}: no such file or directory\n"


def test_the_size_of_a_gone_file_counts_as_nothing(tmp_path):
    assert cli._size(str(tmp_path / "gone")) == 0
    (tmp_path / "f").write_bytes(b"12345")
    assert cli._size(str(tmp_path / "f")) == 5


def skipped(*names_and_reasons: tuple[str, str]) -> list[SkippedFile]:
    return [SkippedFile(file=f, reason=r) for f, r in names_and_reasons]


def test_the_skipped_note_groups_the_first_four_files_by_reason_and_counts_the_rest():
    assert skipped_note(skipped(("d/a.png", NOT_JSON))) == \
        f"skipped 1 file that is not a trace: d/a.png ({NOT_JSON})"
    files = skipped(("d/a.png", NOT_JSON), ("d/c.json", "not a trace"), ("d/b.pt", NOT_JSON), ("d/e.txt", NOT_JSON),
                    ("d/f.txt", NOT_JSON), ("d/g.txt", NOT_JSON))
    assert skipped_note(files) == (f"skipped 6 files that are not traces: d/a.png, d/b.pt, d/e.txt ({NOT_JSON}), "
                                   "d/c.json (not a trace), and 2 more")
    assert skipped_note(files[:4]) == (f"skipped 4 files that are not traces: d/a.png, d/b.pt, d/e.txt ({NOT_JSON}), "
                                       "d/c.json (not a trace)")
    assert skipped_note(files, names=1) == f"skipped 6 files that are not traces: d/a.png ({NOT_JSON}), and 5 more"


# ---------------------------------------------------------------------------------------------------- --collapsed
def test_collapsed_writes_the_frames_stacks_in_nanoseconds_per_step(tmp_path, capsys):
    out_file = tmp_path / "stacks.txt"
    status, out, err = run(capsys, trace(tmp_path, ops=2), "--collapsed", str(out_file))
    assert status == 0 and out.startswith("Trace summary: ")
    assert out_file.read_text() == f"{MAIN};aten::op00 10000\n{MAIN};aten::op01 11000\n"
    assert err == f"trace_summary: wrote {out_file} (gpu collapsed stacks of rank0_a)\n"


def test_collapsed_values_are_cpu_time_without_gpu_work_or_when_asked(tmp_path, capsys):
    out_file = tmp_path / "stacks.txt"
    cpu_only = trace(tmp_path, "rank0_cpu.pt.trace.json", ops=2, gpu=False)
    status, _, err = run(capsys, cpu_only, "--collapsed", str(out_file))
    assert status == 0 and err == f"trace_summary: wrote {out_file} (cpu collapsed stacks of rank0_cpu)\n"
    assert out_file.read_text() == f"{MAIN};aten::op00 20000\n{MAIN};aten::op01 21000\n"
    status, _, err = run(capsys, trace(tmp_path, ops=2), "--collapsed", str(out_file), "--collapsed-value", "cpu")
    assert status == 0 and err == f"trace_summary: wrote {out_file} (cpu collapsed stacks of rank0_a)\n"
    assert out_file.read_text() == f"{MAIN};aten::op00 20000\n{MAIN};aten::op01 21000\n"


def test_collapsed_of_several_traces_writes_one_file_each_named_by_worker(tmp_path, capsys):
    run_dir = tmp_path / "run"
    trace(run_dir, "rank0_a.pt.trace.json", ops=1)
    trace(run_dir, "rank1_a.pt.trace.json", ops=1)
    status, _, err = run(capsys, str(run_dir), "--collapsed", str(tmp_path / "stacks.txt"))
    assert status == 0
    assert err == (f"trace_summary: wrote {tmp_path / 'stacks.rank0_a.txt'} (gpu collapsed stacks of rank0_a)\n"
                   f"trace_summary: wrote {tmp_path / 'stacks.rank1_a.txt'} (gpu collapsed stacks of rank1_a)\n")
    for worker in ("rank0_a", "rank1_a"):
        assert (tmp_path / f"stacks.{worker}.txt").read_text() == f"{MAIN};aten::op00 10000\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "stacks.rank0_a.txt", "stacks.rank1_a.txt"]


def test_collapsed_of_a_trace_without_frames_is_a_data_error_after_the_report(tmp_path, capsys):
    path = trace(tmp_path, ops=1, frames=False)
    status, out, err = run(capsys, path, "--collapsed", str(tmp_path / "stacks.txt"))
    assert status == 1 and out.startswith("Trace summary: rank0_a (rank 0)\n")
    assert err == (f"trace_summary: error: {path}: --collapsed: no Python frames in this trace (capture with "
                   "with_stack=True)\n")
    assert not (tmp_path / "stacks.txt").exists()


def test_collapsed_goes_on_past_a_trace_without_frames_or_a_file_it_cannot_write(tmp_path, capsys):
    run_dir = tmp_path / "run"
    trace(run_dir, "rank0_a.pt.trace.json", ops=1, frames=False)
    trace(run_dir, "rank1_a.pt.trace.json", ops=1)
    trace(run_dir, "rank2_a.pt.trace.json", ops=1)
    (tmp_path / "stacks.rank1_a.txt").mkdir()  # a folder where rank 1's file goes: it cannot be written
    status, _, err = run(capsys, str(run_dir), "--collapsed", str(tmp_path / "stacks.txt"))
    assert status == 1
    assert err.splitlines() == [
        f"trace_summary: wrote {tmp_path / 'stacks.rank2_a.txt'} (gpu collapsed stacks of rank2_a)",
        f"trace_summary: error: {run_dir / 'rank0_a.pt.trace.json'}: --collapsed: no Python frames in this trace "
        "(capture with with_stack=True)",
        f"trace_summary: error: {tmp_path / 'stacks.rank1_a.txt'}: --collapsed: cannot write: Is a directory"]
    assert (tmp_path / "stacks.rank2_a.txt").read_text() == f"{MAIN};aten::op00 10000\n"


def test_collapsed_errors_come_after_the_paths_that_could_not_be_read(tmp_path, capsys):
    missing = str(tmp_path / "missing.json")
    path = trace(tmp_path, ops=1, frames=False)
    status, _, err = run(capsys, missing, path, "--collapsed", str(tmp_path / "stacks.txt"))
    assert status == 1 and err.splitlines() == [
        f"trace_summary: error: {missing}: no such file or directory",
        f"trace_summary: error: {path}: --collapsed: no Python frames in this trace (capture with with_stack=True)"]


def test_collapsed_that_cannot_be_written_is_a_data_error_naming_the_file(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "stacks.txt"
    status, out, err = run(capsys, trace(tmp_path, ops=1), "--collapsed", str(target))
    assert status == 1 and out.startswith("Trace summary: ")
    assert err == f"trace_summary: error: {target}: --collapsed: cannot write: No such file or directory\n"


# ---------------------------------------------------------------------------------------------------------- --diff
def two_sides(tmp_path: Path, **new) -> tuple[str, str]:
    base = trace(tmp_path / "base", ops=1, matmuls=1)
    return base, trace(tmp_path / "new", **{"ops": 2, "matmuls": 1, "step_us": 3000.0, **new})


def test_diff_prints_the_verdict_first_and_exits_0(tmp_path, capsys):
    base, new = two_sides(tmp_path)
    status, out, err = run(capsys, "--diff", base, new)
    assert status == 0 and err == ""
    assert out.startswith("NEW is 50.0% slower per step (+1.00 ms); aten::op01 +0.011 ms; one step a side: ")
    assert f"  BASE  1 step  {base}\n  NEW   1 step  {new}\n" in out


def test_diff_top_limits_the_rows(tmp_path, capsys):
    base, new = two_sides(tmp_path, ops=4)  # three kernels added
    _, out, _ = run(capsys, "--diff", base, new, "--top", "1")
    assert "Kernels: 3 added, 0 removed, 0 changed, 2 the same (per step, by |delta time|)" in out
    assert "kern03" in out and "kern02" not in out and "kern01" not in out
    _, out, _ = run(capsys, "--diff", base, new)
    assert "kern03" in out and "kern02" in out and "kern01" in out


def test_diff_json_gives_its_schema_and_the_peak_and_frames_asked_for(tmp_path, capsys):
    base, new = two_sides(tmp_path)
    status, out, _ = run(capsys, "--diff", base, new, "--json")
    doc = json_of(out)
    assert status == 0 and doc["schema"] == "lightx2v.trace_summary.diff/6" and out.endswith("}\n")
    assert out.startswith('{\n  "schema"')  # indented by two
    (rank,) = doc["ranks"]
    assert rank["efficiency"]["base_mfu_pct"] is None
    assert [f["frame"] for f in rank["frames"]["frames"]] == [USER_FRAME]
    _, out, _ = run(capsys, "--diff", base, new, "--json", "--peak", "989,4.8", "--all-frames")
    (rank,) = json_of(out)["ranks"]
    assert rank["efficiency"]["base_mfu_pct"] == 0.014  # 268,435,456 FLOPs in 2 ms at 989 TFLOP/s
    assert LIBRARY_FRAME in [f["frame"] for f in rank["frames"]["frames"]]


def test_diff_of_more_than_two_paths_is_a_usage_error(tmp_path, capsys):
    path = trace(tmp_path, ops=1)
    status, out, err = run(capsys, "--diff", path, path, path)
    assert status == 2 and out == ""
    assert err.splitlines()[-1].endswith("error: --diff takes BASE NEW or one logdir, got 3 paths")


def test_diff_of_one_path_that_is_no_folder_is_a_data_error(tmp_path, capsys):
    path = trace(tmp_path, ops=1)
    assert run(capsys, "--diff", path) == (1, "", f"trace_summary: error: {path}: --diff with one PATH needs a logdir "
                                                  "holding two runs (or give BASE NEW)\n")


def test_diff_of_a_logdir_compares_its_two_newest_runs(tmp_path, capsys):
    logdir = tmp_path / "logdir"
    for name, mtime, step_us in (("old", 1_000_000_000, 2000.0), ("older", 900_000_000, 9000.0),
                                 ("new", 2_000_000_000, 3000.0)):
        path = trace(logdir / name, ops=1, step_us=step_us)
        os.utime(path, (mtime, mtime))
    status, out, err = run(capsys, "--diff", str(logdir))
    assert status == 0 and out.startswith("NEW is 50.0% slower per step (+1.00 ms)")
    assert err == (f"trace_summary: comparing the two newest runs of {logdir}: BASE {logdir / 'old'}, "
                   f"NEW {logdir / 'new'}\n")


def test_diff_of_a_run_directory_of_spans_compares_its_two_newest_spans(tmp_path, capsys):
    folder = tmp_path / "spans"
    for name, start, step_us in (("worker0.3.pt.trace.json", 900e6, 3000.0), ("worker0.1.pt.trace.json", 0.0, 9000.0),
                                 ("worker0.2.pt.trace.json", 480e6, 2000.0)):
        trace(folder, name, ops=1, start=1000.0 + start, step_us=step_us)
    status, out, err = run(capsys, "--diff", str(folder))
    assert status == 0 and out.startswith("NEW is 50.0% slower per step (+1.00 ms)")
    assert err == (f"trace_summary: comparing the two newest spans of {folder}: "
                   f"BASE {folder / 'worker0.2.pt.trace.json'}, NEW {folder / 'worker0.3.pt.trace.json'}\n")
    assert f"  BASE  spans span 2 ({folder / 'worker0.2.pt.trace.json'}): 1 rank" in out


def test_diff_of_a_run_directory_of_ranks_is_a_data_error_read_or_not(tmp_path, capsys):
    ranks = tmp_path / "ranks"
    trace(ranks, "rank0_a.pt.trace.json", ops=1)
    trace(ranks, "rank1_a.pt.trace.json", ops=1)
    error = "a run directory (its traces are one run), not a logdir of 2 runs: name the runs to compare"
    assert run(capsys, "--diff", str(ranks)) == (1, "", f"trace_summary: error: {ranks}: {error}\n")
    workers = tmp_path / "workers"  # no rank in their names: read, and found to overlap in time
    trace(workers, "worker0.1.pt.trace.json", ops=1)
    trace(workers, "worker1.1.pt.trace.json", ops=1)
    assert run(capsys, "--diff", str(workers)) == (1, "", f"trace_summary: error: {workers}: {error}\n")


def test_diff_of_a_logdir_with_one_run_is_a_data_error(tmp_path, capsys):
    logdir = tmp_path / "logdir"
    trace(logdir / "only", ops=1)
    assert run(capsys, "--diff", str(logdir)) == (
        1, "", f"trace_summary: error: {logdir}: holds 1 run ({logdir / 'only'}), 2 are needed to compare\n")


def test_diff_with_a_side_that_cannot_be_read_is_a_data_error(tmp_path, capsys):
    base = trace(tmp_path, ops=1)
    missing = str(tmp_path / "missing.json")
    assert run(capsys, "--diff", base, missing) == (1, "", f"trace_summary: error: {missing}: no such file or "
                                                           "directory\n")
    damaged = tmp_path / "damaged.pt.trace.json"
    damaged.write_text('{"traceEvents": [')
    assert run(capsys, "--diff", str(damaged), base) == (1, "", f"trace_summary: error: {damaged}: {TRUNCATED}\n")


def test_diff_notes_the_files_skipped_on_each_side(tmp_path, capsys):
    base, new = two_sides(tmp_path)
    for side in ("base", "new"):
        (tmp_path / side / "notes.txt").write_text("x")
    status, out, err = run(capsys, "--diff", str(tmp_path / "base"), str(tmp_path / "new"))
    assert status == 0 and out.startswith("NEW is 50.0% slower per step")
    assert err == "".join(f"trace_summary: note: skipped 1 file that is not a trace: {tmp_path / side / 'notes.txt'} "
                          f"({NOT_JSON})\n" for side in ("base", "new"))


# ---------------------------------------------------------------------------------------------- the progress bar
class Terminal(io.StringIO):
    """A stderr that is a terminal."""

    def isatty(self) -> bool:
        return True


def reading_takes(monkeypatch, seconds: float) -> None:
    """tqdm's clock: the bar starts at 100 s, and every later look at the clock is ``seconds`` on."""
    looks: list[float] = []

    def now() -> float:
        looks.append(0.0)
        return 100.0 if len(looks) == 1 else 100.0 + seconds

    monkeypatch.setattr(tqdm.std, "time", now)


# the bar as last drawn (the bytes read of all to read, scaled to k; the rate in B/s), then wiped off the line
BAR = re.compile(r"^\rreading: +(\d+)%\|([# ]{10})\| (\d\.\d\dk)/(\d\.\d\dk) \[00:01<00:0\d, \d+B/s\]\r {40,}\r$")


def kilobytes(n: int) -> str:
    return f"{n / 1000:.2f}k"


def test_on_a_terminal_a_read_of_over_a_second_shows_a_bar_of_bytes_that_goes_away(tmp_path, monkeypatch):
    path = trace(tmp_path, ops=2)
    size = os.path.getsize(path)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    reading_takes(monkeypatch, 1.5)
    assert main([path]) == 0
    bar = BAR.match(terminal.getvalue())
    assert bar and bar.groups() == ("100", "#" * 10, kilobytes(size), kilobytes(size)), repr(terminal.getvalue())


def test_the_diffs_bar_counts_the_bytes_of_both_sides(tmp_path, monkeypatch):
    # the clock stands still after its first 1.5 s: the bar is drawn once, after the first side (the sides read one
    # after the other, as one worker reads them: side by side, when each lands is up to the machine)
    monkeypatch.setattr(parallel, "plan_workers", lambda paths: 1)
    path = trace(tmp_path, ops=2)
    size = os.path.getsize(path)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    reading_takes(monkeypatch, 1.5)
    assert main(["--diff", path, path]) == 0
    bar = BAR.match(terminal.getvalue())
    assert bar and bar.groups() == ("50", "#" * 5 + " " * 5, kilobytes(size), kilobytes(2 * size)), \
        repr(terminal.getvalue())


@pytest.mark.parametrize("diff", [False, True])
def test_a_read_under_a_second_or_into_a_pipe_shows_no_bar(tmp_path, monkeypatch, diff):
    path = trace(tmp_path, ops=2)
    argv = ["--diff", path, path] if diff else [path]
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    reading_takes(monkeypatch, 0.5)
    assert main(argv) == 0 and terminal.getvalue() == ""
    pipe = io.StringIO()  # a stderr that is no terminal
    monkeypatch.setattr("sys.stderr", pipe)
    reading_takes(monkeypatch, 1.5)
    assert main(argv) == 0 and pipe.getvalue() == ""


@pytest.mark.slow
def test_ctrl_c_on_a_terminal_leaves_the_cursor_on_a_fresh_line(tmp_path):
    """Ctrl-C typed on a real terminal (a pty) while a --diff of two big traces is being read and summarized (~7 s
    here; typed at 2 s): exit status 130, no traceback, and the cursor at the start of a line of its own. It was
    left after the terminal's ``^C`` (and the bar, where one was drawn), so the shell's prompt followed it there."""
    big = tmp_path / "big.pt.trace.json"
    replicate(FIXTURE, big, 150)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the summary on the pty, as a user's shell runs it
        os.execvpe(sys.executable, [sys.executable, "-m", "lightx2v.trace_summary", "--diff", str(big), str(big)],
                   subprocess_env())
    seen, typed, started = b"", False, time.monotonic()
    while time.monotonic() < started + 120:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the pty: it exited
                break
            if not chunk:
                break
            seen += chunk
        if not typed and time.monotonic() > started + 2.0:
            os.write(fd, b"\x03")  # Ctrl-C: the terminal sends SIGINT to the whole foreground group
            typed = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 130, seen[-500:]
    assert b"Traceback" not in seen and b"^C" in seen
    assert seen.endswith(b"\r\n"), seen[-200:]  # the line ended (the pty writes \n as \r\n)
