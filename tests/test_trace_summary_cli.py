"""`python -m lightx2v.trace_summary` in a real subprocess: report, --json, --top, path kinds and clear errors."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_summary import write_capture_summary
from lightx2v.trace_summary.model import SCHEMA

from conftest import H200_TRACE, subprocess_env


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=subprocess_env())


def test_report_on_the_h200_trace():
    proc = cli(H200_TRACE, "--top", "3")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Trace summary: h200_dit_stack" in out and "NVIDIA H200" in out and "cuda runtime 13.0" in out
    assert "ProfilerStep#4" in out and "Top 3 GPU kernels" in out and "Top 3 CPU ops by self time" in out
    assert "nvjet_sm90_tst_256x128" in out and "Memset (Device)" in out
    assert "GPU idle inside steps" in out
    assert proc.stderr == ""


def test_json_output_has_the_documented_fields():
    proc = cli(H200_TRACE, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == SCHEMA
    (run,) = doc["runs"]
    assert set(run) == {"label", "path", "ranks", "comparison", "straggler", "skipped_files", "damaged_files",
                        "spans", "communication"}
    assert run["skipped_files"] == [] and run["damaged_files"] == []
    assert run["comparison"] is None and run["straggler"] is None and run["communication"] is None
    (rank,) = run["ranks"]
    assert set(rank) == {"file", "size_bytes", "compressed", "worker", "rank", "world_size", "devices", "versions",
                         "event_count", "trace_span_us", "steps", "gpu", "idle", "top_kernels", "top_cpu_ops",
                         "cpu_self_total_us", "memory_ops", "gpu_comm_us", "trace_start_us", "notes",
                         "skipped_events", "memory", "launch_links", "efficiency", "frames", "communication",
                         "gpu_clock"}
    assert rank["skipped_events"] == []  # a real trace: nothing malformed
    assert rank["gpu_clock"] == {"gpu_events": 180, "before_launch": 0, "after_sync": 0, "far_off": 0, "off": 0,
                                 "whole_clock": False, "offset_us": None, "example": ""}
    (step,) = rank["steps"]
    assert set(step) == {"name", "number", "start_us", "wall_us", "cpu_us", "gpu_busy_us", "gpu_busy_pct",
                         "kernel_count", "idle", "gpu_launched_us", "gpu_lag_us"}
    assert set(step["idle"]) == {"window_us", "idle_us", "ratio", "largest_gap_us", "largest_gap_at_us",
                                 "largest_gap_step", "gaps_over_10us", "flagged", "causes"}
    assert set(step["idle"]["causes"]) == {"host_wait_us", "sync_us", "short_gaps_us", "other_us", "unknown_us",
                                           "dominant", "syncs"}
    assert rank["launch_links"] == {"gpu_events": 180, "with_launch_record": 180, "by_launch_chain": 180,
                                    "by_external_id": 0, "label_only": 0, "unlinked": 0,
                                    "external_id": "agrees with the launch chain on 180 of 180 events"}
    assert set(rank["gpu"]) == {"busy_us", "activity_us", "kernel_count", "kernel_us", "memcpy_us", "memset_us",
                                "streams", "devices"}
    assert set(rank["top_kernels"][0]) == {"name", "short_name", "calls", "total_us", "mean_us", "pct_of_gpu_time"}
    assert set(rank["top_cpu_ops"][0]) == {"name", "calls", "self_us", "total_us", "mean_self_us",
                                           "pct_of_cpu_self", "self_with_runtime_us"}
    assert set(rank["memory_ops"][0]) == {"kind", "name", "calls", "total_us", "bytes"}
    assert len(rank["top_kernels"]) == 6 and len(rank["top_cpu_ops"]) == 10
    assert step["kernel_count"] == 120 and rank["gpu"]["kernel_count"] == 120


def test_logdir_means_its_newest_run(tmp_path):
    logdir = tmp_path / "torch_profile"
    old, new = logdir / "20260101-000000_old", logdir / "20260102-000000_new"
    for run, mtime in ((new, 2_000_000_000), (old, 1_000_000_000)):
        run.mkdir(parents=True)
        trace = run / "rank0_host.pt.trace.json.gz"
        shutil.copy(H200_TRACE, trace)
        os.utime(trace, (mtime, mtime))
    (logdir / ".trace_browser.json").write_text("{}")  # hidden files are never taken for traces
    proc = cli(logdir, "--json")
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["label"] == "20260102-000000_new"
    assert run["ranks"][0]["rank"] == 0  # from the worker name


@pytest.mark.slow
def test_plain_and_gzip_files_print_the_same_report(tmp_path):
    plain = tmp_path / "h200_dit_stack.pt.trace.json"
    plain.write_bytes(gzip.decompress(H200_TRACE.read_bytes()))
    a, b = cli(plain), cli(H200_TRACE)
    assert a.returncode == b.returncode == 0
    strip = [line for line in a.stdout.splitlines() if not line.lstrip().startswith("file ")]
    assert strip == [line for line in b.stdout.splitlines() if not line.lstrip().startswith("file ")]


def assert_clear_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trace_summary: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.slow
def test_bad_paths_give_one_clear_line(tmp_path):
    assert_clear_error(cli(tmp_path / "missing.pt.trace.json"), "missing.pt.trace.json", "no such file or directory")
    (tmp_path / "empty").mkdir()
    assert_clear_error(cli(tmp_path / "empty"), "no trace files")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a trace")
    assert_clear_error(cli(tmp_path / "notes"), "no trace files")
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    assert_clear_error(cli(tmp_path / "config.json"), "not a trace")
    (tmp_path / "log.txt").write_text("INFO hello\n")
    assert_clear_error(cli(tmp_path / "log.txt"), "not a trace", "not JSON")
    raw = gzip.decompress(H200_TRACE.read_bytes())
    (tmp_path / "cut.pt.trace.json").write_bytes(raw[: len(raw) // 3])
    assert_clear_error(cli(tmp_path / "cut.pt.trace.json"), "truncated")
    data = H200_TRACE.read_bytes()
    (tmp_path / "cut.pt.trace.json.gz").write_bytes(data[: len(data) // 3])
    assert_clear_error(cli(tmp_path / "cut.pt.trace.json.gz"), "truncated gzip")
    # One bad path among good ones still fails the command, naming the bad one, after the good one's report.
    proc = cli(H200_TRACE, tmp_path / "missing.json")
    assert proc.returncode == 1 and proc.stdout == cli(H200_TRACE).stdout
    assert proc.stderr.splitlines() == [f"trace_summary: error: {tmp_path / 'missing.json'}: no such file or directory"]


@pytest.mark.slow
def test_usage_errors_exit_2(tmp_path):
    for args in ([], [H200_TRACE, "--top", "0"], [H200_TRACE, "--top", "x"]):
        proc = cli(*args)
        assert proc.returncode == 2 and "usage:" in proc.stderr and "Traceback" not in proc.stderr


def test_help_states_one_exit_convention_for_both_modes():
    proc = cli("--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())  # argparse wraps the epilog
    assert "Exit status (both modes): 0 when everything was read" in text
    assert "1 for a data error: a PATH or trace file missing, not a trace, truncated or corrupt" in text
    assert "2 for a usage error: an unknown option, a bad value (--top 0), --diff with more than two paths." in text


def test_capture_hook_writes_atomically_and_returns_short_lines(tmp_path):
    trace = tmp_path / "rank0_host.pt.trace.json.gz"
    shutil.copy(H200_TRACE, trace)
    lines = write_capture_summary(str(trace))
    assert 3 <= len(lines) <= 8 and all(len(line) <= 100 for line in lines[:-1])  # the last: a path
    assert lines[-3].startswith("efficiency: no op shapes: record_shapes=True")
    assert lines[-2].startswith("where in your code: gpu_anchor.py:21 forward")
    assert lines[0].startswith("ProfilerStep#4: ") and "GPU busy" in lines[0]
    assert any("nvjet_sm90" in line for line in lines) and lines[-1] == f"summary: {trace}.summary.txt"
    summary = Path(f"{trace}.summary.txt").read_text()
    assert summary == cli(trace).stdout  # the same report as the command prints
    assert sorted(p.name for p in tmp_path.iterdir()) == [trace.name, trace.name + ".summary.txt"]
    with pytest.raises(Exception, match="truncated"):
        cut = tmp_path / "cut.pt.trace.json"
        cut.write_bytes(gzip.decompress(H200_TRACE.read_bytes())[:1000])
        write_capture_summary(str(cut))
    assert not Path(f"{cut}.summary.txt").exists()


def test_command_works_without_orjson():
    code = ("import sys; sys.modules['orjson'] = None; "  # makes `import orjson` fail
            "from lightx2v.trace_summary import reader; assert reader.FAST_DECODER == 'json'; "
            "from lightx2v.trace_summary.__main__ import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, str(H200_TRACE)], capture_output=True, text=True,
                          timeout=120, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == cli(H200_TRACE).stdout


def test_undecodable_bytes_in_a_name_do_not_break_the_report(tmp_path):
    raw = gzip.decompress(H200_TRACE.read_bytes()).replace(b'"name": "aten::gelu"', b'"name": "aten::gel\xff"')
    path = tmp_path / "odd.pt.trace.json"
    path.write_bytes(raw)
    proc = cli(path)
    assert proc.returncode == 0, proc.stderr
    assert "aten::gel" in proc.stdout and "ProfilerStep#4" in proc.stdout
    assert len(write_capture_summary(str(path))) >= 3
