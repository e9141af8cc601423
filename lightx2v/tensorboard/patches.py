"""In-process fixes for torch-tb-profiler 0.4.3 (unmaintained), applied before TensorBoard builds the plugin.

Each fix is a `Fix`: `check()` says whether the installed plugin still looks the way the fix expects (the
names and code it touches exist), `apply()` changes module attributes or class methods. A fix whose check
fails logs one warning naming it and is skipped; TensorBoard then starts with the plugin's own behaviour
for that part. Nothing of the plugin's source is copied or edited on disk.

The plugin parses traces in child processes, which do not share TensorBoard's patched modules: fixes to
parsing (`where="parser"`) are therefore re-applied inside each child, by wrapping the process target the
loader starts (`_loader_child`). Fixes to the server (`where="server"`) apply once, in TensorBoard's process.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

from lightx2v import settings
from lightx2v.hostcheck import HostCheck, guard_wsgi
from lightx2v.tensorboard import large, offline
from lightx2v.tensorboard.fix import Fix, code_names, is_fixed, mark_fixed, missing

logger = logging.getLogger("lightx2v.tensorboard")

RESCAN_SECONDS = 1
"""How often the plugin looks for new or changed runs (0.4.3: every 10 s, hard-coded)."""

RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
"""Kineto's current names for host-side CUDA API events; 0.4.3 only knows the older `runtime`."""


# --- (a) new runs listed within ~1-2 s -------------------------------------------------------------------

def _check_rescan() -> str | None:
    from torch_tb_profiler import consts

    value = getattr(consts, "MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS", None)
    if not isinstance(value, (int, float)):
        return "torch_tb_profiler.consts.MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS is missing"
    return None


def _apply_rescan() -> None:
    import torch_tb_profiler.plugin  # noqa: F401  (load every module that may have imported it by value)
    from torch_tb_profiler import consts

    old = consts.MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS
    for name, module in list(sys.modules.items()):
        if (name == "torch_tb_profiler" or name.startswith("torch_tb_profiler.")) and \
                getattr(module, "MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS", None) == old:
            setattr(module, "MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS", RESCAN_SECONDS)  # noqa: B010


# --- (b) files added to / rewritten in an already-loaded run directory are (re)loaded --------------------

_PLUGIN_STATE = ("logdir", "_runs", "_runs_lock", "_load_lock", "_load_threads", "_queue", "_cache", "_monitor_runs")


def _check_monitor() -> str | None:
    from torch_tb_profiler import io, plugin, utils

    cls = plugin.TorchProfilerPlugin
    problem = (missing(cls, "_monitor_runs", "_get_run_name", "_receive_runs")
               or missing(plugin, "RunLoader") or missing(io, "walk", "join") or missing(io.file, "is_local", "stat")
               or missing(utils, "is_chrome_trace_file"))
    if problem:
        return problem
    absent = [name for name in _PLUGIN_STATE if name not in code_names(cls.__init__)]
    if absent:
        return f"TorchProfilerPlugin.__init__ no longer sets {', '.join(absent)}"
    if "_queue" not in code_names(cls._receive_runs):
        return "TorchProfilerPlugin._receive_runs no longer takes loaded runs from _queue"
    return None


def _apply_monitor() -> None:
    from torch_tb_profiler import plugin

    from lightx2v.tensorboard.run_monitor import monitor_runs

    plugin.TorchProfilerPlugin._monitor_runs = monitor_runs


# --- (c) the run list newest first, so the page opens on the latest capture ------------------------------

def _check_newest_first() -> str | None:
    from torch_tb_profiler import plugin

    cls = plugin.TorchProfilerPlugin
    problem = missing(cls, "_receive_runs", "runs_route")
    if problem:
        return problem
    if "_receive_runs" not in code_names(cls.__init__):
        return "TorchProfilerPlugin.__init__ no longer starts its receive_runs thread"
    absent = [name for name in ("_runs", "_runs_lock", "_queue") if name not in code_names(cls._receive_runs)]
    if absent:
        return f"TorchProfilerPlugin._receive_runs no longer uses {', '.join(absent)}"
    return None


