"""Large traces in torch-tb-profiler 0.4.3: the fixes that let it load and show a with_stack capture of a real
pipeline (hundreds of MB to GB), measured by `benchmarks/bench_tensorboard_large.py`; registered in
`patches.FIXES`.

- `step_ranges` (parser): the Overview's per-step costs intersect each step with the whole trace's busy ranges,
  and 0.4.3 walks every list from its start for every step: O(steps x ranges), minutes on a trace of a thousand
  steps. The lists it passes there are sorted and disjoint (`merge_ranges` output, and intersections and
  differences of such), so for one step the walk can start at the first range ending after the step starts and
  stop after the last starting at or before its end (bisect; a zero-long step on a range's start is
  that range's one point): the same ranges out.
- `stream_parse` (parser): 0.4.3 reads the whole file, `json.loads` it and keeps that document alive while it
  builds its own events and trees: 5-7x the file in RAM. Instead the file is streamed
  (`lightx2v.trace_summary.reader.TraceStream`) into the plugin's own `RunProfileData`, and what its views never
  read is dropped on the way: the plain `python_function` frames (most of a `with_stack` trace) become small
  records, from which the `call_stacks` fix's operator stacks and the Module view's nesting are computed before
  they go; two of them (the earliest and the last to end) stay as events, so the trace's time span is unchanged;
  the args no view reads after an event is built are dropped, repeated names are shared. Anything unusual (not a
  local file, JSON the stream reader rejects, a PyTorch Lightning trace, the 'Record Window End' repair on a
  trace the Trace view still opens) goes the plugin's own way.
- `trace_limit` (server): the Trace view sends the whole trace to the browser as one string (Chromium's limit is
  about 512 MB, and its viewer needs several times that to import it), after the plugin itself read the whole file
  into memory. Past `LIGHTX2V_TB_TRACE_VIEW_MAX_MB` (256) its route answers a notice instead, and the Trace
  view's frame shows it with a link to the trace browser's Timeline, which opens any size one step at a time.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import sys
import urllib.parse
from collections.abc import Iterator
from typing import Any

from lightx2v.tensorboard.fix import code_names, is_fixed, mark_fixed, missing

logger = logging.getLogger("lightx2v.tensorboard")

BISECT_FROM = 16
"""Ranges in a list past which one step's intersection bisects (below it the plugin's walk is as quick)."""


# --- step_ranges -----------------------------------------------------------------------------------------------

def _start(item: tuple) -> Any:
    return item[0]


def _end(item: tuple) -> Any:
    return item[1]


def check_step_ranges() -> str | None:
    from torch_tb_profiler.profiler import overall_parser

    problem = missing(overall_parser, "intersection_ranges_lists", "OverallParser")
    if problem:
        return problem
    if "intersection_ranges_lists" not in code_names(overall_parser.OverallParser.aggregate):
        return "OverallParser.aggregate no longer calls intersection_ranges_lists"
    return None


def apply_step_ranges() -> None:
    from torch_tb_profiler.profiler import overall_parser

    original = overall_parser.intersection_ranges_lists
    if is_fixed(original):
        return

    def intersection_ranges_lists(range_list1, range_list2):
        if len(range_list1) == 1 and len(range_list2) > BISECT_FROM:
            begin, end = range_list1[0]
            first = bisect.bisect_right(range_list2, begin, key=_end)
            last = bisect.bisect_right(range_list2, end, lo=first, key=_start)
            range_list2 = range_list2[first:last]
        return original(range_list1, range_list2)

    mark_fixed(intersection_ranges_lists, original)
    overall_parser.intersection_ranges_lists = intersection_ranges_lists


# --- stream_parse --------------------------------------------------------------------------------------------

DAY_US = 24 * 3600 * 1000  # 0.4.3's threshold for dropping a 'Record Window End' event (in its units, as is)
METADATA_READ = ("Framework", "schemaVersion", "distributedInfo", "deviceProperties")  # RunProfileData.__init__
_NO_ARGS: dict = {}
_NO_SHAPE: list = []


class NotStreamed(Exception):
    """This trace goes the plugin's own way (the message says why)."""


class Frame:
    """What is kept of a plain python_function event: enough for call stacks and the Module view's nesting."""

    __slots__ = ("name", "ts", "duration", "tid", "python_id", "parent_id")
    name: str
    ts: float
    duration: float
    tid: object
    python_id: Any
    parent_id: Any

    def __init__(self, event: dict, args: dict | None):
        self.name = event.get("name")  # type: ignore[assignment]  # what the event has (0.4.3 takes it as is)
        self.ts = event.get("ts")  # type: ignore[assignment]
        self.duration = event.get("dur")  # type: ignore[assignment]
        self.tid = event.get("tid")
        self.python_id = args.get("Python id") if args else None
        self.parent_id = args.get("Python parent id") if args else None


