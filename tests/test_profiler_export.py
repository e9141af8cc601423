"""The drop-in's export of large traces: progress for a slow one, the peak RSS in the log, gzip equal to the plain."""

from __future__ import annotations

import gzip
import logging
import os
import re
import time

import pytest
import torch

from lightx2v.utils import torch_trace_profiler
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

pytestmark = pytest.mark.usefixtures("fresh_profiler_session")


class KinetoLike:
    """An export_chrome_trace that writes as kineto does (``<path>.tmp`` in pieces, then a rename), slowly."""

    def __init__(self, payload: bytes, pieces: int = 1, pause: float = 0.0) -> None:
        self.payload, self.pieces, self.pause = payload, pieces, pause

    def export_chrome_trace(self, path: str) -> None:
        step = -(-len(self.payload) // self.pieces)
        with open(path + ".tmp", "wb") as f:
            for start in range(0, len(self.payload), step):
                f.write(self.payload[start:start + step])
                f.flush()
                time.sleep(self.pause)
        os.replace(path + ".tmp", path)


def a_real_trace(tmp_path) -> bytes:
    def target(x):
        for _ in range(200):
            x = torch.tanh(x @ x)
        return x

    TorchTraceProfileContext("plain", tb_dir="tb", with_stack=True, record_shapes=True).run(target, torch.ones(8, 8))
    (path,) = TorchTraceProfiler.last_capture().trace_paths
    return open(path, "rb").read()


@pytest.fixture
def log_lines(caplog):
    caplog.set_level(logging.INFO, logger=torch_trace_profiler.logger.name)
    return lambda: [r.getMessage() for r in caplog.records]


def test_gzip_output_is_byte_for_byte_the_plain_trace(tmp_path, monkeypatch):
    payload = a_real_trace(tmp_path)
    monkeypatch.setattr(torch_trace_profiler, "GZIP_CHUNK", 4096)  # many pieces through the compressor
    out = tmp_path / "t.pt.trace.json.gz"
    torch_trace_profiler._export_atomically(KinetoLike(payload, pieces=7), str(out), True)
    assert gzip.decompress(out.read_bytes()) == payload
    with gzip.open(out) as f:  # the header names the trace, not the hidden temporary file
        f.read(1)
        assert f.name == str(out)
    assert sorted(os.listdir(tmp_path)) == ["t.pt.trace.json.gz", "tb"]  # no temporary file left


def test_a_slow_export_reports_progress_with_bytes_done_of_total(tmp_path, monkeypatch, log_lines):
    monkeypatch.setattr(torch_trace_profiler, "EXPORT_PROGRESS_SECONDS", 0.05)
    monkeypatch.setattr(torch_trace_profiler, "EXPORT_PROGRESS_EVERY", 0.05)
    monkeypatch.setattr(torch_trace_profiler, "GZIP_CHUNK", 64_000)
    real_copy = torch_trace_profiler.shutil.copyfileobj

    def slow_copy(src, dst, length=0):  # a slow disk: each piece takes a while
        while piece := src.read(length):
            dst.write(piece)
            time.sleep(0.03)

    monkeypatch.setattr(torch_trace_profiler.shutil, "copyfileobj", slow_copy)
    out = tmp_path / "slow.pt.trace.json.gz"
    payload = os.urandom(999_999) + b"}"  # ends as a whole trace does
    stats = torch_trace_profiler._export_atomically(KinetoLike(payload, pieces=4, pause=0.1), str(out), True)
    assert real_copy is not slow_copy and gzip.decompress(out.read_bytes()) == payload
    progress = [line for line in log_lines() if line.startswith(f"[Profile] exporting {out}: ")]
    assert stats.progress_lines == len(progress) >= 3
    assert any(re.search(r": torch\.profiler writing: \d[\d.]* [KM]?B, ", line) for line in progress)
    gzip_line = r": torch\.profiler wrote 1\.0 MB in \d+ s; gzip: \d[\d.]* [KM]?B of 1\.0 MB \(\d+ %\), \d+ s, RSS \d"
    assert any(re.search(gzip_line, line) for line in progress)


def test_a_small_capture_prints_no_progress_and_its_peak_rss(tmp_path, log_lines):
    a_real_trace(tmp_path)
    lines = log_lines()
    assert not [line for line in lines if "exporting" in line]
    (wrote,) = [line for line in lines if ": wrote " in line]
    match = re.search(r"\(\d[\d.]* [KM]B; exported in \d+\.\d s, peak RSS (\d+\.\d) (MB|GB) during export\)$", wrote)
    assert match, wrote
    peak = float(match[1]) * (1e6 if match[2] == "MB" else 1e9)
    _, high_water = torch_trace_profiler._rss_bytes()
    assert 20e6 < peak <= high_water * 1.001


def test_on_trace_ready_handler_reports_the_export_too(tmp_path, log_lines):
    cfg = torch_trace_profiler.TorchTraceProfileConfig(profile_format="chrome", chrome_path=str(tmp_path / "c.json"),
                                                       use_gzip=True)
    torch_trace_profiler.make_on_trace_ready(cfg)(KinetoLike(b'{"traceEvents": []}'))
    assert gzip.decompress((tmp_path / "c.json.gz").read_bytes()) == b'{"traceEvents": []}'
    assert any(re.search(r"wrote .*c\.json\.gz \(\d+ B; exported in \d\.\d s, peak RSS ", line) for line in log_lines())


def test_a_failing_gzip_pass_is_reported_and_leaves_nothing_behind(tmp_path, monkeypatch):
    """The compressor failing (a full disk under the gzip file) raises to the capture, which reports it; no file,
    visible or hidden, and no watch thread is left."""
    class FullDisk(OSError):
        pass

    def full(src, dst, length=0):
        dst.write(src.read(1000))
        raise FullDisk(28, "No space left on device")

    monkeypatch.setattr(torch_trace_profiler.shutil, "copyfileobj", full)
    out = tmp_path / "t.pt.trace.json.gz"
    with pytest.raises(FullDisk):
        torch_trace_profiler._export_atomically(KinetoLike(os.urandom(49_999) + b"}"), str(out), True)
    assert os.listdir(tmp_path) == []
    import threading

    assert not [t for t in threading.enumerate() if t.name == "lightx2v-export-watch"]


def test_an_export_goes_on_without_a_watch_thread(tmp_path, monkeypatch):
    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(torch_trace_profiler.threading.Thread, "start", no_thread)
    out = tmp_path / "t.json"
    stats = torch_trace_profiler._export_atomically(KinetoLike(b"{}"), str(out), False)
    assert out.read_bytes() == b"{}" and stats.seconds >= 0 and stats.peak_rss
