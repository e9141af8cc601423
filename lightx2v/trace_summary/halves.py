"""Read one large plain trace in two halves side by side: the first here, the second in a forked child, their
collected data merged in the file's order, the same data one pass gives.

    cut = find_cut(path)                          # None: small, gzip, not a {...} document, no core to spare
    c, mem, stream = read_halves(path, cut, new_pass, feed, on_read)   # NotACut: read it in one pass instead

Why: a pass over one file is one core's work (3-4 s at 620 MB here, the summary's largest part) while the
machine has another; ranks already read side by side (``parallel.read_files``), one large file did not.

The cut: the first ``}, {`` (the reader's separator between events) from the middle of the file on. The first
half is the file's bytes up to that '}' with ``]}`` after them; the second is ``{"traceEvents": [`` and the
file's bytes from that '{' to the end (``reader.Part``: byte offsets in either stay the file's). A ``}, {``
inside a string, or between objects nested in an event, is no cut between events: the first half then does not
read as a trace whose events array ends at the cut, and the whole file is read in one pass (``NotACut``), so a
wrong cut costs time, never an answer. The child starts after the first half's first batch, which fixes the
pass's ``base`` (times are kept relative to it: ``collect``), and reads its half into a fresh pass with that
base; it sends back the collected data (arrays, a few MB), which ``Collected.extend`` appends.

Errors: the second half holds the file's end, so a truncated file is its TraceError, in the words and byte
offsets one pass gives. A child that dies or cannot send its half: the half is read here (``parallel.beside``).
Only in our commands (``analyze_trace(side_by_side=True)``), never in a reading worker or a user's process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .collect import Collected
from .errors import TraceError
from .memory import MemoryEvents
from .parallel import beside, spare_core
from .reader import _EVENT_SEP, Part, TraceStream

HALVES_MIN_BYTES = 64 << 20  # below this, forking and merging cost more than half a pass saves
SEARCH_BYTES = 1 << 20  # how far past the middle a cut is looked for (kineto's events are < 1 KB)
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
    """Where to cut ``path`` in two, or None: a file under HALVES_MIN_BYTES, gzip (no reading from its middle), not a
    JSON object, no ``}, {`` past its middle, or no core to spare (``parallel.spare_core``)."""
    try:
        size = os.path.getsize(path)
        if size < max(HALVES_MIN_BYTES, 2) or not spare_core():
            return None
        with open(path, "rb") as f:
            if f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] != b"{":  # gzip magic, an array document, not JSON
                return None
            middle = size // 2
            f.seek(middle)
            window = f.read(SEARCH_BYTES)
    except OSError:
        return None  # one pass says why, in its words
    match = _EVENT_SEP.search(window)
    if match is None:
        return None
    return Cut(head_end=middle + match.start() + 1, tail_start=middle + match.end() - 1)


def read_halves(path: str, cut: Cut, new_pass: Callable[[], Pass], feed: Feed,
                on_read: Callable[[int], object] | None = None) -> tuple[Collected, MemoryEvents, TraceStream]:
    """One pass's data over ``path``, its halves read side by side; the stream returned holds the document's
    metadata (both halves'). Raises NotACut (read it in one pass instead) or the file's TraceError."""
    counted = multiprocessing.get_context("fork").RawValue("q", 0)  # the child's bytes read, for the progress
    reported = 0

    def progress(n: int) -> None:
        nonlocal reported
        if on_read is not None:
            theirs = counted.value
            on_read(n + theirs - reported)
            reported = theirs

    head = TraceStream(path, on_read=progress if on_read is not None else None, typed=True,
                       part=Part(0, cut.head_end, after=HEAD_CLOSE))
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
    if on_read is not None:  # the child's last bytes, and the separator between the halves
        on_read(counted.value - reported + cut.tail_start - cut.head_end)
    return c, mem, head
