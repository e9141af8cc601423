"""Which trace files a PATH means (`lightx2v.trace_summary.discover`), fast: files, run folders and logdirs made in
a temporary folder, with the times of their traces set by hand; each run, label, file list, skipped file and
message written here. tests/test_trace_summary_files.py runs the same through the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lightx2v.trace_summary.discover import (
    PERFETTO_REASON,
    RunFiles,
    _mtime,
    newest_runs,
    resolve,
    scan,
    skipped_phrase,
    trace_files,
)
from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.model import SkippedFile

from helpers import made_files
from helpers.made_files import CHROME

NO_TRACE = "JSON without traceEvents near its start"
NOT_JSON_NAME = "not a .json or .json.gz file"
BESIDE_TB = "a JSON trace beside TensorBoard traces: name it to summarize it"
NONE_HERE = "no trace files here or in its subdirectories (expected *.pt.trace.json[.gz] or chrome *.json traces"


def put(path: Path, text: str = CHROME, mtime: float | None = None) -> str:
    """A file made by hand, as the str paths discovery returns."""
    return str(made_files.put(path, text, mtime))


def problem(call, at: object) -> str:
    """The problem of the TraceError ``call`` raises, which must name the path ``at``."""
    with pytest.raises(TraceError) as err:
        call()
    assert err.value.path == str(at)
    return err.value.problem


# --- files named --------------------------------------------------------------------------------------------------

def test_one_file_is_a_run_labelled_by_the_file_in_its_folder(tmp_path):
    f = put(tmp_path / "run" / "trace.json")
    assert resolve([f]) == [RunFiles(label="trace.json", path=str(tmp_path / "run"), files=[f])]


def test_files_of_one_folder_are_the_ranks_of_one_run_labelled_by_the_folder(tmp_path):
    a, b = put(tmp_path / "run" / "trace.rank1.json"), put(tmp_path / "run" / "trace.rank0.json")
    other = put(tmp_path / "other" / "trace.json")
    assert resolve([a, other, b]) == [RunFiles(label="run", path=str(tmp_path / "run"), files=[a, b]),
                                      RunFiles(label="trace.json", path=str(tmp_path / "other"), files=[other])]


def test_paths_after_a_folder_are_resolved_too(tmp_path):
    d = tmp_path / "run"
    t = put(d / "trace.json")
    other = put(tmp_path / "other" / "x.json")
    assert [r.files for r in resolve([str(d), other])] == [[t], [other]]


def test_a_file_named_twice_is_read_once(tmp_path):
    f = put(tmp_path / "run" / "trace.json")
    (run,) = resolve([f, f])
    assert run.files == [f]
    assert run.label == "trace.json"  # one file: labelled by the file, not its folder


def test_any_file_named_is_read_as_a_trace_whatever_its_name(tmp_path):
    f = put(tmp_path / "capture.txt", "not even JSON")
    assert resolve([f])[0].files == [f]


def test_a_missing_path_a_special_file_and_a_perfetto_trace_are_errors_naming_them(tmp_path):
    missing = str(tmp_path / "missing.json")
    fifo = str(tmp_path / "pipe.json")
    os.mkfifo(fifo)
    perfetto = put(tmp_path / "trace.pftrace", "binary")
    assert problem(lambda: resolve([missing]), missing) == "no such file or directory"
    assert problem(lambda: resolve([fifo]), fifo) == "not a regular file or directory"
    assert problem(lambda: resolve([perfetto]), perfetto) == PERFETTO_REASON
    with pytest.raises(TraceError) as err:
        resolve([missing])
    assert err.value.path == missing


def test_with_an_error_list_a_bad_path_is_listed_and_the_others_still_resolved(tmp_path):
    good = put(tmp_path / "run" / "trace.json")
    errors: list[TraceError] = []
    runs = resolve([str(tmp_path / "missing.json"), good, str(tmp_path / "empty")], errors)
    assert [r.files for r in runs] == [[good]]
    assert [(e.path, e.problem) for e in errors] == [(str(tmp_path / "missing.json"), "no such file or directory"),
                                                     (str(tmp_path / "empty"), "no such file or directory")]


def test_an_empty_folder_is_an_error_listed_with_the_others(tmp_path):
    (tmp_path / "empty").mkdir()
    errors: list[TraceError] = []
    assert resolve([str(tmp_path / "empty")], errors) == []
    assert [(e.path, e.problem) for e in errors] == [(str(tmp_path / "empty"), NONE_HERE + ")")]


# --- a folder's files ---------------------------------------------------------------------------------------------

def test_a_folder_lists_its_traces_by_name_and_each_other_file_with_why(tmp_path):
    d = tmp_path / "run"
    b, a = put(d / "b.json"), put(d / "a.json.gz", CHROME)
    notes = put(d / "notes.txt", "x")
    config = put(d / "config.json", '{"steps": 4}')
    perfetto = put(d / "x.pftrace", "binary")
    put(d / ".hidden.json", CHROME)
    (d / "sub").mkdir()
    put(d / "sub" / "deeper.json")
    files, skipped = scan(str(d))
    assert files == [a, b]
    assert skipped == [SkippedFile(file=config, reason=NO_TRACE), SkippedFile(file=notes, reason=NOT_JSON_NAME),
                       SkippedFile(file=perfetto, reason=PERFETTO_REASON)]
    assert trace_files(str(d)) == [a, b]


def test_tensorboard_traces_are_the_run_and_a_chrome_trace_beside_them_is_skipped(tmp_path):
    d = tmp_path / "run"
    r1, r0 = put(d / "rank1_h.1.pt.trace.json", "{}"), put(d / "rank0_h.1.pt.trace.json", "{}")
    chrome = put(d / "trace.json")
    files, skipped = scan(str(d))
    assert files == [r0, r1] and skipped == [SkippedFile(file=chrome, reason=BESIDE_TB)]


def test_a_summary_beside_its_trace_is_not_listed_as_skipped_but_one_without_is(tmp_path):
    d = tmp_path / "run"
    trace = put(d / "r0.pt.trace.json", "{}")
    put(d / "r0.pt.trace.json.summary.txt", "summary")
    orphan = put(d / "gone.pt.trace.json.summary.txt", "summary")
    files, skipped = scan(str(d))
    assert files == [trace] and skipped == [SkippedFile(file=orphan, reason=NOT_JSON_NAME)]


def test_a_folder_that_cannot_be_listed_is_an_error(tmp_path):
    assert problem(lambda: scan(str(tmp_path / "missing")), tmp_path / "missing") == \
        "cannot list directory (No such file or directory)"


def test_a_folder_with_traces_is_one_run_labelled_by_its_name_with_its_skipped_files(tmp_path):
    d = tmp_path / "run7"
    t = put(d / "trace.json")
    notes = put(d / "notes.txt", "x")
    (run,) = resolve([str(d)])
    assert run == RunFiles(label="run7", path=str(d), files=[t],
                           skipped=[SkippedFile(file=notes, reason=NOT_JSON_NAME)])
    assert resolve([str(d) + "/"])[0].label == "run7"


# --- logdirs ------------------------------------------------------------------------------------------------------

def logdir(tmp_path: Path) -> Path:
    """runs a (newest trace at 300), b (200), c/deeper (100); a hidden run (900); notes.txt in the logdir"""
    top = tmp_path / "logs"
    put(top / "a" / "r0.json", mtime=300.0)
    put(top / "a" / "r1.json", mtime=50.0)
    put(top / "b" / "r0.json", mtime=200.0)
    put(top / "c" / "deeper" / "r0.json", mtime=100.0)
    put(top / ".old" / "r0.json", mtime=900.0)
    put(top / "notes.txt", "x")
    return top


def test_a_logdir_means_its_run_whose_newest_trace_is_newest_with_the_logdirs_skipped_files(tmp_path):
    top = logdir(tmp_path)
    (run,) = resolve([str(top)])
    assert run == RunFiles(label="a", path=str(top / "a"), files=[str(top / "a" / "r0.json"),
                                                                  str(top / "a" / "r1.json")],
                           skipped=[SkippedFile(file=str(top / "notes.txt"), reason=NOT_JSON_NAME)])


def test_newest_runs_are_the_last_ones_by_their_newest_trace_oldest_first_deeper_folders_included(tmp_path):
    top = logdir(tmp_path)
    assert [r.path for r in newest_runs(str(top), 3)] == [str(top / "c" / "deeper"), str(top / "b"),
                                                          str(top / "a")]
    assert [r.label for r in newest_runs(str(top))] == ["b", "a"]


def test_runs_as_new_as_each_other_are_ordered_by_path(tmp_path):
    top = tmp_path / "logs"
    put(top / "b" / "r0.json", mtime=100.0)
    put(top / "a" / "r0.json", mtime=100.0)
    assert [r.label for r in newest_runs(str(top))] == ["a", "b"]
    assert resolve([str(top)])[0].label == "b"


def test_newest_runs_of_a_run_folder_says_to_name_the_runs(tmp_path):
    put(tmp_path / "run" / "trace.json")
    assert problem(lambda: newest_runs(str(tmp_path / "run"), 3), str(tmp_path / "run")) == \
        "a run directory (its traces are one run), not a logdir of 3 runs: name the runs to compare"


def test_newest_runs_with_too_few_runs_says_how_many_there_are(tmp_path):
    put(tmp_path / "logs" / "only" / "trace.json")
    assert problem(lambda: newest_runs(str(tmp_path / "logs")), str(tmp_path / "logs")) == \
        f"holds 1 run ({tmp_path / 'logs' / 'only'}), 2 are needed to compare"
    put(tmp_path / "logs" / "second" / "trace.json", mtime=1.0)
    assert problem(lambda: newest_runs(str(tmp_path / "logs"), 3), str(tmp_path / "logs")) == \
        f"holds 2 runs ({tmp_path / 'logs' / 'second'}), 3 are needed to compare"


def test_a_logdir_without_runs_says_so_and_counts_what_it_skipped(tmp_path):
    top = tmp_path / "logs"
    put(top / "notes.txt", "x")
    put(top / "sub" / "a.txt", "x")
    put(top / "sub" / "b.txt", "x")
    assert problem(lambda: resolve([str(top)]), top) == NONE_HERE + "; skipped 1 file that is not a trace)"
    assert problem(lambda: newest_runs(str(top)), top) == NONE_HERE + "; skipped 1 file that is not a trace)"
    (tmp_path / "bare").mkdir()
    assert problem(lambda: newest_runs(str(tmp_path / "bare")), tmp_path / "bare") == NONE_HERE + ")"


def test_a_trace_removed_since_the_listing_counts_as_oldest():
    assert _mtime("/nonexistent/trace.json") == -1.0


def test_skipped_files_are_counted_in_words():
    assert skipped_phrase(1) == "1 file that is not a trace"
    assert skipped_phrase(3) == "3 files that are not traces"
    assert skipped_phrase(0) == "0 files that are not traces"
