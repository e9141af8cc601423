"""The capture's "or, fixed:" hint names a command that works where the capture ran.

Where the image's wrapper `lightx2v-tensorboard` (docker/stack-command) is on PATH, it is the command: it runs the
stack's own interpreter, so it works even where a LightX2V checkout's own `lightx2v` shadows ours (the image runs
the user's code so). Elsewhere `python -m lightx2v.tensorboard`, only where that module is importable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, subprocess_env
from helpers.procs import wait_until

DROP_IN = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"
SCRIPT = ("import torch\nfrom lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext\n"
          "TorchTraceProfileContext('hint', tb_dir='tb').run(torch.ones(4).sum)\n")


def user_checkout(root):
    """A LightX2V checkout with the drop-in installed: its own `lightx2v` package, none of this project's."""
    (root / "lightx2v" / "utils").mkdir(parents=True)
    (root / "lightx2v" / "__init__.py").write_text('"""the user\'s LightX2V"""\n')
    (root / "lightx2v" / "utils" / "__init__.py").write_text("")
    (root / "lightx2v" / "utils" / "torch_trace_profiler.py").write_bytes(DROP_IN.read_bytes())
    return root


def hint_lines(tmp_path, pythonpath: str, path_dirs: list[str], interpreter_dir: str | None = None) -> list[str]:
    interpreter_dir = interpreter_dir or os.path.dirname(sys.executable)
    env = subprocess_env(PYTHONPATH=pythonpath, LIGHTX2V_TORCH_PROFILE_DIR="",
                         PATH=os.pathsep.join([*path_dirs, interpreter_dir, "/usr/bin", "/bin"]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "trace ready" in proc.stderr, proc.stderr
    return [line.strip() for line in proc.stderr.splitlines() if line.strip().startswith("or, fixed:")]


@pytest.mark.slow
def test_in_this_projects_python_the_hint_is_its_command_else_the_module(tmp_path):
    """With the project installed, its console script `lightx2v-tensorboard` (beside the interpreter); where only
    the module is importable (a checkout on PYTHONPATH, nothing installed), `python -m`."""
    installed = shutil.which("lightx2v-tensorboard", path=os.path.dirname(sys.executable))
    (line,) = hint_lines(tmp_path, str(REPO_ROOT), [])
    command = "lightx2v-tensorboard" if installed else "python -m lightx2v.tensorboard"
    assert line.startswith(f"or, fixed:     {command} --logdir {tmp_path / 'tb'} --port ")
    bare = tmp_path / "bare_bin"  # this interpreter without the console scripts beside it
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)
    (line,) = hint_lines(tmp_path, str(REPO_ROOT), [], interpreter_dir=str(bare))
    assert line.startswith(f"or, fixed:     python -m lightx2v.tensorboard --logdir {tmp_path / 'tb'} --port ")


@pytest.mark.parametrize("wrapper_on_path", [True, False])
@pytest.mark.slow
def test_where_the_users_lightx2v_shadows_ours_the_hint_is_the_images_wrapper(tmp_path, wrapper_on_path):
    checkout = user_checkout(tmp_path / "LightX2V")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if wrapper_on_path:  # as docker/install-stack.sh links it
        (bin_dir / "lightx2v-tensorboard").symlink_to(REPO_ROOT / "docker" / "stack-command")
    lines = hint_lines(tmp_path, str(checkout), [str(bin_dir)])
    if wrapper_on_path:
        (line,) = lines
        assert line.startswith(f"or, fixed:     lightx2v-tensorboard --logdir {tmp_path / 'tb'} --port ")
        return
    # No wrapper: a line only if the module really imports in that environment (an editable install of this
    # project may still provide it beside the user's package): then pip's console script beside the interpreter
    # where the project is installed (it imports the same way), else the module; otherwise no line at all.
    probe = subprocess.run([sys.executable, "-c", "import lightx2v.tensorboard.__main__"], capture_output=True,
                           env=subprocess_env(PYTHONPATH=str(checkout)), cwd=tmp_path, timeout=120)
    installed = shutil.which("lightx2v-tensorboard", path=os.path.dirname(sys.executable))
    command = "lightx2v-tensorboard" if installed else "python -m lightx2v.tensorboard"
    assert [line.split("--logdir")[0].strip() for line in lines] == (
        [f"or, fixed:     {command}"] if probe.returncode == 0 else [])


@pytest.mark.slow
def test_beside_a_running_tensorboard_of_the_logdir_the_hint_opens_it(tmp_path):
    """A capture under `lightx2v-serve` (or beside any TensorBoard of that logdir): its port, not a command that
    would start a second one on the port it holds."""
    from conftest import free_port
    from helpers.procs import answers, launcher

    port = free_port()
    server = launcher(tmp_path / "tb", port)
    try:
        wait_until(lambda: answers(port), 90, what="TensorBoard")
        env = subprocess_env(PYTHONPATH=str(REPO_ROOT), LIGHTX2V_TORCH_PROFILE_DIR="")
        proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env,
                              cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    assert f"TensorBoard:   already serving this logdir on port {port}" in proc.stderr, proc.stderr
    assert "tensorboard --logdir" not in proc.stderr and "or, fixed:" not in proc.stderr
    assert f"open:          http://127.0.0.1:{port}/#pytorch_profiler" in proc.stderr
