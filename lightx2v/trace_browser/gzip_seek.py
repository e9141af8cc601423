"""Read any range of a gzip file's decompressed bytes without decompressing from the start each time.

    points = GzipCheckpoints.build(path)   # one decompressing pass (no JSON decoded)
    data = points.read(start, stop)        # decompressed bytes [start, stop): from the nearest point before

gzip cannot be entered in the middle: a byte's meaning depends on the 32 KB before it. But zlib's decompressor
can be copied at any moment, so one pass keeps a copy every ``SPACING`` decompressed bytes, with the compressed
offset it stands at; a read resumes from the last point at or before ``start``. A point holds about 45 KB, so a
2 GB trace keeps ~130 of them (~6 MB) in the server's memory. Copies cannot be written to disk, so each server
process makes its points once per trace (``cached``), at the first window of a gzip trace. Files of several gzip
members (``cat a.gz b.gz``) read as one stream, as ``gzip`` reads them.

Points belong to one version of the file: they are kept under its identity (path, device, inode, size, mtime), and a
read checks that the file it opens still has it. A trace rewritten in place or replaced is never read at the old
points: ``FileChanged`` (the server answers 409, "reload"), and the next request makes points for the new file.
Data that no longer decodes where it did is a ``TraceError`` (422), never a zlib error escaping to the server.
"""

from __future__ import annotations

import os
import zlib
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from lightx2v.trace_browser.memo import Memo
from lightx2v.trace_summary.errors import TraceError

SPACING = 16 << 20  # decompressed bytes between points: a read decompresses at most this much it does not return
BLOCK = 256 << 10  # compressed bytes read at a time (at most; a quarter of the spacing for a closer one)
KEEP_TRACES = 8  # traces whose points a server keeps (the most recently read)
GZIP_WBITS = 31  # zlib: a gzip header and trailer


class FileChanged(ValueError):
    """The file is no longer the version that was indexed or whose points were made: rewritten or replaced."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: the file changed while being read; reload the page")


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """Which version of a file this is: device, inode, size, mtime (ns)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class _Point:
    raw: int  # compressed offset: the next byte to feed
    out: int  # decompressed offset: the next byte it will produce
    inflater: Any  # a zlib decompressor in that state (copied again before use)


class GzipCheckpoints:
    """The points of one gzip file (``build``), and ranges read from them (``read``)."""

    def __init__(self, path: str, points: list[_Point], size: int, block: int,
                 version: tuple[int, int, int, int]) -> None:
        self.path, self.points, self.size, self.block = path, points, size, block
        self.version = version  # the file's ``identity`` when the points were made
        self._outs = [p.out for p in points]  # ascending: the point before a read's start by bisect

    @classmethod
    def build(cls, path: str, spacing: int = SPACING) -> GzipCheckpoints:
        """One pass over ``path`` (TraceError when it is not a complete gzip stream)."""
        try:
            with open(path, "rb") as f:
                return cls._build(path, f, spacing)
        except OSError as exc:
            raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None

    @classmethod
    def _build(cls, path: str, f: Any, spacing: int) -> GzipCheckpoints:
        version = identity(os.fstat(f.fileno()))
        points = [_Point(0, 0, zlib.decompressobj(GZIP_WBITS))]
        out, size = 0, max(4096, min(BLOCK, spacing // 4))  # points fall between blocks
        inflater, raw = zlib.decompressobj(GZIP_WBITS), 0
        while True:
            if out - points[-1].out >= spacing:
                points.append(_Point(raw, out, inflater.copy()))
            block = f.read(size)
            if not block:
                break
            raw += len(block)
            try:
                inflater, produced = _inflate(inflater, block)
            except zlib.error as exc:
                raise TraceError(path, f"corrupt gzip data ({exc})") from None
            out += sum(map(len, produced))
        if not inflater.eof:
            raise TraceError(path, "truncated gzip stream (the file was cut off while being written?)")
        return cls(path, points, out, size, version)

    def read(self, start: int, stop: int) -> bytes:
        """Decompressed bytes [start, stop) (fewer at the end of the stream); FileChanged when the file is not the
        version the points were made from, TraceError when its data no longer decodes."""
        i = max(0, bisect_right(self._outs, start) - 1)
        point = self.points[i]
        inflater, out = point.inflater.copy(), point.out
        parts: list[bytes] = []
        with open(self.path, "rb") as f:
            if identity(os.fstat(f.fileno())) != self.version:
                raise FileChanged(self.path)
            f.seek(point.raw)
            while out < stop:
                block = f.read(self.block)
                if not block:
                    break
                try:
                    inflater, produced = _inflate(inflater, block)
                except zlib.error as exc:
                    raise TraceError(self.path, f"corrupt gzip data after decompressed byte {out} ({exc}): damaged "
                                                "or rewritten since it was indexed") from None
                for data in produced:
                    lo, hi = max(start - out, 0), min(stop - out, len(data))
                    if lo < hi:
                        parts.append(data[lo:hi])
                    out += len(data)
        return b"".join(parts)


def _inflate(inflater: Any, block: bytes) -> tuple[Any, list[bytes]]:
    """Feed ``block``; a member that ends in it is followed by the next member's decompressor (the one to keep).
    Zero bytes after a member are padding, skipped as ``gzip`` skips them."""
    produced = [inflater.decompress(block)]
    while inflater.eof:
        rest = inflater.unused_data.lstrip(b"\0")
        if not rest:
            break
        inflater = zlib.decompressobj(GZIP_WBITS)
        produced.append(inflater.decompress(rest))
    return inflater, produced


_cache: Memo[GzipCheckpoints] = Memo(KEEP_TRACES)


def cached(path: str, expect: tuple[int, int] | None = None) -> GzipCheckpoints:
    """This process's points for ``path`` as it is now (its ``identity``): made once, however many requests ask at
    once, the last few traces kept. ``expect``: the (size, mtime_ns) the caller's index was made from; FileChanged
    when the file is another version now."""
    try:
        with open(path, "rb") as f:
            version = identity(os.fstat(f.fileno()))
            if expect is not None and version[2:] != expect:
                raise FileChanged(path)
            return _cache.get((os.path.realpath(path), *version), lambda: GzipCheckpoints._build(path, f, SPACING))
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None
