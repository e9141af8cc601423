"""A capture with profile_memory=True as a person sees it, with no internet in the browser (Debian's headless
Chromium, every host but 127.0.0.1 unresolvable): TensorBoard's Memory view (our launcher) keeps its tables and
shows the notice where its Google-drawn curve would be.

The capture is real: ``tests/programs/memory_capture.py`` through the drop-in on the CPU (4 MB, 8 MB, 2 MB per
call; the 4 MB freed before the 2 MB).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_offline_views import choose_view, plugin_frame

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.browser import chromium
from helpers.procs import Server, answers, launcher, runs, wait_until

PROGRAM = REPO_ROOT / "tests" / "programs" / "memory_capture.py"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory") / "save_results"
    run = subprocess.run([sys.executable, str(PROGRAM), str(root / "torch_profile")], capture_output=True, text=True,
                         timeout=300, cwd=root.parent, env=subprocess_env(LIGHTX2V_TORCH_PROFILE_REMOTE="0"))
    assert run.returncode == 0, run.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def browser_port(results):
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(results), "--port", str(port),
                     "--host", "127.0.0.1"])
    try:
        wait_until(lambda: answers(port), 60, what="the trace browser")
        yield port
    finally:
        server.stop()


@pytest.fixture(scope="module")
def driver():
    with chromium(offline=True) as browser:
        yield browser


def test_tensorboard_memory_view_keeps_its_tables_and_shows_the_notice_for_its_curve(driver, results, browser_port,
                                                                                     tmp_path):
    port = free_port()
    server = launcher(results / "torch_profile", port)
    try:
        wait_until(lambda: runs(port), 90, what="the memory run")
        plugin_frame(driver, port)
        choose_view(driver, "Memory")
        read = """return [(document.getElementById('lightx2v-charts-banner') || {}).innerText || '',
                          Array.from(document.querySelectorAll('main .lightx2v-offline-notice')).map(n => n.innerText),
                          (document.querySelector('main') || document.body).innerText]"""
        # the allocation table lists the 8 MB block (7812.5 KB) once the view has its data
        banner, notices, text = wait_until(lambda: (t := driver.execute_script(read))[1] and "7812.5" in t[2] and t,
                                           90, interval=0.3, what="the Memory view's notice and tables")
        assert "Memory View" in text and "3906.25" in text  # the 4 MB block too: the tables work offline
        assert "Operator, Kernel and Memory views need it" in banner
        assert f"http://127.0.0.1:{browser_port}/" in banner and "memory curve" in banner
        assert "www.gstatic.com" in notices[0] and f"http://127.0.0.1:{browser_port}/" in notices[0]
        assert driver.execute_script("return document.querySelectorAll('[role=progressbar]').length") == 0
        driver.switch_to.default_content()
        driver.save_screenshot(str(tmp_path / "tensorboard_memory_view.png"))
    finally:
        server.stop()
