"""Reading ranges of a gzip trace from decompression points (`lightx2v.trace_browser.gzip_seek`): every range
equals the same slice of the decompressed bytes, across points and gzip members; a cut-off file is a clear
error; the Timeline's windows of a gzip trace read a part of the file once the points exist."""

from __future__ import annotations

import gzip
import json
import os
import random

import pytest

from lightx2v.trace_browser import gzip_seek
from lightx2v.trace_browser.gzip_seek import GzipCheckpoints
from lightx2v.trace_browser.step_index import step_index
from lightx2v.trace_browser.window import step_window
from lightx2v.trace_summary.errors import TraceError

from helpers.steps_trace import steps_trace


def text(n_events: int, seed: int = 3) -> bytes:
    rng = random.Random(seed)
    return json.dumps([{"name": f"op{rng.randrange(10**6)}", "ts": rng.random() * 1e6, "dur": rng.random()}
                       for _ in range(n_events)]).encode()


@pytest.fixture
def member_pair(tmp_path):
    """Two gzip members one after the other (``cat a.gz b.gz``) and the bytes they decompress to."""
    first, second = text(20_000, 1), text(20_000, 2)
    path = tmp_path / "two.json.gz"
    path.write_bytes(gzip.compress(first) + gzip.compress(second))
    return str(path), first + second


