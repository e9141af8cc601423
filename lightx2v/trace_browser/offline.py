"""The offline views' side of the trace browser: Timeline and Overview pages, the files they load, and what the
trace list shows for them. Nothing here loads from the internet in the browser.

Routes (see `server`): `/timeline/<trace>`, with its JSON `/api/timeline/index/<trace>` (the step index) and
`/api/timeline/window/<trace>?step=K` or `?lo=T&end=T` (one window as a Chrome trace; `&frames=1` adds the
Python frames); `/timeline/<run dir>/` (the run's Timeline: every rank on one clock, a step at a time), with
`/api/timeline/run/<run dir>/` (the steps every rank has) and `/api/merged/<run dir>/?step=NAME` (that step
of every rank as one Chrome trace, `merged`; `&frames=1` adds the Python frames); `/overview/<trace>`,
`/overview/<run dir>/` (the run's ranks compared), `/compare?base=<trace or run dir/>&new=<...>` (two
captures compared; without both, the form that chooses them), `/assets/<polyfill>`,
`/vendor/trace_viewer_full.html`.
"""

from __future__ import annotations

import functools
import html
import json
import os
import posixpath
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from lightx2v.trace_browser import compare, files, merged, overview, timeline, window
from lightx2v.trace_browser.files import Refused, Trace, is_json_trace, list_traces, resolve, resolve_run
from lightx2v.trace_files import FOREIGN, FOREIGN_REASON, classify
from lightx2v.trace_summary.diff import compare_runs
from lightx2v.trace_summary.discover import RunFiles
from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.model import RunSummary
from lightx2v.trace_summary.summarize import summarize_run, summarize_runs
from lightx2v.utils.torch_trace_profiler import TRACE_BROWSER_DIR

from .gzip_seek import FileChanged, identity
from .memo import Memo
from .step_index import StepIndex, describe, index_keeper, step_index

INDEX_ROUTE, WINDOW_ROUTE = "/api/timeline/index/", "/api/timeline/window/"
RUN_INDEX_ROUTE = "/api/timeline/run/"  # + a run folder: the steps every rank has, for the run's Timeline
MERGED_ROUTE = "/api/merged/"  # + a run folder + "?step=NAME": that step of every rank, one clock, one file
JSON = "application/json"


@dataclass(frozen=True)
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    cache: str = "no-cache"
    download: str | None = None  # a file name: sent as an attachment of that name (Content-Disposition)


def _quote(path: str) -> str:
    return files.url_quote(path)


def _text(message: str, status: int) -> Page:
    """A one-line plain-text answer (an error the Timeline's script shows as it is)."""
    return Page(files.shown(message).encode(), "text/plain; charset=utf-8", status=status)


def timeline_url(trace_path: str) -> str:
    return "/timeline/" + _quote(trace_path)


def overview_url(trace_path: str) -> str:
    return "/overview/" + _quote(trace_path)


def run_overview_url(run_dir: str) -> str:
    return "/overview/" + (_quote(run_dir) + "/" if run_dir else "")


def run_timeline_url(run_dir: str, step: str | None = None) -> str:
    """The run's Timeline (`run_dir` relative to the root, "" for the root), opening at `step` (its name)."""
    url = "/timeline/" + (_quote(run_dir) + "/" if run_dir else "")
    return url + (f"?step={urllib.parse.quote(step, safe='')}" if step is not None else "")


def _is_run(rel: str) -> bool:
    """Whether a URL path names a run folder: it ends with "/" ("" is the root's)."""
    return rel == "" or rel.endswith("/")


# --- pages ---------------------------------------------------------------------------------------------------

