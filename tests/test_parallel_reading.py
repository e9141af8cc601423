"""Ranks side by side (lightx2v.trace_summary.parallel): real worker processes read real files; their answers equal
one process's, in the files' order; a file that cannot be read, a worker killed mid-read, a worker that fails are
each reported for their file while the other answers stand; the bytes read add up across workers; an interrupt
leaves no worker behind. A worker is held still by a named pipe as its "trace" (it waits to open it), so each
test decides when it ends: no sleeps, no timing."""

from __future__ import annotations

import gzip
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from lightx2v.trace_summary import parallel
from lightx2v.trace_summary.discover import RunFiles
from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.parallel import plan_workers, read_files, worker_peak
from lightx2v.trace_summary.summarize import summarize_runs

from conftest import FIXTURES, H200_TRACE, subprocess_env

TB_RUN = FIXTURES / "tb_plugin" / "resnet50_num_workers_0"


def first_bytes(path: str, on_read=None) -> bytes:
    """A worker's work: the file's first 16 bytes (a TraceError for a missing one), counting them as read, in two
    reports."""
    try:
        with open(path, "rb") as f:
            data = f.read(16)
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    if on_read is not None:
        on_read(10)
        on_read(len(data) - 10)
    return data


def fails(path: str, on_read=None) -> bytes:
    if path.endswith("bug"):
        raise ZeroDivisionError("a bug")
    return first_bytes(path, on_read)


@pytest.fixture
def fifo(tmp_path):
    """A named pipe a worker waits on; its workers that are still there at the end (a regression) are killed, so
    they cannot hold the test run's output open."""
    path = tmp_path / "held.pt.trace.json"
    os.mkfifo(path)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield str(path)
    for pid in STARTED:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    STARTED.clear()
    for p in psutil.Process().children(recursive=True):  # workers a regression did not even report
        if p.pid not in before:
            p.kill()


STARTED: list[int] = []  # every worker a test with a named pipe started


