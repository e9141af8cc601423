"""Where in your code: GPU time, CPU time and allocations charged to the Python frames of a with_stack capture.

    tree = frame_tree(c, chain, found, op_tree, mem)     # None when the trace has no python_function events
    answer = frame_summary(tree, top=10)                 # model.Frames: the --json answer
    lines = collapsed_stacks(tree, "gpu")                # "a.py:3 main;nn.Module: Linear_0;aten::linear 1234"

A ``with_stack=True`` capture writes the Python frames of each thread (``python_function`` events) nested in time
like its ops. The work is charged through the launch chain, not by a second attribution:

- each kernel, memcpy and memset to the innermost frame around its runtime call (``launch``: correlation id ->
  the call; by ``External id`` only, around its launching op) on the call's thread;
- each CPU op's self time (``optree``) to the innermost frame around the op;
- each allocation (``[memory]`` events, profile_memory=True) to the innermost frame around its timestamp.

That frame and the ones enclosing it are the work's stack. Frames are kept by name: ``file(line): function``
(the line of the function's ``def``, as the profiler records it) and ``nn.Module: <name>`` (by instance here;
``modules`` groups them by class). The frames of torch and its siblings (LIBRARY_ROOTS), of the standard library,
of site-packages / dist-packages, built-in functions and this profiler's own wrapper are **folded** into the
nearest enclosing kept frame: their work is that frame's self work, since the user's question is which of
*their* lines it is (``folded=False`` keeps every frame). Under each kept frame the work is split by its
top-level op (the outermost op around it, ``aten::linear``), the tree's last level and the op of the collapsed
stacks.

Figures are per step: work inside the steps only (``steps``: a GPU event by its launch, an op or an allocation
by its start), divided by their number, so two captures with other step counts compare (``--diff``).
"""

from __future__ import annotations

import re
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property

from .collect import Collected
from .enclosing import NONE, SAME_END_US, Enclosing, same_end_us
from .launch import LaunchChain
from .memory import MemoryEvents
from .model import Frames, FrameStat, FrameTree, ModuleStat
from .optree import OpTree
from .ratios import percent
from .steps import Steps, op_steps

USER, MODULE, LIBRARY = "user", "module", "library"
MODULE_PREFIX = "nn.Module: "
# Top-level packages whose frames are library code even when the profiler writes their path relative to
# sys.path (it does: "torch/nn/modules/module.py(1783): _call_impl", no site-packages in it).
LIBRARY_ROOTS = frozenset({"torch", "torchvision", "torchaudio", "torchgen", "functorch", "triton"})
# The reader's skip pattern with folding (``reader.TraceStream(skip_head=...)``): flow arrows and the frames this
# rule folds that kineto writes most (built-ins, torch's files, frozen stdlib modules), recognised from their
# first bytes and never decoded; the other library frames are decoded and dropped by ``keeps``.
SKIP_HEAD_FOLDED = (rb'\s*"ph"\s*:\s*(?:"[fs]"|"X"\s*,\s*"cat"\s*:\s*"python_function"\s*,\s*"name"\s*:\s*'
                    rb'"(?:<built-in |<frozen |torch/))')
PROFILER_FILE = "torch_trace_profiler.py"  # the drop-in's own frames (its run wrapper) around every capture
_FRAME_RE = re.compile(r"^(.*)\((\d+)\): (.*)$")
_STDLIB_PATH_RE = re.compile(r"(?:^|/)lib/python\d+(?:\.\d+)?/")
_INSTANCE_RE = re.compile(r"_\d+$")
VALUES = ("gpu", "kernel", "cpu", "alloc")  # the order of a node's values in FrameTree.ops
CUDA_DEVICE_TYPE = 1