def _apply_newest_first() -> None:
    from torch_tb_profiler import plugin

    from lightx2v.tensorboard.run_monitor import receive_runs

    plugin.TorchProfilerPlugin._receive_runs = receive_runs


# --- the loader's child processes: parser fixes inside, and no orphans ------------------------------------

_parser_fixes: tuple[str, ...] = ()


def _check_loader_children() -> str | None:
    from torch_tb_profiler.profiler import loader

    if not hasattr(loader, "Process") or "Process" not in code_names(loader.RunLoader.load):
        return "torch_tb_profiler.profiler.loader.RunLoader.load no longer starts multiprocessing Processes"
    return None


def _apply_loader_children() -> None:
    from torch_tb_profiler.profiler import loader

    start_process = _forkserver_process() or loader.Process

    def process(*, target, args=(), kwargs=None, **options):
        options["daemon"] = True  # terminated when TensorBoard exits instead of joined
        return start_process(target=_loader_child, args=(_parser_fixes, target, tuple(args), dict(kwargs or {})),
                             **options)

    loader.Process = process


def _forkserver_process():
    """Process class of a forkserver that has the plugin's parser imported already, or None.

    0.4.3 `spawn`s a fresh interpreter per trace, which spends ~0.8 s importing the plugin (pandas, ...)
    before parsing anything. A forkserver pays that once; forking from its single-threaded server is as
    safe as spawn. Left alone when TORCH_PROFILER_START_METHOD chooses a start method explicitly.
    """
    import multiprocessing

    if os.environ.get("TORCH_PROFILER_START_METHOD") or "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch_tb_profiler.profiler.loader", "lightx2v.tensorboard.patches"])
    return context.Process


def _loader_child(fix_names, target, args, kwargs):
    """Entry point of a trace-parsing child: apply the parser fixes, then run the plugin's own target."""
    _exit_with_parent()
    for fix in FIXES:
        if fix.name in fix_names:
            try:
                fix.apply()
            except Exception as exc:  # the parent's check passed; keep parsing unpatched rather than fail
                logger.warning("lightx2v.tensorboard: fix %r failed in a parser process: %s", fix.name, exc)
    return target(*args, **kwargs)


def _exit_with_parent(interval: float = 0.5) -> None:
    """Exit this helper process once its parent is gone (TensorBoard, or the forkserver that dies with it),
    even after a `kill -9` of TensorBoard."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-tensorboard", daemon=True).start()


def _check_manager() -> str | None:
    from torch_tb_profiler import multiprocessing as tb_mp
    from torch_tb_profiler.io import cache

    problem = missing(tb_mp, "Manager", "get_start_method")
    if problem:
        return problem
    if getattr(cache, "mp", None) is not tb_mp or "Manager" not in code_names(cache.Cache.__init__):
        return ("torch_tb_profiler.io.cache.Cache no longer creates its Manager through "
                "torch_tb_profiler.multiprocessing")
    return None


def _apply_manager() -> None:
    import multiprocessing
    from multiprocessing.managers import SyncManager

    from torch_tb_profiler import multiprocessing as tb_mp

    def manager():
        started = SyncManager(ctx=multiprocessing.get_context(tb_mp.get_start_method()))
        started.start(initializer=_exit_with_parent)
        return started

    tb_mp.Manager = manager


# --- (c) device time on traces whose runtime events are cuda_runtime / cuda_driver -----------------------

def _check_runtime_categories() -> str | None:
    from torch_tb_profiler.profiler import trace

    mapping = getattr(trace, "EventTypeMap", None)
    if not isinstance(mapping, dict) or mapping.get("runtime") != getattr(trace.EventTypes, "RUNTIME", object()):
        return "torch_tb_profiler.profiler.trace.EventTypeMap no longer maps 'runtime' to EventTypes.RUNTIME"
    return None


def _apply_runtime_categories() -> None:
    from torch_tb_profiler.profiler import trace

    for category in RUNTIME_CATEGORIES:
        trace.EventTypeMap.setdefault(category, trace.EventTypes.RUNTIME)


# --- (e) one step per ProfilerStep: torch >= 2 writes each one twice ------------------------------------

STEP_PREFIX = "ProfilerStep#"


def is_gpu_step(event: dict) -> bool:
    """A `ProfilerStep#N` span on a GPU stream: torch >= 2 writes one (`gpu_user_annotation`) beside each CPU
    step. 0.4.3 maps both categories to USER_ANNOTATION and takes every copy for a step of its own: the Overview
    lists each step twice and, once `cuda_runtime` gives the trace device time, its per-step pass leaves the copies
    zero-long and divides by them (ZeroDivisionError: a multi-step GPU trace does not load). The plugin derives a
    step's device extent itself, from the kernels its CPU step launched, so dropping the copies loses nothing."""
    cat, name = event.get("cat"), event.get("name")
    return (event.get("ph") == "X" and isinstance(cat, str) and cat.lower() == "gpu_user_annotation"
            and isinstance(name, str) and name.startswith(STEP_PREFIX))


