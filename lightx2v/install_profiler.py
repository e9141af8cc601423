"""`python -m lightx2v.install_profiler CHECKOUT` (`lightx2v-install-profiler CHECKOUT` in the Docker image):
put this project's fixed `lightx2v/utils/torch_trace_profiler.py` into a LightX2V checkout.

It replaces that one file and keeps the replaced one beside it, as `torch_trace_profiler.py.orig` (not importable,
so nothing picks it up). It refuses, changing nothing, when the file has local edits: uncommitted changes in a git
checkout, or (in any checkout) content that is neither LightX2V's original module nor a version of this one;
`--force` installs anyway, still keeping the copy. It prints the undo that applies: `git checkout` for a clean git
checkout, else moving the copy back. The fixed module keeps the original's API (`TorchTraceProfileContext`,
`TorchTraceProfiler(cfg)`, `make_on_trace_ready`, `log_profile_start`, `log_profile_done`) and needs only torch and
the standard library. Files are written under a temporary name and renamed, with the replaced file's permissions.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Optional

from lightx2v.fileio import write_atomically
from lightx2v.program import program

MODULE = Path("lightx2v", "utils", "torch_trace_profiler.py")
FIXED = Path(__file__).resolve().parent / "utils" / "torch_trace_profiler.py"
BACKUP_SUFFIX = ".orig"
# What every version of this project's module holds, and what LightX2V's original holds (and ours does not).
OURS_MARKERS = (b"_SESSION = _Session()", b"TENSORBOARD_TRACE_RE")
ORIGINAL_MARKERS = (b"class TorchTraceProfileContext", b"tensorboard_trace_handler")


class NotACheckout(Exception):
    pass


class LocalEdits(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Installed:
    target: Path
    what: str  # "installed" or "unchanged"
    backup: Optional[Path] = None  # the replaced file, kept; None: there was none, or it was a version of ours
    undo: Optional[str] = None  # the shell command that puts the checkout back as it was


def is_ours(content: bytes) -> bool:
    return all(marker in content for marker in OURS_MARKERS)


def is_original(content: bytes) -> bool:
    return not is_ours(content) and all(marker in content for marker in ORIGINAL_MARKERS)


def git_state(checkout: Path) -> Optional[str]:
    """The module's state in git: "clean" (tracked, unchanged), "modified", "untracked"; None outside a git work
    tree (or without a usable git)."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=30)

    try:
        if git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
            return None
        if git("ls-files", "--error-unmatch", "--", MODULE.as_posix()).returncode != 0:
            return "untracked"
        status = git("status", "--porcelain", "--", MODULE.as_posix())
    except (OSError, subprocess.SubprocessError):
        return None
    if status.returncode != 0:
        return None
    return "modified" if status.stdout.strip() else "clean"


def install(checkout: Path, force: bool = False) -> Installed:
    """Copy the fixed module into `checkout`, keeping the replaced file beside it (see the module docstring)."""
    if not (checkout / "lightx2v").is_dir():
        raise NotACheckout(f"{checkout} has no lightx2v/ package: give the root of a LightX2V checkout")
    target = checkout / MODULE
    if not target.parent.is_dir():
        raise NotACheckout(f"{target.parent} does not exist: not a LightX2V checkout")
    fixed = FIXED.read_bytes()
    current = target.read_bytes() if target.is_file() else None
    if current == fixed:
        return Installed(target, "unchanged")
    state = git_state(checkout)
    if current is not None and not force:
        if state == "modified":
            raise LocalEdits(f"{target} has uncommitted changes (git status); nothing changed. Commit or stash "
                             "them, or pass --force (the file is kept as a .orig copy)")
        if state != "clean" and not (is_ours(current) or is_original(current)):
            raise LocalEdits(f"{target} is neither LightX2V's original profiler module nor this project's (local "
                             "edits?); nothing changed. Pass --force to replace it (the file is kept as a .orig "
                             "copy)")
    backup = None
    if current is not None and not is_ours(current):
        backup = _free_backup_name(target, current)
        write_atomically(backup, current, mode=target.stat().st_mode & 0o7777)
    mode = target.stat().st_mode & 0o7777 if current is not None else 0o644
    write_atomically(target, fixed, mode=mode)
    if current is not None and state == "clean":
        undo = f"git -C {shlex.quote(str(checkout))} checkout -- {MODULE.as_posix()}"
    elif backup is not None:
        undo = f"mv {shlex.quote(str(backup))} {shlex.quote(str(target))}"
    elif current is None:
        undo = f"rm {shlex.quote(str(target))}"
    else:
        undo = None  # it was an older version of this module: nothing of the user's was replaced
    return Installed(target, "installed", backup, undo)


def _free_backup_name(target: Path, content: bytes) -> Path:
    """`<target>.orig`, or `.orig.2`, `.orig.3`... when an older copy with other content is there already."""
    for n in range(1, 100):
        path = target.with_name(target.name + BACKUP_SUFFIX + ("" if n == 1 else f".{n}"))
        if not path.exists() or path.read_bytes() == content:
            return path
    raise OSError(f"no free backup name beside {target}")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=program("lightx2v.install_profiler"), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="root of the LightX2V checkout (e.g. /workspace/LightX2V)")
    parser.add_argument("--force", action="store_true",
                        help="replace the file even if it has local edits (a copy is still kept beside it)")
    args = parser.parse_args(argv)
    checkout = args.checkout.expanduser().resolve()
    try:
        done = install(checkout, force=args.force)
    except NotACheckout as exc:
        print(f"install_profiler: {exc}", file=sys.stderr)
        return 2
    except LocalEdits as exc:
        print(f"install_profiler: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"install_profiler: cannot write {checkout / MODULE}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if done.what == "unchanged":
        print(f"install_profiler: {done.target} already is the fixed module")
        return 0
    print(f"install_profiler: wrote the fixed profiler module to {done.target}")
    if done.backup is not None:
        print(f"  the replaced file is kept as {done.backup}")
    if done.undo:
        print(f"  undo: {done.undo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