def frame_kind(name: str) -> str:
    """USER, MODULE or LIBRARY for a frame name (the folding rule of the module's docstring)."""
    if name.startswith(MODULE_PREFIX):
        return MODULE
    m = _FRAME_RE.match(name)
    if m is None:  # "<built-in function linear>", "<built-in method view of Tensor object at 0x...>"
        return LIBRARY
    path = m.group(1).replace("\\", "/")
    if path.startswith("<frozen") or _STDLIB_PATH_RE.search(path):
        return LIBRARY
    parts = path.split("/")
    if "site-packages" in parts or "dist-packages" in parts or parts[-1] == PROFILER_FILE:
        return LIBRARY
    head = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0]
    if head in LIBRARY_ROOTS or (head in sys.stdlib_module_names and head != "__main__"):
        return LIBRARY
    return USER


def keeps(folded: bool) -> Callable[[str], bool]:
    """The pass's rule for which frames to keep (``collect.Collected(frames=...)``): all, or all but LIBRARY."""
    if not folded:
        return lambda name: True
    return lambda name: frame_kind(name) != LIBRARY


def location(name: str) -> tuple[str, str]:
    """("gpu_anchor.py:21", "forward") for "gpu_anchor.py(21): forward"; ("", "Linear_0") for a module frame;
    ("", name) for anything else (a built-in)."""
    if name.startswith(MODULE_PREFIX):
        return "", name[len(MODULE_PREFIX):]
    m = _FRAME_RE.match(name)
    if m is None:
        return "", re.sub(r" at 0x[0-9a-fA-F]+", "", name)
    parts = m.group(1).replace("\\", "/").split("/")
    return f"{'/'.join(parts[-2:])}:{m.group(2)}", m.group(3)


DEF_LINE, RUNNING_LINE = "def", "running"
RUNNING_MARK = "line running at start"  # how a text says that a frame's line is the one it was running
STARTUP_GAP_US = 20.0  # the frames of one thread's stack at the start are recorded back to back (1-10 us apart;
# the first frame entered on the thread that started the profiler comes 70 us and more later in every capture we have)


def running_at_start(c: Collected) -> frozenset[str]:
    """The frame names recorded on the stack when the capture began. torch's Python tracer names each frame
    "file(line): function" with the frame's current line when it records it: for a frame it sees entered, that is
    the function's def line; for the frames already on the stack at the start, the line each was running: its call
    of the frame below (the innermost: the line that started the profiler). It records those first, before it
    sees anything entered: every thread's stack in turn, outermost first. So they are the trace's first frames, in
    time order, while each is the next of its thread's stack (inside the one before it, less than STARTUP_GAP_US
    later) or the outermost frame of a thread not seen yet."""
    if not len(c.fr_ts):
        return frozenset()
    ts, dur, thread = c.fr_ts, c.fr_dur, c.fr_thread
    order = sorted(range(len(ts)), key=lambda i: (ts[i], -dur[i]))
    names = c.frame_kept
    seen: set[int] = set()
    running: set[str] = set()
    before = -1
    for i in order:
        new_thread = thread[i] not in seen
        next_of_stack = before >= 0 and thread[i] == thread[before] and ts[i] - ts[before] < STARTUP_GAP_US and \
            ts[i] + dur[i] <= ts[before] + dur[before] + SAME_END_US
        if not (new_thread or next_of_stack):
            break
        seen.add(thread[i])
        running.add(names[c.fr_name[i]])
        before = i
    return frozenset(n for n in running if _FRAME_RE.match(n))  # a built-in is a call, never a frame at the start


def line_kind(name: str, running: frozenset[str]) -> str:
    """RUNNING_LINE, DEF_LINE, or "" for a frame without a line (a module, a built-in)."""
    if not location(name)[0]:
        return ""
    return RUNNING_LINE if name in running else DEF_LINE


def shown(where: str, function: str, frame: str, line: str) -> str:
    """A frame as the tables name it: ``two_functions.py:29 mlp``; ``myscript.py:16 main (line running at start)``
    where the line is the one it was running; a module's or built-in's own name."""
    if not where:
        return frame
    return f"{where} {function}" + (f" ({RUNNING_MARK})" if line == RUNNING_LINE else "")


