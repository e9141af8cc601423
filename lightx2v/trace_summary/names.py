"""Readable names: short kernel names for a terminal, worker and rank names from trace file names.

    short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)")
    # 'vectorized_elementwise_kernel<FillFunctor>'
    worker_name("rank1_node7.1732873.pt.trace.json.gz")   # 'rank1_node7'
    rank_from_name("trace.rank3.json")                     # 3
"""

from __future__ import annotations

import os
import re

# The file names TensorBoard's PyTorch Profiler plugin shows as workers; one definition, in the profiler (light:
# it imports only the standard library until a capture starts).
from lightx2v.utils.torch_trace_profiler import TENSORBOARD_TRACE_RE as PLUGIN_TRACE_RE

_RANK_RE = re.compile(r"(?:^|[^a-z])rank[_\-.]?(\d+)", re.IGNORECASE)


def short_name(name: str, width: int = 0) -> str:
    """``kernel<FirstTypeArg>`` without namespaces, return type and parameters; cut to ``width`` if > 0.

    C++ kernel names are mostly template noise; the kernel's own name plus its first named template argument
    (usually the functor: ``CUDAFunctor_add``, ``GeluCUDAKernelImpl``) is what tells two kernels apart.
    """
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    base, targs, _ = _split_angle(s)
    base = _last_component(_drop_params(base))
    arg = next((a for a in _split_top(targs) if any(c.isalpha() for c in a) and a not in _PLAIN_ARGS), None)
    out = f"{base}<{_last_component(_cut_at(arg, '(<'))}>" if arg else base
    out = out.strip() or name
    return cut(out, width) if width else out


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in ``...`` when it was longer."""
    return text if len(text) <= width else text[: width - 3] + "..."


_PLAIN_ARGS = frozenset({"true", "false", "float", "double", "int", "bool", "long", "unsigned int", "half"})


def _split_angle(s: str) -> tuple[str, str, str]:
    """(text before the first top-level '<', its template arguments, the rest)."""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "<" and depth == 0:
            level = 0
            for j in range(i, len(s)):
                level += {"<": 1, ">": -1}.get(s[j], 0)
                if level == 0:
                    return s[:i], s[i + 1:j], s[j + 1:]
            return s[:i], s[i + 1:], ""
    return s, "", ""


def _split_top(s: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur).strip())
    return [p for p in parts if p]


def _drop_params(s: str) -> str:
    s = s.rstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, 0, -1):
        depth += {")": 1, "(": -1}.get(s[i], 0)
        if depth == 0:
            return s[:i]
    return s


def _cut_at(s: str, chars: str) -> str:
    cut = min((i for i in (s.find(c) for c in chars) if i > 0), default=len(s))
    return s[:cut]


def _last_component(s: str) -> str:
    return s.strip().rsplit("::", 1)[-1].strip()


def worker_name(path: str) -> str:
    """The worker part of a trace file name, as the TensorBoard plugin shows it (chrome files: name sans .json)."""
    base = os.path.basename(path)
    match = PLUGIN_TRACE_RE.match(base)
    if match:
        return match.group(1)
    for suffix in (".json.gz", ".json", ".gz"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def rank_from_name(path: str) -> int | None:
    """Rank encoded in a file name (``rank1_host...``, ``trace.rank1.json``), if any."""
    match = _RANK_RE.search(os.path.basename(path))
    return int(match.group(1)) if match else None
