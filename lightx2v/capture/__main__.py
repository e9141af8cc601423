"""`python -m lightx2v.capture`: list the processes writing captures under a folder, or arm their next capture.

    python -m lightx2v.capture                          # list the processes writing under the default folder
    python -m lightx2v.capture arm --pid 1234           # that process captures its next first run()
    python -m lightx2v.capture arm save_results         # every running process writing under save_results
    python -m lightx2v.capture arm --pid 1234 --wait 600   # ... and wait for the capture, print its run directory
    python -m lightx2v.capture arm --job JOB_ID --wait 600  # a torchrun job: every rank captures the same call

FOLDER is a logdir or any folder above it: the logdirs below it are found searching down at most 6 folders deep
(5000 folders in all; hidden folders, node_modules/site-packages and the runs inside a logdir are skipped). Its
default: $LIGHTX2V_TORCH_PROFILE_DIR, else $LIGHTX2V_RESULTS_DIR, else save_results (in the working directory).

Only processes that profile in TensorBoard format (the default) and have made their first capture can be armed;
a chrome-format process writes no status file. A multi-rank (torchrun) job is listed as one line and armed as a
whole, once, however it is named (--job, any rank's --pid or --id, or torchrun's pid): every rank captures at the
same call index of the call site of its last capture (docs/capture.md says why that cannot hang). Status files
of processes that exited over a day ago (or past the newest 20 per logdir) are removed when listing.

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
from lightx2v.capture.jobs import Job, arm_job, explain_job, group, job_of, wait_for_job_capture
from lightx2v.program import program
from lightx2v.utils.torch_trace_profiler import ENV_DIR, whole_number

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
    pid = whole_number(text)
    if pid is None or pid <= 0:
        raise argparse.ArgumentTypeError(f"expected a process id (a positive integer), got {text!r}")
    return pid


def main(argv: Optional[Sequence[str]] = None) -> int:
    settings.exit_on_bad_values(PROG)
    parser = argparse.ArgumentParser(prog=program("lightx2v.capture"), description=__doc__,
                                     epilog=settings.help_text(PROG),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=("list", "arm"), default="list")
    parser.add_argument("folder", nargs="?", default=None,
                        help="a logdir or a folder above it (default $LIGHTX2V_TORCH_PROFILE_DIR, else "
                             "$LIGHTX2V_RESULTS_DIR, else save_results)")
    parser.add_argument("--pid", type=positive_pid,
                        help="arm only this process (a rank's or torchrun's pid: its whole job)")
    parser.add_argument("--id", dest="ident", help="arm only this process, by the id the list shows (<host>_<pid>)")
    parser.add_argument("--job", metavar="JOB_ID", help="arm only this multi-rank job, by the id the list shows")
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

    entries = group(processes)
    if args.action == "list":
        if args.json:
            print(json.dumps([{"id": p.id, "state": p.state, **p.status} for p in processes], indent=1))
        elif not processes:
            print(f"no process has written captures under {folder} ({WHY_NOT_LISTED})")
        for entry in entries if not args.json else ():
            print(entry.describe())
        return 0

    try:
        chosen = choose(entries, processes, args)
    except NotArmed as exc:
        print(f"capture: {exc}", file=sys.stderr)
        return 1
    if not chosen:
        print(f"capture: no running process writes captures under {folder} ({WHY_NOT_LISTED})", file=sys.stderr)
        return 1
    failed = False
    for entry in chosen:
        try:
            failed |= arm_and_wait(entry, args.wait)
        except NotArmed as exc:
            print(f"capture: {exc}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


def choose(entries: list, processes: list, args: argparse.Namespace) -> list:
    """What the user named: a job (by --job, or a rank's / torchrun's --pid, a rank's --id), one process, or
    with nothing named every entry with a running process, each job once. NotArmed when nothing matches."""
    if args.job is not None:
        job = job_of(entries, job_id=args.job)
        if job is None:
            raise NotArmed(f"no job with id {args.job!r} writes captures here: {WHY_NOT_LISTED}")
        return [job]
    if args.pid is not None or args.ident is not None:
        job = job_of(entries, pid=args.pid, ident=args.ident)
        return [job] if job is not None else select(processes, args.pid, args.ident)
    return [e for e in entries if (any(p.state == "running" for p in e.ranks) if isinstance(e, Job)
                                   else e.state == "running")]


def arm_and_wait(entry, wait: Optional[float]) -> bool:
    """Arm one process or job, print the answer (and, with ``wait``, the capture); True when the capture failed."""
    if isinstance(entry, Job):
        answer = arm_job(entry)
        print(explain_job(entry, answer))
        if wait is None:
            return False
        done = wait_for_job_capture(entry, answer, wait)
        errors = [f"rank {r}: {c['error']}" for r, c in sorted(done["ranks"].items()) if c.get("error")]
        ranks = f"{len(done['ranks'])} rank{'' if len(done['ranks']) == 1 else 's'}"
        print(f"job {entry.id}: captured call {done['call']} on {ranks} -> "
              f"{' | '.join(done['run_dirs'])}" + (f" (errors: {'; '.join(errors)})" if errors else ""))
        return bool(errors) or len(done["run_dirs"]) != 1
    answer = arm(entry)
    print(explain(entry, answer))
    if wait is None:
        return False
    last = wait_for_capture(entry, int(answer.get("captures_before") or 0), wait)
    problem = f" (error: {last['error']})" if last.get("error") else ""
    print(f"{entry.id}: captured {last.get('calls')} calls -> {last.get('run_dir')}{problem}")
    return bool(last.get("error"))


if __name__ == "__main__":
    sys.exit(main())
