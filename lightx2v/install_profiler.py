"""`python -m lightx2v.install_profiler CHECKOUT` (`lightx2v-install-profiler CHECKOUT` in the Docker image):
put this project's fixed `lightx2v/utils/torch_trace_profiler.py` into a LightX2V checkout.

It replaces that one file and touches nothing else, so `git -C CHECKOUT checkout -- lightx2v/utils/
torch_trace_profiler.py` undoes it. The fixed module keeps the original's call-site API
(`TorchTraceProfileContext(name, tb_dir=..., ...)`, `.run(func, *args)`) and needs only torch and the standard
library; nothing else in LightX2V imports it. The file is written under a temporary name and renamed, with
the replaced file's permissions.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

MODULE = Path("lightx2v", "utils", "torch_trace_profiler.py")
FIXED = Path(__file__).resolve().parent / "utils" / "torch_trace_profiler.py"


class NotACheckout(Exception):
    pass


def install(checkout: Path) -> tuple[Path, str]:
    """Copy the fixed module into `checkout`; returns the target and what happened ('installed'/'unchanged')."""
    if not (checkout / "lightx2v").is_dir():
        raise NotACheckout(f"{checkout} has no lightx2v/ package: give the root of a LightX2V checkout")
    target = checkout / MODULE
    if not target.parent.is_dir():
        raise NotACheckout(f"{target.parent} does not exist: not a LightX2V checkout")
    fixed = FIXED.read_bytes()
    if target.is_file() and target.read_bytes() == fixed:
        return target, "unchanged"
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".torch_trace_profiler.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(fixed)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target, "installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="lightx2v-install-profiler", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="root of the LightX2V checkout (e.g. /workspace/LightX2V)")
    args = parser.parse_args(argv)
    checkout = args.checkout.expanduser().resolve()
    try:
        target, what = install(checkout)
    except NotACheckout as exc:
        print(f"install_profiler: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"install_profiler: cannot write {checkout / MODULE}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if what == "unchanged":
        print(f"install_profiler: {target} already is the fixed module")
    else:
        print(f"install_profiler: wrote the fixed profiler module to {target}\n"
              f"  undo: git -C {checkout} checkout -- {MODULE.as_posix()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