def check_stream_parse() -> str | None:
    from torch_tb_profiler.profiler import data, trace

    problem = (missing(data.RunProfileData, "parse", "process", "analyze", "_preprocess_file")
               or missing(trace, "create_event", "EventTypes", "OperatorEvent", "MemoryEvent"))
    if problem:
        return problem
    if "_preprocess_file" not in code_names(data.RunProfileData.parse):
        return "RunProfileData.parse no longer reads the file with _preprocess_file"
    if not {"create_event", "create_association_events"} <= code_names(data.RunProfileData.__init__):
        return "RunProfileData.__init__ no longer builds its events from traceEvents with trace.create_event"
    return None


def apply_stream_parse() -> None:
    from torch_tb_profiler.profiler import data

    original = data.RunProfileData.parse
    if is_fixed(original):
        return

    def parse(worker, span, path, cache_dir):
        try:
            return stream_parse(worker, span, path)
        except NotStreamed as why:
            logger.info("lightx2v.tensorboard: %s parsed by the plugin itself: %s", path, why)
            return original(worker, span, path, cache_dir)

    mark_fixed(parse, original)
    data.RunProfileData.parse = staticmethod(parse)


class _Reader:
    """One streaming pass: the events the plugin builds, the frames set aside, the markers 0.4.3 repairs."""

    def __init__(self, path: str, metadata: dict | None):
        from lightx2v.trace_summary.reader import TraceStream

        self.stream = TraceStream(path)
        self.metadata = metadata
        self.frames: list[Frame] = []
        self.markers: list[tuple[bool, Any]] = []  # (is 'Record Window End', ts) in file order
        self._first: dict | None = None
        self._last: dict | None = None
        self._last_end: Any = None
        self._ints: dict[Any, Any] = {}

    def document(self) -> dict:
        """The document RunProfileData.__init__ reads: metadata (what the file has before traceEvents, unless a
        first pass told all of it) and the events as a generator."""
        batches = self.stream.batches()
        first = next(batches, [])
        self.seen = dict(self.stream.metadata) if self.metadata is None else self.metadata
        doc = {key: value for key, value in self.seen.items() if key != "traceEvents"}
        doc["traceEvents"] = self._events(first, batches)
        return doc

    def _events(self, first: list[dict], batches: Iterator[list[dict]]) -> Iterator[dict]:
        intern, ints, frames, markers = sys.intern, self._ints, self.frames, self.markers
        frame_cat = "python_function"
        batch: list[dict] | None = first
        while batch is not None:
            for event in batch:
                name, cat = event.get("name"), event.get("cat")
                if type(name) is str:
                    event["name"] = name = intern(name)
                    if name == "Record Window End" or name.startswith("Iteration Start:"):
                        markers.append((name == "Record Window End", event.get("ts")))
                if type(cat) is str:
                    event["cat"] = cat = intern(cat)
                args = event.get("args")
                if cat == frame_cat and event.get("ph") == "X" and \
                        not (args and args.get("Python module id") is not None):
                    frames.append(Frame(event, args))
                    self._span(event)
                    continue
                pid, tid = event.get("pid"), event.get("tid")  # one int object per thread, not per event
                if type(pid) is int:
                    event["pid"] = ints.setdefault(pid, pid)
                if type(tid) is int:
                    event["tid"] = ints.setdefault(tid, tid)
                yield event
            batch = next(batches, None)
        # the earliest frame and the last to end stay events, for 0.4.3's time span of the trace (it sorts by ts)
        if self._first is not None:
            yield self._first
        if self._last is not None and self._last is not self._first:
            yield self._last

    def _span(self, event: dict) -> None:
        ts: Any = event.get("ts")
        dur: Any = event.get("dur")
        try:
            if self._first is None or ts < self._first["ts"]:
                self._first = event
            end = ts + dur
            if self._last is None or end > self._last_end:
                self._last, self._last_end = event, end
        except TypeError:  # no ts or dur: 0.4.3 fails on such an event; so do we (the plugin's way)
            raise NotStreamed("a python_function event without ts or dur") from None

    def window_end_dropped(self) -> bool:
        """Whether 0.4.3 would delete a 'Record Window End' event (its end more than a day after the iteration's
        start): the same reverse scan, over the marker events only."""
        end = start = None
        for is_end, ts in reversed(self.markers):
            if is_end:
                end = ts
            else:
                start = ts
            if start is not None and end is not None:
                break
        return start is not None and end is not None and end - start > DAY_US