def _check_gpu_steps() -> str | None:
    from torch_tb_profiler.profiler import data, trace

    problem = missing(trace, "create_event", "EventTypeMap", "EventTypes")
    if problem:
        return problem
    if trace.EventTypeMap.get("gpu_user_annotation") != getattr(trace.EventTypes, "USER_ANNOTATION", object()):
        return "trace.EventTypeMap no longer maps gpu_user_annotation to EventTypes.USER_ANNOTATION"
    if "create_event" not in code_names(data.RunProfileData.__init__):
        return "RunProfileData.__init__ no longer builds its events with trace.create_event"
    return None


def _apply_gpu_steps() -> None:
    from torch_tb_profiler.profiler import trace

    original = trace.create_event
    if is_fixed(original):
        return

    def create_event(event, is_pytorch_lightning):
        return None if is_gpu_step(event) else original(event, is_pytorch_lightning)

    mark_fixed(create_event, original)
    trace.create_event = create_event


# --- (d) call stacks for torch >= 2 traces, and no HTTP 500 from the call-stack view ---------------------

def _check_call_stacks() -> str | None:
    from torch_tb_profiler.profiler import data, trace

    problem = missing(data.RunProfileData, "process") or missing(trace, "OperatorEvent", "EventTypes")
    if problem:
        return problem
    if "callstack" not in code_names(trace.OperatorEvent.__init__):
        return "trace.OperatorEvent no longer has a callstack attribute"
    if not hasattr(trace.EventTypes, "PYTHON_FUNCTION") or not hasattr(trace.EventTypes, "OPERATOR"):
        return "trace.EventTypes has no PYTHON_FUNCTION / OPERATOR"
    return None


def _apply_call_stacks() -> None:
    from torch_tb_profiler.profiler import data, trace

    from lightx2v.tensorboard.callstack import attach_call_stacks

    original = data.RunProfileData.process
    if is_fixed(original):
        return
    frame_types = {trace.EventTypes.PYTHON_FUNCTION, getattr(trace.EventTypes, "MODULE", None)}

    def process(self):
        # stream_parse attached them already, from the frames it then dropped
        events = [] if getattr(self, "call_stacks_attached", False) else getattr(self, "events", None) or []
        attach_call_stacks(
            (e for e in events if e.type in frame_types),
            (e for e in events if e.type == trace.EventTypes.OPERATOR and isinstance(e, trace.OperatorEvent)),
        )
        return original(self)

    mark_fixed(process)
    data.RunProfileData.process = process


def _check_stack_route() -> str | None:
    from torch_tb_profiler import plugin

    cls = plugin.TorchProfilerPlugin
    problem = missing(cls, "operation_stack_route", "_get_profile_for_request", "_validate", "respond_as_json")
    if problem:
        return problem
    if "operation_stack_route" not in code_names(cls.get_plugin_apps):
        return "TorchProfilerPlugin.get_plugin_apps no longer routes /operation/stack to operation_stack_route"
    return None