def test_every_range_equals_the_slice_of_the_decompressed_bytes(member_pair):
    path, plain = member_pair
    points = GzipCheckpoints.build(path, spacing=64 << 10)
    assert len(points.points) > 10 and points.size == len(plain)
    rng = random.Random(5)
    cuts = [(0, 10), (0, len(plain)), (len(plain) - 5, len(plain) + 100), (len(plain) // 2 - 7, len(plain) // 2 + 7)]
    cuts += [(p.out, p.out + 1) for p in points.points] + [(p.out - 1, p.out + 1) for p in points.points[1:]]
    for _ in range(200):
        a = rng.randrange(len(plain))
        cuts.append((a, a + rng.randrange(300_000)))
    for start, stop in cuts:
        assert points.read(start, stop) == plain[start:stop], (start, stop)


def test_a_read_resumes_from_the_nearest_point_not_the_start(member_pair, monkeypatch):
    path, plain = member_pair
    points = GzipCheckpoints.build(path, spacing=64 << 10)
    fed = []
    real = gzip_seek._inflate

    def counted(inflater, block):
        fed.append(len(block))
        return real(inflater, block)

    monkeypatch.setattr(gzip_seek, "_inflate", counted)
    start = len(plain) * 3 // 4
    assert points.read(start, start + 1000) == plain[start:start + 1000]
    assert 0 < sum(fed) <= 2 * points.block  # from the point before ``start``, not from the file's start
    assert 2 * points.block < os.path.getsize(path) / 4


def test_a_cut_off_or_corrupt_gzip_file_is_a_clear_error(tmp_path):
    data = gzip.compress(text(5000))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="truncated gzip stream"):
        GzipCheckpoints.build(str(cut))
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(data[:20] + bytes(200) + data[220:])
    with pytest.raises(TraceError, match="corrupt gzip data"):
        GzipCheckpoints.build(str(bad))


def bytes_read() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_a_gzip_traces_step_windows_read_a_part_of_the_file_once_the_points_exist(tmp_path, monkeypatch):
    plain = steps_trace(tmp_path / "plain" / "rank0_host.pt.trace.json", steps=3000)
    path = tmp_path / "rank0_host.pt.trace.json.gz"
    with open(plain, "rb") as src:
        path.write_bytes(gzip.compress(src.read(), compresslevel=1))  # level 1: bigger, so reads are measurable
    monkeypatch.setattr(gzip_seek, "SPACING", 16 << 10)
    gzip_seek._cache.clear()
    index = step_index(str(path), None, 4096)
    plain_index = step_index(plain, None, 4096)
    assert index.compressed and [c.start for c in index.chunks] == [c.start for c in plain_index.chunks]
    assert step_window(str(path), index, 0) == step_window(plain, plain_index, 0)  # makes the points
    size = os.path.getsize(path)
    for k in (1500, 2999):
        before = bytes_read()
        window = step_window(str(path), index, k, frames=True)
        read = bytes_read() - before
        assert window == step_window(plain, plain_index, k, frames=True)
        assert read < size / 4, f"read {read} of {size} bytes for one step of 3000"


# --- several members in one read block; a file rewritten or damaged after its points were made -----------------

def members(*parts: bytes) -> bytes:
    """One gzip member per part, one after the other (``cat a.gz b.gz c.gz``)."""
    return b"".join(gzip.compress(part) for part in parts)


def test_members_that_all_end_inside_one_read_block_are_all_read(tmp_path):
    """Four small members lie in the first block read: each one's end starts the next one's decompressor."""
    parts = [b'{"traceEvents": [', b'{"ph": "X", "name": "a", "ts": 1, "dur": 2},', b'{"ph": "X", "name": "b", '
             b'"ts": 3, "dur": 4}', b"]}"]
    path = tmp_path / "four.json.gz"
    path.write_bytes(members(*parts))
    assert path.stat().st_size < 4096  # the smallest block: all four members in one read
    points = GzipCheckpoints.build(str(path))
    plain = b"".join(parts)
    assert points.size == len(plain) and points.read(0, len(plain)) == plain
    assert points.read(len(parts[0]) + 5, len(plain) - 1) == plain[len(parts[0]) + 5:-1]


def test_every_reader_of_gzip_reads_all_the_members_of_one_block(tmp_path):
    """The summary's reader and the "is it a trace" sniff read the same four-member file whole."""
    from lightx2v.trace_files import classify
    from lightx2v.trace_summary.reader import TraceStream

    parts = [b'{"schemaVersion": 1,', b' "traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2},',
             b'{"ph": "X", "name": "b", "ts": 3, "dur": 4},', b'{"ph": "X", "name": "c", "ts": 5, "dur": 6}]}']
    path = tmp_path / "chrome_trace.json.gz"  # not a TensorBoard name: classified by its content
    path.write_bytes(members(*parts))
    assert [e["name"] for e in TraceStream(str(path))] == ["a", "b", "c"]
    assert classify(str(path)).kind == "chrome", classify(str(path))
    plain = b"".join(parts)
    assert GzipCheckpoints.build(str(path)).read(0, len(plain)) == plain


def test_zero_padding_between_members_is_skipped_by_every_reader(tmp_path):
    """gzip itself skips zero bytes after a member (padded archives); the seek points and the sniff do too."""
    from lightx2v.trace_files import classify
    from lightx2v.trace_summary.reader import TraceStream

    parts = [b'{"schemaVersion": 1,', b' "traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}]}']
    path = tmp_path / "chrome_trace.json.gz"
    path.write_bytes(gzip.compress(parts[0]) + bytes(64) + gzip.compress(parts[1]) + bytes(7))
    assert gzip.decompress(path.read_bytes()) == b"".join(parts)
    assert [e["name"] for e in TraceStream(str(path))] == ["a"]
    assert classify(str(path)).kind == "chrome", classify(str(path))
    assert GzipCheckpoints.build(str(path)).read(0, 1000) == b"".join(parts)


def test_a_trace_rewritten_in_place_is_read_anew_not_at_the_old_points(tmp_path, monkeypatch):
    monkeypatch.setattr(gzip_seek, "SPACING", 16 << 10)  # many points: old ones would resume in the wrong place
    path = tmp_path / "rank0_host.pt.trace.json.gz"
    old, new = text(3000, 1), text(5000, 2)
    path.write_bytes(gzip.compress(old))
    inode = path.stat().st_ino
    middle = len(old) // 2
    assert len(gzip_seek.cached(str(path)).points) > 4
    assert gzip_seek.cached(str(path)).read(middle, middle + 100) == old[middle:middle + 100]
    with open(path, "r+b") as f:  # in place: the same inode, other bytes, another length
        f.write(gzip.compress(new))
        f.truncate()
    assert path.stat().st_ino == inode
    points = gzip_seek.cached(str(path))
    assert points.size == len(new) and points.read(middle, middle + 1000) == new[middle:middle + 1000]


def test_points_of_another_version_of_the_file_are_refused(tmp_path):
    path = tmp_path / "rank0_host.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text(3000, 1)))
    points = GzipCheckpoints.build(str(path))
    st = path.stat()
    with pytest.raises(gzip_seek.FileChanged):
        gzip_seek.cached(str(path), expect=(st.st_size, st.st_mtime_ns + 1))  # the index was made from another
    path.write_bytes(gzip.compress(text(3000, 2)))
    with pytest.raises(gzip_seek.FileChanged, match="changed while being read"):
        points.read(0, 100)


def test_data_that_no_longer_decodes_where_it_did_is_a_trace_error(tmp_path):
    """Damaged after the points were made, under the same size and mtime: a TraceError, not a zlib error."""
    path = tmp_path / "rank0_host.pt.trace.json.gz"
    first, second = text(3000, 1), text(3000, 2)
    path.write_bytes(members(first, second))
    points = gzip_seek.cached(str(path))
    st = path.stat()
    with open(path, "r+b") as f:  # the second member's header: no longer gzip
        f.seek(len(gzip.compress(first)))
        f.write(b"\0\0\0\0")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert gzip_seek.cached(str(path)) is points  # nothing tells the file changed
    with pytest.raises(TraceError, match="corrupt gzip data"):
        points.read(len(first) + 10, len(first) + 20)
