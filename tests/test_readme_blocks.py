"""Every shell block of README.md is run by a test or marked as needing Docker or a GPU (tests/helpers/
readme_blocks.py reads the markers), and the blocks this machine can run are run here as a user types them: the
servers started, checked where the README says to look, and stopped. The first block, on a fresh clone with a stock
Debian python3, is tests/docker_tests/test_new_user.py's."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse

import pytest

from conftest import REPO_ROOT, free_port, missing_tool, subprocess_env
from helpers.procs import Server, answers, http_get, runs, wait_for
from helpers.readme_blocks import block_run_by, marker_problems, shell_blocks

THIS = "tests/test_readme_blocks.py"
ORIGINAL = REPO_ROOT / "tests" / "programs" / "original_profiler.py"  # LightX2V's module, as a stand-in
FIXED = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"
START_TIMEOUT = 180  # supervisord, TensorBoard and the trace browser on a loaded 2-core machine
# What `lightx2v-serve` must not inherit from the machine running the tests: its ports and folders come from the
# block (or from the variables the test sets on purpose).
CLEAN = {"TENSORBOARD_PORT": "", "TRACE_BROWSER_PORT": "", "LIGHTX2V_TORCH_PROFILE_DIR": "",
         "LIGHTX2V_RESULTS_DIR": "", "LIGHTX2V_INFER_CMD": "", "LIGHTX2V_TENSORBOARD_PORT": ""}


def command(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing_tool(f"`{name}` is not on PATH: install the project (`pip install -e '.[serve]'`)")
    return path


# ------------------------------------------------------------------------------------------------ the markers
def test_every_shell_block_is_run_by_a_test_or_marked_as_needing_docker_or_a_gpu():
    assert len(shell_blocks()) >= 4
    assert marker_problems() == []


def test_a_block_without_a_marker_or_with_a_wrong_one_is_named(tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text(
        "# Doc\n\n```bash\nunmarked\n```\n\n<!-- needs: docker -->\n```bash\nok\n```\n\n<!-- needs: luck -->\n"
        "```bash\nno\n```\n\n<!-- runs: tests/test_readme_blocks.py::test_nothing_of_that_name -->\n```sh\nno\n"
        "```\n\n<!-- runs: tests/test_readme_blocks.py::test_the_ports_block -->\n\n```bash\nnot right before\n"
        "```\n\n```python\nnot a shell block\n```\n", encoding="utf-8")
    problems = marker_problems(doc)
    assert [p.split(":", 2)[1] for p in problems] == ["3", "13", "18", "24"], problems
    assert "no marker" in problems[0] and "needs: luck" in problems[1] and "no such test" in problems[2]
    assert "no marker" in problems[3]  # a blank line between the comment and the fence: not its marker


# ---------------------------------------------------------------------------------------------- the ports block
@pytest.mark.slow
def test_the_ports_block(tmp_path):
    """Other ports on the server, and the laptop's forward that keeps the trace browser on 9001 for Perfetto's
    "Open by URL": the serve line runs (on free ports: the README's may be taken on a shared machine), prints the
    README's laptop line for the ports it was given, and that line forwards the server's ports, parsed by ssh
    itself; the trace browser, reached as the laptop's 9001, hands Perfetto a URL on 9001."""
    serve_line, ssh_line = block_run_by(f"{THIS}::test_the_ports_block").commands()
    argv = shlex.split(serve_line)
    assert argv[0] == "lightx2v-serve", serve_line
    doc_tb, doc_browser = argv[argv.index("--port") + 1], argv[argv.index("--browser-port") + 1]
    tb, browser = free_port(), free_port()
    mine = {doc_tb: str(tb), doc_browser: str(browser)}
    server = Server([command(argv[0]), *(mine.get(arg, arg) for arg in argv[1:])], cwd=tmp_path, **CLEAN)
    try:
        wait_for(server, lambda: answers(tb) and answers(browser), START_TIMEOUT,
                 f"TensorBoard on {tb} and the trace browser on {browser}")
        wait_for(server, lambda: "ssh -N" in server.output(), 30, "the printed ssh line")
        # the printed line is the README's laptop line: the laptop's 16006 and 9001 to the ports serve was given
        printed = f"ssh -N -L 16006:127.0.0.1:{tb} -L 9001:127.0.0.1:{browser} user@"
        assert printed in server.output(), server.output()[-2000:]
        assert ssh_line.startswith(f"ssh -N -L 16006:127.0.0.1:{doc_tb} -L 9001:127.0.0.1:{doc_browser} user@")

        # the laptop line: ssh's own reading of it (-G prints the configuration and connects nowhere)
        ssh = shutil.which("ssh") or missing_tool("needs ssh (apt-get install openssh-client)")
        ssh_argv = shlex.split(ssh_line)
        assert ssh_argv[0] == "ssh", ssh_line
        config = subprocess.run([ssh, "-G", *ssh_argv[1:]], capture_output=True, text=True, timeout=30, check=True)
        forwards = re.findall(r"^localforward (\d+) \[?([\d.]+)\]?:(\d+)$", config.stdout, re.M)
        assert sorted(forwards) == sorted([("16006", "127.0.0.1", doc_tb), ("9001", "127.0.0.1", doc_browser)]), (
            f"the laptop line must forward 16006 (the URL above) to the server's --port and 9001 (Perfetto's "
            f"'Open by URL') to its --browser-port: {forwards}")

        # the embedded inference's trace, as the laptop sees it through that forward (Host 127.0.0.1:9001)
        def index_through_the_forward() -> str:
            status, _, body = http_get_as(f"http://127.0.0.1:{browser}/", "127.0.0.1:9001")
            return body.decode() if status == 200 and "<a class=deep href=" in body.decode() else ""

        page = wait_for(server, index_through_the_forward, START_TIMEOUT, "the embedded inference's trace listed")
        deep_links = re.findall(r'<a class=deep href="[^"]*#!/\?url=([^"]+)"', page)
        assert deep_links and all(urllib.parse.unquote(url).startswith("http://127.0.0.1:9001/files/")
                                  for url in deep_links), deep_links
    finally:
        server.stop(timeout=60)


def http_get_as(url: str, host: str):
    """A GET with the Host header a browser sends through the forward (the laptop's port, not the server's)."""
    import urllib.request

    request = urllib.request.Request(url, headers={"Host": host})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers, response.read()


# ------------------------------------------------------------------------------------- your own LightX2V, no Docker
def _stand_in_checkout(home):
    """~/LightX2V as a LightX2V checkout: its own `lightx2v` package with LightX2V's original profiler module."""
    checkout = home / "LightX2V"
    (checkout / "lightx2v" / "utils").mkdir(parents=True)
    (checkout / "lightx2v" / "__init__.py").write_text("")
    (checkout / "lightx2v" / "utils" / "__init__.py").write_text("")
    (checkout / "lightx2v" / "utils" / "torch_trace_profiler.py").write_bytes(ORIGINAL.read_bytes())
    (checkout / "README.md").write_text("a LightX2V checkout\n")
    return checkout


USER_SCRIPT = """
import torch
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext

a = torch.randn(64, 64)
with TorchTraceProfileContext("readme_user", with_stack=False) as profile:
    profile.run(torch.mm, a, a)
"""


@pytest.mark.slow
def test_the_without_docker_block(tmp_path):
    """The fixed module goes into ~/LightX2V, and `lightx2v-serve --checkout` lists what a script run in that
    checkout (another shell, its own `lightx2v` on PYTHONPATH) captures with it."""
    install_line, serve_line = block_run_by(f"{THIS}::test_the_without_docker_block").commands()
    home = tmp_path / "home"
    checkout = _stand_in_checkout(home)
    env = {"HOME": str(home), **CLEAN}
    installed = subprocess.run(["bash", "-c", install_line], cwd=tmp_path, env=subprocess_env(**env),
                               capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    module = checkout / "lightx2v" / "utils" / "torch_trace_profiler.py"
    assert module.read_bytes() == FIXED.read_bytes()
    assert module.with_name("torch_trace_profiler.py.orig").read_bytes() == ORIGINAL.read_bytes()
    assert "undo" in installed.stdout

    tb, browser = free_port(), free_port()
    command(shlex.split(serve_line)[0])
    # the ports by their documented variables (the block names none); `exec` so the stop reaches serve itself
    server = Server(["bash", "-c", f"exec {serve_line}"], cwd=tmp_path,
                    **{**env, "TENSORBOARD_PORT": str(tb), "TRACE_BROWSER_PORT": str(browser)})
    try:
        wait_for(server, lambda: answers(tb) and answers(browser), START_TIMEOUT,
                 f"TensorBoard on {tb} and the trace browser on {browser}")
        assert str(checkout / "save_results" / "torch_profile") in server.output()
        user = subprocess.run([sys.executable, "-c", USER_SCRIPT], cwd=checkout, capture_output=True, text=True,
                              timeout=300, env={**subprocess_env(), "PYTHONPATH": str(checkout), "HOME": str(home),
                                                "LIGHTX2V_TORCH_PROFILE_DIR": ""})
        assert user.returncode == 0, user.stderr[-2000:]
        wait_for(server, lambda: any(run.endswith("_readme_user") for run in runs(tb)), 60,
                 "the user's capture listed by TensorBoard")
        status, _, body = http_get(f"http://127.0.0.1:{browser}/")
        assert status == 200 and "_readme_user" in body.decode()
    finally:
        server.stop(timeout=60)
    assert server.proc.returncode == 0, server.output()[-2000:]
