"""The streaming reader returns exactly what json.load returns, in every layout, and names broken input."""

from __future__ import annotations

import gzip
import json

import pytest

from lightx2v.trace_summary import TraceError
from lightx2v.trace_summary.analyze import SKIP_HEAD
from lightx2v.trace_summary.reader import TraceStream

from conftest import H200_TRACE
from helpers.summary import capture_cpu_trace

H200_RAW = gzip.decompress(H200_TRACE.read_bytes())

# Events that defeat a naive cut at "}, {": the fast path must fall back to exact decoding for each of them.
TRICKY_EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "void k<{lambda()#1}, {lambda()#2}>(int)", "pid": 0, "tid": 7,
     "ts": 1.5, "dur": 2.25},
    {"ph": "X", "cat": "cpu_op", "name": 'quote " backslash \\ and }, { inside', "pid": 1, "tid": 1, "ts": 2,
     "dur": 1},
    {"ph": "X", "cat": "python_function", "name": "f}, {g", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
    {"ph": "X", "cat": "python_function", "name": "plain.py(1): f", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "unicode \u00fc\u00f1\u00ef \U0001F680", "pid": 1, "tid": 1, "ts": 4,
     "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "nested", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
     "args": {"list": [{"a": 1}, {"b": [2, {"c": "}, {"}]}]}},
    {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 7, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "cpu_op", "name": "not a number", "pid": 1, "tid": 1, "ts": 8, "dur": 1,
     "args": {"v": float("nan")}},
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
]


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)  # NaN-safe equality


def read_all(path, **kwargs) -> tuple[list, dict]:
    stream = TraceStream(str(path), **kwargs)
    return list(stream), stream.metadata


@pytest.mark.parametrize("chunk", [7, 64, 4096, 4 << 20])
@pytest.mark.parametrize("layout", ["indent", "minified", "metadata_after", "array_format"])
def test_stream_equals_json_load_for_tricky_events(tmp_path, layout, chunk):
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "X"}, {"id": 1, "name": "Y"}],
           "traceEvents": TRICKY_EVENTS * 3, "traceName": "t"}
    if layout == "metadata_after":
        doc = {"traceEvents": doc["traceEvents"], "deviceProperties": doc["deviceProperties"],
               "distributedInfo": {"rank": 1, "world_size": 2}}
    if layout == "array_format":
        doc = TRICKY_EVENTS * 3
    text = json.dumps(doc, indent=2) if layout != "minified" else json.dumps(doc, separators=(",", ":"))
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    events, metadata = read_all(path, chunk_bytes=chunk)
    expected = json.loads(text)
    if layout == "array_format":
        assert canonical(events) == canonical(expected) and metadata == {}
    else:
        assert canonical(events) == canonical(expected.pop("traceEvents"))
        assert canonical(metadata) == canonical(expected)


@pytest.mark.parametrize("chunk", [97, 4 << 20])
def test_stream_equals_json_load_on_the_h200_trace(chunk):
    events, metadata = read_all(H200_TRACE, chunk_bytes=chunk)
    expected = json.loads(H200_RAW)
    assert canonical(events) == canonical(expected.pop("traceEvents"))
    assert canonical(metadata) == canonical(expected)


def test_skipping_drops_exactly_the_unused_categories(tmp_path):
    cpu_trace = capture_cpu_trace(tmp_path, "rank0_cpu")
    for path, raw in ((H200_TRACE, H200_RAW), (cpu_trace, cpu_trace.read_bytes())):
        stream = TraceStream(str(path), skip_head=SKIP_HEAD)
        kept = list(stream)
        all_events = json.loads(raw)["traceEvents"]
        unused = [e for e in all_events if e.get("ph") in ("f", "s") or e.get("cat") == "python_function"]
        assert unused, "the traces hold events of the skipped kinds"
        # runtime and driver calls are the launch chain's first link: read, never skipped
        assert any(e.get("cat") in ("cuda_runtime", "cuda_driver") for e in kept) or path != H200_TRACE
        assert stream.skipped == len(unused)
        assert canonical(kept) == canonical([e for e in all_events if e not in unused])
    # A skippable event whose name contains the cut pattern is still read whole, never half-skipped.
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps({"traceEvents": TRICKY_EVENTS}, indent=2))
    stream = TraceStream(str(path), skip_head=SKIP_HEAD, chunk_bytes=64)
    names = [e.get("name") for e in stream]
    assert "f}, {g" in names and "plain.py(1): f" not in names and stream.skipped == 2


def expect_error(path, *fragments: str) -> str:
    with pytest.raises(TraceError) as info:
        read_all(path, chunk_bytes=1024)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_missing_empty_and_non_json_files(tmp_path):
    expect_error(tmp_path / "nope.json", "no such file")
    (tmp_path / "empty.json").write_bytes(b"")
    expect_error(tmp_path / "empty.json", "empty file")
    (tmp_path / "notes.txt").write_text("hello world\n")
    expect_error(tmp_path / "notes.txt", "not a trace", "not JSON")
    (tmp_path / "other.json").write_text('{"name": "a config file", "values": [1, 2, 3]}')
    expect_error(tmp_path / "other.json", "not a trace", "without a traceEvents list")
    (tmp_path / "numbers.json").write_text("[1, 2, 3]")
    expect_error(tmp_path / "numbers.json", "not a trace", "other than event objects")


