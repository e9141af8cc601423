"""Several trace browsers on one folder: each keeps its own discovery file (`<root>/.trace_browser/<host>_<pid>.json`),
a stopping one removes only its own, and the real profiler keeps printing the "Perfetto page" line of the newest
one still running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from lightx2v.utils.torch_trace_profiler import TRACE_BROWSER_DIR, TRACE_BROWSER_FILE, trace_browser_url

from conftest import free_port, subprocess_env
from helpers.procs import Server, http_get, wait_until

CAPTURE = """import torch
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
with TorchTraceProfileContext('discovery probe') as profile:
    profile.run(torch.nn.Linear(8, 8), torch.randn(2, 8))
"""


def start(root, url: str) -> tuple[Server, int]:
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                     "--host", "127.0.0.1", "--url", url], LIGHTX2V_BIND_HOST="")
    wait_until(lambda: http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200, 30, what="a trace browser")
    wait_until(lambda: discovery_of(root).get(server.pid), 10, what="its discovery file")
    return server, port


def discovery_of(root) -> dict[int, dict]:
    """pid -> entry of every discovery file in the folder."""
    folder = root / TRACE_BROWSER_DIR
    entries = [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.is_dir() else []
    return {entry["pid"]: entry for entry in entries}


def perfetto_line(workdir) -> str | None:
    """The "Perfetto page" line a real capture under `workdir/save_results/torch_profile` prints, if any."""
    result = subprocess.run([sys.executable, "-c", CAPTURE], cwd=workdir, capture_output=True, text=True,
                            env=subprocess_env(LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_TORCH_PROFILE="1"),
                            timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stderr.splitlines() if "Perfetto page:" in line]
    return lines[0] if lines else None


@pytest.mark.slow
def test_a_second_browser_stopping_leaves_the_first_ones_page(tmp_path):
    root = tmp_path / "save_results"
    root.mkdir()
    first, first_port = start(root, "http://first.example:9001/")
    try:
        second, second_port = start(root, "http://second.example:9002/")
        try:
            entries = discovery_of(root)
            assert set(entries) == {first.pid, second.pid}
            assert entries[first.pid]["port"] == first_port and entries[second.pid]["port"] == second_port
            assert {p.name for p in (root / TRACE_BROWSER_DIR).iterdir()} == \
                {f"{socket.gethostname()}_{first.pid}.json", f"{socket.gethostname()}_{second.pid}.json"}
            assert perfetto_line(tmp_path).startswith("Perfetto page: http://second.example:9002/")  # the newest
        finally:
            second.stop()
        assert second.proc.returncode == 0 and set(discovery_of(root)) == {first.pid}
        assert perfetto_line(tmp_path).startswith("Perfetto page: http://first.example:9001/")  # still there
    finally:
        first.stop()
    assert discovery_of(root) == {}
    assert perfetto_line(tmp_path) is None


@pytest.mark.slow
def test_a_killed_browsers_file_is_skipped_then_cleared(tmp_path):
    root = tmp_path / "save_results"
    root.mkdir()
    killed, _ = start(root, "http://killed.example:1/")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.proc.wait(10)
    assert set(discovery_of(root)) == {killed.pid}  # left behind by kill -9: its port no longer answers
    assert trace_browser_url(str(root / "torch_profile" / "run" / "t.pt.trace.json")) is None
    survivor, _ = start(root, "http://survivor.example:2/")
    try:
        assert set(discovery_of(root)) == {survivor.pid}  # the dead one's file removed at start
        assert trace_browser_url(str(root / "torch_profile" / "run" / "t.pt.trace.json")) == \
            "http://survivor.example:2/"
    finally:
        survivor.stop()
        killed.stop()


def test_the_single_file_of_an_older_stack_is_still_read(tmp_path):
    """An older trace browser wrote one `<root>/.trace_browser.json`; the profiler still finds its page."""
    root = tmp_path / "save_results"
    root.mkdir()
    other_root = tmp_path / "elsewhere"
    other_root.mkdir()
    server, port = start(other_root, "http://live.example:3/")  # something that answers on a port
    try:
        (root / TRACE_BROWSER_FILE).write_text(json.dumps({"pid": 1, "port": port, "url": "http://older.example/"}))
        assert trace_browser_url(str(root / "torch_profile" / "t.pt.trace.json")) == "http://older.example/"
    finally:
        server.stop()
    assert trace_browser_url(str(root / "torch_profile" / "t.pt.trace.json")) is None
