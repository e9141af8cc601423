"""No environment value costs the caller the result, and the drop-in reads each variable as the stack does.

The drop-in reads its variables itself, inside the user's ``run()`` (it stands alone in a user's checkout); the stack
reads the same ones through ``lightx2v.settings``. Here: a real capture in a child Python under hostile values of
every variable the drop-in reads returns the result, a bad value is said once and its default kept, and a folder
variable means the same folder to the process that writes (the drop-in) and to the ones that watch (the viewers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lightx2v import settings
from lightx2v.utils import torch_trace_profiler as dropin

from conftest import subprocess_env
from helpers.traces import plugin_traces

# What the drop-in reads from the environment, on the caller's path: its own five and the launcher's.
DROP_IN_VARIABLES = (dropin.ENV_ENABLE, dropin.ENV_DIR, dropin.ENV_PORT, dropin.ENV_REMOTE, dropin.ENV_MEMORY_SNAPSHOT,
                     "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
# Values str.isdigit() takes and int() refuses or reads otherwise, blanks, numbers past any range or int()'s digit
# limit, text that is not UTF-8 (a surrogate escape), path-like text.
HOSTILE = ("¹", "²³", "٣", "１２", " \t ", "-1", "+7", "1_000", "1e3", "99999999999999999999", "9" * 5000, "\udcff",
           "~", "a/../b")


def run_child(cwd: Path, script: str, **env: str) -> subprocess.CompletedProcess:
    """``script`` in a child Python in ``cwd``, the drop-in's variables unset but for ``env``, its home in cwd."""
    (cwd / "home").mkdir(exist_ok=True)
    clean = {var: "" for var in DROP_IN_VARIABLES} | {"HOME": str(cwd / "home")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=240,
                          env=subprocess_env(**{**clean, **env}), cwd=cwd)


