"""Read any range of a gzip file's decompressed bytes without decompressing from the start each time.

    points = GzipCheckpoints.build(path)   # one decompressing pass (no JSON decoded)
    data = points.read(start, stop)        # decompressed bytes [start, stop): from the nearest point before

gzip cannot be entered in the middle: a byte's meaning depends on the 32 KB before it. But zlib's decompressor
can be copied at any moment, so one pass keeps a copy every ``SPACING`` decompressed bytes, with the compressed
offset it stands at; a read resumes from the last point at or before ``start``. A point holds about 45 KB, so a
2 GB trace keeps ~130 of them (~6 MB) in the server's memory. Copies cannot be written to disk, so each server
process makes its points once per trace (``cached``), at the first window of a gzip trace. Files of several gzip
members (``cat a.gz b.gz``) read as one stream, as ``gzip`` reads them.
"""

from __future__ import annotations

import os
import zlib
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from lightx2v.trace_summary.errors import TraceError

SPACING = 16 << 20  # decompressed bytes between points: a read decompresses at most this much it does not return
BLOCK = 256 << 10  # compressed bytes read at a time (at most; a quarter of the spacing for a closer one)
KEEP_TRACES = 8  # traces whose points a server keeps (the most recently read)
GZIP_WBITS = 31  # zlib: a gzip header and trailer


@dataclass
class _Point:
    raw: int  # compressed offset: the next byte to feed
    out: int  # decompressed offset: the next byte it will produce
    inflater: Any  # a zlib decompressor in that state (copied again before use)


class GzipCheckpoints:
    """The points of one gzip file (``build``), and ranges read from them (``read``)."""

    def __init__(self, path: str, points: list[_Point], size: int, block: int) -> None:
        self.path, self.points, self.size, self.block = path, points, size, block
        self._outs = [p.out for p in points]  # ascending: the point before a read's start by bisect

    @classmethod
    def build(cls, path: str, spacing: int = SPACING) -> GzipCheckpoints:
        """One pass over ``path`` (TraceError when it is not a complete gzip stream)."""
        try:
            return cls._build(path, spacing)
        except zlib.error as exc:
            raise TraceError(path, f"corrupt gzip data ({exc})") from None
        except OSError as exc:
            raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None

    @classmethod
    def _build(cls, path: str, spacing: int) -> GzipCheckpoints:
        points = [_Point(0, 0, zlib.decompressobj(GZIP_WBITS))]
        out, size = 0, max(4096, min(BLOCK, spacing // 4))  # points fall between blocks
        with open(path, "rb") as f:
            inflater, raw = zlib.decompressobj(GZIP_WBITS), 0
            while True:
                if out - points[-1].out >= spacing:
                    points.append(_Point(raw, out, inflater.copy()))
                block = f.read(size)
                if not block:
                    break
                raw += len(block)
                inflater, produced = _inflate(inflater, block)
                out += sum(map(len, produced))
        if not inflater.eof:
            raise TraceError(path, "truncated gzip stream (the file was cut off while being written?)")
        return cls(path, points, out, size)

    def read(self, start: int, stop: int) -> bytes:
        """Decompressed bytes [start, stop) (fewer at the end of the stream)."""
        i = max(0, bisect_right(self._outs, start) - 1)
        point = self.points[i]
        inflater, out = point.inflater.copy(), point.out
        parts: list[bytes] = []
        with open(self.path, "rb") as f:
            f.seek(point.raw)
            while out < stop:
                block = f.read(self.block)
                if not block:
                    break
                inflater, produced = _inflate(inflater, block)
                for data in produced:
                    lo, hi = max(start - out, 0), min(stop - out, len(data))
                    if lo < hi:
                        parts.append(data[lo:hi])
                    out += len(data)
        return b"".join(parts)


def _inflate(inflater: Any, block: bytes) -> tuple[Any, list[bytes]]:
    """Feed ``block``; a member that ends in it is followed by the next member's decompressor (the one to keep)."""
    produced = [inflater.decompress(block)]
    while inflater.eof and inflater.unused_data:
        rest = inflater.unused_data
        inflater = zlib.decompressobj(GZIP_WBITS)
        produced.append(inflater.decompress(rest))
    return inflater, produced


_cache: OrderedDict[tuple[str, int, int], GzipCheckpoints] = OrderedDict()


def cached(path: str) -> GzipCheckpoints:
    """This process's points for ``path`` as it is now (size and mtime): made once, the last few traces kept."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    found = _cache.get(key)
    if found is None:
        found = _cache[key] = GzipCheckpoints.build(path, SPACING)
        while len(_cache) > KEEP_TRACES:
            _cache.popitem(last=False)
    _cache.move_to_end(key)
    return found
