"""PATHs -> runs -> per-rank summaries (`lightx2v.trace_summary.summarize`), fast: on small hand-made traces
(tests/helpers/small_trace.py), the ranks of a run in order, the comparison and straggler of several ranks, the
options passed down (--top, --peak, --all-frames, the progress callback) and a damaged rank file; each expected
value written by hand."""

from __future__ import annotations

import os

import pytest

from lightx2v.trace_summary.discover import RunFiles
from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.model import DamagedFile, PeakSpec, SkippedFile
from lightx2v.trace_summary.summarize import span_runs, summarize_paths, summarize_run

from helpers.small_trace import LIBRARY_FRAME, T0, small_trace

TRUNCATED = "truncated trace: the JSON ends early (the file was cut off while being written?)"
PEAK = PeakSpec(device="", gpu="--peak", tflops={"fp8": 989.0, "bf16": 989.0, "tf32": 989.0, "fp32": 989.0},
                tbps=4.8, source="given with --peak")


def test_a_path_gives_ten_rows_of_kernels_and_cpu_ops_unless_told_otherwise(tmp_path):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json", ops=12)
    (run,) = summarize_paths([trace])
    (rank,) = run.ranks
    assert len(rank.top_cpu_ops) == 10 and len(rank.top_kernels) == 10
    assert rank.top_kernels[0].name == "kern11" and rank.top_cpu_ops[0].name == "aten::op11"
    (run,) = summarize_paths([trace], top=3)
    assert [k.name for k in run.ranks[0].top_kernels] == ["kern11", "kern10", "kern09"]
    assert [op.name for op in run.ranks[0].top_cpu_ops] == ["aten::op11", "aten::op10", "aten::op09"]


def test_a_run_gives_ten_rows_unless_told_otherwise(tmp_path):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json", ops=12)
    run = RunFiles("a", str(tmp_path), [trace])
    assert len(summarize_run(run).ranks[0].top_kernels) == 10
    assert len(summarize_run(run, 2).ranks[0].top_kernels) == 2


def test_library_frames_are_folded_unless_all_frames_are_asked_for(tmp_path):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json")
    for summarize in (lambda **kw: summarize_paths([trace], **kw)[0],
                      lambda **kw: summarize_run(RunFiles("a", str(tmp_path), [trace]), **kw)):
        folded = summarize().ranks[0]
        assert folded.frames is not None and folded.frames.folded is True
        assert [n for n in folded.tables.frames.names if n == LIBRARY_FRAME] == []
        kept = summarize(folded=False).ranks[0]
        assert kept.frames is not None and kept.frames.folded is False
        assert LIBRARY_FRAME in kept.tables.frames.names


def test_a_given_peak_is_the_one_the_efficiency_answers_use(tmp_path):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json")
    (run,) = summarize_paths([trace])
    assert run.ranks[0].efficiency.peak is None  # no device in the trace, no --peak
    (run,) = summarize_paths([trace], peak=PEAK)
    assert run.ranks[0].efficiency.peak == PEAK
    run = summarize_run(RunFiles("a", str(tmp_path), [trace]), peak=PEAK)
    assert run.ranks[0].efficiency.peak == PEAK


def test_the_progress_callback_is_given_every_byte_read(tmp_path):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json")
    read: list[int] = []
    summarize_run(RunFiles("a", str(tmp_path), [trace]), on_read=read.append)
    assert sum(read) == os.path.getsize(trace)


def test_one_rank_has_no_comparison_and_no_straggler(tmp_path):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json")
    run = summarize_run(RunFiles("a run", "/where/it/is", [trace]))
    assert run.label == "a run" and run.path == "/where/it/is"
    assert [r.worker for r in run.ranks] == ["rank0_a"]
    assert run.comparison is None and run.straggler is None
    assert run.skipped_files == [] and run.damaged_files == []


def test_two_ranks_are_compared_and_the_slower_one_is_the_straggler(tmp_path):
    small_trace(tmp_path / "rank0_a.pt.trace.json", step_us=2000.0)
    small_trace(tmp_path / "rank1_a.pt.trace.json", step_us=3000.0)
    (run,) = summarize_paths([str(tmp_path)])
    assert [(row.rank, row.step_wall_us) for row in run.comparison] == [(0, 2000.0), (1, 3000.0)]
    assert run.straggler.rank == 1 and run.straggler.criterion == "step_wall"
    assert run.straggler.slower_than_fastest_pct == pytest.approx(50.0)


