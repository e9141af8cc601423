"""The per-capture summary is a handler the drop-in is given, never a module it imports.

In this project the host package (`lightx2v/__init__.py`) names the stack's hook, so `<trace>.summary.txt` appears
as before. Copied into a LightX2V checkout, the drop-in imports nothing, not even a module of the user's that
happens to be called `lightx2v.trace_summary`. Code can set its own handler, or none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO_ROOT, subprocess_env

DROP_IN = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"


def capture(tmp_path, pythonpath: str, before: str = "") -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler
        {before}
        TorchTraceProfileContext("hook", tb_dir="tb").run(torch.ones(8).sum)
        print("TRACE", TorchTraceProfiler.last_capture().trace_paths[0])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=subprocess_env(PYTHONPATH=pythonpath, LIGHTX2V_TORCH_PROFILE_DIR=""))
    assert proc.returncode == 0, proc.stderr
    return proc


def trace_of(proc: subprocess.CompletedProcess) -> str:
    return next(line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("TRACE "))


@pytest.mark.slow
def test_in_this_project_the_stacks_summary_is_written(tmp_path):
    proc = capture(tmp_path, str(REPO_ROOT))
    trace = trace_of(proc)
    assert open(trace + ".summary.txt").read().startswith("Trace summary: ")
    assert f"[Profile]   summary: {trace}.summary.txt" in proc.stderr


@pytest.mark.slow
def test_in_a_lightx2v_checkout_nothing_is_imported_not_even_a_module_of_that_name(tmp_path):
    checkout = tmp_path / "LightX2V"
    (checkout / "lightx2v" / "utils").mkdir(parents=True)
    (checkout / "lightx2v" / "trace_summary").mkdir()
    (checkout / "lightx2v" / "__init__.py").write_text("")
    (checkout / "lightx2v" / "utils" / "__init__.py").write_text("")
    (checkout / "lightx2v" / "utils" / "torch_trace_profiler.py").write_bytes(DROP_IN.read_bytes())
    trap = tmp_path / "imported"
    (checkout / "lightx2v" / "trace_summary" / "__init__.py").write_text(
        f"open({str(trap)!r}, 'w').close()\ndef write_capture_summary(path):\n    return ['from the user']\n")
    proc = capture(tmp_path, str(checkout))
    trace = trace_of(proc)
    assert not trap.exists()  # the user's module of that name was never imported
    assert "from the user" not in proc.stderr and "summary:" not in proc.stderr
    assert not os.path.exists(trace + ".summary.txt")


@pytest.mark.slow
def test_a_handler_set_in_code_replaces_the_default_and_none_switches_it_off(tmp_path):
    (tmp_path / "mine").mkdir()
    proc = capture(tmp_path / "mine", str(REPO_ROOT),
                   "TorchTraceProfiler.set_summary_handler(lambda path: ['mine: ' + path.rsplit('/', 1)[1]])")
    trace = trace_of(proc)
    assert f"[Profile]   mine: {trace.rsplit('/', 1)[1]}" in proc.stderr
    assert not os.path.exists(trace + ".summary.txt")

    (tmp_path / "off").mkdir()
    proc = capture(tmp_path / "off", str(REPO_ROOT), "TorchTraceProfiler.set_summary_handler(None)")
    trace = trace_of(proc)
    assert "summary:" not in proc.stderr and os.path.getsize(trace) > 0
    assert not os.path.exists(trace + ".summary.txt")
