"""The drop-in's messages: shown by default in a plain script, through the application's logging once it has
some, and never twice."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import subprocess_env

LOGGER = "lightx2v.utils.torch_trace_profiler"


@pytest.mark.slow
def test_each_message_once_before_and_after_the_application_configures_logging(tmp_path):
    """A plain script (no logging configured) sees the capture's lines on stderr; after it calls
    ``logging.basicConfig()``, the next capture's lines come through the root handler, each exactly once."""
    script = textwrap.dedent("""
        import logging, sys, torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

        TorchTraceProfiler.set_summary_handler(None)

        def capture(label):
            TorchTraceProfiler.reset_session()
            TorchTraceProfileContext(label, tb_dir="tb", wait=0, warmup=1, active=1).run(torch.ones(4).sum)

        capture("before")
        sys.stderr.write("=== basicConfig\\n")
        logging.basicConfig()
        capture("after")
        print("handlers of the profiler's logger:", len(logging.getLogger(%r).handlers))
    """ % LOGGER)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(LIGHTX2V_TORCH_PROFILE_REMOTE="0"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    before, after = proc.stderr.split("=== basicConfig\n")
    for label, text in (("before", before), ("after", after)):
        for message in (f"[Profile] {label}: capturing 2 calls", f"[Profile] {label}: wrote ",
                        f"[Profile] {label}: trace ready"):
            assert text.count(message) == 1, (message, proc.stderr)
    assert before.startswith("[Profile] before: capturing 2 calls"), before  # bare, as printed
    assert f"INFO:{LOGGER}:[Profile] after: capturing 2 calls" in after, after  # through the root handler
    assert "[Profile] before" not in after and "[Profile] after" not in before
    assert proc.stdout.strip() == "handlers of the profiler's logger: 0"