def label(name: str, running: frozenset[str] = frozenset()) -> str:
    """A frame as the tree, the collapsed stacks and the flame graph name it: "forward (gpu_anchor.py:21)";
    "main (myscript.py:16, line running at start)" for a frame that was on the stack when the capture began."""
    where, function = location(name)
    if where:
        text = f"{function} ({where}{', ' + RUNNING_MARK if name in running else ''})"
    else:
        text = name if name.startswith(MODULE_PREFIX) else function
    return text.replace(";", ",")


def module_class(name: str) -> str:
    """ "Linear" for "nn.Module: Linear_0" (the profiler numbers a class's instances)."""
    return _INSTANCE_RE.sub("", name[len(MODULE_PREFIX):])


class FrameIndex:
    """The Python frames' nesting (``Enclosing``) and each frame's parent, built once, at first use: the frame tree
    and the sync causes' code lines (``code_line``) both read it.

    Frames that do not nest (a faulty tracer's or a replay's: each step's ``<module>`` frame running into the
    next step's) are not chained: a frame that starts inside another and ends after it closes that one at its
    start (``Enclosing(close_overlapped=True)``). Each step's frames stay a sibling of the last step's, so the tree
    keeps the code's depth and size however many steps there are, and the work after that start is charged to
    the later frame."""

    def __init__(self, c: Collected) -> None:
        self.c = c

    @cached_property
    def frames(self) -> Enclosing:
        c = self.c
        latest = (c.base or 0.0) + max(c.fr_ts, default=0.0)
        return Enclosing(c.fr_thread, c.fr_ts, c.fr_dur, close_overlapped=True, same_end=same_end_us(latest))

    @cached_property
    def running(self) -> frozenset[str]:
        """The frame names on the stack when the capture began (``running_at_start``)."""
        return running_at_start(self.c)

    @cached_property
    def parent(self) -> array:
        parent = array("l", [NONE]) * len(self.c.fr_ts)
        for i, p in self.frames.walk():
            parent[i] = p
        return parent


def frame_tree(c: Collected, chain: LaunchChain, steps: Steps, tree: OpTree, mem: MemoryEvents | None = None,
               folded: bool = True, index: FrameIndex | None = None) -> FrameTree | None:
    """The charged work as a tree of kept frames (see the module's docstring); None without Python frames.

    ``mem`` must be finished (``memory.summarize`` finishes it); its timestamps are the trace's own. ``index``:
    the pass's frame index when something else already built it."""
    if not len(c.fr_ts):
        return None
    frame_names = c.frame_kept
    keep = [not folded or frame_kind(n) != LIBRARY for n in frame_names]
    index = index or FrameIndex(c)
    frames = index.frames
    b = _Builder(len(steps.steps))
    node_of = array("l", [0]) * len(c.fr_ts)
    fr_name = c.fr_name
    for i, p in frames.walk():
        up = node_of[p] if p != NONE else 0
        n = fr_name[i]
        if keep[n]:
            up = b.child(up, frame_names[n])
            b.calls[up] += 1
        node_of[i] = up
    around = _Around(c, frames, node_of, tree)
    op_names = list(c.names)
    root, op_name = tree.root, c.op_name

    def top_op(o: int) -> str:
        return op_names[op_name[root[o]]] if o != NONE else ""

    is_kernel = [key.__class__ is str for key in c.gpu_names]
    gpu: dict[tuple[int, int], list[float]] = {}  # (node, top-level op name id) -> [GPU, kernel] time
    g_dur, g_name, call, op = c.g_dur, c.g_name, chain.call, chain.op
    for g, k in enumerate(steps.of_gpu):
        if k == NONE:
            continue
        o = op[g]
        node = around.launch(call[g], o)
        key = (node, op_name[root[o]] if o != NONE else NONE)
        row = gpu.get(key)
        if row is None:
            row = gpu[key] = [0.0, 0.0]
        d = g_dur[g]
        row[0] += d
        if is_kernel[g_name[g]]:
            row[1] += d
        b.step_gpu_add(node, k, d)
    for (node, n), (total, kernel) in gpu.items():
        b.gpu(node, op_names[n] if n != NONE else "", total, kernel)
    starts = [lo for lo, _ in steps.cpu_spans]
    ends = [hi for _, hi in steps.cpu_spans]
    child = tree.child_us
    cpu: dict[tuple[int, int], float] = {}  # (node, top-level op name id) -> self time
    of_root, node_of_root = around.of_root, around.root_node
    step_cpu_add = b.step_cpu_add
    for o, (d, k) in enumerate(zip(c.op_dur, op_steps(c, steps), strict=True)):
        self_us = d - child[o]
        if self_us <= 0.0 or k == NONE:
            continue
        r = root[o]
        at = of_root.get(r)  # the node of the op's top-level op, looked up once
        if at is None:
            at = node_of_root(r)
        if at == MIXED:
            at = around.op(o)
        key = (at, op_name[r])
        cpu[key] = cpu.get(key, 0.0) + self_us
        step_cpu_add(at, k, self_us)
    for (node, n), us in cpu.items():
        b.cpu(node, op_names[n], us)
    device = _allocations(c, mem, b, frames, node_of, chain.ops, top_op, starts, ends) if mem is not None else ""
    return b.tree(device, index.running)


