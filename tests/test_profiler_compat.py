"""Code written against LightX2V's original profiler module keeps working when the drop-in replaces it.

The same calls (tests/programs/original_api_calls.py) run against the original's stand-in
(tests/programs/original_profiler.py) and against the drop-in, each in a fresh process; what a caller sees is
compared: returned values, the files left (TensorBoard-visible traces, the chrome file), the logged lines. The one
intended difference is the original's flaw: its once-per-session flag lives on each profiler object.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, subprocess_env
from helpers.traces import event_names, load_trace, plugin_traces

PROGRAMS = REPO_ROOT / "tests" / "programs"
DROP_IN = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"
ORIGINAL = PROGRAMS / "original_profiler.py"


def run_calls(module: Path, out: Path) -> tuple[dict, str]:
    out.mkdir()
    proc = subprocess.run([sys.executable, str(PROGRAMS / "original_api_calls.py"), str(module), str(out)],
                          capture_output=True, text=True, timeout=300, cwd=out,
                          env=subprocess_env(LIGHTX2V_TORCH_PROFILE="", LIGHTX2V_TORCH_PROFILE_DIR=""))
    assert proc.returncode == 0, proc.stderr
    log, _, seen = proc.stdout.rstrip().rpartition("\n")
    return json.loads(seen), log + proc.stderr


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = tmp_path_factory.mktemp("compat")
    return {"original": (root / "original", *run_calls(ORIGINAL, root / "original")),
            "drop-in": (root / "drop_in", *run_calls(DROP_IN, root / "drop_in"))}


@pytest.mark.slow
def test_returned_values_are_the_originals(both):
    (_, original, _), (_, ours, _) = both["original"], both["drop-in"]
    same = ("steps", "ran_before", "claims", "result", "calls", "ran_after", "exported_chrome_path")
    assert {k: ours[k] for k in same} == {k: original[k] for k in same}
    assert original["steps"] == 3 and original["claims"] == [True, True, False] and original["calls"] == 3
    assert original["result"] == 3 and original["ran_after"] is True
    # The flaw the drop-in fixes: the original lets every new profiler object capture again.
    assert original["second_profiler_claims"] is True and ours["second_profiler_claims"] is False


@pytest.mark.parametrize("folder", ["tb", "own"])  # TorchTraceProfiler.run, and make_on_trace_ready in your profiler
@pytest.mark.slow
def test_each_capture_leaves_one_tensorboard_trace(both, folder):
    for name, (out, _, _) in both.items():
        (trace,) = plugin_traces(out / folder)
        assert any(n.startswith("ProfilerStep#") for n in event_names(load_trace(trace))), name
    # The drop-in puts it in a run directory of its own, which TensorBoard's plugin notices (files added to a
    # run it has loaded it never does); the original writes it straight into the logdir.
    out = both["drop-in"][0]
    assert plugin_traces(out / folder)[0].parent.parent == out / folder
    assert plugin_traces(both["original"][0] / folder)[0].parent == both["original"][0] / folder


def test_make_on_trace_ready_writes_the_chrome_path(both):
    for name, (out, seen, _) in both.items():
        assert seen["exported_chrome_path"] == "c/trace.json", name
        assert "ProfilerStep#0" in event_names(load_trace(out / "c" / "trace.json")), name
        assert [f for f in seen["files"] if f.startswith("c/")] == ["c/trace.json"], name  # no temp file left


def test_log_lines_name_the_call_site_the_logdir_and_how_to_open_it(both):
    for name, (out, _, log) in both.items():
        start = next(line for line in log.splitlines() if line.startswith("[Profile] site: "))
        assert str(out / "tb") in start and "3" in start, name
        assert "[Profile] torch trace export finished." in log, name
        assert f"tensorboard --logdir {out / 'tb'} --port 16006" in log, name
        assert "http://127.0.0.1:16006/#pytorch_profiler" in log, name
