"""`python -m lightx2v.capture`: list the processes writing captures under a folder, or arm their next capture.

    python -m lightx2v.capture                          # list the processes writing under the default folder
    python -m lightx2v.capture arm --pid 1234           # that process captures its next first run()
    python -m lightx2v.capture arm save_results         # every running process writing under save_results
    python -m lightx2v.capture arm --pid 1234 --wait 600   # ... and wait for the capture, print its run directory

FOLDER is a logdir or any folder above it: the logdirs below it are found searching down at most 6 folders deep
(5000 folders in all; hidden folders, node_modules/site-packages and the runs inside a logdir are skipped). Its
default: $LIGHTX2V_TORCH_PROFILE_DIR, else $LIGHTX2V_RESULTS_DIR, else save_results (in the working directory).

Only processes that profile in TensorBoard format (the default) and have made their first capture can be armed;
a chrome-format process writes no status file. Multi-rank (torchrun) jobs are refused: see the profiler module's
"remote arming" section. Status files of processes that exited over a day ago (or past the newest 20 per logdir)
are removed when listing.

Exit status: 0 when every named process armed (and, with --wait, captured), 1 otherwise, with the reason;
2 for a usage error (a missing folder, a bad flag or environment value).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Optional, Sequence

from lightx2v import settings
from lightx2v.capture.control import (
    SEARCH_FOLDERS,
    WHY_NOT_LISTED,
    NotArmed,
    arm,
    explain,
    search_processes,
    select,
    wait_for_capture,
)
from lightx2v.utils.torch_trace_profiler import ENV_DIR

PROG = "capture"


def default_folder() -> str:
    """$LIGHTX2V_TORCH_PROFILE_DIR, else $LIGHTX2V_RESULTS_DIR, else save_results."""
    return settings.get(ENV_DIR) or settings.get(settings.RESULTS_DIR)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return value


def positive_pid(text: str) -> int:
    if not text.strip().isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a process id (a positive integer), got {text!r}")
    return int(text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    settings.exit_on_bad_values(PROG)
    parser = argparse.ArgumentParser(prog="python -m lightx2v.capture", description=__doc__,
                                     epilog=settings.help_text(PROG),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=("list", "arm"), default="list")
    parser.add_argument("folder", nargs="?", default=None,
                        help="a logdir or a folder above it (default $LIGHTX2V_TORCH_PROFILE_DIR, else "
                             "$LIGHTX2V_RESULTS_DIR, else save_results)")
    parser.add_argument("--pid", type=positive_pid, help="arm only this process")
    parser.add_argument("--id", dest="ident", help="arm only this process, by the id the list shows (<host>_<pid>)")
    parser.add_argument("--wait", type=positive_seconds, metavar="SECONDS", help="wait up to SECONDS for the capture")
    parser.add_argument("--json", action="store_true", help="list: print the status files as JSON")
    args = parser.parse_intermixed_args(argv)  # `arm --pid 1 DIR` and `arm DIR --pid 1` alike
    folder = os.path.abspath(args.folder or default_folder())
    if not os.path.isdir(folder):
        origin = "" if args.folder else " (the default: name a folder, or set $LIGHTX2V_TORCH_PROFILE_DIR)"
        what = "not a folder" if os.path.exists(folder) else "no such folder"
        parser.error(f"{folder}: {what}{origin}")
    processes, search = search_processes(folder)
    if search.truncated:
        print(f"capture: stopped searching {folder} after {SEARCH_FOLDERS} folders; name a folder closer to the "
              "logdir to see every process", file=sys.stderr)

    if args.action == "list":
        if args.json:
            print(json.dumps([{"id": p.id, "state": p.state, **p.status} for p in processes], indent=1))
        elif not processes:
            print(f"no process has written captures under {folder} ({WHY_NOT_LISTED})")
        for p in processes:
            print(p.describe())
        return 0

    try:
        chosen = select(processes, args.pid, args.ident)
    except NotArmed as exc:
        print(f"capture: {exc}", file=sys.stderr)
        return 1
    if args.pid is None and args.ident is None:
        chosen = [p for p in chosen if p.state == "running"]
        if not chosen:
            print(f"capture: no running process writes captures under {folder} ({WHY_NOT_LISTED})",
                  file=sys.stderr)
            return 1
    failed = False
    for process in chosen:
        try:
            answer = arm(process)
            print(explain(process, answer))
            if args.wait is not None:
                last = wait_for_capture(process, int(answer.get("captures_before") or 0), args.wait)
                problem = f" (error: {last['error']})" if last.get("error") else ""
                print(f"{process.id}: captured {last.get('calls')} calls -> {last.get('run_dir')}{problem}")
                failed |= bool(last.get("error"))
        except NotArmed as exc:
            print(f"capture: {exc}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