def stream_parse(worker, span, path):
    """RunProfileData for `path`, built from the streamed events (see the module's doc); NotStreamed when the
    plugin's own parse must do it."""
    from lightx2v.trace_summary.errors import TraceError

    if not os.path.isfile(path):
        raise NotStreamed("not a local file")
    metadata = None
    for _ in range(2):
        reader = _Reader(path, metadata)
        try:
            profile = _build(worker, span, reader)
        except TraceError as exc:
            raise NotStreamed(str(exc)) from None
        final = reader.stream.metadata
        if all(final.get(key) == reader.seen.get(key) for key in METADATA_READ):
            break
        metadata = final  # a key 0.4.3 reads comes after traceEvents: once more, with the whole metadata known
    else:
        raise NotStreamed("its metadata changed between two passes")
    if final.get("Framework") == "pytorch-lightning":
        raise NotStreamed("a PyTorch Lightning trace")
    if reader.window_end_dropped():
        if reader.stream.bytes_read <= trace_view_max_bytes():
            raise NotStreamed("0.4.3 rewrites it without its 'Record Window End' event for the Trace view")
        profile.events = [e for e in profile.events if e.name != "Record Window End"]  # no Trace view past the limit
    _finish(profile, reader)
    profile.trace_file_path = path
    profile.lightx2v_streamed = True
    profile.process()
    profile.analyze()
    return profile


def _build(worker, span, reader: _Reader):
    from torch_tb_profiler.profiler import data

    return data.RunProfileData(worker, span, reader.document())


def _finish(profile, reader: _Reader) -> None:
    """Before 0.4.3 processes the events: the frames' work, then the frames and unread args go."""
    from torch_tb_profiler.profiler import data, trace

    from lightx2v.tensorboard.callstack import attach_call_stacks

    types = trace.EventTypes
    events = profile.events
    if is_fixed(data.RunProfileData.process):  # the call_stacks fix is on in this process: its work, done here
        attach_call_stacks(reader.frames, (e for e in events if e.type == types.OPERATOR
                                           and isinstance(e, trace.OperatorEvent)))
        profile.call_stacks_attached = True
    modules = [e for e in events if e.type == types.MODULE]
    if modules:
        _module_parents(modules, reader.frames)
    sentinel = -1
    for event in events:
        if event.type != types.MEMORY:
            event.args = _NO_ARGS
        if type(getattr(event, "input_shape", None)) is list and not event.input_shape:
            event.input_shape = _NO_SHAPE
        if event.type == types.PYTHON_FUNCTION:  # the two frames kept for the time span: not in the Module nesting
            event.python_id, event.python_parent_id, sentinel = sentinel, None, sentinel - 1
    reader.frames.clear()


def _module_parents(modules: list, frames: list[Frame]) -> None:
    """Each module's parent id becomes its nearest enclosing module's (through the frames between them, which
    are dropped), or None: the nesting 0.4.3's Module view would find with every frame present."""
    module_ids = {m.python_id for m in modules}
    frame_parent = {f.python_id: f.parent_id for f in frames if f.python_id is not None}
    for module in modules:
        parent, hops = module.python_parent_id, 0
        while parent is not None and parent not in module_ids and hops < 10_000:
            parent, hops = frame_parent.get(parent), hops + 1
        module.python_parent_id = parent if parent in module_ids else None


# --- trace_limit ---------------------------------------------------------------------------------------------

NOTICE_KEY = "lightx2v_trace_notice"
"""The notice's key in the Trace route's answer: what the Trace view's frame looks for."""


def json_bytes(path: str) -> int:
    """The trace's JSON size: the file's, or for gzip the larger of the file's and its trailer's (mod 4 GiB)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return size
            f.seek(-4, os.SEEK_END)
            return max(size, struct.unpack("<I", f.read(4))[0])
    except (OSError, struct.error):
        return 0


def timeline_url(trace_path: str, logdir: str | None) -> str:
    """The trace browser's Timeline of this trace where its folder is known (a trace browser serves a folder
    above it, or $LIGHTX2V_RESULTS_DIR holds it), else the trace browser's home page (its list of traces)."""
    from lightx2v import settings
    from lightx2v.tensorboard.offline import trace_browser_url
    from lightx2v.utils.torch_trace_profiler import TRACE_BROWSER_DIR, TRACE_BROWSER_FILE

    url, _known = trace_browser_url(logdir)
    real = os.path.realpath(trace_path)
    roots = []
    folder = os.path.dirname(real)
    for _ in range(16):
        if os.path.isdir(os.path.join(folder, TRACE_BROWSER_DIR)) or \
                os.path.isfile(os.path.join(folder, TRACE_BROWSER_FILE)):
            roots.append(folder)
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    try:
        results = settings.get(settings.RESULTS_DIR)
    except settings.SettingError:
        results = None
    if results:
        roots.append(os.path.realpath(results))
    for root in roots:
        rel = os.path.relpath(real, root)
        if not rel.startswith(".."):
            return url.rstrip("/") + "/timeline/" + urllib.parse.quote(rel.replace(os.sep, "/"))
    return url


