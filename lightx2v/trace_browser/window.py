"""One window of a trace as a Chrome trace of its own: the events of one step, or of one time range, that a
browser can hold whatever the size of the file.

    data = step_window(trace_path, index, k, frames=False)       # bytes: {"traceEvents": [...], ...metadata}
    data = range_window(trace_path, lo, hi, frames=True)

Which events a window keeps (times in the trace's own microseconds; an event is *in* [lo, end) when it starts
before ``end`` and starts at or ends after ``lo``):

- metadata events (``"ph": "M"``: process and thread names, sort order) always, and every top-level key but
  ``traceEvents`` (deviceProperties, distributedInfo, ...);
- Python frames (``python_function``) only with ``frames``, by time: they are most of a with_stack trace;
- a step's window: GPU events and flow arrows launched in a step (by correlation id, the index's launch runs)
  are in that step's window and no other, however late the GPU ran them; every other event is kept by time in
  the step's window [lo, end) (``step_index``);
- a time range: every event by time.

A window reads only the pieces of the file the index says may hold its events (``Chunk``: a seek and one read
each, typically a few MB per step); in a gzip file, from the nearest of the decompression points the server made
in one pass at its first window of that trace (``gzip_seek``). Without an index, one streaming pass
(``TraceStream``; frames skipped undecoded when not asked for).
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import Any

from lightx2v.trace_summary.reader import TraceStream

from . import gzip_seek
from .step_index import FLOW_PHASES, GPU_CATS, SKIP_FRAMES, Chunk, StepIndex

FRAME_CAT = "python_function"

try:  # the reader's optional speed-up, for writing too
    import orjson

    def _dumps(value: Any) -> bytes:
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer past 64 bits (the reader decodes them exactly; orjson writes none)
            return json.dumps(value, separators=(",", ":")).encode()

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - same bytes' meaning, slower
    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    _loads = json.loads


def _in(e: dict[str, Any], lo: float, end: float) -> bool:
    ts = e.get("ts")
    if not isinstance(ts, (int, float)):
        return False
    dur = e.get("dur")
    return ts < end and (ts >= lo or (isinstance(dur, (int, float)) and ts + dur >= lo))


def _window(trace_path: str, keep: Callable[[dict[str, Any]], bool], frames: bool, index: StepIndex | None,
            needed: Callable[[Chunk], bool]) -> bytes:
    events = []
    if index is not None and index.chunks:
        metadata = index.metadata
        pieces = _pieces(trace_path, [c for c in index.chunks if needed(c)], index)
    else:
        stream = TraceStream(trace_path, skip_head=None if frames else SKIP_FRAMES)
        metadata = stream.metadata  # complete once the stream is read, before it is used below
        pieces = stream.batches()
    for batch in pieces:
        for e in batch:
            if e.get("ph") == "M":
                events.append(e)
            elif e.get("cat") == FRAME_CAT and not frames:
                continue
            elif keep(e):
                events.append(e)
    return _dumps({**metadata, "traceEvents": events})


def _pieces(trace_path: str, chunks: list[Chunk], index: StepIndex) -> Iterator[list[dict[str, Any]]]:
    """The events of these pieces, read where they lie: a seek each in a plain file; in a gzip file, from the
    nearest decompression point before each run of adjacent pieces (``gzip_seek``: of the version of the file the
    index was made from, else ``FileChanged``)."""
    runs: list[list[int]] = []  # [start, stop) of adjacent pieces, read at once
    for c in chunks:
        if runs and runs[-1][1] == c.start:
            runs[-1][1] = c.stop
        else:
            runs.append([c.start, c.stop])
    if index.compressed:
        points = gzip_seek.cached(trace_path, (index.size, index.mtime_ns) if index.size else None)
        parts: Iterator[bytes] = (points.read(start, stop) for start, stop in runs)
    else:
        parts = _plain_parts(trace_path, runs, index)
    for data in parts:
        data = data.rstrip(b" \t\r\n")
        if data.endswith(b","):
            data = data[:-1]
        try:
            yield _loads(b"[" + data + b"]")
        except ValueError:  # NaN or a huge integer (orjson refuses them; the reader decodes them exactly)
            yield json.loads(b"[" + data + b"]")


def _plain_parts(trace_path: str, runs: list[list[int]], index: StepIndex) -> Iterator[bytes]:
    with open(trace_path, "rb") as f:
        st = os.fstat(f.fileno())
        if index.size and (st.st_size, st.st_mtime_ns) != (index.size, index.mtime_ns):
            raise gzip_seek.FileChanged(trace_path)
        for start, stop in runs:
            f.seek(start)
            yield f.read(stop - start)


def range_window(trace_path: str, lo: float, end: float, frames: bool = False,
                 index: StepIndex | None = None) -> bytes:
    """The events in [lo, end), metadata kept; Python frames only with ``frames``. With the trace's ``index``,
    only the pieces of a plain file that may hold them are read."""
    return _window(trace_path, lambda e: _in(e, lo, end), frames, index,
                   lambda c: c.needed(lo, end, [], frames))


def step_window(trace_path: str, index: StepIndex, k: int, frames: bool = False) -> bytes:
    """Step ``k`` of ``index`` (IndexError when there is none): its launches wherever they ran, the rest by time."""
    step = index.steps[k]
    runs = sorted((first, last, j) for j, s in enumerate(index.steps) for first, last in s.launches)
    firsts = [r[0] for r in runs]

    def owner(corr: Any) -> int:
        """The step that launched this correlation id; -1 when none did."""
        if not isinstance(corr, int):
            return -1
        i = bisect_right(firsts, corr) - 1
        return runs[i][2] if i >= 0 and corr <= runs[i][1] else -1

    def keep(e: dict[str, Any]) -> bool:
        if e.get("cat") in GPU_CATS:
            args = e.get("args")
            j = owner(args.get("correlation") if isinstance(args, dict) else None)
        elif e.get("ph") in FLOW_PHASES:
            j = owner(e.get("id"))
        else:
            j = -1
        return j == k if j >= 0 else _in(e, step.lo, step.end)

    return _window(trace_path, keep, frames, index, lambda c: c.needed(step.lo, step.end, step.launches, frames))