def code_line(index: FrameIndex) -> Callable[[int, float, float], str] | None:
    """Where in the user's code a host call [lo, hi] on ``thread`` sat: "two_functions.py:41 main", the innermost
    user frame around it ("" when none); None without Python frames. The idle causes name a sync's line with it
    (``steps.step_stats(where=...)``); the index is built at the first call (most traces have no sync) and the
    frame tree reuses it."""
    c = index.c
    if not len(c.fr_ts):
        return None
    names, fr_name = c.frame_kept, c.fr_name

    def where(thread: int, lo: float, hi: float) -> str:
        parent = index.parent
        f = index.frames.innermost(thread, lo, hi)
        while f != NONE and frame_kind(names[fr_name[f]]) != USER:  # --all-frames keeps library frames too
            f = parent[f]
        if f == NONE:
            return ""
        name = names[fr_name[f]]
        at, function = location(name)
        return shown(at, function, name, line_kind(name, index.running))

    return where


MIXED = -2  # a top-level op with frames inside it (Python called back from the op): its ops are looked up each


class _Around:
    """The node of the innermost kept frame around an op or a launch. One frame lookup per top-level op: when no
    frame starts inside it, every op and runtime call inside it has that op's innermost frame; otherwise (Python
    called back from inside an op) each is looked up on its own."""

    def __init__(self, c: Collected, frames: Enclosing, node_of: array, tree: OpTree) -> None:
        self.c, self.frames, self.node_of, self.root = c, frames, node_of, tree.root
        self.starts = {t: found[0] for t, found in frames.threads.items()}
        self.of_root: dict[int, int] = {}

    def _node(self, thread: int, lo: float, hi: float) -> int:
        f = self.frames.innermost(thread, lo, hi)
        return self.node_of[f] if f != NONE else 0

    def _root(self, o: int) -> int:
        r = self.root[o]
        node = self.of_root.get(r)
        return self.root_node(r) if node is None else node

    def root_node(self, r: int) -> int:
        """The node of top-level op ``r`` (MIXED when a frame starts inside it), kept in ``of_root``."""
        c = self.c
        t, lo = c.op_thread[r], c.op_ts[r]
        hi = lo + c.op_dur[r]
        starts = self.starts.get(t)
        pos = bisect_left(starts, lo) if starts is not None else 0
        inside = starts is not None and pos < len(starts) and starts[pos] <= hi
        node = self.of_root[r] = MIXED if inside else self._node(t, lo, hi)
        return node

    def op(self, o: int) -> int:
        node = self._root(o)
        if node != MIXED:
            return node
        c = self.c
        return self._node(c.op_thread[o], c.op_ts[o], c.op_ts[o] + c.op_dur[o])

    def launch(self, i: int, o: int) -> int:
        """GPU work launched by runtime call ``i`` (NONE: not recorded) inside op ``o`` (NONE: none known)."""
        if o != NONE:
            node = self._root(o)
            if node != MIXED:
                return node
        c = self.c
        if i != NONE:
            return self._node(c.rt_thread[i], c.rt_ts[i], c.rt_ts[i] + c.rt_dur[i])
        return self.op(o) if o != NONE else 0


