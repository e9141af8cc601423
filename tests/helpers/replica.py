"""A real trace replicated to a size: the benchmarks' big traces and the tests that need one (peak memory).

    copies = replicate(FIXTURE, out, 100)                   # >= 100 MB of plain JSON, its steps renumbered per copy
    replicate(FIXTURE, out, 100, module_overrun=0.5)        # each copy's <module> frame runs into the next copy

Each copy's timestamps, correlation ids and External ids are shifted, so the launch chain links every copy as it
does the original.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
ID_SHIFT = 10**7
STEP = "ProfilerStep#"
MODULE_FRAME = "<module>"  # the function name of a script's outermost Python frame ("gpu_anchor.py(86): <module>")


def replicate(src: Path, out: Path, size_mb: float, metadata_once: bool = False,
              module_overrun: float = 0.0) -> int:
    """Write ``out`` (plain JSON) of at least ``size_mb`` MB from copies of ``src``'s events; returns the copies.
    ``metadata_once``: metadata events (``"ph": "M"``) in the first copy only, as kineto writes them once.
    ``module_overrun``: each copy's ``<module>`` Python frames last this share of a copy's span longer, so they
    end inside the next copy's (frames that overlap without nesting, as a faulty tracer or a replay writes them);
    the copies are laid out as without it."""
    with gzip.open(src, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e]
    steps = sorted({int(e["name"][len(STEP):]) for e in timed
                    if str(e.get("name", "")).startswith(STEP) and e["name"][len(STEP):].isdigit()}) or [0]
    lo = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - lo + 500.0
    copies = 0
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        first = True
        while f.tell() < size_mb * 1e6:
            for ev in timed:
                if metadata_once and copies and ev.get("ph") == "M":
                    continue
                e = dict(ev)
                e["ts"] = ev["ts"] + copies * span
                name = e.get("name")
                if copies and isinstance(name, str) and name.startswith(STEP) and name[len(STEP):].isdigit():
                    # N -> N + copies x the source's step numbers
                    e["name"] = f"{STEP}{int(name[len(STEP):]) + copies * (steps[-1] - steps[0] + 1)}"
                if module_overrun and ev.get("cat") == "python_function" and ev["name"].endswith(MODULE_FRAME):
                    e["dur"] = ev["dur"] + module_overrun * span
                args = ev.get("args")
                if isinstance(args, dict):
                    e["args"] = a = dict(args)
                    for key in ("correlation", "External id"):
                        if isinstance(a.get(key), int):
                            a[key] += copies * ID_SHIFT
                if isinstance(e.get("id"), int):  # a flow arrow (no args): its id is the correlation id
                    e["id"] += copies * ID_SHIFT
                f.write(("" if first else ",\n") + json.dumps(e))
                first = False
            copies += 1
        f.write("\n]}\n")
    return copies
