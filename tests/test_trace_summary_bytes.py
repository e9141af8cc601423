"""One byte unit: the trace browser's list, its Overview and the terminal summary print one file's size alike.

They all go through trace_summary.render.format_bytes (decimal units); the list once had a 1024-based copy that
printed 756.2 KB for the 774.4 KB the others showed.
"""

from __future__ import annotations

import gzip
import html
import re
import subprocess
import sys

import pytest

from lightx2v.trace_summary.render import format_bytes

from conftest import H200_TRACE, free_port, subprocess_env
from helpers.procs import Server, http_get, wait_until


@pytest.mark.slow
def test_list_overview_and_summary_print_the_same_size(tmp_path):
    root = tmp_path / "save_results"
    root.mkdir()
    trace = root / "h200.pt.trace.json"
    trace.write_bytes(gzip.decompress(H200_TRACE.read_bytes()))  # 714 KB: KB differ by 1000 vs 1024
    size = format_bytes(trace.stat().st_size)
    assert size == f"{trace.stat().st_size / 1000:.1f} KB" != f"{trace.stat().st_size / 1024:.1f} KB"
    summary = subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", str(trace)], capture_output=True,
                             text=True, timeout=120, env=subprocess_env())
    assert summary.returncode == 0, summary.stderr
    assert f"file      {trace} ({size}, " in summary.stdout
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port)],
                    LIGHTX2V_BIND_HOST="")
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200, 30, what="the browser")
        status, _, body = http_get(f"http://127.0.0.1:{port}/")
        assert status == 200
        (row,) = re.findall(r"<tr><td class=path>h200\.pt\.trace\.json</td><td class=num>([^<]*)</td>", body.decode())
        assert html.unescape(row) == size
        status, _, page = http_get(f"http://127.0.0.1:{port}/overview/h200.pt.trace.json")
        assert status == 200 and f" · {size} · " in html.unescape(page.decode())
    finally:
        server.stop()


@pytest.mark.parametrize("size", [0, 523, 999, 1000, 757_512, 999_949, 1_500_000_000, 12_345_678_901_234])
def test_the_profiler_log_prints_sizes_by_the_same_rule(tmp_path, size):
    """The drop-in stands alone, so it keeps its own copy of the byte rule: "wrote ... (size)" must read as the list."""
    from lightx2v.utils.torch_trace_profiler import _size

    path = tmp_path / "sized"
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no disk used
    assert _size(str(path)) == format_bytes(size)