@pytest.mark.parametrize("fraction", [0.0005, 0.01, 0.25, 0.5, 0.77, 0.999])
def test_cut_off_json_is_reported_truncated(tmp_path, fraction):
    cut = max(int(len(H200_RAW) * fraction), 1)
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(H200_RAW[:cut])
    expect_error(path, "truncated trace")
    gz = tmp_path / "cut.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(H200_RAW[:cut]))  # a complete gzip of an incomplete JSON
    expect_error(gz, "truncated trace")


def test_cut_off_and_corrupt_gzip(tmp_path):
    data = H200_TRACE.read_bytes()
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(data[: len(data) // 2])
    expect_error(path, "truncated gzip stream")
    path.write_bytes(data[:10] + bytes(len(data) - 10))
    expect_error(path, "corrupt gzip data")


def test_malformed_json_in_the_middle_names_the_byte(tmp_path):
    at = H200_RAW.index(b'"name": "aten::linear"') + 5
    path = tmp_path / "bad.pt.trace.json"
    path.write_bytes(H200_RAW[:at] + b"@" + H200_RAW[at + 1:])
    message = expect_error(path, "malformed JSON at byte")
    offset = int(message.split("at byte ")[1].split(":")[0])
    assert abs(offset - at) < 64


def test_without_orjson_the_stdlib_path_gives_the_same_events(tmp_path, monkeypatch):
    from lightx2v.trace_summary import reader

    monkeypatch.setattr(reader, "_fast_loads", reader._stdlib_loads)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": TRICKY_EVENTS * 2, "traceName": "x"}, indent=2))
    events, metadata = read_all(path, chunk_bytes=64)
    assert canonical(events) == canonical(TRICKY_EVENTS * 2) and metadata == {"traceName": "x"}
    events, _ = read_all(H200_TRACE)
    assert canonical(events) == canonical(json.loads(H200_RAW)["traceEvents"])


@pytest.mark.parametrize("name", ["plain.pt.trace.json", "packed.pt.trace.json.gz"])
def test_progress_callback_counts_every_byte_on_disk(tmp_path, name):
    """The CLI's progress bar adds up what `on_read` reports; it must reach the file's size exactly."""
    path = tmp_path / name
    doc = json.loads(gzip.decompress(H200_TRACE.read_bytes()))
    doc["traceEvents"] *= 4
    data = json.dumps(doc).encode()
    # stored, not compressed: a gzip file of 2.6 MB, read in several reads whatever the library's (isal: 512 KB)
    path.write_bytes(gzip.compress(data, compresslevel=0) if name.endswith(".gz") else data)
    seen: list[int] = []
    events = sum(1 for _ in TraceStream(str(path), chunk_bytes=4096, on_read=seen.append))
    assert events > 1000 and len(seen) > 3  # reported as it goes, not once at the end
    assert sum(seen) == path.stat().st_size


@pytest.mark.parametrize("chunk_bytes", [97, 4096, 1 << 22])
@pytest.mark.parametrize("skip", [None, SKIP_HEAD])
def test_batch_offsets_cut_the_event_array_into_pieces_that_decode_alone(tmp_path, chunk_bytes, skip):
    """``batch_start`` .. the next one's (the last: ``events_end``) are byte ranges of the file that hold the
    events in order, skipped ones included: each decodes alone as a JSON array once its trailing comma is cut."""
    events = [*json.loads(H200_RAW)["traceEvents"][:400], *TRICKY_EVENTS]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "x"}))
    stream = TraceStream(str(path), chunk_bytes=chunk_bytes, skip_head=skip)
    starts, batches = [], []
    for batch in stream.batches():
        starts.append(stream.batch_start)
        batches.append([json.dumps(e) for e in batch])  # as text: NaN is not equal to itself
    data = path.read_bytes()
    pieces = []
    for a, b, batch in zip(starts, [*starts[1:], stream.events_end], batches, strict=True):
        piece = data[a:b].rstrip()
        decoded = [json.dumps(e) for e in json.loads(b"[" + (piece[:-1] if piece.endswith(b",") else piece) + b"]")]
        assert set(batch) <= set(decoded)  # each batch lies in its own piece
        pieces += decoded
    assert pieces == [json.dumps(e) for e in events]


@pytest.mark.parametrize("chunk_bytes", [1, 2])
@pytest.mark.parametrize("layout", ['{"traceEvents": [{"a": 1}], "m": 2}', '[{"a": 1}]'])
def test_a_byte_order_mark_is_passed_over_even_when_the_first_read_is_shorter_than_it(tmp_path, chunk_bytes,
                                                                                         layout):
    """The BOM is 3 bytes: a first chunk of 1 or 2 bytes holds only part of it (was: 'not JSON')."""
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + layout.encode())
    stream = TraceStream(str(path), chunk_bytes=chunk_bytes)
    assert list(stream) == [{"a": 1}] and stream.metadata == ({"m": 2} if layout.startswith("{") else {})
