"""One large plain trace read in two halves side by side (``halves``): the same summary as one pass, byte for byte.

Every figure of the summary is compared (its ``repr``) with one pass's on the three corpora (gzip, as they are,
and decompressed) and on a trace holding each class of malformed event, cut at every ``}, {`` it has:
between events (read in halves), inside a name and between objects nested in an event (no cut: one pass).
A file cut off, or malformed, in its second half: one pass's error, word for word, byte offsets included.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import time
from array import array

import pytest
from test_gzip_reading import LIBRARIES
from test_typed_reading import CORPUS, GOOD, MALFORMED, MEM, corpus_id

from lightx2v.trace_summary import analyze, halves, parallel, reader
from lightx2v.trace_summary.collect import COLUMNS, Collected
from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.reader import _EVENT_SEP

from conftest import H200_TRACE, missing_tool
from helpers.summary import cpu_op, trace_doc, write_json


@pytest.fixture
def spare_core(monkeypatch):
    """The command's machine: two cores, this process alone (an xdist worker may have another test's thread)."""
    monkeypatch.setattr(parallel, "available_cores", lambda: 2)
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    monkeypatch.setattr(parallel, "_in_worker", False)


@pytest.fixture
def halves_read(monkeypatch, spare_core):
    """Every file is cut (no size floor); the list says, per summary, whether it was read in halves."""
    monkeypatch.setattr(halves, "HALVES_MIN_BYTES", 0)
    said: list[bool] = []
    real = analyze.read_halves

    def spy(*args, **kwargs):
        in_halves = True  # an answer, or the second half's TraceError
        try:
            return real(*args, **kwargs)
        except halves.NotACut:
            in_halves = False
            raise
        finally:
            said.append(in_halves)

    monkeypatch.setattr(analyze, "read_halves", spy)
    return said


def outcome(path, **kwargs) -> str:
    """The summary's every figure, or the error's words."""
    try:
        return repr(analyze.analyze_trace(str(path), **kwargs))
    except TraceError as exc:
        return f"TraceError: {exc}"


def plain(tmp_path, path):
    target = tmp_path / path.name.removesuffix(".gz")
    target.write_bytes(gzip.decompress(path.read_bytes()))
    return target


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
def test_a_trace_read_in_halves_is_the_same_summary(tmp_path, monkeypatch, halves_read, path, packed):
    trace = path if packed else plain(tmp_path, path)
    one_pass = outcome(trace)
    assert not halves_read and "TraceError" not in one_pass  # the capture hook's call (side_by_side=False)
    assert outcome(trace, side_by_side=True) == one_pass  # cut at the middle (a small file's may be no cut)
    data = gzip.decompress(path.read_bytes())
    middle = len(data) // 2
    for m in sorted(_EVENT_SEP.finditer(data), key=lambda m: abs(m.start() - middle))[:200]:
        if halves_read[-1]:
            break  # the summary was read in halves
        monkeypatch.setattr(analyze, "find_cut", lambda path, m=m: halves.Cut(m.start() + 1, m.end() - 1))
        assert outcome(trace, side_by_side=True) == one_pass
    assert halves_read[-1]


def test_every_cut_gives_the_same_summary_or_one_pass(tmp_path, monkeypatch, halves_read):
    events = [*GOOD, MEM] + [e for kind in MALFORMED.values() for e in kind] + [*GOOD[-3:]]
    nested = cpu_op("aten::cat", 1000600, 1000610)
    nested["args"]["Input Dims"] = [{"a": 1}, {"b": 2}]  # objects nested in an event: a "}, {" that is no cut
    doc = trace_doc([*events, nested, *GOOD[:3]])
    doc["deviceProperties"] = doc.pop("deviceProperties") * 2  # after the events: "}, {" in a list of objects
    trace = write_json(tmp_path / "t.pt.trace.json", doc)
    data = trace.read_bytes()
    one_pass = outcome(trace)
    cuts = [halves.Cut(m.start() + 1, m.end() - 1) for m in _EVENT_SEP.finditer(data)]
    for cut in cuts:
        monkeypatch.setattr(analyze, "find_cut", lambda path, cut=cut: cut)
        assert outcome(trace, side_by_side=True) == one_pass, cut
    between_events = len(events) + 3  # one separator after each event but the last
    assert halves_read.count(True) == between_events
    assert halves_read.count(False) == len(cuts) - between_events >= 4  # in two names, nested, after the events


@pytest.mark.parametrize("damage", ["cut off", "cut off in a string", "malformed"])
def test_a_second_half_that_cannot_be_read_is_the_file_s_error_in_one_pass_s_words(tmp_path, halves_read, damage):
    data = plain(tmp_path, H200_TRACE).read_bytes()
    at = len(data) * 3 // 4
    if damage == "cut off":
        data = data[:at]
    elif damage == "cut off in a string":
        data = data[:data.index(b'"name": "', at) + 12]
    else:
        at = data.index(b'"ts":', at)
        data = data[:at] + b'"ts" 5' + data[at + 5:]
    trace = tmp_path / "damaged.json"
    trace.write_bytes(data)
    one_pass = outcome(trace)
    assert one_pass.startswith("TraceError: ")
    if damage == "malformed":
        assert f"at byte {at + 5}:" in one_pass  # the file's own offset (past "ts" and a space)
    assert outcome(trace, side_by_side=True) == one_pass
    assert halves_read == [True]  # the first half was read: the error is the second's


def test_the_progress_counts_the_file_once_whichever_way_it_is_read(tmp_path, monkeypatch, halves_read):
    trace = plain(tmp_path, H200_TRACE)
    read: list[int] = []
    analyze.analyze_trace(str(trace), on_read=read.append, side_by_side=True)
    assert sum(read) == os.path.getsize(trace) and len(read) >= 2 and halves_read == [True]
    trace = write_json(tmp_path / "t.pt.trace.json", trace_doc([*GOOD, cpu_op("a }, { b", 1000900, 1000950), *GOOD]))
    inside = trace.read_bytes().index(b"}, {") + 1  # a cut inside a name: the first half is read, then one pass
    monkeypatch.setattr(analyze, "find_cut", lambda path: halves.Cut(inside, inside + 2))
    read.clear()
    analyze.analyze_trace(str(trace), on_read=read.append, side_by_side=True)
    assert halves_read == [True, False] and sum(read) == os.path.getsize(trace)


def test_a_child_that_dies_leaves_its_half_to_be_read_here(tmp_path, monkeypatch, halves_read):
    trace = plain(tmp_path, H200_TRACE)
    one_pass = outcome(trace)
    here = os.getpid()
    real = halves.TraceStream

    def dies_in_the_child(*args, **kwargs):
        if os.getpid() != here:
            os._exit(3)
        return real(*args, **kwargs)

    monkeypatch.setattr(halves, "TraceStream", dies_in_the_child)
    assert outcome(trace, side_by_side=True) == one_pass and halves_read == [True]


def test_no_cut_where_halves_would_not_help_or_cannot_be(tmp_path, monkeypatch, spare_core):
    trace = plain(tmp_path, H200_TRACE)
    monkeypatch.setattr(halves, "HALVES_MIN_BYTES", 0)
    cut = halves.find_cut(str(trace))
    assert cut is not None and trace.read_bytes()[cut.head_end - 1:cut.tail_start + 1].startswith(b"}")
    assert halves.find_cut(str(H200_TRACE)) == cut  # gzip: the same cut, in the inflated bytes
    array_doc = tmp_path / "array.json"
    array_doc.write_text('[{"ph": "X", "ts": 1}, {"ph": "X", "ts": 2}]')
    assert halves.find_cut(str(array_doc)) is None  # Chrome's array form: one pass
    assert halves.find_cut(str(tmp_path / "missing.json")) is None  # one pass says why
    monkeypatch.setattr(halves, "HALVES_MIN_BYTES", os.path.getsize(trace))
    assert halves.find_cut(str(trace)) == cut
    monkeypatch.setattr(halves, "HALVES_MIN_BYTES", os.path.getsize(trace) + 1)
    assert halves.find_cut(str(trace)) is None  # small
    monkeypatch.setattr(halves, "HALVES_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "available_cores", lambda: 1)
    assert halves.find_cut(str(trace)) is None  # no core to spare


def two_events_apart(path, after_middle: int, packed: bool):
    """A document whose only ``}, {`` starts ``after_middle`` bytes past its middle; that separator's offset."""
    head, tail = b'{"traceEvents": [{"name": "', b'"}, {"name": "b"}]}'
    sep = 2 * after_middle + len(tail) - 1  # the document is then sep - 1 + len(tail) bytes long
    doc = head + b"a" * (sep - len(head) - 1) + tail
    assert doc.index(b"}, {") == sep and sep - len(doc) // 2 == after_middle
    path.write_bytes(gzip.compress(doc) if packed else doc)
    return sep


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_the_cut_is_the_first_separator_within_the_search_bytes_past_the_middle(tmp_path, halves_read, packed):
    trace = tmp_path / "t.pt.trace.json"
    for after_middle in (100, halves.SEARCH_PIECE + 7, halves.SEARCH_BYTES - 4):  # in a later piece; the last one's end
        sep = two_events_apart(trace, after_middle, packed)
        assert halves.find_cut(str(trace)) == halves.Cut(head_end=sep + 1, tail_start=sep + 3), after_middle
    two_events_apart(trace, halves.SEARCH_BYTES - 3, packed)  # one byte too far: not looked for
    assert halves.find_cut(str(trace)) is None


def intact_cut(monkeypatch, trace):
    """The cut of ``trace`` as it is now, for every later summary (a cut-off gzip file's trailer tells no size)."""
    cut = halves.find_cut(str(trace))
    assert cut is not None
    monkeypatch.setattr(analyze, "find_cut", lambda path: cut)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("damage", ["cut off", "crc"])
def test_a_damaged_gzip_trace_s_second_half_is_one_pass_s_error(tmp_path, monkeypatch, halves_read, library, damage):
    monkeypatch.setattr(reader, "GZIP_LIBRARY", library)
    data = H200_TRACE.read_bytes()
    trace = tmp_path / "t.pt.trace.json.gz"
    trace.write_bytes(data)
    intact_cut(monkeypatch, trace)
    trace.write_bytes(data[:len(data) * 3 // 4] if damage == "cut off" else data[:-8] + bytes(4) + data[-4:])
    one_pass = outcome(trace)
    assert one_pass.startswith("TraceError: ")
    assert outcome(trace, side_by_side=True) == one_pass
    assert halves_read == [True]


def test_where_isal_gives_up_zlib_goes_on_in_each_half(tmp_path, monkeypatch, halves_read):
    if "isal" not in LIBRARIES:
        missing_tool("isal (pip install -e '.[fast]')")
    monkeypatch.setattr(reader, "GZIP_LIBRARY", "isal")
    intact_cut(monkeypatch, H200_TRACE)
    one_pass = outcome(H200_TRACE)
    gave_up = tmp_path / "gave_up"

    class GivesUp(reader._isal_gzip.IGzipFile):
        """Its first read works (the second half's: the bytes it skips), the next one fails."""
        reads = 0

        def read(self, *args):
            self.reads += 1
            if self.reads > 1:
                with open(gave_up, "a") as said:  # the child's: a file tells the parent
                    said.write(f"{os.getpid()}\n")
                raise OSError("isal gave up")
            return super().read(*args)

    monkeypatch.setattr(reader._isal_gzip, "IGzipFile", GivesUp)
    assert outcome(H200_TRACE, side_by_side=True) == one_pass and "TraceError" not in one_pass
    assert halves_read == [True]
    assert set(gave_up.read_text().split()) - {str(os.getpid())}  # in the child, past the bytes its half skips


def test_a_gzip_trace_s_progress_counts_each_byte_on_disk_once(tmp_path, monkeypatch, halves_read):
    ops = [cpu_op(f"aten::{os.urandom(24).hex()}", 1000000 + i, 1000000.5 + i) for i in range(30_000)]
    trace = write_json(tmp_path / "rank0.pt.trace.json.gz", trace_doc(ops), gz=True, indent=None)  # 2 MB on disk
    size = trace.stat().st_size
    read: list[int] = []
    analyze.analyze_trace(str(trace), on_read=read.append, side_by_side=True)
    assert sum(read) == size and halves_read == [True]  # the reader reads ahead of the cut: not counted twice
    cut = halves.find_cut(str(trace))
    for library in LIBRARIES:
        monkeypatch.setattr(reader, "GZIP_LIBRARY", library)
        read.clear()
        tail = reader.TraceStream(str(trace), on_read=read.append, typed=True,
                                  part=reader.Part(cut.tail_start, None, before=halves.TAIL_OPEN))
        assert len(list(tail)) > 10_000
        assert 0.4 * size < sum(read) < 0.6 * size  # from the file's position once the first half is skipped


def test_every_array_the_pass_fills_is_appended_by_extend():
    """A new per-event array in ``Collected`` must say which ids it holds, or a half's would be lost."""
    assert {k for k, v in vars(Collected()).items() if isinstance(v, array)} == set(COLUMNS)


@pytest.mark.parametrize("form", ["compact", "byte order mark"])
def test_a_trace_written_compact_or_with_a_byte_order_mark_is_cut_too(tmp_path, halves_read, form):
    doc = json.dumps(trace_doc([*GOOD, MEM, *GOOD]), separators=(",", ":") if form == "compact" else None)
    trace = tmp_path / "t.pt.trace.json"
    trace.write_bytes(("\ufeff" if form == "byte order mark" else "").encode() + doc.encode())
    assert halves.find_cut(str(trace)) is not None
    read: list[int] = []
    assert outcome(trace, side_by_side=True, on_read=read.append) == outcome(trace)
    assert "TraceError" not in outcome(trace) and halves_read == [True]
    assert sum(read) == trace.stat().st_size


def test_a_gzip_trailer_that_wrapped_past_4_gb_is_read_as_a_size_at_least_the_file_s(tmp_path):
    packed = gzip.compress(b'{"traceEvents": []}' * 1000)  # 19,000 bytes of JSON in about 100
    path = tmp_path / "t.json.gz"
    on_disk = len(packed)  # a trailer equal to the file's size is a size (stored, not compressed), not wrapped
    for trailer, size in ((19_000, 19_000), (on_disk, on_disk), (10, 10 + (1 << 32))):  # below the file's: wrapped
        path.write_bytes(packed[:-4] + struct.pack("<I", trailer))
        with open(path, "rb") as raw:
            assert halves._json_size(raw, True) == size


def test_the_bar_moves_with_both_halves_not_only_at_the_end(tmp_path, monkeypatch, halves_read):
    """The child's bytes are told while this process reads its own half (one bar for both)."""
    ops = [cpu_op(f"aten::{os.urandom(8).hex()}", 1000000 + i, 1000000.5 + i) for i in range(8000)]
    trace = tmp_path / "t.pt.trace.json"  # about 1.3 MB, compact: one byte between the halves, told last
    trace.write_text(json.dumps(trace_doc(ops), separators=(",", ":")))
    here = os.getpid()
    real_stream, real_feed = halves.TraceStream, analyze._feed
    monkeypatch.setattr(halves, "TraceStream", lambda *a, **k: real_stream(*a, chunk_bytes=1 << 15, **k))

    def slow_here(c, stream, batch):  # this half takes 1-2 s: the child reads its own meanwhile
        if os.getpid() == here:
            time.sleep(0.05)
        real_feed(c, stream, batch)

    monkeypatch.setattr(analyze, "_feed", slow_here)
    read: list[int] = []
    analyze.analyze_trace(str(trace), on_read=read.append, side_by_side=True)
    assert halves_read == [True] and sum(read) == trace.stat().st_size
    assert sum(read[:-1]) > 0.9 * sum(read)  # all but the byte between the halves, before the last word
