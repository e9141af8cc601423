"""`python -m lightx2v.capture`: list the processes writing captures under a folder, or arm their next capture.

    python -m lightx2v.capture                          # list (folder: $LIGHTX2V_TORCH_PROFILE_DIR, else save_results)
    python -m lightx2v.capture arm --pid 1234           # that process captures its next first run()
    python -m lightx2v.capture arm save_results         # every running process writing under save_results
    python -m lightx2v.capture arm --pid 1234 --wait 600   # ... and wait for the capture, print its run directory

Exit status: 0 when every named process armed (and, with --wait, captured), 1 otherwise, with the reason.
Multi-rank (torchrun) jobs are refused: see the profiler module's "remote arming" section.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from lightx2v.capture.control import NotArmed, arm, explain, find_processes, select, wait_for_capture


def default_folder() -> str:
    return os.environ.get("LIGHTX2V_TORCH_PROFILE_DIR") or os.environ.get("LIGHTX2V_RESULTS_DIR") or "save_results"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lightx2v.capture", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=("list", "arm"), default="list")
    parser.add_argument("folder", nargs="?", default=None,
                        help="a logdir or a folder above it (default: %(default)s -> $LIGHTX2V_TORCH_PROFILE_DIR, "
                             "else $LIGHTX2V_RESULTS_DIR, else save_results)")
    parser.add_argument("--pid", type=int, help="arm only this process")
    parser.add_argument("--id", dest="ident", help="arm only this process, by the id the list shows (<host>_<pid>)")
    parser.add_argument("--wait", type=float, metavar="SECONDS", help="wait up to SECONDS for the capture")
    parser.add_argument("--json", action="store_true", help="list: print the status files as JSON")
    args = parser.parse_intermixed_args(argv)  # `arm --pid 1 DIR` and `arm DIR --pid 1` alike
    folder = os.path.abspath(args.folder or default_folder())
    processes = find_processes(folder)

    if args.action == "list":
        if args.json:
            print(json.dumps([{"id": p.id, "state": p.state, **p.status} for p in processes], indent=1))
        elif not processes:
            print(f"no process has written captures under {folder} (a process shows up after its first capture)")
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
            print(f"capture: no running process writes captures under {folder}", file=sys.stderr)
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