def timeline_page(root: str, rel: str) -> Page:
    """One trace's Timeline, or a run folder's (`rel` ends with "/"): the same page, whose windows are then the
    merged steps of every rank (`merged`)."""
    if _is_run(rel):
        run = _run_files(root, rel, "Timeline")
        name = run.label + "/"
    else:
        real = resolve(root, rel)
        name = os.path.basename(real)
        if not is_json_trace(real):
            raise Refused(404, "the Timeline opens JSON traces; open this one in Perfetto")
    problems = timeline.missing()
    if problems:
        body = overview.render_error("Timeline not installed", "The offline Timeline needs " + "; and ".join(problems)
                                     + ". Then reload this page. The Overview works without it.")
        return Page(body.encode(), status=503)
    quoted = _quote(files.url_unquote(rel))
    if _is_run(rel):
        page = timeline.render_timeline(files.shown(name), RUN_INDEX_ROUTE + quoted, MERGED_ROUTE + quoted, run=True)
    else:
        page = timeline.render_timeline(files.shown(name), INDEX_ROUTE + quoted, WINDOW_ROUTE + quoted)
    return Page(page.encode())


def _json_trace(root: str, rel: str) -> str:
    real = resolve(root, rel)
    if not is_json_trace(real):
        raise Refused(404, "the Timeline opens JSON traces; open this one in Perfetto")
    return real


# What the server keeps between requests (`memo`: made once per key however many requests ask at once). Keys hold
# the files' `_version`, so a rewritten or replaced trace is a new key.
_INDEXES: Memo[StepIndex] = Memo(keep=64)
_STEP_WINDOWS: Memo[bytes] = Memo(keep=8)  # the few steps last shown: moving back to one costs no pass over the file
_SUMMARIES: Memo[RunSummary] = Memo(keep=16)
_RUN_STEPS: Memo[dict] = Memo(keep=16)  # a run's Timeline index (`merged.run_steps`)
_MERGED: Memo[bytes] = Memo(keep=8)  # the merged steps last shown, as the single trace's windows
_OVERVIEWS: Memo[bytes] = Memo(keep=16)  # rendered pages: a burst of requests renders each once
_INDEXING = threading.Lock()  # one index pass at a time (each holds its trace's decoded pieces)


def _version(path: str) -> tuple[int, int, int, int]:
    return identity(os.stat(path))


def _index_key(root: str, real: str) -> tuple:
    """(trace, its version, cache folder): the index is kept in `<root>/.trace_browser/index` and in memory."""
    return real, _version(real), os.path.join(os.path.realpath(root), TRACE_BROWSER_DIR, "index")


def _index_of(root: str, real: str, key: tuple | None = None) -> StepIndex:
    real, _, cache_dir = key = key or _index_key(root, real)

    def build() -> StepIndex:
        with _INDEXING:
            return step_index(real, cache_dir)

    return _INDEXES.get(key, build)


def timeline_index(root: str, rel: str) -> Page:
    """The steps the Timeline moves between (built on the first request for a trace, one streaming pass)."""
    real = _json_trace(root, rel)
    try:
        index = _index_of(root, real)
    except TraceError as exc:
        return _text(str(exc), 422)
    except ValueError as exc:  # FileChanged: rewritten while being indexed
        return _text(str(exc), 409)
    return Page(json.dumps(describe(index)).encode(), JSON)


def timeline_window(root: str, rel: str, query: str) -> Page:
    """One window as a Chrome trace: `?step=K` (the index's K-th step) or `?lo=T&end=T` (the trace's own
    microseconds), `&frames=1` with the Python frames; `&download=1` sends it as a `.json` file to open in
    Perfetto UI (a window of a trace past Perfetto's in-browser limit), named after the trace and the window."""
    real = _json_trace(root, rel)
    params = dict(urllib.parse.parse_qsl(query))
    frames = params.get("frames") == "1"
    try:
        if "step" in params:
            key = _index_key(root, real)
            index = _index_of(root, real, key)
            k = int(params["step"]) if params["step"].isascii() and params["step"].isdigit() else -1
            if not 0 <= k < len(index.steps):
                raise Refused(404, f"no step {params['step']}: the trace has {len(index.steps)} (0-based)")
            body = _STEP_WINDOWS.get((key, k, frames), lambda: window.step_window(real, index, k, frames))
        elif "lo" in params and "end" in params:
            try:
                lo, end = float(params["lo"]), float(params["end"])
            except ValueError:
                raise Refused(400, "lo and end are times in the trace's microseconds") from None
            body = window.range_window(real, lo, end, frames, _index_of(root, real))
        else:
            raise Refused(400, "name a window: ?step=K or ?lo=T&end=T (and &frames=1 for Python frames)")
    except TraceError as exc:
        return _text(str(exc), 422)
    except ValueError:  # FileChanged, or pieces that no longer decode: the file was replaced while being read
        return _text("the trace changed while being read; reload the page", 409)
    if params.get("download") != "1":
        return Page(body, JSON)
    stem = os.path.basename(real).removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace")
    what = f"step{params['step']}" if "step" in params else f"{params['lo']}-{params['end']}us"
    return Page(body, JSON, download=f"{stem}.{what}{'.frames' if frames else ''}.json")


