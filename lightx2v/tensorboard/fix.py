"""What a plugin fix is, and the two probes its check uses: shared by `patches` (the list of fixes) and
`offline` (two of them), so neither module imports the other's internals.

A `Fix` is checked before it is applied: `check()` says whether the installed torch-tb-profiler still looks the
way the fix expects (the names and code it touches exist), so a changed plugin costs one warning, not a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# The fixes' names, in `patches.FIXES` order: here, in a module that imports nothing, so the settings registry can
# check `LIGHTX2V_TB_SKIP_FIXES` without importing the plugin (a test keeps the two lists equal).
FIX_NAMES = ("rescan", "reload_runs", "newest_first", "loader_children", "manager_exits", "stack_route",
             "offline_trace", "charts_notice", "trace_limit", "cuda_runtime", "call_stacks", "gpu_steps",
             "step_ranges", "stream_parse", "parse_errors")


@dataclass(frozen=True)
class Fix:
    name: str
    what: str  # one line, for logs and docs
    where: str  # "server" (TensorBoard's process) or "parser" (each trace-parsing child process)
    check: Callable[[], str | None]  # None when the plugin looks as expected, else what differs
    apply: Callable[[], None]


def code_names(func: Any) -> set[str]:
    """Global and attribute names a function's code uses (its own code only)."""
    code = getattr(func, "__code__", None)
    return set(code.co_names) if code is not None else set()


def missing(obj: Any, *names: str) -> str | None:
    """What `obj` lacks of `names` (one line), or None when it has them all."""
    absent = [name for name in names if not hasattr(obj, name)]
    return f"{getattr(obj, '__name__', obj)} has no {', '.join(absent)}" if absent else None


def mark_fixed(func: Callable[..., Any], original: Callable[..., Any] | None = None) -> None:
    """Mark a replacement function as ours (so a second apply is a no-op), keeping what it replaced."""
    setattr(func, "_lightx2v_fix", True)  # noqa: B010  (functions take any attribute; typed code cannot say so)
    if original is not None:
        setattr(func, "__wrapped__", original)  # noqa: B010


def is_fixed(func: Any) -> bool:
    """Whether ``func`` is a replacement that ``mark_fixed`` marked."""
    return bool(getattr(func, "_lightx2v_fix", False))