def _apply_stack_route() -> None:
    from torch_tb_profiler import plugin
    from werkzeug import wrappers

    @wrappers.Request.application  # type: ignore[arg-type]  # a method: werkzeug takes the request last
    def operation_stack_route(self, request):
        profile = self._get_profile_for_request(request)
        op_name = request.args.get("op_name")
        self._validate(op_name=op_name)
        if request.args.get("group_by") == "OperationAndInputShape":
            tables = profile.operation_stack_by_name_input
            key = f"{op_name}###{request.args.get('input_shape')}"
        else:
            tables = profile.operation_stack_by_name
            key = str(op_name)
        table = (tables or {}).get(key)
        if table is None:  # op without a recorded stack: an empty table, not a KeyError -> HTTP 500
            sort = "device_self_duration" if getattr(profile, "has_kernel", False) else "host_self_duration"
            table = {"metadata": {"sort": sort, "tooltips": {}}, "data": []}
        return self.respond_as_json(table)

    plugin.TorchProfilerPlugin.operation_stack_route = operation_stack_route


PARSE_FAILED = "Failed to parse profile data for Run %s on %s. Exception=%s"  # 0.4.3's loader, with exc_info


class ParseFailureLine(logging.Filter):
    """The plugin logs a trace it cannot parse with a 20-40 line traceback (two, chained, when our streamed parse
    hands it on first); the run monitor then says what to do. This keeps one line: the run, the worker, why."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != PARSE_FAILED or not isinstance(record.args, tuple) or len(record.args) != 3:
            return True
        run, worker, exc = record.args
        why = _not_streamed(exc) or exc  # our reader's message names the file and the damage: "empty file", ...
        record.msg = "lightx2v.tensorboard: run %s, worker %s: cannot be parsed: %s"
        record.args = (run, worker, str(why) or type(why).__name__)
        record.exc_info = record.exc_text = None
        return True


def _not_streamed(exc: object) -> BaseException | None:
    """The NotStreamed that sent this trace to the plugin's own parse, where the plugin's failure followed it."""
    seen = 0
    while isinstance(exc, BaseException) and seen < 8:  # JSONDecodeError <- StopIteration <- NotStreamed
        if isinstance(exc, large.NotStreamed):
            return exc
        exc, seen = exc.__context__, seen + 1
    return None


def _check_parse_errors() -> str | None:
    from torch_tb_profiler import consts
    from torch_tb_profiler.profiler import loader

    if PARSE_FAILED not in loader.RunLoader._process_data.__code__.co_consts or not consts.PLUGIN_NAME:
        return "torch_tb_profiler.profiler.loader.RunLoader._process_data no longer logs its parse failures so"
    return None


def _apply_parse_errors() -> None:
    from torch_tb_profiler import consts

    plugin_logger = logging.getLogger(consts.PLUGIN_NAME)
    if not any(isinstance(f, ParseFailureLine) for f in plugin_logger.filters):
        plugin_logger.addFilter(ParseFailureLine())


FIXES: tuple[Fix, ...] = (
    Fix("rescan", f"new runs are found every {RESCAN_SECONDS} s instead of every 10 s", "server",
        _check_rescan, _apply_rescan),
    Fix("reload_runs", "files added to or rewritten in an already-loaded run directory are (re)loaded",
        "server", _check_monitor, _apply_monitor),
    Fix("newest_first", "the run list is newest first, so the page opens on the latest capture (0.4.3: name "
        "order, the oldest first)", "server", _check_newest_first, _apply_newest_first),
    Fix("loader_children", "traces are parsed in children forked from a preloaded server (not a fresh "
        "interpreter each), which get the parser fixes and exit with TensorBoard",
        "server", _check_loader_children, _apply_loader_children),
    Fix("manager_exits", "the plugin's cache manager process exits with TensorBoard", "server",
        _check_manager, _apply_manager),
    Fix("stack_route", "the call-stack view answers an empty table instead of HTTP 500", "server",
        _check_stack_route, _apply_stack_route),
    Fix("offline_trace", "the Trace view loads its Web Components polyfill from this server, not a CDN", "server",
        offline.check_offline_trace, offline.apply_offline_trace),
    Fix("charts_notice", "where Google Charts cannot load, the page says so and keeps working instead of spinning",
        "server", offline.check_charts_notice, offline.apply_charts_notice),
    Fix("trace_limit", "past LIGHTX2V_TB_TRACE_VIEW_MAX_MB of JSON the Trace view says so, with a link to the trace "
        "browser's Timeline, instead of sending the browser more than it can open", "server",
        large.check_trace_limit, large.apply_trace_limit),
    Fix("cuda_runtime", "device time counts cuda_runtime / cuda_driver events", "parser",
        _check_runtime_categories, _apply_runtime_categories),
    Fix("call_stacks", "operator call stacks are rebuilt from python_function events", "parser",
        _check_call_stacks, _apply_call_stacks),
    Fix("gpu_steps", "each ProfilerStep is one step (not also its copy on the GPU stream, which 0.4.3 listed "
        "twice and, with device time, divided by zero on)", "parser", _check_gpu_steps, _apply_gpu_steps),
    Fix("step_ranges", "the Overview's per-step costs bisect the trace's busy ranges instead of walking them "
        "from the start for every step", "parser", large.check_step_ranges, large.apply_step_ranges),
    Fix("stream_parse", "traces are streamed into the plugin, the events and args no view reads dropped on the way",
        "parser", large.check_stream_parse, large.apply_stream_parse),
    Fix("parse_errors", "a trace that cannot be parsed is one log line (run, worker, why) instead of a traceback",
        "parser", _check_parse_errors, _apply_parse_errors),
)


def skipped_fixes(skip: frozenset[str] = frozenset()) -> frozenset[str]:
    """`skip` and $LIGHTX2V_TB_SKIP_FIXES together, checked: an unknown name is a `settings.SettingError` (one
    line naming the known ones), so a typo never leaves a fix on silently."""
    from_env = frozenset(settings.get(settings.TB_SKIP_FIXES))  # the registry checks these names
    unknown = sorted(frozenset(skip) - {fix.name for fix in FIXES} - {"all"})
    if unknown:
        raise settings.SettingError(f"unknown fix name {', '.join(unknown)}; known: "
                                    f"{', '.join(fix.name for fix in FIXES)}, all")
    return frozenset(skip) | from_env


def apply_fixes(skip: frozenset[str] = frozenset()) -> dict[str, str | None]:
    """Apply every fix whose check passes; returns {fix name: None if applied, else why not}.

    One warning is logged for each fix that cannot be applied. `skip` names fixes to leave out
    (also read from the comma-separated env var LIGHTX2V_TB_SKIP_FIXES; `all` skips every fix); an unknown
    name raises `settings.SettingError`.
    """
    global _parser_fixes
    skip = skipped_fixes(skip)
    if "all" in skip:
        skip = frozenset(fix.name for fix in FIXES)
    results: dict[str, str | None] = {}
    for fix in FIXES:
        if fix.name in skip:
            results[fix.name] = "skipped on request"
            continue
        try:
            problem = fix.check()
        except Exception as exc:  # e.g. a module renamed away
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None and fix.where == "parser" and results.get("loader_children") is not None:
            problem = "the plugin's parser processes could not be patched (see loader_children)"
        if problem is None:
            try:
                if fix.where == "server":
                    fix.apply()
            except Exception as exc:
                problem = f"applying it failed: {type(exc).__name__}: {exc}"
        results[fix.name] = problem
        if problem is not None and fix.name not in skip:
            logger.warning("lightx2v.tensorboard: fix %r not applied (%s): %s. TensorBoard runs without it.",
                           fix.name, fix.what, problem)
    _parser_fixes = tuple(fix.name for fix in FIXES if fix.where == "parser" and results[fix.name] is None)
    return results


def guard_hosts(check: HostCheck) -> None:
    """Put the Host check (`lightx2v.hostcheck`) in front of TensorBoard's whole WSGI app: every route, every
    plugin. TensorBoard builds its server through `program.create_port_scanning_werkzeug_server(app, flags)`; we
    hand it the guarded app. Not a `Fix`: it cannot be skipped, and where the hook is gone TensorBoard must not
    start unguarded (RuntimeError)."""
    import importlib

    program: Any = importlib.import_module("tensorboard.program")  # the module itself: `tensorboard.program` is lazy

    original = getattr(program, "create_port_scanning_werkzeug_server", None)
    if not callable(original):
        raise RuntimeError("tensorboard.program.create_port_scanning_werkzeug_server is gone: cannot put the Host "
                           "check in front of this TensorBoard version")

    def make_server(wsgi_app, flags):
        return original(guard_wsgi(wsgi_app, check), flags)

    program.create_port_scanning_werkzeug_server = make_server