def _run_files(root: str, rel: str, view: str) -> RunFiles:
    """What a URL path names (percent-encoded, relative): a run folder (ends with "/"; "" is the root) or one JSON
    trace. Refused as `resolve` / `resolve_run` refuse; `view` names the page in the non-JSON refusal."""
    if rel == "" or rel.endswith("/"):
        real_dir, members = resolve_run(root, rel)
        return RunFiles(os.path.basename(real_dir) or real_dir, real_dir, members)
    real = resolve(root, rel)
    if not is_json_trace(real):
        raise Refused(404, f"the {view} reads JSON traces; open this one in Perfetto")
    if classify(real, files.url_unquote(rel).rsplit("/", 1)[-1]).kind == FOREIGN:  # the name it is asked by
        raise Refused(422, f"{FOREIGN_REASON}: no {view} of it")
    return RunFiles(os.path.basename(real), os.path.dirname(real), [real])


def _run_key(run: RunFiles) -> tuple:
    """What a run's summary depends on: its files and their versions (a rewritten file is read again)."""
    return tuple((f, _version(f)) for f in run.files), run.label, run.path


def _index_keeper(root: str) -> functools.partial:
    """What makes a trace's Timeline index in its summary's pass, kept in the root's index folder."""
    return functools.partial(index_keeper, os.path.join(os.path.realpath(root), TRACE_BROWSER_DIR, "index"))


def _summary_of(root: str, run: RunFiles, key: tuple | None = None) -> RunSummary:
    """The run's summary, kept by its files' versions; TraceError when it cannot be read. Its ranks are read side
    by side, and each one's Timeline index is made in the same pass (kept in the index folder)."""
    return _SUMMARIES.get(key or _run_key(run), lambda: summarize_run(run, also=_index_keeper(root)))


def _summaries_of(root: str, runs: list[RunFiles]) -> list[RunSummary | TraceError]:
    """Several runs' summaries (the Compare page's two sides): those not kept yet are read together, all their
    files side by side; a run that cannot be read is read again alone, for its error as ``_summary_of`` says it."""
    keys = [_run_key(run) for run in runs]
    todo = {key: run for key, run in zip(keys, runs, strict=True) if not _SUMMARIES.holds(key)}
    if len(todo) > 1:
        read = summarize_runs(list(todo.values()), keep_going=True, also=_index_keeper(root))
        for key, summary in zip(todo, read, strict=True):
            if not summary.damaged_files:
                _SUMMARIES.put(key, summary)
    out: list[RunSummary | TraceError] = []
    for run, key in zip(runs, keys, strict=True):
        try:
            out.append(_summary_of(root, run, key))
        except TraceError as exc:
            out.append(exc)
    return out


def overview_page(root: str, rel: str) -> Page:
    root_real = os.path.realpath(root)
    run = _run_files(root, rel, "Overview")
    key = _run_key(run)

    def timeline_of(file: str) -> str:
        return timeline_url(os.path.relpath(os.path.realpath(file), root_real).replace(os.sep, "/"))

    run_dir = files.url_unquote(rel).strip("/")  # the URL path is percent-encoded: encode the folder once

    def merged_of(step: str) -> str:
        return f"{MERGED_ROUTE}{_quote(run_dir + '/' if run_dir else '')}?step={urllib.parse.quote(step, safe='')}"

    def step_timeline_of(step: str) -> str:
        return run_timeline_url(run_dir, step)

    def render() -> bytes:
        several = _is_run(rel)
        return overview.render_overview(_summary_of(root, run, key), timeline_url=timeline_of,
                                        merged_url=merged_of if several else None,
                                        step_timeline_url=step_timeline_of if several else None).encode()

    try:
        return Page(_OVERVIEWS.get((key, root_real), render))
    except TraceError as exc:
        return Page(overview.render_error("Cannot summarize this trace", str(exc)).encode(), status=422)


