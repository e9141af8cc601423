"""Read several trace files side by side: one worker process per file, as many at once as the cores and the memory
allow, their answers merged in the parent in the files' order.

    outcomes = read_files(paths, work, on_read=bar.update)   # work(path, on_read=...) -> answer, in a worker
    for path, outcome in zip(paths, outcomes): ...          # the answer, a TraceError, or None (not read)

A run's ranks (2-8 files of 1-2 GB with_stack) were read one after another; each pass is one CPU core's work, so
side by side they take about as long as the largest (figures in docs/trace_summary.md). How many at once
(``plan_workers``): never more than the files or the cores this process may use, and never more than the memory
holds, each worker's peak estimated from its file's size (WORKER_BASE_BYTES plus WORKER_PEAK_SHARE of the JSON,
measured; a gzip file's JSON size from its trailer, or GZIP_RATIO times the file). One worker reads in this
process, with nothing started.

Workers are forked where that is safe (Linux, a parent of one thread: the command), else started by ``forkserver``
(a fresh server process forks them: safe in a threaded parent such as the trace browser, and quick: the analysis
modules are loaded there once), else ``spawn``. A file
that cannot be read is that file's TraceError; so is a worker that dies (killed by the out-of-memory killer, by a
signal) or fails unexpectedly: the other files' answers stand. Progress: each worker counts the bytes it read in
one slot of a shared array; the parent adds them up for ``on_read`` (one bar across all the files).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from .errors import TraceError

WORKER_BASE_BYTES = 96 << 20  # an idle worker: the interpreter and the analysis modules
WORKER_PEAK_SHARE = 0.35  # its peak grows with the JSON it reads (0.23x measured at 620 MB): with a margin
GZIP_RATIO = 12  # decompressed / compressed where a gzip trailer cannot tell (kineto JSON: 8-20x)
MEMORY_SHARE = 0.8  # of the memory available now that the workers may take together
POLL_S = 0.2  # how often the parent adds up the workers' progress while it waits
_PRELOAD = ["lightx2v.trace_summary.analyze"]

Work = Callable[..., Any]  # work(path, on_read=callable) -> a picklable answer
T = TypeVar("T")
U = TypeVar("U")
_in_worker = False  # this process is a reading worker: its core is its file's (``beside`` then runs in turn)


def json_bytes(path: str) -> int:
    """The size of a trace's JSON: the file's, or for gzip its trailer's (mod 2**32: a multi-member or > 4 GB file
    reads as at least GZIP_RATIO times the file)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return size
            f.seek(-4, os.SEEK_END)
            (trailer,) = struct.unpack("<I", f.read(4))
    except (OSError, struct.error):
        return 0  # unreadable: its worker says why, quickly
    return max(trailer, GZIP_RATIO * size)


def worker_peak(path: str) -> int:
    """A worker's estimated peak memory for ``path`` (bytes)."""
    return WORKER_BASE_BYTES + int(WORKER_PEAK_SHARE * json_bytes(path))


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes the system can give without swapping (Linux's MemAvailable); None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def plan_workers(paths: Sequence[str], cores: int | None = None, memory: int | None = None) -> int:
    """How many files to read at once: at most the files, the cores, and what the memory holds of the largest
    worker (at least 1)."""
    if len(paths) <= 1:
        return 1
    cores = available_cores() if cores is None else cores
    memory = available_memory() if memory is None else memory
    by_memory = len(paths)
    if memory is not None:
        by_memory = int(MEMORY_SHARE * memory) // max(worker_peak(p) for p in paths)
    return max(1, min(len(paths), cores, by_memory))


def _fork_safe() -> bool:
    """Linux, and a process of one thread (a fork copies no other thread, so no lock another one held)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def _context() -> Any:
    """``fork`` where that is safe (the command: nothing to import again, nothing to start); else ``forkserver``
    (a threaded parent: the trace browser), else ``spawn``. Those two import the parent's main module again in
    each worker, as ``multiprocessing`` documents: our programs' are safe to import."""
    methods = multiprocessing.get_all_start_methods()
    if _fork_safe():
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def read_files(paths: Sequence[str], work: Work, on_read: Callable[[int], object] | None = None,
               workers: int | None = None, stop_on_error: bool = False,
               on_start: Callable[[str, int], object] | None = None) -> list[Any]:
    """``work(path, on_read=...)`` for each path, side by side (``workers`` at once; default ``plan_workers``).

    Each outcome, in the order of ``paths``: the answer, a TraceError (the file could not be read, or its worker
    died or failed), or None: not read, when ``stop_on_error`` stopped the files after one that failed (those
    before it are still read: the first failure in the files' order is the one a caller reports).
    ``on_start(path, pid)``: a worker started (tests use it to stop one)."""
    workers = plan_workers(paths) if workers is None else max(1, min(workers, len(paths)))
    if workers == 1:
        return _in_process(paths, work, on_read, stop_on_error)
    ctx = _context()
    counters = ctx.Array("q", len(paths), lock=False)  # bytes read, one slot per file, one writer each
    outcomes: list[Any] = [None] * len(paths)
    pending = list(range(len(paths)))
    running: dict[int, tuple[Any, Connection]] = {}
    last = len(paths)  # files from here on are not wanted (stop_on_error after a failure)
    counted = 0
    try:
        while pending or running:
            while pending and len(running) < workers:
                k = pending.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_worker, args=(work, paths[k], counters, k, send), daemon=True)
                with _flushable_std_streams():
                    proc.start()
                send.close()  # the worker holds the other end: EOF here once it is gone
                running[k] = (proc, receive)
                if on_start is not None:
                    on_start(paths[k], proc.pid)
            ready = set(wait([c for _, c in running.values()] + [p.sentinel for p, _ in running.values()], POLL_S))
            for k, (proc, conn) in list(running.items()):
                if conn in ready or proc.sentinel in ready:
                    outcomes[k] = _collect(paths[k], proc, conn)
                    del running[k]
                    if stop_on_error and isinstance(outcomes[k], TraceError) and k < last:
                        last = k
                        pending = [j for j in pending if j < last]
                        for j in [j for j in running if j > last]:
                            _stop(*running.pop(j))
            if on_read is not None:
                total = sum(counters)
                if total > counted:
                    on_read(total - counted)
                    counted = total
    finally:
        for proc, conn in running.values():  # an interrupt (Ctrl-C) or an error here: no worker outlives us
            _stop(proc, conn)
    return outcomes


