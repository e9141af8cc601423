"""Which files under the results root are traces, and how a URL path maps to one of them, safely.

What a trace is comes from the stack's one rule, :mod:`lightx2v.trace_files` (the summary and the profiler
notice use it too); this module adds the walk, the root's boundary and the URL mapping.

File names are bytes on Linux; one that is not UTF-8 (``b"\\xff.json"``) reaches Python as a str with surrogate
escapes (``os.fsdecode``). Such files are listed and served like any other: a URL carries the name's own bytes
(``url_quote``: ``%FF``) and maps back to the same file (``url_unquote``), and pages show the undecodable bytes
as ``\\xff`` (``shown``), so a name never makes a page fail to encode.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import stat
import urllib.parse
import zlib
from dataclasses import dataclass

from lightx2v.trace_files import (
    CHROME,
    FOREIGN,
    JSON_KINDS,
    TENSORBOARD,
    TRACE_SUFFIXES,
    classify,
    is_json_trace_name,
    is_tensorboard_name,
    run_members,
)

_GZIP_MAGIC = b"\x1f\x8b"
GZIP_SMALLEST = 20  # a gzip header (10 bytes), an empty deflate block (2) and the trailer (8)
DEFLATE_MAX_RATIO = 1032  # deflate's limit: no stream decompresses to more than ~1032x its size
WHOLE_GZIP_CHECK = 256 << 10  # a gzip this small is decompressed to its end (a few ms): its cut is known for sure
_TAIL = 64  # last bytes read: a JSON trace's closing brackets after whitespace
_PIECE = 1 << 20  # decompressed bytes at a time

_SURROGATE = re.compile("[\ud800-\udfff]")


def url_quote(path: str) -> str:
    """`path` (as ``os`` gives it) percent-encoded from its bytes on disk: the one way a path becomes a URL."""
    return urllib.parse.quote(os.fsencode(path))


def url_unquote(url_path: str) -> str:
    """The path a percent-encoded URL path names, as ``os`` takes it (``url_quote``'s inverse, any bytes)."""
    return os.fsdecode(urllib.parse.unquote_to_bytes(url_path))


def shown(text: str) -> str:
    """`text` as it can be shown and encoded as UTF-8: a file name's undecodable bytes (surrogate escapes) as
    ``\\xNN``, any other lone surrogate as ``\\uNNNN``; other text unchanged."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\x{ord(m[0]) - 0xDC00:02x}" if "\udc80" <= m[0] <= "\udcff"
                          else f"\\u{ord(m[0]):04x}", text)


@dataclass(frozen=True)
class Trace:
    path: str  # relative to the root, with "/" separators
    size: int
    mtime: float
    kind: str = ""  # trace_files' kind (list_traces sets it); "" when not classified: the name decides
    damaged: str = ""  # why the file cannot be whole (`damage`); "" when it looks whole


def summarized(trace: Trace) -> bool:
    """Whether the summary reads this trace (its Overview, a run's rank, a side to compare): JSON, and not a trace
    another tool wrote (``FOREIGN``: the Timeline and Perfetto open it, nothing counts it as a capture)."""
    return is_json_trace_name(trace.path) and trace.kind != FOREIGN


def run_traces(traces: list[Trace]) -> list[Trace]:
    """Which of one folder's traces are its run's ranks, by the summary's own rule (``run_members``)."""
    by_path = {t.path: t for t in traces if summarized(t)}
    kinds = [(path, TENSORBOARD if is_tensorboard_name(path.rsplit("/", 1)[-1]) else CHROME) for path in by_path]
    return [by_path[path] for path in run_members(kinds)]


def run_size(traces: list[Trace]) -> int:
    """How many of one folder's traces are its run's ranks."""
    return len(run_traces(traces))


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def list_traces(root: str) -> list[Trace]:
    """Every trace file under `root`, newest first; hidden files/folders and links leading outside skipped."""
    root_real = os.path.realpath(root)
    found = []
    for folder, dirs, files in os.walk(root_real):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and _inside(os.path.realpath(os.path.join(folder, d)), root_real))
        for name in files:
            if name.startswith(".") or not name.endswith(TRACE_SUFFIXES):
                continue
            full = os.path.join(folder, name)
            real = os.path.realpath(full)
            if not _inside(real, root_real):
                continue
            try:
                st = os.stat(real)
            except OSError:
                continue
            kind = classify(real, name).kind if stat.S_ISREG(st.st_mode) else None
            if kind is None:
                continue
            rel = os.path.relpath(full, root_real).replace(os.sep, "/")
            damaged = _damage(real, st.st_size, st.st_mtime_ns) if is_json_trace_name(name) else ""
            found.append(Trace(rel, st.st_size, st.st_mtime, kind, damaged))
    found.sort(key=lambda t: (-t.mtime, t.path))
    return found


def damage(path: str) -> str:
    """Why the JSON trace at `path` is damaged ("" when it looks whole), from checks cheap enough for a list of
    many files: one read of its first and last bytes (a small gzip is decompressed to its end). A damaged file
    looks like any other until opened; this says so in the list. What is found: an empty file; plain JSON whose
    last bytes are not a closing ``}`` or ``]`` (a cut); a gzip too short to be one, one that stops before its
    stream ends (small files), or whose last 8 bytes are no trailer (the size they state is more than deflate
    can make of the file). A large gzip cut where its last bytes happen to read as a trailer passes: its Overview
    and Timeline say it is cut."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    return _damage(os.path.realpath(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _damage(real: str, size: int, mtime_ns: int) -> str:  # size and mtime: a rewritten file is checked again
    if size == 0:
        return "empty file (0 bytes)"
    try:
        with open(real, "rb") as f:
            head = f.read(2)
            whole = head + f.read() if head == _GZIP_MAGIC and size <= WHOLE_GZIP_CHECK else b""
            f.seek(max(0, size - _TAIL))
            tail = f.read()
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    if head != _GZIP_MAGIC:
        return _json_cut(tail, size)
    if size < GZIP_SMALLEST:
        return f"cut off: {size} bytes, fewer than any gzip file has"
    if whole:
        return _gzip_cut(whole)
    stated = int.from_bytes(tail[-4:], "little")  # the trailer's ISIZE: the decompressed size, mod 2**32
    return "cut off: its gzip stream ends without its trailer" if stated > DEFLATE_MAX_RATIO * size else ""


def _json_cut(tail: bytes, size: int, what: str = "") -> str:
    """A whole trace is one JSON object (or Chrome's array of events): its last bytes close it."""
    if tail.rstrip(b" \t\r\n").endswith((b"}", b"]")):
        return ""
    return f"cut off: {what}{size:,} bytes of JSON that do not end with }} or ]"


def _gzip_cut(data: bytes) -> str:
    """A small gzip file decompressed to its end, every member as ``gzip`` reads them, _PIECE bytes at a time (a
    small file may decompress to a thousand times its size): corrupt, cut off, or its JSON's end checked."""
    total, last = 0, b""
    while data:
        inflater = zlib.decompressobj(wbits=31)
        while not inflater.eof:
            try:
                piece = inflater.decompress(data, _PIECE)
            except zlib.error:
                return "corrupt gzip data"
            data = inflater.unconsumed_tail
            if not piece and not data:  # every byte read, no end of stream
                return f"cut off: its gzip stream stops after {total:,} bytes of JSON"
            total += len(piece)
            last = (last + piece)[-_TAIL:]
        data = inflater.unused_data.lstrip(b"\0")  # zero padding between members, skipped as gzip does
    return _json_cut(last, total, "gzip of ")


class Refused(Exception):
    """A request path that must not be served; `status` is the HTTP status to answer."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


def _real_path_under(root_real: str, rel: str, missing: str) -> str:
    """The real path that `rel` (decoded, relative) names under `root_real`, refusing anything that leaves it:
    Refused(403) for bad characters, absolute paths, `..` and links pointing outside; Refused(404, missing) for
    hidden or empty parts. One rule for files and run folders alike."""
    if "\x00" in rel or "\\" in rel:
        raise Refused(403, "bad characters in path")
    if rel.startswith("/") or posixpath.isabs(rel) or (len(rel) > 1 and rel[1] == ":"):
        raise Refused(403, "absolute path")
    parts = rel.split("/")
    if any(part in ("..", ".") for part in parts):
        raise Refused(403, "path leaves the results folder")
    if any(part.startswith(".") or part == "" for part in parts):
        raise Refused(404, missing)
    real = os.path.realpath(os.path.join(root_real, *parts))
    if not _inside(real, root_real):
        raise Refused(403, "link points outside the results folder")
    return real


def resolve(root: str, url_path: str) -> str:
    """The real path of the trace that `url_path` (percent-encoded, relative to root) names.

    Raises Refused(403) for anything that leaves the root (`..`, absolute paths, links pointing
    outside) and Refused(404) for hidden or missing files and non-traces.
    """
    rel = url_unquote(url_path)
    real = _real_path_under(os.path.realpath(root), rel, "no such trace")
    name = rel.split("/")[-1]
    if not os.path.isfile(real) or not name.endswith(TRACE_SUFFIXES):
        raise Refused(404, "no such trace")
    if classify(real, name).kind is None:
        raise Refused(404, "not a trace")
    return real


def content_type(name: str) -> str:
    if name.endswith(".gz"):
        return "application/gzip"  # served as stored; Perfetto unpacks gzip itself
    if name.endswith(".json"):
        return "application/json"
    return "application/octet-stream"


def resolve_run(root: str, url_path: str) -> tuple[str, list[str]]:
    """A run directory under the root (percent-encoded, relative; "" is the root itself) and its JSON traces,
    sorted by name. Same refusals as `resolve`; Refused(404) when the folder holds no JSON trace."""
    rel = url_unquote(url_path).strip("/")
    root_real = os.path.realpath(root)
    real = _real_path_under(root_real, rel, "no such run") if rel else root_real
    if not os.path.isdir(real):
        raise Refused(404, "no such run")
    traces = []
    for entry in sorted(os.scandir(real), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        target = os.path.realpath(entry.path)
        if not _inside(target, root_real) or not os.path.isfile(target):
            continue
        kind = classify(target, entry.name).kind
        if kind in JSON_KINDS:
            traces.append((entry.path, kind))
    found = run_members(traces)  # the summary's own choice of a folder's ranks
    if not found:
        raise Refused(404, "no JSON trace in this folder")
    return real, found


def is_json_trace(path: str) -> bool:
    """Whether the offline views (JSON readers) can open it; Perfetto's binary formats they cannot."""
    return is_json_trace_name(path)