def _allocations(c: Collected, mem: MemoryEvents, b: _Builder, frames: Enclosing, node_of: array,
                 ops: Enclosing, top_op: Callable[[int], str], starts: list[float], ends: list[float]) -> str:
    """Charge the allocations of one device kind (CUDA when there are any, else the CPU); returns its name."""
    if not len(mem):
        return ""
    kinds = {dtype for dtype, _ in mem.devices}
    wanted = CUDA_DEVICE_TYPE if CUDA_DEVICE_TYPE in kinds else min(kinds)
    devices = {d for (dtype, _), d in mem.devices.items() if dtype == wanted}
    thread_of = {t: c.threads.get(key, NONE) for key, t in mem.threads.items()}
    base = c.base or 0.0
    for j, nbytes in enumerate(mem.nbytes):
        if nbytes <= 0 or mem.device[j] not in devices:
            continue
        ts = mem.ts[j] - base
        k = bisect_right(starts, ts) - 1
        if k < 0 or ts > ends[k]:
            continue
        t = thread_of[mem.thread[j]]
        f = frames.innermost(t, ts, ts) if t != NONE else NONE
        o = ops.innermost(t, ts, ts) if t != NONE else NONE
        b.alloc(node_of[f] if f != NONE else 0, top_op(o), nbytes)
    return "cuda" if wanted == CUDA_DEVICE_TYPE else "cpu"


class _Builder:
    """The tree under construction: totals over the steps, divided by their number in ``tree``."""

    def __init__(self, steps: int) -> None:
        self.steps = max(steps, 1)
        self.names, self.kinds, self.parent, self.calls = [""], [USER], [NONE], [0]
        self.children: dict[tuple[int, str], int] = {}
        self.values: list[list[float]] = [[0.0, 0.0, 0.0, 0.0]]
        self.ops: dict[tuple[int, str], list[float]] = {}
        self.step_gpu: dict[int, list[float]] = {}
        self.step_cpu: dict[int, list[float]] = {}

    def child(self, parent: int, name: str) -> int:
        key = (parent, name)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = len(self.names)
            self.names.append(name)
            self.kinds.append(frame_kind(name))
            self.parent.append(parent)
            self.calls.append(0)
            self.values.append([0.0, 0.0, 0.0, 0.0])
        return node

    def _op(self, node: int, op: str) -> list[float]:
        row = self.ops.get((node, op))
        if row is None:
            row = self.ops[(node, op)] = [0.0, 0.0, 0.0, 0.0]
        return row

    def gpu(self, node: int, op: str, us: float, kernel_us: float) -> None:
        v, row = self.values[node], self._op(node, op)
        v[0] += us
        row[0] += us
        v[1] += kernel_us
        row[1] += kernel_us

    def cpu(self, node: int, op: str, us: float) -> None:
        self.values[node][2] += us
        self._op(node, op)[2] += us

    def step_gpu_add(self, node: int, step: int, us: float) -> None:
        series = self.step_gpu.get(node)
        if series is None:
            series = self.step_gpu[node] = [0.0] * self.steps
        series[step] += us

    def step_cpu_add(self, node: int, step: int, us: float) -> None:
        series = self.step_cpu.get(node)
        if series is None:
            series = self.step_cpu[node] = [0.0] * self.steps
        series[step] += us

    def alloc(self, node: int, op: str, nbytes: int) -> None:
        self.values[node][3] += nbytes
        self._op(node, op)[3] += nbytes

    def tree(self, memory_device: str, running: frozenset[str] = frozenset()) -> FrameTree:
        s = self.steps
        cols = [[v[k] / s for v in self.values] for k in range(4)]
        return FrameTree(names=self.names, kinds=self.kinds, parent=self.parent, calls=self.calls,
                         gpu_us=cols[0], kernel_us=cols[1], cpu_us=cols[2], alloc_bytes=cols[3],
                         ops={key: [x / s for x in row] for key, row in self.ops.items()},
                         step_gpu_us=self.step_gpu, step_cpu_us=self.step_cpu, steps=self.steps,
                         memory_device=memory_device, running=running & frozenset(self.names))