def trace_view_max_bytes() -> int:
    """$LIGHTX2V_TB_TRACE_VIEW_MAX_MB in bytes (TensorBoard checks the value at start; a bad one here: the
    default)."""
    from lightx2v import settings

    try:
        megabytes = settings.get(settings.TB_TRACE_VIEW_MAX_MB)
    except settings.SettingError:
        megabytes = settings.SETTINGS[settings.TB_TRACE_VIEW_MAX_MB].default
    return int(megabytes) * 10**6


def notice(trace_path: str, size: int, limit: int, logdir: str | None) -> dict:
    """The Trace route's answer for a trace past `limit` bytes: our notice (the Trace view's frame shows it), in a
    document that is also a valid trace (one labelled slice) for any other reader of the route."""
    url = timeline_url(trace_path, logdir)
    text = (f"This trace is {size / 1e6:,.0f} MB of JSON, more than the Trace view sends to a browser "
            f"({limit / 1e6:,.0f} MB, LIGHTX2V_TB_TRACE_VIEW_MAX_MB). The other views have all of it. "
            "The trace browser's Timeline opens it one step at a time:")
    return {NOTICE_KEY: {"text": text, "url": url, "bytes": size},
            "displayTimeUnit": "ms",
            "traceEvents": [{"ph": "X", "cat": "notice", "name": f"{text} {url}", "pid": "Trace too large",
                             "tid": url, "ts": 0, "dur": 1_000_000}]}


def check_trace_limit() -> str | None:
    from torch_tb_profiler import plugin

    from lightx2v.tensorboard.offline import check_routes

    cls = plugin.TorchProfilerPlugin
    problem = missing(cls, "trace_route", "_get_profile_for_request") or check_routes("/trace_embedding.html")
    if problem:
        return problem
    if "trace_route" not in code_names(getattr(cls.get_plugin_apps, "__wrapped__", cls.get_plugin_apps)):
        return "TorchProfilerPlugin.get_plugin_apps no longer routes /trace to trace_route"
    return None


def apply_trace_limit() -> None:
    import json

    from torch_tb_profiler import plugin
    from werkzeug import wrappers

    from lightx2v.tensorboard import offline

    cls = plugin.TorchProfilerPlugin
    original = cls.trace_route  # werkzeug's Request.application: called as (self, environ, start_response)
    if is_fixed(original):
        return

    def trace_route(self, environ, start_response):
        request = wrappers.Request(environ)
        try:
            profile = self._get_profile_for_request(request)
            path = profile.trace_file_path
        except Exception:  # the plugin's own route answers these (404, 400)
            return original(self, environ, start_response)
        size, limit = (json_bytes(path) if path else 0), trace_view_max_bytes()
        if size <= limit:
            return original(self, environ, start_response)
        body = json.dumps(notice(path, size, limit, getattr(self, "logdir", None)))
        response = wrappers.Response(body, content_type="application/json", headers=cls.headers)
        return response(environ, start_response)

    mark_fixed(trace_route, original)
    cls.trace_route = trace_route
    offline.add_embedding_rewrite(embed_notice)


def embed_notice(page: str) -> str:
    """The Trace view's frame: a message listener ahead of the plugin's that shows our notice as a page with the
    link (the viewer would draw it as one labelled slice) and keeps it from the viewer."""
    return page.replace("<head>", "<head>" + _NOTICE_SCRIPT.replace("@KEY@", NOTICE_KEY), 1)


_NOTICE_SCRIPT = """
    <script>
        window.addEventListener('message', function (event) {
            var data = (event.data || {}).data, doc = data;
            if (typeof data === 'string') {
                if (data.indexOf('"@KEY@"') < 0 || data.length > 100000) return;
                try { doc = JSON.parse(data); } catch (e) { return; }
            }
            var note = doc && doc['@KEY@'];
            if (!note) return;
            event.stopImmediatePropagation();
            var show = function () {
                var box = document.createElement('div');
                box.id = 'lightx2v-trace-notice';
                box.style.cssText = 'padding:16px 20px;font:15px sans-serif;color:#222;background:#fff4e5;'
                    + 'border-left:4px solid #e67e22;position:fixed;top:0;left:0;right:0;z-index:10000;';
                box.appendChild(document.createTextNode(note.text + ' '));
                var a = document.createElement('a');
                a.href = note.url; a.target = '_blank'; a.rel = 'noopener'; a.textContent = note.url;
                box.appendChild(a);
                document.body.appendChild(box);
            };
            if (document.body) show(); else document.addEventListener('DOMContentLoaded', show);
        });
    </script>"""