def noting(on_start):
    def note(path, pid):
        STARTED.append(pid)
        on_start(path, pid)
    return note


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_workers_are_bounded_by_the_files_the_cores_and_the_memory_the_largest_needs(tmp_path):
    files = []
    for i in range(6):
        p = tmp_path / f"rank{i}.json"
        p.write_bytes(b" " * (100 << 20 if i == 0 else 1000))
        files.append(str(p))
    big = worker_peak(files[0])
    assert big == parallel.WORKER_BASE_BYTES + int(parallel.WORKER_PEAK_SHARE * (100 << 20))
    assert plan_workers(files, cores=4, memory=1 << 40) == 4
    assert plan_workers(files, cores=64, memory=1 << 40) == 6
    assert plan_workers(files, cores=64, memory=int(3 * big / parallel.MEMORY_SHARE)) == 3
    assert plan_workers(files, cores=64, memory=1) == 1
    assert plan_workers(files[:1], cores=64, memory=1 << 40) == 1
    assert plan_workers(files[:2], cores=64, memory=1 << 40) == 2
    assert isinstance(plan_workers(files, cores=64, memory=int(3 * big / parallel.MEMORY_SHARE)), int)
    assert plan_workers(files) == max(1, min(6, parallel.available_cores(),
                                             int(parallel.MEMORY_SHARE * parallel.available_memory()) // big))


def test_a_gzip_files_peak_counts_its_json_from_the_trailer(tmp_path):
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(b"[" + b" " * 50_000_000 + b"]"))  # compresses ~1000x: the trailer tells
    assert parallel.json_bytes(str(gz)) == 50_000_002
    gz.write_bytes(gzip.compress(os.urandom(100_000)))  # does not compress: GZIP_RATIO times the file
    assert parallel.json_bytes(str(gz)) == parallel.GZIP_RATIO * gz.stat().st_size
    gz.write_bytes(b"\x1f\x8b" + bytes(20) + b"\xff\xff\xff\xff")  # a trailer past 2**31: unsigned
    assert parallel.json_bytes(str(gz)) == 2 ** 32 - 1
    assert parallel.json_bytes(str(H200_TRACE)) == max(len(gzip.decompress(H200_TRACE.read_bytes())),
                                                       parallel.GZIP_RATIO * H200_TRACE.stat().st_size)
    assert parallel.json_bytes(str(tmp_path / "missing")) == 0


def test_answers_come_back_in_the_files_order_and_the_bytes_read_add_up(tmp_path):
    files = [str(p) for p in sorted(FIXTURES.rglob("*.json.gz"))[:5]]
    counted: list[int] = []
    got = read_files(files, first_bytes, on_read=counted.append, workers=3)
    assert got == [first_bytes(f) for f in files]
    assert sum(counted) == 16 * len(files)  # both reports of each worker


def test_a_file_that_cannot_be_read_and_a_failing_worker_are_their_files_errors(tmp_path):
    files = [str(H200_TRACE), str(tmp_path / "missing.json"), str(tmp_path / "bug"), str(TB_RUN)]
    (tmp_path / "bug").write_text("x")
    got = read_files(files, fails, workers=2)
    assert got[0] == first_bytes(files[0])
    assert (got[1].path, got[1].problem) == (files[1], "no such file")
    assert got[2].problem == "reading it failed unexpectedly (ZeroDivisionError: a bug)"
    assert isinstance(got[3], TraceError) and got[3].path == str(TB_RUN)  # a directory: IsADirectoryError


@pytest.mark.timeout(120)  # a named pipe holds a worker: a regression would hang, not fail
def test_a_worker_killed_mid_read_is_its_files_error_and_the_others_stand(fifo):
    def kill_the_held_one(path, pid):
        if path == fifo:
            os.kill(pid, signal.SIGKILL)

    got = read_files([str(H200_TRACE), fifo, str(H200_TRACE)], first_bytes, workers=3,
                     on_start=noting(kill_the_held_one))
    assert got[0] == got[2] == first_bytes(str(H200_TRACE))
    assert (got[1].path, got[1].problem) == (fifo, "the worker reading it was killed (SIGKILL: out of memory?)")


@pytest.mark.timeout(120)
def test_after_a_failure_the_later_files_are_stopped_and_the_earlier_ones_read(tmp_path, fifo):
    started = {}
    files = [str(H200_TRACE), str(tmp_path / "missing.json"), fifo]
    got = read_files(files, first_bytes, workers=3, stop_on_error=True,
                     on_start=noting(lambda path, pid: started.setdefault(path, pid)))
    assert got[0] == first_bytes(files[0]) and got[1].problem == "no such file" and got[2] is None
    assert not alive(started[fifo])  # the held worker was stopped, not waited for


@pytest.mark.timeout(120)
def test_an_interrupt_leaves_no_worker_behind(fifo, tmp_path):
    other = tmp_path / "other.pt.trace.json"
    os.mkfifo(other)
    pids = []

    def interrupted_after_the_second(path, pid):
        pids.append(pid)
        if len(pids) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        read_files([fifo, str(other)], first_bytes, workers=2, on_start=noting(interrupted_after_the_second))
    assert len(pids) == 2 and not any(map(alive, pids))


def test_a_runs_ranks_read_side_by_side_equal_one_process_s_summary(tmp_path):
    run = RunFiles("run", str(TB_RUN), sorted(str(p) for p in TB_RUN.glob("*.json.gz")))
    cut = tmp_path / "rank9.pt.trace.json.gz"
    cut.write_bytes(gzip.compress((TB_RUN / os.listdir(TB_RUN)[0]).read_bytes())[:5000])
    damaged = RunFiles("run", str(TB_RUN), [*run.files, str(cut)])
    alone = summarize_runs([run, damaged], workers=1, keep_going=True)
    counted: list[int] = []
    side_by_side = summarize_runs([run, damaged], workers=3, keep_going=True, on_read=counted.append)
    assert repr(side_by_side) == repr(alone)
    assert [d.file for d in side_by_side[1].damaged_files] == [str(cut)] and len(side_by_side[1].ranks) == 2
    assert sum(counted) == 2 * sum(os.path.getsize(f) for f in run.files)  # the cut one failed at its first read
    with pytest.raises(TraceError) as raised:  # without keep_going: the first failure in the runs' order
        summarize_runs([run, damaged], workers=3)
    assert raised.value.path == str(cut)


def test_a_copy_of_a_file_read_side_by_side_gives_the_same_answer(tmp_path):
    copy = tmp_path / "rank1.pt.trace.json.gz"
    shutil.copy(H200_TRACE, copy)
    one, two = (r.ranks[0] for r in summarize_runs([RunFiles("a", "", [str(H200_TRACE)]),
                                                     RunFiles("b", "", [str(copy)])], workers=2))
    assert (one.steps, one.top_kernels, one.frames) == (two.steps, two.top_kernels, two.frames)


def test_a_script_without_a_main_guard_reads_side_by_side(tmp_path):
    """A user's script calling the summary at its top level (no ``if __name__ == "__main__"``): its workers are
    forked, so nothing imports the script again (a spawned worker would, and fail)."""
    script = tmp_path / "summarize_two.py"
    script.write_text("from lightx2v.trace_summary.discover import RunFiles\n"
                      "from lightx2v.trace_summary.summarize import summarize_runs\n"
                      f"runs = [RunFiles('a', '', [{str(H200_TRACE)!r}]), RunFiles('b', '', [{str(H200_TRACE)!r}])]\n"
                      "print([len(r.ranks[0].steps) for r in summarize_runs(runs, workers=2)])\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=subprocess_env())
    assert (done.returncode, done.stdout, done.stderr) == (0, "[1, 1]\n", "")


def ends_badly(path: str, on_read=None):
    """A worker's work that ends as ``path`` says: an exit status, a signal, no memory, an interrupt it ignores."""
    how = os.path.basename(path)
    if how == "exit3":
        os._exit(3)
    if how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    if how == "memory":
        raise MemoryError
    if how == "interrupt":
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C is the parent's: the worker goes on
    return how


def test_each_way_a_worker_can_end_without_an_answer_is_said_for_its_file(tmp_path):
    files = [str(tmp_path / how) for how in ("exit3", "sigterm", "memory", "interrupt", "fine")]
    got = read_files(files, ends_badly, workers=3)
    assert [g.problem if isinstance(g, TraceError) else g for g in got] == [
        "the worker reading it ended without an answer (exit status 3)",
        "the worker reading it was killed (SIGTERM)",
        "out of memory while reading it",
        "interrupt", "fine"]
    assert [g.path for g in got[:3]] == files[:3]


def test_one_worker_reads_in_this_process_and_stops_after_a_failure_when_asked(tmp_path):
    files = [str(tmp_path / "missing.json"), str(H200_TRACE)]
    assert [type(g) for g in read_files(files, first_bytes, workers=1)] == [TraceError, bytes]
    assert [type(g) for g in read_files(files, first_bytes, workers=1, stop_on_error=True)] == [TraceError,
                                                                                              type(None)]


def test_a_threaded_parent_starts_its_workers_from_a_fork_server(monkeypatch):
    with monkeypatch.context() as alone:  # another test's thread may still be winding down in this worker
        alone.setattr(parallel.threading, "active_count", lambda: 1)
        assert parallel._context().get_start_method() == "fork"  # a parent of one thread: forked
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        ctx = parallel._context()
        assert ctx.get_start_method() == "forkserver"
        assert read_files([str(H200_TRACE)] * 2, first_bytes, workers=2) == [first_bytes(str(H200_TRACE))] * 2
    finally:
        release.set()
        other.join()


class ClosedPipe:
    """A stdout whose reader has gone (`... | head`): every flush raises."""

    def write(self, text: str) -> int:
        raise BrokenPipeError

    def flush(self) -> None:
        raise BrokenPipeError


def test_a_stdout_whose_reader_has_gone_does_not_stop_workers_and_is_put_back(monkeypatch):
    closed = ClosedPipe()
    monkeypatch.setattr(sys, "stdout", closed)
    assert read_files([str(H200_TRACE)] * 2, first_bytes, workers=2) == [first_bytes(str(H200_TRACE))] * 2
    assert sys.stdout is closed


def test_the_machine_says_its_cores_and_memory():
    assert parallel.available_cores() == len(os.sched_getaffinity(0))
    with open("/proc/meminfo") as f:  # Linux, as this project's machines
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    memory = parallel.available_memory()
    assert abs(memory - 1024 * kb) < 1 << 30 and memory % 1024 == 0  # read again a moment later: about the same


def test_a_worker_sends_its_answer_or_why_there_is_none_and_counts_what_it_read(tmp_path, monkeypatch):
    """A worker's body, run here (as mutation testing sees it): its answer or its error through the pipe, the
    bytes it read in its slot, Ctrl-C left to the parent, and it knows it is a worker."""
    monkeypatch.setattr(parallel, "_in_worker", False)  # set by the body; put back after this test
    counters = [0, 0]
    before = signal.getsignal(signal.SIGINT)
    try:
        for path, work, expected in ((str(H200_TRACE), first_bytes, first_bytes(str(H200_TRACE))),
                                     (str(tmp_path / "missing"), first_bytes, "no such file"),
                                     (str(tmp_path / "memory"), ends_badly, "out of memory while reading it"),
                                     (str(tmp_path / "bug"), fails, "reading it failed unexpectedly "
                                                                     "(ZeroDivisionError: a bug)")):
            receive, send = multiprocessing.Pipe(duplex=False)
            parallel._worker(work, path, counters, 1, send)
            got = receive.recv()
            assert got == expected or (got.path, got.problem) == (path, expected)
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert parallel._in_worker  # beside() then analyses in turn: the cores are the files'
    finally:
        signal.signal(signal.SIGINT, before)
    assert counters == [0, 16]
    counted: list[int] = []
    assert read_files([str(H200_TRACE)], first_bytes, on_read=counted.append) == [first_bytes(str(H200_TRACE))]
    assert counted == [10, 6]  # in this process: the work's own reports


@pytest.fixture
def spare_core(monkeypatch):
    """``beside`` as on the command's machine: two cores, this process alone (an xdist worker may still have
    another test's thread winding down)."""
    monkeypatch.setattr(parallel, "available_cores", lambda: 2)
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    monkeypatch.setattr(parallel, "_in_worker", False)


def test_beside_runs_the_first_in_a_child_and_the_second_here(spare_core):
    in_child, in_this = parallel.beside(os.getpid, os.getpid)
    assert in_this == os.getpid() and in_child != in_this
    here = os.getpid()
    assert parallel.beside(lambda: None if os.getpid() != here else "here", lambda: 0) == (None, 0)  # an answer


@pytest.mark.parametrize("why", ["one core", "threaded", "in a worker"])
def test_beside_runs_both_here_where_a_child_would_not_help_or_is_not_safe(monkeypatch, why):
    monkeypatch.setattr(parallel, "available_cores", lambda: 1 if why == "one core" else 2)
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 2 if why == "threaded" else 1)
    monkeypatch.setattr(parallel, "_in_worker", why == "in a worker")
    assert parallel.beside(os.getpid, os.getpid) == (os.getpid(), os.getpid())


def test_a_child_that_dies_or_raises_leaves_the_first_to_run_here(spare_core):
    here = os.getpid()

    def dies_in_the_child():
        if os.getpid() != here:
            os.kill(os.getpid(), signal.SIGKILL)
        return "here"

    assert parallel.beside(dies_in_the_child, lambda: 2) == ("here", 2)

    def raises():
        raise ValueError(f"in {'the child' if os.getpid() != here else 'this process'}")

    with pytest.raises(ValueError, match="in this process"):  # met again here, with its own traceback
        parallel.beside(raises, lambda: 2)


def test_an_error_here_leaves_no_child_behind(spare_core, tmp_path):
    started = tmp_path / "child"

    def waits():  # in the child: says its pid, then runs until killed
        started.write_text(str(os.getpid()))
        threading.Event().wait(120)

    def fails():
        for _ in range(12000):  # 120 s at most: a child that never starts fails the test, never hangs it
            if started.exists() and started.read_text():
                break
            threading.Event().wait(0.01)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        parallel.beside(waits, fails)
    assert not alive(int(started.read_text()))


def test_the_frames_charged_beside_the_other_tables_are_the_same_summary(spare_core, monkeypatch):
    from lightx2v.trace_summary import analyze

    calls = []
    real = analyze.beside
    monkeypatch.setattr(analyze, "beside", lambda a, b: calls.append(1) or real(a, b))
    monkeypatch.setattr(analyze, "BESIDE_MIN_EVENTS", 0)
    serial = analyze.analyze_trace(str(H200_TRACE))  # the capture hook's call, in a user's process: no fork
    assert not calls
    split = analyze.analyze_trace(str(H200_TRACE), side_by_side=True)
    assert calls == [1] and split.frames is not None and split.tables.frames is not None
    assert repr(split) == repr(serial)


@pytest.mark.parametrize("diff", [False, True])
def test_the_command_asks_for_the_side_by_side(monkeypatch, capsys, diff):
    from lightx2v.trace_summary import __main__ as command

    asked = []
    real = command.summarize_runs
    monkeypatch.setattr(command, "summarize_runs",
                        lambda *a, **k: asked.append(k.get("side_by_side")) or real(*a, **k))
    args = ["--diff", str(H200_TRACE), str(H200_TRACE)] if diff else [str(H200_TRACE)]
    assert command.main(args) == 0
    assert asked and all(asked)
