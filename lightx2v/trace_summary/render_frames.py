"""The text of "where in your code" (``frames``): the summary's section, the ``--frames`` tree and the capture
log's line. Per step; the frame is the last column and never cut."""

from __future__ import annotations

from .frames import inclusive, label, shown
from .model import Frames, FrameStat, FrameTree, ModuleStat

TREE_MIN_SHARE = 0.0005  # --frames leaves out frames and ops below 0.05% of the step's total (and says how many)


def _ms(us: float) -> str:
    return f"{us / 1000:.3f}"


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f}"


def _pct(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:.1f}"


def frames_lines(f: Frames | None) -> list[str]:
    """The summary's section: the user's frames by GPU time (CPU trace: CPU op time), then nn.Module classes."""
    if f is None:
        return []
    folded = "torch, stdlib, site-packages folded into their caller" if f.folded else "every frame"
    head = (f"Where in your code (Python frames by self time, per step of {f.steps}; {folded}; --frames: the "
            "tree)")
    lines = ["", head]
    if not f.frames:
        return [*lines, "  no frames of your code around the work in the steps"]
    mem = bool(f.memory_device)
    alloc = f" {'alloc MiB':>9}" if mem else ""
    if f.gpu:
        lines.append(f"  {'GPU ms':>8} {'self ms':>8} {'% GPU':>6} {'CPU ms':>8}{alloc} {'calls':>6}  frame "
                     "(top op)")
    else:
        lines.append(f"  {'CPU ms':>8} {'self ms':>8} {'% CPU':>6}{alloc} {'calls':>6}  frame (top op)")
    for r in f.frames:
        lines.append(_frame_row(r, f.gpu, mem))
    unattributed = f.unattributed_gpu_us if f.gpu else f.unattributed_cpu_us
    if unattributed:
        lines.append(f"  ({_ms(unattributed)} ms of {'GPU work' if f.gpu else 'CPU op time'} per step ran with no "
                     "Python frame around it)")
    if f.modules:
        lines += ["", "  nn.Module frames by class",
                  f"  {'GPU ms' if f.gpu else 'CPU ms':>8} {'% GPU' if f.gpu else '% CPU':>6}"
                  + (f" {'CPU ms':>8}" if f.gpu else "") + alloc + f" {'instances':>9} {'calls':>6}  class"]
        for m in f.modules:
            lines.append(_module_row(m, f.gpu, mem))
    return lines


def _frame_row(r: FrameStat, gpu: bool, mem: bool) -> str:
    alloc = f" {_mib(r.alloc_bytes):>9}" if mem else ""
    name = shown(r.location, r.function, r.frame, r.line)
    top = f"  ({r.top_op})" if r.top_op else ""
    if gpu:
        return (f"  {_ms(r.gpu_us):>8} {_ms(r.gpu_self_us):>8} {_pct(r.gpu_pct):>6} {_ms(r.cpu_us):>8}{alloc} "
                f"{r.calls:>6}  {name}{top}")
    return f"  {_ms(r.cpu_us):>8} {_ms(r.cpu_self_us):>8} {_pct(r.cpu_pct):>6}{alloc} {r.calls:>6}  {name}{top}"


def _module_row(m: ModuleStat, gpu: bool, mem: bool) -> str:
    alloc = f" {_mib(m.alloc_bytes):>9}" if mem else ""
    if gpu:
        return (f"  {_ms(m.gpu_us):>8} {_pct(m.gpu_pct):>6} {_ms(m.cpu_us):>8}{alloc} {m.instances:>9} "
                f"{m.calls:>6}  {m.module_class}")
    return f"  {_ms(m.cpu_us):>8} {_pct(m.cpu_pct):>6}{alloc} {m.instances:>9} {m.calls:>6}  {m.module_class}"


def tree_lines(tree: FrameTree | None, gpu: bool) -> list[str]:
    """``--frames``: the frame tree, inclusive and self per step, each frame's top-level ops as its last level."""
    if tree is None:
        return ["", "Frame tree: no Python frames in this trace (capture with with_stack=True)"]
    own = tree.gpu_us if gpu else tree.cpu_us
    other = tree.cpu_us if gpu else None
    total = inclusive(tree, own)
    other_total = inclusive(tree, other) if other is not None else None
    floor = TREE_MIN_SHARE * total[0]
    what = "GPU ms (inclusive, self), CPU ms" if gpu else "CPU op ms (inclusive, self)"
    lines = ["", f"Frame tree ({what} per step; the top-level ops under each frame last; below "
                 f"{100 * TREE_MIN_SHARE:.2f}% left out)"]
    children: dict[int, list[int]] = {}
    for node in range(1, len(tree.names)):
        children.setdefault(tree.parent[node], []).append(node)
    ops: dict[int, list[tuple[str, list[float]]]] = {}
    for (node, op), row in tree.ops.items():
        ops.setdefault(node, []).append((op, row))
    column = 0 if gpu else 2
    hidden = 0

    def cpu(node: int) -> str:
        return f" {_ms(other_total[node]):>8}" if other_total is not None else ""

    def walk(node: int, depth: int) -> None:
        nonlocal hidden
        indent = "  " * depth
        if node and not children.get(node) and len(ops.get(node, [])) == 1:
            return  # its one op is on its own line already
        for op, row in sorted(ops.get(node, []), key=lambda item: -item[1][column]):
            if row[column] < floor or not row[column]:
                hidden += 1
                continue
            other_ms = f" {_ms(row[2]):>8}" if gpu else ""
            lines.append(f"  {_ms(row[column]):>8} {'':>8}{other_ms}  {indent}{op or '(no op)'}")
        for child in sorted(children.get(node, []), key=lambda n: -total[n]):
            if total[child] < floor or not total[child]:
                hidden += 1
                continue
            mine = ops.get(child, [])
            only = f"  <- {mine[0][0]}" if not children.get(child) and len(mine) == 1 and mine[0][0] else ""
            lines.append(f"  {_ms(total[child]):>8} {_ms(own[child]):>8}{cpu(child)}  {indent}"
                         f"{label(tree.names[child], tree.running)}{only}")
            walk(child, depth + 1)

    if own[0]:
        lines.append(f"  {_ms(own[0]):>8} {_ms(own[0]):>8}{cpu(0)}  (no Python frame)")
    walk(0, 0)
    if hidden:
        lines.append(f"  ({hidden} frames and ops below {100 * TREE_MIN_SHARE:.2f}% left out)")
    return lines


def log_line(f: Frames | None) -> str:
    """The capture log's line: the user frame with the most self time (its file:line), its share."""
    if f is None or not f.frames:
        return ""
    key = (lambda r: r.gpu_self_us) if f.gpu else (lambda r: r.cpu_self_us)
    top = max(f.frames, key=key)
    total = f.gpu_us if f.gpu else f.cpu_us
    share = f" ({100 * key(top) / total:.0f}% of {'GPU' if f.gpu else 'CPU op'} time)" if total else ""
    name = shown(top.location, top.function, top.frame, top.line)
    return f"where in your code: {name} {_ms(key(top))} ms/step self{share}"
