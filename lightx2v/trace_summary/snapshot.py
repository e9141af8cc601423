"""What holds the peak on CUDA: read a ``torch.cuda.memory._snapshot()`` pickle written beside a trace.

    for s in read_snapshot("run/rank0_host.memory_snapshot.pickle"):
        print(s.device, s.peak_bytes, [(site.location, site.function, site.bytes) for site in s.sites])

The drop-in (``memory_snapshot=True``) writes ``rank<R>_<host>.memory_snapshot.pickle`` into the run directory of
the rank's trace (the trace's worker name + SNAPSHOT_SUFFIX); :func:`snapshot_files` finds it for a trace by that
name, else by rank in the same folder.

The structure is the one documented in ``torch.cuda.memory._snapshot``'s docstring: ``segments`` (cudaMalloc'd
memory, each with its ``blocks``: size, address, state, the allocating stack's ``frames`` innermost first) and
``device_traces`` (per device, the allocator's actions in order: ``alloc``, ``free_requested``, ``free_completed``,
``segment_alloc``, ``segment_free``, ``oom``, ...). The peak is found by replaying a device's actions from the
state before its first one (the blocks live at the end, with each action undone backwards); without a history,
the live blocks of the segments are the answer ("segments": the state when the snapshot was taken). Live bytes at
the peak are grouped by the innermost frame in the user's own code: frames of torch, site-packages, the Python
standard library, ``<frozen ...>``/``<string>`` and C++ frames are skipped.

A pickle can run code when it is loaded: this one is loaded by an unpickler that refuses every global (the
snapshot is plain dicts, lists, tuples, strings and numbers), so a file that names any class or function is
reported as an error, never executed.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from typing import Any

from .errors import TraceError
from .model import SnapshotSite, SnapshotSummary
from .names import rank_from_name, worker_name

SNAPSHOT_SUFFIX = ".memory_snapshot.pickle"
MAX_SITES = 10
_FREE = "free_completed"
_LIB_PARTS = ("site-packages", "dist-packages")
_STDLIB_DIR = re.compile(r"[/\\]lib[/\\]python\d+(?:\.\d+)?t?[/\\]")
_TORCH_DIR = re.compile(r"(?:^|[/\\])torch[/\\]")


class SnapshotError(TraceError):
    """A snapshot file that cannot be read; the message names the file and the problem."""


class _Refused(pickle.UnpicklingError):
    pass


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"it names {module}.{name}; only plain data (dicts, lists, strings, numbers) "
                                     "is loaded, since a pickle can run code")


def snapshot_files(trace_path: str, rank: int | None) -> list[str]:
    """The snapshot(s) of this trace's rank in its folder: ``<worker>`` + SNAPSHOT_SUFFIX, else any
    ``*`` + SNAPSHOT_SUFFIX whose name carries the same rank (0 for a trace without one)."""
    folder = os.path.dirname(os.path.abspath(trace_path))
    exact = os.path.join(folder, worker_name(trace_path) + SNAPSHOT_SUFFIX)
    if os.path.isfile(exact):
        return [exact]
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(SNAPSHOT_SUFFIX))
    except OSError:
        return []
    want = 0 if rank is None else rank
    return [os.path.join(folder, n) for n in names if (rank_from_name(n) or 0) == want]


def load_snapshot(path: str) -> dict[str, Any]:
    """The snapshot dict from ``path``, by the restricted unpickler; raises SnapshotError naming the file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SnapshotError(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        doc = _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise SnapshotError(path, f"not a plain memory snapshot: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            MemoryError) as exc:
        raise SnapshotError(path, f"not a memory snapshot pickle (truncated or corrupt: {exc or type(exc).__name__})"
                            ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("segments"), list):
        raise SnapshotError(path, "not a memory snapshot: expected a dict with a 'segments' list "
                                  "(torch.cuda.memory._snapshot())")
    return doc


def read_snapshot(path: str) -> list[SnapshotSummary]:
    """One summary per device the snapshot holds memory or history for (device order)."""
    doc = load_snapshot(path)
    try:
        return _summaries(path, doc)
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        raise SnapshotError(path, f"not a memory snapshot: unexpected structure ({type(exc).__name__}: {exc})"
                            ) from None


def _summaries(path: str, doc: dict[str, Any]) -> list[SnapshotSummary]:
    segments: dict[int, list[dict[str, Any]]] = {}
    for seg in doc["segments"]:
        segments.setdefault(int(seg.get("device", 0)), []).append(seg)
    traces = doc.get("device_traces") or []
    devices = sorted(set(segments) | {d for d, t in enumerate(traces) if t})
    out = []
    for device in devices:
        segs = segments.get(device, [])
        trace = traces[device] if device < len(traces) else []
        live_end = {int(b["address"]): (int(b["size"]), b.get("frames") or [])
                    for seg in segs for b in seg.get("blocks", []) if str(b.get("state", "")).startswith("active")}
        reserved = sum(int(seg["total_size"]) for seg in segs)
        if trace:
            peak, at, live = _replay(trace, live_end)
            source = "device_traces"
        else:
            peak, at, live = sum(size for size, _ in live_end.values()), None, live_end
            source = "segments"
        sites, other = _group(live)
        out.append(SnapshotSummary(file=os.path.abspath(path), device=device, source=source, peak_bytes=peak,
                                   peak_at_us=at, reserved_bytes=reserved, sites=sites[:MAX_SITES],
                                   other_bytes=other + sum(s.bytes for s in sites[MAX_SITES:])))
    return out


Live = dict[int, tuple[int, list[Any]]]  # address -> (size, frames of the allocation)


def _replay(trace: list[dict[str, Any]], live_end: Live) -> tuple[int, float | None, Live]:
    """(peak bytes, its time_us, the blocks live then), replaying ``trace`` from the state before it began.

    A block is freed at ``free_completed`` (``free_requested`` only marks it while other streams still use it);
    a history without any ``free_completed`` uses ``free_requested``.
    """
    free = _FREE if any(e.get("action") == _FREE for e in trace) else "free_requested"
    sizes = {addr: size for addr, (size, _) in _live_at(trace, live_end, free, -1).items()}  # live, by address
    total = sum(sizes.values())
    peak, peak_at, peak_index = total, None, -1
    for i, e in enumerate(trace):
        action = e.get("action")
        if action == "alloc":
            sizes[int(e["addr"])] = int(e["size"])
            total += int(e["size"])
            if total > peak:
                peak, peak_at, peak_index = total, e.get("time_us"), i
        elif action == free:
            total -= sizes.pop(int(e["addr"]), 0)  # 0: a second free of one block (a damaged history)
    live = _live_at(trace, live_end, free, peak_index)  # the blocks live at the peak, with their frames
    return peak, float(peak_at) if isinstance(peak_at, (int, float)) else None, live


def _live_at(trace: list[dict[str, Any]], live_end: Live, free: str, index: int) -> Live:
    """The blocks live just after action ``index`` (-1: before the first), undoing the later ones from the end.

    A block a later free gives back keeps the stack of its allocation: a free's own frames are where it was freed,
    and the drop-in records none (``context="alloc"``)."""
    allocated: dict[int, list[Any]] = {}  # address -> frames of its latest alloc up to ``index``
    for e in trace[:index + 1]:
        if e.get("action") == "alloc":
            allocated[int(e["addr"])] = e.get("frames") or []
    live = dict(live_end)
    for e in reversed(trace[index + 1:]):
        action = e.get("action")
        if action == "alloc":
            live.pop(int(e["addr"]), None)
        elif action == free:
            addr = int(e["addr"])
            live[addr] = (int(e["size"]), allocated.get(addr) or e.get("frames") or [])
    return live


def user_frame(frames: list[Any]) -> dict[str, Any] | None:
    """The innermost frame in the user's own code (frames are innermost first), or None."""
    for f in frames:
        if not isinstance(f, dict):
            continue
        name = str(f.get("filename", ""))
        if (not name.endswith(".py") or name.startswith("<") or any(p in name for p in _LIB_PARTS)
                or _STDLIB_DIR.search(name) or _TORCH_DIR.search(name)):
            continue
        return f
    return None


def _group(live: Live) -> tuple[list[SnapshotSite], int]:
    by_site: dict[tuple[str, int, str], list[int]] = {}
    other = 0
    for size, frames in live.values():
        f = user_frame(frames)
        if f is None:
            other += size
            continue
        key = (str(f.get("filename")), int(f.get("line", 0)), str(f.get("name", "?")))
        entry = by_site.setdefault(key, [0, 0])
        entry[0] += size
        entry[1] += 1
    sites = [SnapshotSite(location=f"{_short_path(fn)}:{line}", function=fun, filename=fn, line=line, bytes=b,
                          blocks=n)
             for (fn, line, fun), (b, n) in by_site.items()]
    sites.sort(key=lambda s: (-s.bytes, s.location))
    return sites, other


def _short_path(filename: str) -> str:
    parts = re.split(r"[/\\]", filename)
    return "/".join(parts[-2:])