@contextmanager
def _flushable_std_streams() -> Iterator[None]:
    """multiprocessing flushes sys.stdout and sys.stderr before it starts a worker: one whose reader has gone
    (``... | head``) raises BrokenPipeError there. Such a stream is set aside while the worker starts (the command
    meets the error where it writes, and says nothing, as it does without workers)."""
    broken = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            broken[name] = stream
            setattr(sys, name, None)
    try:
        yield
    finally:
        for name, stream in broken.items():
            setattr(sys, name, stream)


def _in_process(paths: Sequence[str], work: Work, on_read: Callable[[int], object] | None,
                stop_on_error: bool) -> list[Any]:
    outcomes: list[Any] = [None] * len(paths)
    for k, path in enumerate(paths):
        try:
            outcomes[k] = work(path, on_read=on_read)
        except TraceError as exc:
            outcomes[k] = exc
            if stop_on_error:
                break
    return outcomes


def _worker(work: Work, path: str, counters: Any, slot: int, conn: Connection) -> None:
    """A worker's whole life: read ``path``, send the answer or why there is none."""
    global _in_worker
    _in_worker = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers

    def count(n: int) -> None:
        counters[slot] += n

    try:
        outcome: Any = work(path, on_read=count)
    except TraceError as exc:
        outcome = exc
    except MemoryError:
        outcome = TraceError(path, "out of memory while reading it")
    except Exception as exc:  # a bug: this file's answer is missing, the others stand
        outcome = TraceError(path, f"reading it failed unexpectedly ({type(exc).__name__}: {exc})")
    try:
        conn.send(outcome)
    finally:
        conn.close()


def _collect(path: str, proc: Any, conn: Connection) -> Any:
    """The worker's answer, or the TraceError that says how it ended without one."""
    outcome: Any = None
    try:
        if conn.poll():
            outcome = conn.recv()
    except (EOFError, OSError):
        pass
    finally:
        conn.close()
    proc.join()
    if outcome is not None:
        return outcome
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = ": out of memory?" if -code == signal.SIGKILL else ""
        return TraceError(path, f"the worker reading it was killed ({name}{hint})")
    return TraceError(path, f"the worker reading it ended without an answer (exit status {code})")


def _stop(proc: Any, conn: Connection) -> None:
    proc.kill()
    proc.join()
    conn.close()


def spare_core() -> bool:
    """Whether ``beside`` forks: a core to spare (not a reading worker, whose core is its file's; two or more
    cores) and a fork that is safe."""
    return not _in_worker and available_cores() >= 2 and _fork_safe()


def beside(first: Callable[[], T], second: Callable[[], U]) -> tuple[T, U]:
    """``(first(), second())``, ``first`` in a forked child while ``second`` runs here: two analyses of one pass's
    data at once on a machine with a core to spare (the child has the data without a copy: a fork shares its
    pages; only ``first``'s answer is pickled back). One after the other instead where a fork is not safe (not
    Linux, a threaded parent), in a reading worker (the cores are the files'), on one core, and whenever the child
    ends without an answer (killed, or ``first`` raised: it runs again here, where an error surfaces as it would
    have)."""
    if not spare_core():
        return first(), second()
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_beside_child, args=(first, send), daemon=True)
    with _flushable_std_streams():
        proc.start()
    send.close()  # the child holds the other end: EOF here once it is gone
    answer = None
    try:
        second_answer = second()
        try:
            answer = receive.recv()
        except (EOFError, OSError):
            pass
    finally:
        receive.close()
        if answer is None:  # no answer, or an error (Ctrl-C) here: the child must not outlive this call
            proc.kill()
        proc.join()
    return (answer[0] if answer is not None else first()), second_answer


def _beside_child(first: Callable[[], Any], conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops this child
    try:
        conn.send((first(),))  # a 1-tuple: any answer, None included, is told from no answer
    except BaseException:  # the parent runs it again itself and meets the error there
        pass
    finally:
        conn.close()