def merged_page(root: str, rel: str, query: str) -> Page:
    """One step of a run folder's ranks on one clock as one Chrome trace file for Perfetto UI (``merged``):
    `?step=ProfilerStep%232`, `&frames=1` with the Python frames. Sent as a download; the run's Timeline draws
    it as its window (a fetch reads it whatever its Content-Disposition)."""
    if not _is_run(rel):
        raise Refused(404, "a merged step is of a run folder: its path ends with /")
    params = dict(urllib.parse.parse_qsl(query))
    step, frames = params.get("step", ""), params.get("frames") == "1"
    if not step:
        raise Refused(400, "name the step: ?step=ProfilerStep%23N")
    run = _run_files(root, rel, "merged step")
    key = _run_key(run)
    root_real = os.path.realpath(root)
    try:
        summary = _summary_of(root, run, key)
        body = _MERGED.get((key, root_real, step, frames),
                           lambda: merged.merged_step(summary, lambda f: _index_of(root, f), step, frames))
    except TraceError as exc:
        return _text(str(exc), 422)
    except FileChanged:
        return _text("a rank's trace changed while being read; reload the page", 409)
    except ValueError as exc:  # no rank has the step
        return _text(str(exc), 404)
    name = f"{run.label}.{step.replace('#', '')}{'.frames' if frames else ''}.merged.json"
    return Page(body, JSON, download=name)


def run_timeline_index(root: str, rel: str) -> Page:
    """The run's Timeline index (`merged.run_steps`, as JSON): the steps every rank of a run folder has, on the
    merged files' clock. Refused for a file (422 when no step is on every rank, saying which rank lacks what)."""
    if not _is_run(rel):
        raise Refused(404, "a run's Timeline is of a run folder: its path ends with / (one trace's Timeline is "
                           "/timeline/<trace>)")
    run = _run_files(root, rel, "run's Timeline")
    key = _run_key(run)
    try:
        index = _RUN_STEPS.get((key, os.path.realpath(root)), lambda: merged.run_steps(
            _summary_of(root, run, key), lambda f: _index_of(root, f)))
    except TraceError as exc:
        return _text(str(exc), 422)
    except ValueError:  # FileChanged: rewritten while being indexed
        return _text("a rank's trace changed while being read; reload the page", 409)
    if not index["steps"]:
        lacking = "; ".join(f"{s['name']} not on {', '.join(s['missing'])}" for s in index["left_out"][:4])
        raise Refused(422, f"no step is on every rank of {files.shown(run.label)}/: " + (
            lacking + (" ..." if len(index["left_out"]) > 4 else "") if lacking else "no rank has a ProfilerStep")
            + "; open each rank's own Timeline")
    return Page(json.dumps(index).encode(), JSON)


def compare_page(root: str, query: str) -> Page:
    """Two captures compared (`?base=...&new=...`, each as the Overview's URL path names it, decoded); with a side
    missing, the form that chooses them. Paths are checked exactly as the Overview's are."""
    params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True, errors="surrogateescape"))  # any bytes
    base, new = params.get("base"), params.get("new")
    if base is None or new is None:
        if base is not None or new is not None:
            raise Refused(400, "name both sides: /compare?base=<trace or run folder/>&new=<...>")
        sides = compare.choices(list_traces(root))
        return Page(compare.render_chooser(sides).encode())
    read = [_run_files(root, _quote(side), "Compare page") for side in (base, new)]
    runs = []
    for side, summary in zip((base, new), _summaries_of(root, read), strict=True):  # both read side by side
        if isinstance(summary, TraceError):
            body = overview.render_error("Cannot summarize this trace", f"{side or './'}: {summary}")
            return Page(body.encode(), status=422)
        runs.append(summary)
    try:
        diff = compare_runs(runs[0], runs[1])
    except ValueError as exc:  # a side without a readable rank
        return Page(overview.render_error("Cannot compare these captures", str(exc)).encode(), status=422)

    def overview_of(path: str) -> str:
        return run_overview_url(path.rstrip("/")) if path == "" or path.endswith("/") else overview_url(path)

    page = compare.render_compare(diff, runs[0], runs[1], base_path=base, new_path=new, overview_url=overview_of)
    return Page(page.encode())