@pytest.mark.slow
def test_a_superscript_port_leaves_the_result_and_the_trace_and_is_said_once(tmp_path):
    """``LIGHTX2V_TENSORBOARD_PORT=¹``: str.isdigit() takes it, int() does not; the capture still ends with the
    caller's result, and the hints keep the default port with one warning naming the variable."""
    proc = run_child(tmp_path, """
        import torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler
        print(TorchTraceProfileContext("port", tb_dir="tb").run(lambda: "the result"))
        TorchTraceProfiler.reset_session()
        print(TorchTraceProfileContext("port", tb_dir="tb").run(lambda: "again"))
    """, LIGHTX2V_TENSORBOARD_PORT="¹", LIGHTX2V_TORCH_PROFILE_REMOTE="0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["the result", "again"]
    assert len(plugin_traces(tmp_path / "tb")) == 2
    assert proc.stderr.count("http://127.0.0.1:16006/#pytorch_profiler") == 2
    warnings = [line for line in proc.stderr.splitlines() if "LIGHTX2V_TENSORBOARD_PORT" in line]
    assert warnings == ["[Profile] LIGHTX2V_TENSORBOARD_PORT='¹' is not a port number 1-65535; keeping the "
                        "default: 16006"]


@pytest.mark.slow
def test_no_environment_value_raises_into_run(tmp_path):
    """Every variable the drop-in reads, all at once, set to each hostile value in turn: each capture returns the
    caller's result (the drop-in reads the environment at each capture, so one child tries them all)."""
    proc = run_child(tmp_path, f"""
        import os, torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler
        for n, value in enumerate({HOSTILE!r}):
            for var in {DROP_IN_VARIABLES!r}:
                os.environ[var] = value
            TorchTraceProfiler.reset_session()
            result = TorchTraceProfileContext(f"hostile{{n}}", tb_dir="tb").run(lambda: n)
            assert result == n, (value, result)
            os.environ[{dropin.ENV_DIR!r}] = ""
            print(TorchTraceProfiler.capture_status()["captures"], flush=True)
    """)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == [str(n + 1) for n in range(len(HOSTILE))]
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------- one rule in the drop-in and the stack
@pytest.mark.parametrize("value", ["7007", " 7007 ", "007007", "1", "65535", "0", "65536", "-5", "+7007", "7_007",
                                   "70x", "¹", "²³", "٣", "１２", "9" * 5000, "", "  "])
def test_the_hint_port_is_the_registrys_port_or_the_default(monkeypatch, value):
    """Where the registry takes a value, the drop-in prints that port; where it refuses one (with a line naming
    the variable), the drop-in keeps its default; never an exception from either but the registry's SettingError."""
    monkeypatch.setenv(dropin.ENV_PORT, value)
    try:
        expected = settings.get(dropin.ENV_PORT) or 16006
    except settings.SettingError as exc:
        assert str(exc) == f"{dropin.ENV_PORT}={value!r}: expected a port number 1-65535"
        expected = 16006
    assert dropin._hint_port(16006) == expected


@pytest.mark.parametrize("value", ["/abs/tr", " /abs/tr ", "rel/tr", "~/tr", " ~/tr ", "~", "~/", "   ", "", "\t",
                                   "a b", "~nobody_here_at_all/x", "x/~/y"])
def test_the_profile_dir_is_one_folder_for_the_writer_and_the_viewers(tmp_path, monkeypatch, value):
    """The folder the drop-in writes to is the one the viewers watch (``lightx2v.tensorboard``: the registry's
    value, else the drop-in's default, from the same cwd), for every spelling of it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(dropin.ENV_DIR, value)
    watched = os.path.abspath(settings.get(dropin.ENV_DIR) or dropin.DEFAULT_TB_DIR)
    assert dropin.resolve_log_dir() == watched
    assert dropin.resolve_log_dir("given") == (watched if value.strip() else str(tmp_path / "given"))


@pytest.mark.parametrize("value", ["/abs/assets", " /abs/assets ", "~/assets", "   ", "", "rel/assets"])
def test_the_assets_dir_is_one_folder_for_the_assets_package_and_the_registry(tmp_path, monkeypatch, value):
    """``lightx2v.assets`` stands alone too (the image's assets stage copies it alone): its own reading of its
    folder variable, checked against the registry's."""
    from lightx2v import assets

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    environ = {assets.ENV_ASSETS_DIR: value}
    registry = settings.get(settings.ASSETS_DIR, environ)
    assert assets.assets_dir(environ) == (Path(registry) if registry else assets.assets_dir({}))


@pytest.mark.slow
@pytest.mark.parametrize("value,where", [("~/tr", "home/tr"), (" ~/tr ", "home/tr"),
                                         ("   ", "save_results/torch_profile")])
def test_a_capture_lands_where_the_viewers_watch(tmp_path, value, where):
    """Through run() in a child: ``~/tr`` is ``$HOME/tr`` (not ``<cwd>/~/tr``), blanks are unset (not a folder named
    by spaces), and the logdir the capture reports is the one ``python -m lightx2v.tensorboard`` would watch."""
    proc = run_child(tmp_path, """
        import json, os, torch
        from lightx2v import settings
        from lightx2v.utils.torch_trace_profiler import (DEFAULT_TB_DIR, ENV_DIR, TorchTraceProfileContext,
                                                         TorchTraceProfiler)
        TorchTraceProfileContext("dir").run(torch.ones(3).sum)
        print(json.dumps([TorchTraceProfiler.last_capture().log_dir,
                          os.path.abspath(settings.get(ENV_DIR) or DEFAULT_TB_DIR)]))
    """, LIGHTX2V_TORCH_PROFILE_DIR=value, LIGHTX2V_TORCH_PROFILE_REMOTE="0")
    assert proc.returncode == 0, proc.stderr
    written, watched = json.loads(proc.stdout)
    assert written == watched == str(tmp_path / where)
    assert len(plugin_traces(tmp_path / where)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"home", where.split("/")[0]})
