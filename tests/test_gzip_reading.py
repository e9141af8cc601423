"""Gzip traces read by ISA-L's inflate (``isal``, the ``fast`` extra) where it is installed, by zlib otherwise: the
same events, the same bytes counted, and a damaged file said in the same words either way (where isal fails, zlib
reads the file again and says why). Each test runs with every library this machine has."""

from __future__ import annotations

import gzip
import json

import pytest

from lightx2v.trace_summary import TraceError, reader
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.reader import TraceStream

from conftest import H200_TRACE

try:
    import isal  # noqa: F401
    LIBRARIES = ["isal", "zlib"]
except ImportError:
    LIBRARIES = ["zlib"]

DOC = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i,
                                   "dur": 1} for i in range(3000)], "deviceProperties": []}).encode()
PACKED = gzip.compress(DOC)


@pytest.fixture(params=LIBRARIES)
def library(request, monkeypatch):
    monkeypatch.setattr(reader, "GZIP_LIBRARY", request.param)
    return request.param


def read(path, **kwargs) -> tuple[list, TraceStream]:
    stream = TraceStream(str(path), **kwargs)
    return list(stream), stream


def problem(path, **kwargs) -> str:
    with pytest.raises(TraceError) as raised:
        read(path, **kwargs)
    return raised.value.problem


def test_the_library_in_use_is_the_fastest_installed():
    assert reader.GZIP_LIBRARY == LIBRARIES[0]


@pytest.mark.parametrize("chunk", [1000, 1 << 20])
def test_every_member_is_read_and_the_bytes_on_disk_counted(tmp_path, library, chunk):
    path = tmp_path / "t.json.gz"
    cut = len(DOC) // 3
    members = [gzip.compress(DOC[:cut]), gzip.compress(DOC[cut:2 * cut]), bytes(5), gzip.compress(DOC[2 * cut:])]
    path.write_bytes(b"".join(members))
    seen: list[int] = []
    events, stream = read(path, chunk_bytes=chunk, on_read=seen.append, typed=True)
    assert [e["name"] if isinstance(e, dict) else e.name for e in events] == [f"e{i}" for i in range(3000)]
    assert stream.metadata == {"deviceProperties": []}
    assert sum(seen) == path.stat().st_size and stream.bytes_read == len(DOC)


@pytest.mark.parametrize("damage", ["cut", "corrupt", "crc", "trailing garbage"])
def test_a_damaged_gzip_file_is_said_in_zlib_s_words_whichever_library_reads_it(tmp_path, monkeypatch, damage):
    data = {"cut": PACKED[:len(PACKED) // 2], "corrupt": PACKED[:200] + bytes(60) + PACKED[260:],
            "crc": PACKED[:-8] + bytes(4) + PACKED[-4:], "trailing garbage": PACKED + b"garbage"}[damage]
    path = tmp_path / "t.json.gz"
    path.write_bytes(data)
    said = {}
    for library in LIBRARIES:
        monkeypatch.setattr(reader, "GZIP_LIBRARY", library)
        said[library] = problem(path, chunk_bytes=4096)
    assert len(set(said.values())) == 1, said
    assert said["zlib"].startswith("truncated gzip stream" if damage == "cut" else "corrupt gzip data (")


def test_a_gzip_summary_is_its_plain_twin_s(tmp_path, library):
    plain = tmp_path / "rank0.pt.trace.json"
    plain.write_bytes(gzip.decompress(H200_TRACE.read_bytes()))
    packed, twin = analyze_trace(str(H200_TRACE)), analyze_trace(str(plain))
    assert packed.compressed and not twin.compressed
    assert (packed.steps, packed.top_kernels, packed.frames, packed.tables) == \
        (twin.steps, twin.top_kernels, twin.frames, twin.tables)
