"""Every `python -m lightx2v.*` entry point answers `--help` (and its subcommands' `--help`) with exit 0, no
traceback, and, for the stack's programs, every user setting it reads with its default. The entry points are found
by walking the package, so a new one is covered without editing this file."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lightx2v import settings

from conftest import REPO_ROOT, subprocess_env

PACKAGE = REPO_ROOT / "lightx2v"
SUBCOMMANDS = {"lightx2v.capture": (["arm"], ["list"]), "lightx2v.assets": (["install"], ["status"])}


def entry_points() -> list[str]:
    """`lightx2v.<pkg>` for each package with a __main__.py, `lightx2v.<module>` for each module run as a script."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        if path.name == "__main__.py":
            found.append(module.removesuffix(".__main__"))
        elif 'if __name__ == "__main__":' in path.read_text():
            found.append(module)
    return sorted(set(found))


def run_help(module: str, *args: str) -> subprocess.CompletedProcess:
    clean = {name: "" for name in settings.SETTINGS}  # the defaults, whatever this shell has set
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=180,
                          cwd=REPO_ROOT, env=subprocess_env(**clean))


def test_the_entry_points_are_found():
    found = entry_points()
    assert {f"lightx2v.{p}" for p in settings.PROGRAMS} <= set(found)
    assert {"lightx2v.trace_summary", "lightx2v.infer", "lightx2v.install_profiler"} <= set(found)


@pytest.mark.parametrize("module", entry_points())
@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.slow
def test_help_works_and_shows_our_defaults(module, flag):
    result = run_help(module, flag)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "usage:" in result.stdout
    program = module.split(".")[-1]
    if program in settings.PROGRAMS:
        for setting in settings.SETTINGS.values():
            if program in setting.read_by and setting.scope == settings.USER:
                assert setting.name in result.stdout, f"{module} --help does not name {setting.name}"
                assert setting.shown_default in result.stdout, f"{module} --help omits {setting.name}'s default"


@pytest.mark.parametrize("module,args", [(m, a) for m, cases in SUBCOMMANDS.items() for a in cases])
def test_subcommand_help_works(module, args):
    result = run_help(module, *args, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "usage:" in result.stdout


@pytest.mark.slow
def test_tensorboard_help_shows_ours_then_tensorboard_s():
    out = run_help("lightx2v.tensorboard", "--help").stdout
    ours, _, theirs = out.partition("TensorBoard's own flags:")
    assert "--port    $TENSORBOARD_PORT, else 16006" in ours
    assert "save_results/torch_profile" in ours and "LIGHTX2V_TB_SKIP_FIXES" in ours
    assert "usage: tensorboard" in theirs and "--logdir" in theirs
