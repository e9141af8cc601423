"""`python -m lightx2v.install_profiler CHECKOUT`: the fixed module goes in, the replaced file is kept beside it, local
edits are refused unless forced, and the printed undo really puts the checkout back (git or not)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, subprocess_env

FIXED = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"
ORIGINAL = (REPO_ROOT / "tests" / "programs" / "original_profiler.py").read_bytes()  # LightX2V's, as a stand-in
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def checkout(root, module: bytes | None = ORIGINAL, git: bool = False):
    (root / "lightx2v" / "utils").mkdir(parents=True)
    (root / "lightx2v" / "__init__.py").write_text("")
    (root / "README.md").write_text("a LightX2V checkout\n")
    if module is not None:
        (root / "lightx2v" / "utils" / "torch_trace_profiler.py").write_bytes(module)
    if git:
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "LightX2V"]):
            subprocess.run(["git", "-C", str(root), *cmd], check=True, capture_output=True,
                           env={**os.environ, **GIT_ENV})
    return root, root / "lightx2v" / "utils" / "torch_trace_profiler.py"


def install(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.install_profiler", *args], cwd=cwd, env=subprocess_env(),
                          capture_output=True, text=True, timeout=60)


def undo_line(result: subprocess.CompletedProcess) -> str:
    (line,) = [line for line in result.stdout.splitlines() if line.strip().startswith("undo: ")]
    return line.strip().removeprefix("undo: ")


def files(root) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}


def test_a_checkout_without_git_keeps_the_original_beside_it_and_the_undo_restores_it(tmp_path):
    root, target = checkout(tmp_path / "LightX2V")
    os.chmod(target, 0o640)
    before = files(root)
    result = install(str(root), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    backup = target.with_name("torch_trace_profiler.py.orig")
    assert f"kept as {backup}" in result.stdout and "git -C" not in result.stdout
    assert target.read_bytes() == FIXED.read_bytes() and backup.read_bytes() == ORIGINAL
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert set(files(root)) == set(before) | {backup.relative_to(root)}
    assert not [p for p in root.rglob(".*") if p.is_file()]  # no temporary file left

    again = install(str(root), cwd=tmp_path)
    assert again.returncode == 0 and "already is the fixed module" in again.stdout

    subprocess.run(undo_line(result), shell=True, check=True, cwd=tmp_path)
    assert files(root) == before and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_clean_git_checkout_is_undone_with_git_checkout(tmp_path):
    root, target = checkout(tmp_path / "LightX2V", git=True)
    before = files(root)
    result = install(str(root), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert undo_line(result) == f"git -C {root} checkout -- lightx2v/utils/torch_trace_profiler.py"
    assert target.read_bytes() == FIXED.read_bytes()
    subprocess.run(undo_line(result), shell=True, check=True, cwd=tmp_path)
    assert target.read_bytes() == ORIGINAL
    assert files(root) == {**before, target.with_suffix(".py.orig").relative_to(root): ORIGINAL}


def test_uncommitted_edits_are_refused_unless_forced_and_then_kept(tmp_path):
    root, target = checkout(tmp_path / "LightX2V", git=True)
    edited = ORIGINAL + b"\n# my local tweak\n"
    target.write_bytes(edited)
    before = files(root)
    refused = install(str(root), cwd=tmp_path)
    assert refused.returncode == 1 and "uncommitted changes" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr and files(root) == before

    forced = install(str(root), "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    backup = target.with_name("torch_trace_profiler.py.orig")
    assert backup.read_bytes() == edited and undo_line(forced).startswith("mv ")
    subprocess.run(undo_line(forced), shell=True, check=True, cwd=tmp_path)
    assert files(root) == before


@pytest.mark.parametrize("git", [False, True])
def test_a_file_that_is_neither_the_original_nor_ours_is_refused_unless_forced(tmp_path, git):
    root, target = checkout(tmp_path / "LightX2V", module=b"# our own profiler, not LightX2V's\n", git=git)
    if git:  # committed, so git sees no edit: only the content tells
        target.write_bytes(b"# our own profiler, not LightX2V's\n")
    refused = install(str(root), cwd=tmp_path)
    if git:
        assert refused.returncode == 0, refused.stderr  # committed content: git checkout is the undo
        assert undo_line(refused).startswith("git -C ")
        return
    assert refused.returncode == 1 and "neither LightX2V's original" in refused.stderr
    assert target.read_bytes() == b"# our own profiler, not LightX2V's\n"
    forced = install(str(root), "--force", cwd=tmp_path)
    assert forced.returncode == 0 and target.with_suffix(".py.orig").read_bytes().startswith(b"# our own")


def test_no_module_yet_is_undone_by_removing_it(tmp_path):
    root, target = checkout(tmp_path / "LightX2V", module=None)
    result = install(str(root), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert undo_line(result) == f"rm {target}" and "kept as" not in result.stdout
    subprocess.run(undo_line(result), shell=True, check=True, cwd=tmp_path)
    assert not target.exists()


@pytest.mark.parametrize("layout", ["empty", "no-utils"])
def test_install_refuses_what_is_not_a_checkout(tmp_path, layout):
    (tmp_path / "x").mkdir()
    if layout == "no-utils":
        (tmp_path / "x" / "lightx2v").mkdir()
    result = install(str(tmp_path / "x"), cwd=tmp_path)
    assert result.returncode == 2 and "LightX2V checkout" in result.stderr and "Traceback" not in result.stderr
