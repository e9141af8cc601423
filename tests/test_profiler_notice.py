"""Recognizing LightX2V's original profiler module by what it leaves in the logdir, and installing the fix.

Real files from real captures: the original layout comes from `torch.profiler.tensorboard_trace_handler`
writing straight into the logdir (what LightX2V's module does at every step), the fixed layout from this
project's module.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from lightx2v.profiler_notice import add_banner, find_original_traces, notice_text, watch_in_background

from conftest import REPO_ROOT

FIXED = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"


def path_without_install_command() -> str:
    """PATH as on a machine where the project is not installed (no console script lightx2v-install-profiler)."""
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if not shutil.which("lightx2v-install-profiler", path=d))


@pytest.fixture
def not_installed(monkeypatch):
    monkeypatch.setenv("PATH", path_without_install_command())


def handler_capture(logdir, steps: int = 2) -> None:
    """What LightX2V's original module does at `steps` steps: a bare handler capture each time."""
    import torch
    import torch.profiler as tp

    for _ in range(steps):
        with tp.profile(activities=[tp.ProfilerActivity.CPU],
                        schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1),
                        on_trace_ready=tp.tensorboard_trace_handler(str(logdir))) as prof:
            torch.ones(4) @ torch.ones(4)
            prof.step()


def checkout(root):
    (root / "lightx2v" / "utils").mkdir(parents=True)
    (root / "lightx2v" / "__init__.py").write_text("")
    (root / "lightx2v" / "utils" / "torch_trace_profiler.py").write_text("# original\n")
    return root


def test_traces_straight_in_the_logdir_are_the_original_module(tmp_path, not_installed):
    logdir = checkout(tmp_path / "LightX2V") / "save_results" / "torch_profile"
    handler_capture(logdir)
    finding = find_original_traces(str(logdir))
    assert finding.files == 2 and finding.checkout == str(tmp_path / "LightX2V")
    text = notice_text(finding)
    assert "LightX2V's original profiler module" in text and str(logdir) in text
    assert "keeps the replaced file as lightx2v/utils/torch_trace_profiler.py.orig and prints the undo" in text
    # neither in the image nor installed, so no lightx2v-install-profiler on PATH: the exact cp of this module
    assert text.splitlines()[-1].strip() == f"cp {FIXED} {tmp_path / 'LightX2V'}/lightx2v/utils/torch_trace_profiler.py"


def test_with_the_install_command_on_path_the_fix_is_that_command(tmp_path, monkeypatch):
    """In the image, or where the project is installed (its console script), the one command to paste."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "lightx2v-install-profiler").write_text("#!/bin/sh\n")
    (bin_dir / "lightx2v-install-profiler").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    logdir = checkout(tmp_path / "LightX2V") / "save_results" / "torch_profile"
    handler_capture(logdir)
    text = notice_text(find_original_traces(str(logdir)))
    assert text.splitlines()[-1].strip() == f"lightx2v-install-profiler {tmp_path / 'LightX2V'}"


def test_many_captures_of_one_process_in_one_folder(tmp_path):
    handler_capture(tmp_path / "myrun", steps=3)
    finding = find_original_traces(str(tmp_path))
    assert finding.files == 3 and finding.example.startswith("myrun/") and finding.checkout is None
    assert "<your LightX2V checkout>" in notice_text(finding)


def test_the_fixed_layout_and_hidden_files_say_nothing(tmp_path, fresh_profiler_session):
    from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext

    with TorchTraceProfileContext("fixed") as profile:
        profile.run(lambda: None)
    logdir = tmp_path / "save_results" / "torch_profile"
    (logdir / ".half.pt.trace.json").write_text("{")
    handler_capture(logdir / "one_capture", steps=1)  # a single bare-handler capture is not the pattern
    assert len(list(logdir.glob("*/*.pt.trace.json"))) == 2
    assert find_original_traces(str(logdir)) is None
    assert find_original_traces(str(tmp_path / "missing")) is None


def test_banner_goes_at_the_top_of_the_page_only_when_needed(tmp_path, monkeypatch, not_installed):
    monkeypatch.delenv("LIGHTX2V_TORCH_PROFILE_DIR", raising=False)
    page = "<html><body>\n<h1>Traces</h1></body></html>"
    assert add_banner(page, str(tmp_path)) == page
    handler_capture(tmp_path / "torch_profile", steps=1)
    banner = add_banner(page, str(tmp_path))
    assert banner.index("id=profiler-notice") < banner.index("<h1>") and "<pre>cp " in banner


def test_the_watcher_logs_once(tmp_path):
    messages = []
    thread = watch_in_background(str(tmp_path), messages.append, interval=0.05)
    handler_capture(tmp_path, steps=2)
    thread.join(timeout=30)
    assert not thread.is_alive() and len(messages) == 1 and messages[0].startswith("[lightx2v] ")


def test_serve_checkout_gives_the_exact_cp_on_the_page_even_with_the_logdir_elsewhere(tmp_path):
    """`serve --checkout PATH` tells the stack its checkout (LIGHTX2V_CHECKOUT): the page's fix is the exact `cp`,
    not `<your LightX2V checkout>`, also when the logdir (`--logdir`) does not sit inside the checkout."""
    from lightx2v import serve

    from conftest import free_port
    from helpers.procs import Server, http_get, wait_until

    root = checkout(tmp_path / "LightX2V")
    (root / "save_results").mkdir()
    logdir = tmp_path / "elsewhere" / "torch_profile"
    handler_capture(logdir, steps=2)
    args = serve.parse_args(["--checkout", str(root), "--logdir", str(logdir), "--no-inference"])
    env = serve.stack_env(args, str(tmp_path), environ={})
    told = {k: env[k] for k in ("LIGHTX2V_CHECKOUT", "LIGHTX2V_TORCH_PROFILE_DIR", "LIGHTX2V_RESULTS_DIR")}
    assert told["LIGHTX2V_CHECKOUT"] == str(root)
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", told["LIGHTX2V_RESULTS_DIR"],
                     "--port", str(port)], LIGHTX2V_BIND_HOST="", PATH=path_without_install_command(), **told)
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200, 30, what="the browser")
        page = http_get(f"http://127.0.0.1:{port}/")[2].decode()
    finally:
        server.stop()
    assert "id=profiler-notice" in page and "&lt;your LightX2V checkout&gt;" not in page
    assert f"<pre>cp {FIXED} {root}/lightx2v/utils/torch_trace_profiler.py</pre>" in page
