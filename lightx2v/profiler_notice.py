"""Recognize traces written by LightX2V's original profiler module, and say once how to fix it.

LightX2V's own `lightx2v/utils/torch_trace_profiler.py` hands `tb_dir` straight to
`torch.profiler.tensorboard_trace_handler`, and its once-per-process flag is set on the context *object*: a
runner that makes a new `TorchTraceProfileContext` at every step captures again at every step (the target runs
5 times per step) and drops one more `{host}_{pid}.{ns}.pt.trace.json` straight into the logdir, where
TensorBoard shows all of them as a single run. The fixed module never writes there: each capture gets its own
run directory, one `rank<R>_<host>` file per rank. So a trace file directly in the logdir, or several
timestamped files of one process in one directory, is that module's signature.

The viewer stack calls `watch_in_background` (TensorBoard launcher: one log message) and `add_banner`
(trace browser page); both say what is wrong and the one command that puts the fixed module into the checkout.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lightx2v import settings
from lightx2v.trace_files import is_tensorboard_name
from lightx2v.utils.torch_trace_profiler import TENSORBOARD_TRACE_RE, resolve_log_dir

MODULE = "lightx2v/utils/torch_trace_profiler.py"
INSTALL_COMMAND = "lightx2v-install-profiler"  # on PATH in the Docker image (docker/stack-command)
# The checkout the stack serves, when it was told: the image sets it (/workspace/LightX2V), so does
# `python -m lightx2v.serve --checkout PATH`. It names the checkout in the fix even when the logdir is elsewhere.
ENV_CHECKOUT = settings.CHECKOUT
PLACEHOLDER = "<your LightX2V checkout>"
# `{host}_{pid}` then `.{digits}`: what tensorboard_trace_handler names a file when no worker name is given
_HANDLER_NAME = re.compile(r"^.+_\d+(\.\d+)+\.pt\.trace\.json(\.gz)?$")


@dataclass(frozen=True)
class Finding:
    logdir: str
    files: int  # trace files in the original module's layout
    example: str  # one of them, relative to the logdir
    checkout: str | None  # the LightX2V checkout the logdir belongs to, when it looks like one


def _traces(folder: str) -> list[str]:
    """The TensorBoard-named traces directly in `folder` (the stack's one rule, lightx2v.trace_files)."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.is_file() and is_tensorboard_name(e.name))
    except OSError:
        return []


def _subdirs(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []


def _checkout_of(logdir: str) -> str | None:
    """The checkout the stack was told it serves ($LIGHTX2V_CHECKOUT, a folder), else `<checkout>` for a logdir
    `<checkout>/save_results/torch_profile` that holds a `lightx2v` package."""
    told = settings.get(ENV_CHECKOUT)
    if told and os.path.isdir(told):
        return os.path.abspath(told)
    checkout = Path(logdir).resolve().parent.parent
    return str(checkout) if (checkout / "lightx2v" / "__init__.py").is_file() else None


def find_original_traces(logdir: str) -> Finding | None:
    """The original module's traces under `logdir` (the folder itself and one level down), or None."""
    straight = _traces(logdir)
    if straight:
        return Finding(logdir, len(straight), straight[-1], _checkout_of(logdir))
    for sub in _subdirs(logdir):
        names = _traces(os.path.join(logdir, sub))
        matches = (TENSORBOARD_TRACE_RE.match(n) for n in names if _HANDLER_NAME.match(n))
        per_process = Counter(m.group(1) for m in matches if m)
        worker, count = per_process.most_common(1)[0] if per_process else ("", 0)
        if count >= 2:
            example = next(n for n in names if n.startswith(worker + "."))
            return Finding(logdir, count, f"{sub}/{example}", _checkout_of(logdir))
    return None


def fix_command(checkout: str | None) -> str:
    """The one command that puts the fixed module into `checkout`."""
    target = checkout or PLACEHOLDER
    if shutil.which(INSTALL_COMMAND):
        return f"{INSTALL_COMMAND} {target}"
    source = Path(__file__).resolve().parent / "utils" / "torch_trace_profiler.py"
    return f"cp {source} {target}/{MODULE}"


def notice_text(finding: Finding) -> str:
    where = ("straight in" if "/" not in finding.example else "from one process in one folder of")
    return (
        f"{finding.files} trace file(s) {where} {finding.logdir} (e.g. {finding.example}): they come from "
        f"LightX2V's original profiler module ({MODULE}). It profiles again at every new "
        "TorchTraceProfileContext (its once-per-process flag is kept per object), so each step runs its target "
        "5 times and writes one more file, and it writes them into the logdir itself, where TensorBoard shows "
        "them all as one run. The fixed module captures once per process into a run directory of its own and "
        "follows LIGHTX2V_TORCH_PROFILE_DIR. Put it into your checkout (your other files stay as they are; it "
        f"keeps the replaced file as {MODULE}.orig and prints the undo):\n"
        f"    {fix_command(finding.checkout)}"
    )


def watch_in_background(logdir: str, log: Callable[[str], None], interval: float = 2.0) -> threading.Thread:
    """Look at `logdir` every `interval` seconds; on the first finding, `log` the notice once and stop."""

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            finding = find_original_traces(logdir)
            if finding:
                log(f"[lightx2v] {notice_text(finding)}")
                return

    thread = threading.Thread(target=watch, name="profiler_notice", daemon=True)
    thread.start()
    return thread


def logdir_for_results(results_root: str) -> str:
    """The logdir next to a results folder: $LIGHTX2V_TORCH_PROFILE_DIR, else `<results>/torch_profile` (the
    profiler's own rule, resolve_log_dir)."""
    return resolve_log_dir(os.path.join(results_root, "torch_profile"))


def add_banner(page: str, results_root: str) -> str:
    """`page` with the notice as a banner at the top of its body, when the original layout is there."""
    finding = find_original_traces(logdir_for_results(results_root))
    if finding is None:
        return page
    text, command = notice_text(finding).rsplit("\n", 1)
    banner = ("<div id=profiler-notice role=alert style=\"border:2px solid #c60;background:#fff4e5;padding:.8em;"
              f"margin-bottom:1em\"><strong>Profiler module:</strong> {html.escape(text)}"
              f"<pre>{html.escape(command.strip())}</pre></div>")
    head, sep, tail = page.partition("<body>")
    return head + sep + "\n" + banner + tail if sep else banner + page