def test_captures_of_one_worker_at_different_times_are_its_spans_oldest_first_without_a_straggler(tmp_path):
    later = small_trace(tmp_path / "worker0.1.pt.trace.json", start=T0 + 470e6, step_us=3000.0)  # 7 min 50 s on
    earlier = small_trace(tmp_path / "worker0.2.pt.trace.json", step_us=2000.0)
    (run,) = summarize_paths([str(tmp_path)])
    assert run.spans and [r.file for r in run.ranks] == [earlier, later]  # by time, not by name
    assert [r.trace_start_us for r in run.ranks] == [T0, T0 + 470e6]  # their first step's start
    assert [row.step_wall_us for row in run.comparison] == [2000.0, 3000.0] and run.straggler is None
    first, second = span_runs(run)
    assert (first.label, first.path, first.ranks, first.spans) == (f"{tmp_path.name} span 1", earlier,
                                                                    [run.ranks[0]], False)
    assert (second.label, second.path, second.ranks) == (f"{tmp_path.name} span 2", later, [run.ranks[1]])


def test_files_without_a_rank_that_overlap_in_time_are_no_spans_and_the_slower_one_is_the_straggler(tmp_path):
    small_trace(tmp_path / "worker0.1.pt.trace.json", step_us=2000.0)
    small_trace(tmp_path / "worker1.1.pt.trace.json", start=T0 + 1000.0, step_us=3000.0)
    (run,) = summarize_paths([str(tmp_path)])
    assert not run.spans and run.straggler.worker == "worker1"


def test_ranks_are_ordered_by_rank_then_the_files_without_one_by_worker(tmp_path):
    # worker names sorting against the ranks: the order comes from the ranks, not the names
    files = [small_trace(tmp_path / "z_first.pt.trace.json", rank=0),
             small_trace(tmp_path / "b_nameless.pt.trace.json"),
             small_trace(tmp_path / "y_second.pt.trace.json", rank=1),
             small_trace(tmp_path / "a_nameless.pt.trace.json"),
             small_trace(tmp_path / "x_third.pt.trace.json", rank=2)]
    run = summarize_run(RunFiles("a", str(tmp_path), files))
    assert [(r.rank, r.worker) for r in run.ranks] == [(0, "z_first"), (1, "y_second"), (2, "x_third"),
                                                       (None, "a_nameless"), (None, "b_nameless")]


def test_a_damaged_rank_file_raises_unless_asked_to_keep_going(tmp_path):
    damaged = tmp_path / "rank0_a.pt.trace.json"
    damaged.write_text('{"traceEvents": [')
    good = small_trace(tmp_path / "rank1_a.pt.trace.json")
    run = RunFiles("a", str(tmp_path), [str(damaged), good])
    with pytest.raises(TraceError) as raised:
        summarize_run(run)
    assert (raised.value.path, raised.value.problem) == (str(damaged), TRUNCATED)
    kept = summarize_run(run, keep_going=True)
    assert kept.damaged_files == [DamagedFile(file=str(damaged), problem=TRUNCATED)]
    assert [r.worker for r in kept.ranks] == ["rank1_a"] and kept.comparison is None


def test_a_run_whose_only_file_is_damaged_has_no_ranks(tmp_path):
    damaged = tmp_path / "rank0_a.pt.trace.json"
    damaged.write_text('{"traceEvents": [')
    run = summarize_run(RunFiles("a", str(tmp_path), [str(damaged)]), keep_going=True)
    assert run.ranks == [] and run.comparison is None and run.straggler is None
    assert run.damaged_files == [DamagedFile(file=str(damaged), problem=TRUNCATED)]


def test_the_files_skipped_in_a_folder_are_listed_with_the_run(tmp_path):
    small_trace(tmp_path / "rank0_a.pt.trace.json")
    (tmp_path / "notes.txt").write_text("not a trace")
    (run,) = summarize_paths([str(tmp_path)])
    assert run.skipped_files == [SkippedFile(file=str(tmp_path / "notes.txt"),
                                             reason="not a .json or .json.gz file")]
    skipped = [SkippedFile(file="x.png", reason="r")]
    files = RunFiles("a", str(tmp_path), [str(tmp_path / "rank0_a.pt.trace.json")], skipped)
    run = summarize_run(files)
    assert run.skipped_files == skipped


def test_a_bad_path_raises(tmp_path):
    with pytest.raises(TraceError, match="no such file or directory"):
        summarize_paths([str(tmp_path / "missing.json")])
