"""Peak memory of the summary when the Python frames overlap without nesting (issue 36 E): a faulty tracer or a
replay writes each step's ``<module>`` frame running into the next step's. Each such frame used to become the
child of the one before, a frame tree as deep as the trace (15,643 nodes instead of 100 here; peak RSS 1.07x the
file at 100 MB, 1.3x at 200 MB, against 0.44x and 0.33x for the same trace nested). Now a frame that starts inside
another and ends after it closes it (``frames.FrameIndex``), and memory is what a nested trace needs.

The summary runs in a child process on the real H200 fixture replicated to ~100 MB (tests/helpers/replica.py);
the child reports its own peak (``VmHWM``: the high-water mark of its own address space, which, unlike
``ru_maxrss``, does not count the pytest process it was forked from)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import subprocess_env
from helpers.replica import FIXTURE, replicate

SIZE_MB = 100
MEMORY_BOUND = 0.7  # peak RSS / file size: 0.44 for this trace nested or overlapping now, 1.07 before
CHILD = """
import sys
from lightx2v.trace_summary.analyze import analyze_trace

summary = analyze_trace(sys.argv[1])
tree = summary.tables.frames
with open("/proc/self/status") as f:
    peak_kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(len(tree.names), len(summary.steps), peak_kb)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the child's VmHWM from /proc")
def test_frames_running_into_the_next_steps_keep_the_summarys_memory_bounded(tmp_path):
    trace = tmp_path / "overrun.pt.trace.json"
    copies = replicate(FIXTURE, trace, SIZE_MB, module_overrun=0.5)
    done = subprocess.run([sys.executable, "-c", CHILD, str(trace)], env=subprocess_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    nodes, steps, peak_kb = map(int, done.stdout.split())
    size_mb = trace.stat().st_size / 1e6
    ratio = peak_kb / 1024 / size_mb
    assert steps == copies
    assert nodes == 100, f"the frame tree has {nodes} nodes (100 when each step's frames are siblings)"
    assert ratio <= MEMORY_BOUND, (f"peak RSS {peak_kb / 1024:.0f} MB = {ratio:.2f}x the {size_mb:.0f} MB file "
                                   f"(bound {MEMORY_BOUND}x)")
