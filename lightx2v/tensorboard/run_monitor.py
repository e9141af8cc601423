"""A run monitor for torch-tb-profiler that notices changes inside run directories, not only new ones.

0.4.3's `_monitor_runs` loads each run directory once: a trace added later (a late rank, a second capture
into the same directory) stays invisible until restart, and a file that was half-written when it was read
fails and is never read again. This monitor keeps a signature of every run directory (trace file names,
sizes and modification times) and reloads a run whenever its signature changes; the old run stays visible
until the new one is ready. Run directories that lose all their traces are dropped from the list.

It replaces `TorchProfilerPlugin._monitor_runs` (see `patches`), and uses only the plugin's own pieces:
its `io` layer (local and remote logdirs), `RunLoader`, and the queue that `_receive_runs` consumes.

`receive_runs` replaces `_receive_runs`, which kept the runs in name order: the plugin's page selects the first
run of the list, so it opened on the oldest capture. The list is kept newest first (by the newest trace file of
each run directory, then by name), so the page opens on what the user just captured; a run the user picked stays
selected when newer ones arrive (the page keeps a selection that is still listed).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections import OrderedDict

logger = logging.getLogger("lightx2v.tensorboard")


def run_signatures(logdir: str) -> dict[str, tuple]:
    """{run directory: signature} for every directory under `logdir` that holds trace files."""
    from torch_tb_profiler import io, utils
    from torch_tb_profiler.io import file as tb_file

    found: dict[str, tuple] = {}
    for root, _, files in io.walk(logdir):
        names = sorted(name for name in files if utils.is_chrome_trace_file(name))
        entries: list[tuple] = []  # (name, size, mtime_ns) locally, (name, size) on remote filesystems
        for name in names:
            path = io.join(root, name)
            try:
                if tb_file.is_local(path):
                    st = os.stat(path)
                    entries.append((name, st.st_size, st.st_mtime_ns))
                else:
                    entries.append((name, tb_file.stat(path).length))
            except (OSError, FileNotFoundError):
                continue  # vanished between listing and stat
        if entries:
            found[root] = tuple(entries)
    return found


class _State:
    def __init__(self) -> None:
        self.loaded: dict[str, tuple] = {}  # run dir -> signature it was last loaded with
        self.loading: dict[str, threading.Thread] = {}


def monitor_runs(plugin) -> None:
    """Body of the plugin's `monitor_runs` thread (method replacement; runs forever)."""
    from torch_tb_profiler import consts

    logger.info("lightx2v.tensorboard: watching %s for new and changed runs", plugin.logdir)
    state = _State()
    while True:
        try:
            scan_once(plugin, state)
        except Exception:
            logger.warning("lightx2v.tensorboard: scanning %s failed", plugin.logdir, exc_info=True)
        time.sleep(consts.MONITOR_RUN_REFRESH_INTERNAL_IN_SECONDS)


def scan_once(plugin, state: _State) -> None:
    found = run_signatures(plugin.logdir)
    for run_dir, thread in list(state.loading.items()):
        if not thread.is_alive():
            del state.loading[run_dir]

    for run_dir in [d for d in state.loaded if d not in found and d not in state.loading]:
        del state.loaded[run_dir]
        name = plugin._get_run_name(run_dir)
        with plugin._runs_lock:
            removed = plugin._runs.pop(name, None)
        if removed is not None:
            logger.info("lightx2v.tensorboard: run %s has no trace left; removed from the list", name)

    for run_dir, signature in found.items():
        if run_dir in state.loading or state.loaded.get(run_dir) == signature:
            continue
        thread = threading.Thread(target=_load, args=(plugin, state, run_dir, signature),
                                  name=f"load_run {run_dir}", daemon=True)
        state.loading[run_dir] = thread
        with plugin._load_lock:
            plugin._load_threads.append(thread)
        thread.start()


def _load(plugin, state: _State, run_dir: str, signature: tuple) -> None:
    from torch_tb_profiler import plugin as plugin_module

    name = plugin._get_run_name(run_dir)
    reload = run_dir in state.loaded
    try:
        if reload:
            _forget_cached_files(plugin, run_dir)
        logger.info("lightx2v.tensorboard: %s run %s", "reloading" if reload else "loading", name)
        run = plugin_module.RunLoader(name, run_dir, plugin._cache).load()
        if getattr(run, "profiles", None):
            plugin._queue.put(run)
        else:
            logger.warning("lightx2v.tensorboard: no trace in %s could be parsed yet; "
                           "it is read again when its files change", run_dir)
    except Exception:
        logger.warning("lightx2v.tensorboard: loading run %s failed", name, exc_info=True)
    finally:
        multiprocessing.active_children()  # reap the finished parser processes (no zombies)
        state.loaded[run_dir] = signature
        with plugin._load_lock:
            try:
                plugin._load_threads.remove(threading.current_thread())
            except ValueError:
                pass


def _forget_cached_files(plugin, run_dir: str) -> None:
    """Drop the plugin's per-file caches for `run_dir`, so changed files are read again."""
    prefix = run_dir.rstrip("/\\") + os.sep
    cache_dict = getattr(plugin._cache, "_cache_dict", None)
    if cache_dict is not None:
        for key in [k for k in list(cache_dict.keys()) if str(k).startswith(prefix)]:
            cache_dict.pop(key, None)
    gpu_metrics = getattr(plugin, "_gpu_metrics_file_dict", None)
    if isinstance(gpu_metrics, dict):
        for key in [k for k in list(gpu_metrics) if str(k).startswith(prefix)]:
            gpu_metrics.pop(key, None)


def newest_trace_ns(run_dir: str) -> int:
    """The modification time (ns) of the newest trace file in `run_dir` (0 when there is none, or the directory
    is on a remote filesystem, where the list keeps name order)."""
    from torch_tb_profiler import utils

    try:
        with os.scandir(run_dir) as entries:
            return max((e.stat().st_mtime_ns for e in entries if utils.is_chrome_trace_file(e.name)), default=0)
    except OSError:
        return 0


def newest_first(runs: dict, newest: dict[str, int]) -> OrderedDict:
    """`runs` ({name: run}) ordered newest first by `newest` ({name: ns}), ties (and unknowns, 0) by name."""
    return OrderedDict(sorted(runs.items(), key=lambda item: (-newest.get(item[0], 0), item[0])))


def receive_runs(plugin) -> None:
    """Body of the plugin's `receive_runs` thread (method replacement; runs forever): takes each loaded run from
    the queue and keeps the list newest first."""
    newest: dict[str, int] = {}
    while True:
        run = plugin._queue.get()
        if run is None:
            continue
        logger.info("lightx2v.tensorboard: run %s listed", run.name)
        newest[run.name] = newest_trace_ns(run.run_dir)
        with plugin._runs_lock:
            runs = dict(plugin._runs)
            runs[run.name] = run
            plugin._runs = newest_first(runs, newest)
