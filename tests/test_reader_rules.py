"""The streaming reader's rules on small hand-made documents, each answer from json.loads of the same bytes or
written here: what it keeps as metadata, where its batches start and end, what it skips undecoded and what it
hands ``on_skipped``, how it counts bytes, and the exact one-line reason for each kind of broken input."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest
from test_gzip_reading import LIBRARIES

from lightx2v.trace_summary import TraceError, reader
from lightx2v.trace_summary.reader import TraceStream

from conftest import missing_tool

SKIP = rb'\s*"ph"\s*:\s*"f"'  # flow-end events, dropped undecoded
PAD = "p" * 4096  # a first key this long: the events start past the first decode window's reach


def write(tmp_path, data: str | bytes, name: str = "t.json"):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def read(tmp_path, data: str | bytes, **kwargs) -> tuple[list, TraceStream]:
    stream = TraceStream(str(write(tmp_path, data)), **kwargs)
    return list(stream), stream


def error(tmp_path, data: str | bytes, **kwargs) -> str:
    path = write(tmp_path, data)
    with pytest.raises(TraceError) as info:
        list(TraceStream(str(path), **kwargs))
    assert info.value.path == str(path) and str(info.value) == f"{path}: {info.value.problem}"
    return info.value.problem


def events_doc(n: int) -> str:
    return json.dumps({"traceEvents": [{"ph": "X", "name": f"e{i}", "ts": i} for i in range(n)]})


# --- what is read --------------------------------------------------------------------------------------------

def test_before_reading_a_stream_has_read_nothing():
    stream = TraceStream("/nonexistent/t.json")
    assert (stream.skipped, stream.bytes_read, stream.batch_start, stream.events_end) == (0, 0, 0, 0)
    assert stream.compressed is False and stream.metadata == {}


def test_metadata_is_every_top_level_key_but_the_events_before_or_after_them(tmp_path):
    text = '{"a": 1, "traceEvents": [{"x": 1}], "b": {"c": [1, 2]}, "traceName": "t"}'
    events, stream = read(tmp_path, text)
    assert events == [{"x": 1}] and stream.metadata == {"a": 1, "b": {"c": [1, 2]}, "traceName": "t"}


def test_a_trace_events_key_that_is_no_list_is_metadata_and_then_no_trace(tmp_path):
    assert error(tmp_path, '{"traceEvents": 5}') == "not a trace: a JSON object without a traceEvents list"


def test_an_empty_event_list_ends_where_its_bracket_is(tmp_path):
    text = '{"traceEvents": [ ], "after": 2}'
    events, stream = read(tmp_path, text)
    assert events == [] and stream.metadata == {"after": 2}
    assert stream.events_end == text.index("]") and stream.batch_start == 0
    events, stream = read(tmp_path, '{"traceEvents":[]}')
    assert events == [] and stream.events_end == 16


@pytest.mark.parametrize("prefix", ["", "\ufeff", "  \n", "\ufeff\n "])
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 1 << 20])
def test_a_byte_order_mark_and_leading_whitespace_are_passed_over_in_either_layout(tmp_path, prefix, chunk):
    events, stream = read(tmp_path, prefix + '{"traceEvents":[{"a":1},{"b":2}],"m":3}', chunk_bytes=chunk)
    assert events == [{"a": 1}, {"b": 2}] and stream.metadata == {"m": 3}
    events, stream = read(tmp_path, prefix + '[{"a":1},{"b":2}]', chunk_bytes=chunk)
    assert events == [{"a": 1}, {"b": 2}] and stream.metadata == {}


def test_a_gzip_file_is_found_by_its_content_whatever_its_name(tmp_path):
    text = events_doc(3)
    path = write(tmp_path, gzip.compress(text.encode()), name="t.json")
    stream = TraceStream(str(path))
    assert list(stream) == json.loads(text)["traceEvents"] and stream.compressed is True
    stream = TraceStream(str(write(tmp_path, text, name="t.json.gz")))
    assert list(stream) == json.loads(text)["traceEvents"] and stream.compressed is False


@pytest.mark.parametrize("chunk", [7, 100, 1 << 20])
def test_bytes_read_counts_the_decompressed_bytes_and_on_read_the_ones_on_disk(tmp_path, chunk):
    text = events_doc(200).encode()
    for data in (text, gzip.compress(text)):
        seen: list[int] = []
        stream = TraceStream(str(write(tmp_path, data)), chunk_bytes=chunk, on_read=seen.append)
        list(stream)
        assert stream.bytes_read == len(text) and sum(seen) == len(data)


def test_a_chunk_holding_every_event_gives_them_in_two_batches(tmp_path):
    path = write(tmp_path, events_doc(50))
    sizes = [len(b) for b in TraceStream(str(path)).batches()]
    assert sizes == [49, 1]  # the last one has no "}, {" after it: decoded exactly at the end


def test_an_event_the_cut_cannot_decode_is_decoded_exactly_without_reading_ahead(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "ts": i} for i in range(1000)]
    events[1]["name"] = "a }, { b"
    path = write(tmp_path, json.dumps({"traceEvents": events}))
    assert path.stat().st_size > 30_000
    stream = TraceStream(str(path), chunk_bytes=256)
    got = []
    for batch in stream.batches():
        if any(e["name"] == "a }, { b" for e in batch):
            assert stream.bytes_read < 6000  # its 4 KiB decode window and a chunk, not the whole file first
        got += batch
    assert got == events


@pytest.mark.parametrize("chunk", [16, 64, 1 << 20])
def test_values_longer_than_the_decode_window_are_read_whole(tmp_path, chunk):
    number = "1." + "0" * 6000 + "5"
    doc = (f'{{"traceEvents": [{{"name": "{"}, {" * 2000}"}}], "n": {number}, "s": "{"x" * 9000}", '
           f'"l": [{", ".join(str(i) for i in range(3000))}]}}')
    events, stream = read(tmp_path, doc, chunk_bytes=chunk)
    assert events == [{"name": "}, {" * 2000}]
    assert stream.metadata == {"n": float(number), "s": "x" * 9000, "l": list(range(3000))}


@pytest.mark.parametrize("size", [4090, 4094, 4095, 4096, 4097, 4098, 4100])
def test_values_ending_around_the_first_window_s_edge_are_read_whole(tmp_path, size):
    s = "y" * (size - 2)  # the value is its quotes and these
    doc = f'{{"traceEvents": [], "s": "{s}", "n": {"9" * (size % 7 + 1)}.{"1" * size}}}'
    _, stream = read(tmp_path, doc, chunk_bytes=1 << 20)
    assert stream.metadata == {k: v for k, v in json.loads(doc).items() if k != "traceEvents"}
    assert stream.metadata["s"] == s


def test_a_literal_cut_by_the_first_window_is_read_whole(tmp_path):
    value = "[" + "0," * 2047 + "true]"  # the window's last character is the 't' of true
    assert value.index("t") == 4095
    _, stream = read(tmp_path, '{"traceEvents": [], "v": ' + value + "}")
    assert stream.metadata == {"v": [0] * 2047 + [True]}


def test_a_bad_value_at_the_very_end_is_malformed_not_truncated(tmp_path):
    assert error(tmp_path, '{"traceEvents": [], "a": @}') == "malformed JSON at byte 25: Expecting value"


def test_bytes_that_are_no_utf8_are_read_as_escaped_surrogates_not_an_error(tmp_path):
    _, stream = read(tmp_path, b'{"traceEvents": [], "name": "r\xffx"}')
    assert stream.metadata == {"name": "r\udcffx"}


# --- skipping ------------------------------------------------------------------------------------------------

def flow(i: int) -> dict:
    return {"ph": "f", "id": i, "ts": i}


def test_skip_head_drops_matching_events_undecoded_and_counts_them(tmp_path):
    events = [flow(0), {"ph": "X", "a": 1}, flow(1), flow(2), {"ph": "X", "a": 2}, flow(3), {"ph": "X", "a": 3}]
    for chunk in (24, 1 << 20):
        got, stream = read(tmp_path, json.dumps({"traceEvents": events}), chunk_bytes=chunk, skip_head=SKIP)
        assert got == [e for e in events if e["ph"] != "f"] and stream.skipped == 4
        got, stream = read(tmp_path, json.dumps({"pad": PAD, "traceEvents": events * 300}), chunk_bytes=chunk,
                           skip_head=SKIP)
        assert got == [e for e in events if e["ph"] != "f"] * 300 and stream.skipped == 1200


@pytest.mark.parametrize("odd", [{"ph": "f", "name": 'a " quote'}, {"ph": "f", "name": "a \\ backslash"}])
def test_a_skippable_event_holding_an_escape_is_decoded_not_skipped(tmp_path, odd):
    events = [{"ph": "X", "a": 1}, odd, flow(1), {"ph": "X", "a": 2}]
    got, stream = read(tmp_path, json.dumps({"traceEvents": events}), skip_head=SKIP)
    assert got == [events[0], odd, events[3]] and stream.skipped == 1


def test_a_backslash_in_another_event_does_not_stop_one_being_skipped(tmp_path):
    events = [{"ph": "X", "a": "x\\y"}, flow(1), {"ph": "X", "a": 2}, {"ph": "X", "b": "p\\q"}, {"ph": "X"}]
    got, stream = read(tmp_path, json.dumps({"traceEvents": events}), skip_head=SKIP)
    assert got == [events[0], events[2], events[3], events[4]] and stream.skipped == 1


def test_the_first_event_can_be_skipped_and_only_when_it_matches(tmp_path):
    got, stream = read(tmp_path, json.dumps({"traceEvents": [flow(0), {"ph": "X", "a": 1}, {"ph": "X"}]}),
                       skip_head=SKIP)
    assert got == [{"ph": "X", "a": 1}, {"ph": "X"}] and stream.skipped == 1
    got, stream = read(tmp_path, json.dumps({"traceEvents": [{"ph": "X", "a": 1}, {"ph": "X"}, flow(0)]}),
                       skip_head=SKIP)
    assert stream.skipped == 0 and len(got) == 3  # the last event is decoded exactly, never skipped


@pytest.mark.parametrize("chunk", [40, 1 << 20])
def test_on_skipped_gets_each_skipping_batch_s_bytes_as_they_lie_in_the_file(tmp_path, chunk):
    events = [*(flow(i) if i % 3 else {"ph": "X", "n": i} for i in range(600)), {"ph": "X", "n": "end"}]
    path = write(tmp_path, json.dumps({"pad": PAD, "traceEvents": events}))
    data = path.read_bytes()
    pieces: list[bytes] = []
    stream = TraceStream(str(path), chunk_bytes=chunk, skip_head=SKIP, on_skipped=lambda p: pieces.append(bytes(p)))
    starts, got = [], []
    for batch in stream.batches():
        starts.append(stream.batch_start)
        got += batch
    assert got == [e for e in events if e["ph"] != "f"] and stream.skipped == 400
    assert pieces and (len(pieces) > 10 if chunk == 40 else True)
    at = 0
    for piece in pieces:
        at = data.index(piece, at)
        assert at in starts  # a piece starts where its batch starts
    assert sum(piece.count(b'"ph": "f"') for piece in pieces) == 400


@pytest.mark.parametrize("chunk", range(40, 72, 3))
def test_a_skippable_event_cut_inside_a_string_is_decoded_whole_wherever_the_chunks_end(tmp_path, chunk):
    events = []
    for i in range(150):
        events += [{"ph": "f", "name": f"f}}, {{g{i}", "id": i}, {"ph": "X", "name": f"x{i}"}, flow(i)]
    events.append({"ph": "X", "name": "end"})  # (the last event is decoded exactly, never skipped)
    path = write(tmp_path, json.dumps({"pad": PAD, "traceEvents": events}))
    stream = TraceStream(str(path), chunk_bytes=chunk, skip_head=SKIP)
    got = list(stream)
    assert got == [e for e in events if e["ph"] == "X" or "name" in e] and stream.skipped == 150


# --- errors --------------------------------------------------------------------------------------------------

def test_a_missing_file_and_a_directory_say_so(tmp_path):
    with pytest.raises(TraceError) as info:
        list(TraceStream(str(tmp_path / "nope.json")))
    assert info.value.problem == "no such file" and info.value.path == str(tmp_path / "nope.json")
    with pytest.raises(TraceError) as info:
        list(TraceStream(str(tmp_path)))
    assert info.value.problem == "cannot read (Is a directory)" and info.value.path == str(tmp_path)


def test_a_file_that_fails_on_its_first_read_says_it_cannot_be_read():
    with pytest.raises(TraceError) as info:
        list(TraceStream("/proc/self/mem"))  # opens, but reading at offset 0 fails (EIO)
    assert info.value.problem == "cannot read (Input/output error)" and info.value.path == "/proc/self/mem"


def test_a_read_failing_mid_file_says_it_cannot_be_read(tmp_path, monkeypatch):
    path = write(tmp_path, events_doc(10))
    stream = TraceStream(str(path))
    opened = TraceStream._open

    class Failing:
        def read(self, n):
            raise OSError(5, "Input/output error")

        def close(self):
            pass

    def open_then_fail(self):
        opened(self)
        self._file.close()
        self._file = Failing()

    monkeypatch.setattr(TraceStream, "_open", open_then_fail)
    with pytest.raises(TraceError) as info:
        list(stream)
    assert info.value.problem == "cannot read (Input/output error)" and info.value.path == str(path)


@pytest.mark.parametrize("data", ["", "  \n\t ", "\ufeff"])
def test_an_empty_file_is_no_trace(tmp_path, data):
    assert error(tmp_path, data) == "empty file, not a trace"


def test_a_file_that_is_no_json_says_how_it_starts_in_24_bytes(tmp_path):
    assert error(tmp_path, "hello world, this is a long text file\n") == \
        "not a trace: not JSON (starts with 'hello world, this is a l')"
    assert error(tmp_path, b"\xff\xfehello") == "not a trace: not JSON (starts with '\ufffd\ufffdhello')"


TRUNCATED = "truncated trace: the JSON ends early (the file was cut off while being written?)"


@pytest.mark.parametrize("data", ['{"traceEvents": [', '{"traceEvents": [{"a": 1},', '{"traceEvents": [{"a": 1}',
                                  '{"traceEvents": [{"a": 1}, {"b"', '{"traceEvents": []', '{"traceEvents": [], ',
                                  '{"a": 1', '{"a"', '{"a": ', '{', '[{"a": 1}', '{"s": "unterminated'])
def test_a_document_cut_off_anywhere_is_truncated(tmp_path, data):
    for chunk in (3, 1 << 20):
        assert error(tmp_path, data, chunk_bytes=chunk) == TRUNCATED


def test_a_cut_off_gzip_stream_and_corrupt_gzip_data_say_so(tmp_path):
    packed = gzip.compress(events_doc(300).encode())
    assert error(tmp_path, packed[:len(packed) // 2]) == \
        "truncated gzip stream (the file was cut off while being written?)"
    assert error(tmp_path, packed[:10] + bytes(len(packed) - 10)).startswith("corrupt gzip data (")


@pytest.mark.parametrize("data, problem", [
    ('{"traceEvents": [], "a": 1 "b": 2}', "malformed JSON at byte 27: expected ',' or '}' between top-level keys"),
    ('{"traceEvents": [], 5: 2}', "malformed JSON at byte 20: expected a top-level key"),
    ('{"traceEvents": [], "a" 2}', "malformed JSON at byte 24: expected ':' after a top-level key"),
    ('{"traceEvents": []} x', "malformed JSON at byte 20: unexpected data after the end of the JSON document"),
    ('{"traceEvents": []}x', "malformed JSON at byte 19: unexpected data after the end of the JSON document"),
    ('[{"a": 1}] [', "malformed JSON at byte 11: unexpected data after the end of the JSON document"),
    ('{"traceEvents": [{"a": 1} {"b": 2}]}', "malformed JSON at byte 26: expected ',' or ']' after an event in "
                                             "traceEvents"),
    ('{"traceEvents": [{"a": 1}, 7]}',
     "not a trace: traceEvents holds something other than event objects (at byte 27)"),
    ('{"traceEvents": [7]}', "not a trace: traceEvents holds something other than event objects (at byte 17)"),
    ('[1, 2]', "not a trace: traceEvents holds something other than event objects (at byte 1)"),
    ('{"traceEvents": [], "a": [1, 2, @]}', "malformed JSON at byte 32: Expecting value"),
    ('{"name": "a config", "values": [1, 2]}', "not a trace: a JSON object without a traceEvents list"),
])
@pytest.mark.parametrize("chunk", [4, 1 << 20])
def test_malformed_json_names_the_byte_and_what_was_expected(tmp_path, data, problem, chunk):
    assert error(tmp_path, data, chunk_bytes=chunk) == problem


def test_the_byte_named_counts_from_the_file_s_start_after_chunks_were_dropped(tmp_path):
    head = '{"traceEvents": [' + ", ".join('{"a": %d}' % i for i in range(100)) + '], "m": [1, 2, @]}'
    assert error(tmp_path, head, chunk_bytes=16) == f"malformed JSON at byte {head.index('@')}: Expecting value"


def test_nesting_too_deep_for_the_parser_is_malformed(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    assert error(tmp_path, '{"traceEvents": [], "deep": ' + deep + "}") == "malformed JSON at byte 28: nesting too deep"


# --- cuts, parts and values, typed ------------------------------------------------------------------------------

@pytest.mark.parametrize("buf, start, cut", [
    (b'{"a": 1}, {"b": 2}', 0, (8, 10)),
    (b'{"a":1},{"b":2}, {"c":3}', 0, (15, 17)),  # the last one, compact or spaced
    (b'{"a":1} ,\n\t {"b":2}', 0, (7, 12)),  # whitespace on both sides of the comma
    (b'{"a":1}, {"b":2}', 9, None),  # none after start (start is at an event's '{')
    (b'{"a":1},{"b":2},{"c":3}', 16, None),  # ... compact, with cuts before it
    (b'{"a":1},{"b":2}', 0, (7, 8)),
    (b'{"a": {"b": 1}}', 0, None),  # a nested object follows a colon
    (b'{"a": [1, {"b": 2}]}', 0, None),  # a comma, but no '}' before it
    (b'{"a": [{"b": 1}, {"c": 2}]}', 0, (15, 17)),  # objects in a list look the same: the reader checks later
])
def test_last_cut_is_the_last_brace_comma_brace_after_start(buf, start, cut):
    assert reader.last_cut(buf, start) == cut


def test_generic_value_reads_nan_and_bytes_that_are_no_utf8_as_the_dict_path_does():
    value = reader.generic_value(b'{"name": "r\xffx", "ts": NaN, "n": 123456789012345678901234567890}')
    assert value["name"] == "r\udcffx" and value["ts"] != value["ts"] and value["n"] == 123456789012345678901234567890


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("start, end", [(3, 7), (0, None), (9, None), (3, 3), (20, None),
                                        (reader.CHUNK_BYTES * 2 + 5, reader.CHUNK_BYTES * 2 + 12)])
def test_a_part_reads_before_its_bytes_and_after(packed, start, end):
    data = bytes(range(48, 58)) if start <= 20 else os.urandom(reader.CHUNK_BYTES * 3)
    raw = io.BytesIO(gzip.compress(data) if packed else data)
    part = reader._PartReader(reader.inflating(raw, packed), raw, reader.Part(start, end, b"<", b">"), packed)
    got = []
    while piece := part.read(2):
        got.append(piece)
    assert b"".join(got) == b"<" + data[start:end] + b">" and all(len(p) <= 2 for p in got)
    through = min(len(data), end if end is not None else len(data))  # a plain part stays where it was seeked
    assert part.position == (start if not packed and start > len(data) else through)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_each_batch_starts_at_its_first_event_s_brace_in_the_file(tmp_path, typed, chunk):
    text = events_doc(300)
    stream = TraceStream(str(write(tmp_path, text)), chunk_bytes=chunk, typed=typed)
    for batch in stream.batches():
        first = batch[0]["name"] if isinstance(batch[0], dict) else batch[0].name
        assert text.index('{"ph": "X", "name": "%s", ' % first) == stream.batch_start


@pytest.mark.parametrize("fails_at", [2, 9])
def test_where_isal_gives_up_inside_a_part_zlib_goes_on_from_the_part_s_byte(tmp_path, monkeypatch, fails_at):
    """The second read fails while the part's first bytes are dropped; the ninth, after them."""
    if "isal" not in LIBRARIES:
        missing_tool("isal (pip install -e '.[fast]')")
    text = events_doc(3000)
    tail_start = text.index("}, {", len(text) // 2) + 3
    path = write(tmp_path, gzip.compress(text.encode()), "t.json.gz")

    def events(**kwargs):
        part = reader.Part(tail_start, None, before=b'{"traceEvents": [')
        return list(TraceStream(str(path), typed=True, part=part, chunk_bytes=4096, **kwargs))

    monkeypatch.setattr(reader, "GZIP_LIBRARY", "zlib")
    expected = events()
    assert len(expected) > 1000
    reads = []

    class GivesUp(reader._isal_gzip.IGzipFile):
        def read(self, *args):
            reads.append(args)
            if len(reads) == fails_at:
                raise OSError("isal gave up")
            return super().read(*args)

    monkeypatch.setattr(reader, "GZIP_LIBRARY", "isal")
    monkeypatch.setattr(reader._isal_gzip, "IGzipFile", GivesUp)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 50_000)  # the part's first bytes dropped in several reads
    assert events() == expected and len(reads) == fails_at