def static_file(name: str) -> Page:
    """The polyfill or the trace viewer, from where they are installed (never from this repository)."""
    if name == "assets/" + timeline.WEBCOMPONENTS.file:
        path, ctype = timeline.polyfill_path(), "application/javascript; charset=utf-8"
    elif name == "vendor/" + timeline.VIEWER_FILE:
        path, ctype = timeline.viewer_path(), "text/html; charset=utf-8"
    else:
        raise Refused(404, "not found")
    if path is None:
        raise Refused(404, f"{name} is not installed: {'; '.join(timeline.missing())}")
    with open(path, "rb") as f:
        return Page(f.read(), ctype, cache="max-age=3600")


# --- what the trace list shows ---------------------------------------------------------------------------------

def row_links(trace: Trace, timeline_ready: bool) -> str:
    """The Timeline / Overview links of one row of the trace list."""
    if not is_json_trace(trace.path):
        return "<span class=offline-none title=\"Perfetto's own format: open it in Perfetto\">–</span>"
    if timeline_ready:
        tl = f'<a class=timeline href="{html.escape(timeline_url(trace.path))}" target=_blank>Timeline</a>'
    else:
        tl = "<span class=\"timeline disabled\" title=\"not installed: see the notice above\">Timeline</span>"
    if not files.summarized(trace):  # another tool's trace: viewable, no summary
        return tl + (' <span class=offline-none title="its events are not torch.profiler\'s: the Overview reads '
                     'torch.profiler traces">not torch.profiler</span>')
    return tl + f' <a class=overview href="{html.escape(overview_url(trace.path))}" target=_blank>Overview</a>'


def runs_section(traces: Sequence[Trace], timeline_ready: bool = True) -> str:
    """Folders holding several JSON traces (the ranks of one capture), each with its rank-comparing Overview and
    its Timeline (every rank on one clock; greyed when the Timeline is not installed)."""
    by_dir: dict[str, list[Trace]] = {}
    for t in traces:
        by_dir.setdefault(posixpath.dirname(t.path), []).append(t)
    runs = [(d, n) for d, ts in by_dir.items() if (n := files.run_size(ts)) > 1]  # the ranks the summary reads
    if not runs:
        return ""

    def timeline_link(d: str) -> str:
        if not timeline_ready:
            return "<span class=\"timeline disabled\" title=\"not installed: see the notice above\">Timeline</span> "
        return f'<a class=run-timeline href="{html.escape(run_timeline_url(d))}" target=_blank>Timeline</a> '

    rows = "".join(
        f"<tr><td class=path>{html.escape(files.shown(d or '.'))}/</td><td class=num>{n}</td>"
        f'<td>{timeline_link(d)}<a class=run-overview href="{html.escape(run_overview_url(d))}" target=_blank>'
        "Overview</a></td></tr>"
        for d, n in runs)
    return ("<h2>Runs with several traces</h2><p>The Overview of a run compares its ranks and names the straggler; "
            "its Timeline shows every rank on one clock, a step at a time.</p><table id=runs><thead><tr>"
            "<th>Run folder</th><th>Traces</th><th></th></tr></thead>"
            f"<tbody>{rows}</tbody></table><h2>Trace files</h2>")


def notice(problems: Sequence[str]) -> str:
    """The line above the list: which offline views work here, or the command that adds the missing one."""
    if not problems:
        return ("<p id=offline-notice class=ok><strong>Timeline</strong> and <strong>Overview</strong> open in this "
                "browser with no internet (served from this machine).</p>")
    items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    return ("<div id=offline-notice class=missing><p><strong>Offline Timeline not installed.</strong> "
            f"It needs:</p><ul>{items}</ul><p>The Overview works already; Perfetto needs internet in the browser."
            "</p></div>")
