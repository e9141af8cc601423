"""Read one large trace in two halves side by side: the first here, the second in a forked child, their collected
data merged in the file's order, the same data one pass gives.

    cut = find_cut(path)                          # None: small, not a {...} document, no core to spare
    c, mem, stream = read_halves(path, cut, new_pass, feed, on_read)   # NotACut: read it in one pass instead

Why: a pass over one file is one core's work (3-4 s at 620 MB here, the summary's largest part) while the
machine has another; ranks already read side by side (``parallel.read_files``), one large file did not.

The cut: the first ``}, {`` (the reader's separator between events) from the middle of the JSON on. The first
half is the JSON up to that '}' with ``]}`` after it; the second is ``{"traceEvents": [`` and the JSON from that
'{' to the end (``reader.Part``: byte offsets in either stay the JSON's; a gzip file's second half inflates and
drops the first half's bytes first, 0.12 s at 620 MB with isal). A ``}, {`` inside a string, between objects
nested in an event or after the events array, is no cut between events: the first half then does not read as a
trace whose events array ends at the cut, and the whole file is read in one pass (``NotACut``), so a wrong cut
costs time, never an answer. The child starts after the first half's first batch, which fixes the pass's
``base`` (times are kept relative to it: ``collect``), and reads its half into a fresh pass with that base; it
sends back the collected data (arrays, a few MB), which ``Collected.extend`` appends.

Errors: the second half holds the file's end, so a file cut off is its TraceError, in the words and byte offsets
one pass gives. A child that dies or cannot send its half: the half is read here (``parallel.beside``). Only in
our commands (``analyze_trace(side_by_side=True)``), never in a reading worker or a user's process.
"""

from __future__ import annotations

import multiprocessing
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from .collect import Collected
from .errors import TraceError
from .memory import MemoryEvents
from .parallel import beside, spare_core
from .reader import _EVENT_SEP, _GZIP_MAGIC, Part, TraceStream, inflating

HALVES_MIN_BYTES = 64 << 20  # below this, forking and merging cost more than half a pass saves
SEARCH_BYTES = 1 << 20  # how far past the middle a cut is looked for (kineto's events are < 1 KB)
SEARCH_PIECE = 1 << 14  # read at a time while looking
HEAD_CLOSE = b"]}"  # closes the first half's events array and document
TAIL_OPEN = b'{"traceEvents": ['  # opens the second half's

Pass = tuple[Collected, MemoryEvents]
Feed = Callable[[Collected, TraceStream, list[Any]], None]


class NotACut(Exception):
    """The cut was no boundary between two events of the traceEvents array: read the file in one pass."""


@dataclass(frozen=True)
class Cut:
    head_end: int  # just past the '}' that ends the first half's last event
    tail_start: int  # the '{' that starts the second half's first event


def find_cut(path: str) -> Cut | None:
    """Where to cut ``path`` in two, or None: JSON under HALVES_MIN_BYTES, not a JSON object (Chrome's array
    form), no ``}, {`` past its middle, a file that cannot be read (one pass says why), or no core to spare
    (``parallel.spare_core``). A gzip file's middle is found by inflating its first half (isal: 0.12 s at 620 MB)."""
    if not spare_core():
        return None
    try:
        with open(path, "rb") as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
            size = _json_size(raw, compressed)
            if size < HALVES_MIN_BYTES:
                return None
            raw.seek(0)
            with inflating(raw, compressed) as f:
                if f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] != b"{":
                    return None
                middle = size // 2
                f.seek(middle)  # a gzip reader inflates the bytes up to there
                window = b""
                while len(window) < SEARCH_BYTES:  # a piece at a time: a gzip reader checks its end's CRC
                    piece = f.read(SEARCH_PIECE)
                    if not piece:
                        return None
                    window += piece
                    match = _EVENT_SEP.search(window)
                    if match is not None:
                        return Cut(head_end=middle + match.start() + 1, tail_start=middle + match.end() - 1)
    except Exception:  # whatever the file holds (a damaged gzip stream): one pass reads it and says why
        return None
    return None


def _json_size(raw: IO[bytes], compressed: bool) -> int:
    """The JSON's size: the file's, or a gzip file's from its trailer (the size mod 2**32, so at least the file's:
    beyond 4 GB of JSON the guess may be low, and the halves uneven; a wrong size never gives a wrong answer)."""
    size = raw.seek(0, os.SEEK_END)
    if not compressed:
        return size
    raw.seek(-4, os.SEEK_END)
    (json_size,) = struct.unpack("<I", raw.read(4))
    while json_size < size:
        json_size += 1 << 32
    return json_size


def read_halves(path: str, cut: Cut, new_pass: Callable[[], Pass], feed: Feed,
                on_read: Callable[[int], object]) -> tuple[Collected, MemoryEvents, TraceStream]:
    """One pass's data over ``path``, its halves read side by side; the stream returned holds the document's
    metadata (both halves'). ``on_read`` is told each byte on disk once, the child's as it reads them. Raises
    NotACut (read it in one pass instead) or the file's TraceError."""
    counted = multiprocessing.get_context("fork").RawValue("q", 0)  # the child's bytes read, for the progress
    file_size = os.path.getsize(path)
    reported = told = 0

    def tell(n: int) -> None:
        nonlocal told
        if n > 0:
            told += n
            on_read(n)

    def progress(n: int) -> None:  # the first half's bytes, and the child's since the last call
        nonlocal reported
        theirs = counted.value
        tell(n + theirs - reported)
        reported = theirs

    head = TraceStream(path, on_read=progress, typed=True, part=Part(0, cut.head_end, after=HEAD_CLOSE))
    c, mem = new_pass()
    batches = head.batches()
    try:
        for batch in batches:  # until the base is known: the second half keeps its times relative to it
            feed(c, head, batch)
            if c.base is not None:
                break

        def read_tail() -> tuple[Pass, dict[str, Any]] | TraceError:
            def count(n: int) -> None:
                counted.value += n

            tail = TraceStream(path, on_read=count, typed=True, part=Part(cut.tail_start, None, before=TAIL_OPEN))
            later, later_mem = new_pass()
            later.base = c.base
            try:
                for batch in tail.batches():
                    feed(later, tail, batch)
            except TraceError as exc:
                return exc
            return (later, later_mem), tail.metadata

        def read_head() -> None:
            for batch in batches:
                feed(c, head, batch)

        tail_read, _ = beside(read_tail, read_head)
    except TraceError as exc:
        raise NotACut(str(exc)) from None
    finally:
        batches.close()
    if head.events_end != cut.head_end:
        raise NotACut(f"the events array ended at byte {head.events_end}, not at the cut ({cut.head_end})")
    if isinstance(tail_read, TraceError):
        raise tail_read
    (later, later_mem), metadata = tail_read
    c.extend(later)
    mem.extend(later_mem)
    head.metadata.update(metadata)
    tell(file_size - told)  # the child's last bytes, and those between the halves (a gzip file: its read-ahead)
    return c, mem, head
