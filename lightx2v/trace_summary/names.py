"""Readable names: short kernel names for a terminal, worker and rank names from trace file names.

    short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)")
    # 'vectorized_elementwise_kernel<FillFunctor>'
    short_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(...::Params)")
    # 'cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>'
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
    """A kernel's name for a text table: one rule for the summary, ``--diff`` and the trace browser.

    Demangle-style: the return type (``void``, ``std::enable_if<...>::type``), the parameter list and
    ``(anonymous namespace)`` go; the kernel's own name stays (the last part of its qualified name; a bare
    ``kernel`` / ``Kernel`` / ``device_kernel`` keeps its namespace: ``cutlass::Kernel<...>``), with its first
    named template argument (the functor or tile config: ``CUDAFunctor_add``, ``GeluCUDAKernelImpl``; numbers,
    ``true``/``false``, builtin types and ``decltype(...)`` are skipped), since the rest is template noise. Names
    that are not C++ (``nvjet_sm90_...``, ``triton_...``) are kept whole; an Itanium-mangled name (``_ZN...``)
    gets the same treatment from its leading components. Cut to ``width`` (``cut``) if > 0: only a column in
    the middle of a row is cut; the last column of a table shows the whole short name.
    """
    s = name.strip()
    if s.startswith("_Z"):
        out = _mangled(s) or s
        return cut(out, width) if width else out
    s = s.replace("(anonymous namespace)::", "").replace("{anonymous}::", "")
    s = _drop_return_type(_drop_params(s))
    base, targs, _ = _split_angle(s)
    base = _own_name(base)
    arg = next((a for a in map(_arg_name, _split_top(targs)) if a), None)
    out = f"{base}<{arg}>" if arg else base
    out = out.strip() or name
    return cut(out, width) if width else out


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in ``...`` when it was longer: for a column in the middle of a
    row (the last column is never cut)."""
    return text if len(text) <= width else text[: width - 3] + "..."


_PLAIN_ARGS = frozenset({"true", "false", "float", "double", "int", "bool", "long", "unsigned int", "half", "char",
                         "short", "unsigned", "unsigned long", "long long", "unsigned long long", "unsigned char",
                         "signed char", "unsigned short", "decltype", "nullptr"})
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[uUlLfF]*$")  # 4, 1ul, 0u, 1.0f
_GENERIC = re.compile(r"^(device_)?[kK]ernel\d*$")  # names that say nothing without their namespace


def _own_name(qualified: str) -> str:
    """``vectorized_elementwise_kernel`` of ``at::native::vectorized_elementwise_kernel``; ``cutlass::Kernel``."""
    parts = [p.strip() for p in qualified.strip().split("::")]
    if len(parts) > 1 and _GENERIC.match(parts[-1]):
        return "::".join(parts[-2:])
    return parts[-1]


def _arg_name(arg: str) -> str:
    """A template argument's own name (``CUDAFunctor_add`` of ``at::native::CUDAFunctor_add<float>``), or ""
    for one that tells kernels apart by nothing but a number, a flag or a builtin type."""
    arg = arg.strip()
    if not arg or arg.startswith("(") or _NUMBER.match(arg):
        return ""
    arg = _last_component(_cut_at(arg, "(<"))
    while arg.endswith((" const", "*", "&")):  # Half const*, Half* const, Half const&: Half
        arg = arg.removesuffix(" const").rstrip("*& ")
    if not any(c.isalpha() for c in arg) or arg in _PLAIN_ARGS or _NUMBER.match(arg):
        return ""
    return arg


def _drop_return_type(s: str) -> str:
    """The text after the last space outside ``<>``, ``()``, ``{}`` and ``[]``: ``void f<T>`` -> ``f<T>``."""
    depth = 0
    last = -1
    for i, ch in enumerate(s):
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        elif ch == " " and depth == 0:
            last = i
    return s[last + 1:] if last >= 0 and s[last + 1:] else s


def _mangled(s: str) -> str:
    """``cutlass_cudnn_train::Kernel<ImplicitGemmConvolution>`` of ``_ZN19cutlass_cudnn_train6KernelINS_4conv...``:
    the nested name's components and the last component of the first template argument's name; "" when the
    name does not start that way."""
    i = 3 if s.startswith("_ZN") else 2
    parts, i = _source_names(s, i)
    if not parts:
        return ""
    out = _own_name("::".join(parts))
    if i < len(s) and s[i] == "I":  # template arguments: the first one's name, when it is a name
        j = i + 1
        while j < len(s) and not _digit(s[j]):
            if s.startswith(("St", "Sa", "Sb", "Ss", "Si", "So", "Sd"), j):  # std:: and its abbreviations
                j += 2
            elif s[j] == "S":  # a substitution, S_ or S<seq-id>_
                end = s.find("_", j)
                if end < 0:
                    break
                j = end + 1
            elif s[j] in "NKVr":  # a nested name's start, qualifiers
                j += 1
            else:  # a builtin type or a literal: no name
                break
        arg, _ = _source_names(s, j)
        if arg and arg[-1] not in _PLAIN_ARGS:
            out += f"<{arg[-1]}>"
    return out


def _digit(c: str) -> bool:
    """An ASCII digit: a mangled name's lengths are written in them (``str.isdigit`` also takes ``¹``, which
    ``int`` refuses, and ``٣``, which it reads as 3)."""
    return "0" <= c <= "9"


def _source_names(s: str, i: int) -> tuple[list[str], int]:
    """The ``<length><identifier>`` run from ``i`` of a mangled name: (identifiers, where the run ends)."""
    parts = []
    while i < len(s) and _digit(s[i]):
        j = i
        while j < len(s) and _digit(s[j]):
            j += 1
        n = int(s[i:j])
        if n == 0 or j + n > len(s):
            break
        parts.append(s[j:j + n])
        i = j + n
    return parts, i


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
            return s[:i].rstrip()  # "k<F> (int)": no space left for _drop_return_type to take as its end
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