def inclusive(tree: FrameTree, values: Sequence[float]) -> list[float]:
    """Per node: its own value plus its descendants' (children are numbered after their parents)."""
    out = list(values)
    parent = tree.parent
    for node in range(len(out) - 1, 0, -1):
        out[parent[node]] += out[node]
    return out


def _outermost(tree: FrameTree) -> list[bool]:
    """Per node: no ancestor has the same frame name (its inclusive value is counted once for the name)."""
    names, parent = tree.names, tree.parent
    out = [True] * len(names)
    for node in range(1, len(names)):
        p = parent[node]
        while p > 0:
            if names[p] == names[node]:
                out[node] = False
                break
            p = parent[p]
    return out


def _ancestry(tree: FrameTree, node: int) -> list[int]:
    """The node and its ancestors below the root, innermost first."""
    out = []
    while node > 0:
        out.append(node)
        node = tree.parent[node]
    return out


def per_frame(tree: FrameTree) -> dict[str, dict[str, float]]:
    """Per frame name: calls and inclusive/self of each value (a name's nodes summed, nested repeats once)."""
    incl = {k: inclusive(tree, getattr(tree, f)) for k, f in
            (("gpu", "gpu_us"), ("kernel", "kernel_us"), ("cpu", "cpu_us"), ("alloc", "alloc_bytes"))}
    outer = _outermost(tree)
    out: dict[str, dict[str, float]] = {}
    for node in range(1, len(tree.names)):
        row = out.setdefault(tree.names[node], dict.fromkeys(
            ("calls", "gpu", "gpu_self", "kernel", "cpu", "cpu_self", "alloc", "alloc_self"), 0.0))
        row["calls"] += tree.calls[node]
        row["gpu_self"] += tree.gpu_us[node]
        row["cpu_self"] += tree.cpu_us[node]
        row["alloc_self"] += tree.alloc_bytes[node]
        if outer[node]:
            for k, values in incl.items():
                row[k] += values[node]
    return out


def frame_series(tree: FrameTree, gpu: bool) -> dict[str, tuple[list[float], list[float]]]:
    """Per frame name: (inclusive, self) per step, of GPU time when ``gpu`` else of CPU op time (``--diff``)."""
    own = tree.step_gpu_us if gpu else tree.step_cpu_us
    zero = [0.0] * tree.steps
    per_node = [own.get(node, zero) for node in range(len(tree.names))]
    incl = [list(v) for v in per_node]
    for node in range(len(incl) - 1, 0, -1):
        p = tree.parent[node]
        incl[p] = [a + b for a, b in zip(incl[p], incl[node], strict=True)]
    outer = _outermost(tree)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for node in range(1, len(tree.names)):
        name = tree.names[node]
        total, self_ = out.get(name) or ([0.0] * tree.steps, [0.0] * tree.steps)
        self_ = [a + b for a, b in zip(self_, per_node[node], strict=True)]
        if outer[node]:
            total = [a + b for a, b in zip(total, incl[node], strict=True)]
        out[name] = (total, self_)
    return out


def _top_ops(tree: FrameTree, names: Iterable[str], column: int) -> dict[str, str]:
    """Per frame name of ``names``: the top-level op with the most of value ``column`` under it."""
    wanted = set(names)
    sums: dict[tuple[str, str], float] = {}
    for (node, op), row in tree.ops.items():
        if not op or not row[column]:
            continue
        seen = set()
        for a in _ancestry(tree, node):
            name = tree.names[a]
            if name in wanted and name not in seen:
                seen.add(name)
                sums[(name, op)] = sums.get((name, op), 0.0) + row[column]
    best: dict[str, tuple[float, str]] = {}
    for (name, op), v in sums.items():
        if name not in best or v > best[name][0]:
            best[name] = (v, op)
    return {name: op for name, (_, op) in best.items()}


def frame_summary(tree: FrameTree, frame_events: int, folded: bool, has_gpu: bool, top: int) -> Frames:
    """The answer for the text summary and --json: the top frames and the nn.Module classes.

    Frames rank by self time (GPU, then CPU op time), inclusive breaking ties: the lines where the time is spent,
    not the entry chain (``<module>`` -> ``main`` -> ...) that holds all of it; the tree shows that."""
    rows = per_frame(tree)
    gpu_total, cpu_total = sum(tree.gpu_us), sum(tree.cpu_us)
    kinds = dict(zip(tree.names, tree.kinds, strict=True))
    ranked = sorted((name for name in rows if kinds[name] != MODULE),
                    key=lambda name: (-rows[name]["gpu_self"], -rows[name]["gpu"], -rows[name]["cpu_self"],
                                      -rows[name]["cpu"], name))[:top]
    ops = _top_ops(tree, ranked, 0 if has_gpu and gpu_total else 2)
    frames = []
    for name in ranked:
        r = rows[name]
        where, function = location(name)
        frames.append(FrameStat(
            frame=name, kind=kinds[name], location=where, function=function,
            line=line_kind(name, tree.running), calls=int(r["calls"]),
            gpu_us=r["gpu"], gpu_self_us=r["gpu_self"], kernel_us=r["kernel"], cpu_us=r["cpu"],
            cpu_self_us=r["cpu_self"], alloc_bytes=r["alloc"], alloc_self_bytes=r["alloc_self"],
            gpu_pct=percent(r["gpu"], gpu_total) if has_gpu else None, cpu_pct=percent(r["cpu"], cpu_total),
            top_op=ops.get(name, "")))
    classes: dict[str, list[float]] = {}
    instances: dict[str, set[str]] = {}
    for name, r in rows.items():
        if kinds[name] != MODULE:
            continue
        cls = module_class(name)
        acc = classes.setdefault(cls, [0.0] * 5)
        for k, key in enumerate(("calls", "gpu", "kernel", "cpu", "alloc")):
            acc[k] += r[key]
        instances.setdefault(cls, set()).add(name)
    modules = [ModuleStat(module_class=cls, instances=len(instances[cls]), calls=int(v[0]), gpu_us=v[1],
                          kernel_us=v[2], cpu_us=v[3], alloc_bytes=v[4],
                          gpu_pct=percent(v[1], gpu_total) if has_gpu else None, cpu_pct=percent(v[3], cpu_total))
               for cls, v in sorted(classes.items(), key=lambda item: (-item[1][1], -item[1][3], item[0]))][:top]
    return Frames(frame_events=frame_events, folded=folded, steps=tree.steps, gpu=has_gpu, gpu_us=gpu_total,
                  cpu_us=cpu_total, alloc_bytes=sum(tree.alloc_bytes), memory_device=tree.memory_device,
                  unattributed_gpu_us=tree.gpu_us[0], unattributed_cpu_us=tree.cpu_us[0], frames=frames,
                  modules=modules)


COLLAPSED_VALUES = {"gpu": (0, 1000.0), "cpu": (2, 1000.0), "memory": (3, 1.0)}  # name -> (column, scale)
NO_FRAME = "(no Python frame)"


def collapsed_stacks(tree: FrameTree, value: str) -> list[str]:
    """One line per (stack, top-level op): ``frame;frame;op value``, the format flamegraph.pl, inferno and
    speedscope read. ``value``: "gpu" or "cpu" (nanoseconds per step, integers) or "memory" (bytes per step);
    lines whose value rounds to 0 are left out."""
    column, scale = COLLAPSED_VALUES[value]
    stacks: dict[int, str] = {}

    def stack(node: int) -> str:
        s = stacks.get(node)
        if s is None:
            s = stacks[node] = ";".join(label(tree.names[a], tree.running)
                                        for a in reversed(_ancestry(tree, node))) or NO_FRAME
        return s

    out = []
    for (node, op), row in sorted(tree.ops.items(), key=lambda item: (item[0][0], item[0][1])):
        v = round(row[column] * scale)
        if v > 0:
            out.append(f"{stack(node)};{op.replace(';', ',') or '(no op)'} {v}")
    return out
