"""Large traces in torch-tb-profiler 0.4.3: the fixes that let it load and show a with_stack capture of a real
pipeline (hundreds of MB to GB), measured by `benchmarks/bench_tensorboard_large.py`; registered in
`patches.FIXES`.

- `step_ranges` (parser): the Overview's per-step costs intersect each step with the whole trace's busy ranges,
  and 0.4.3 walks every list from its start for every step: O(steps x ranges), minutes on a trace of a thousand
  steps. The lists it passes there are sorted and disjoint (`merge_ranges` output, and intersections and
  differences of such), so for one step the walk can start at the first range ending after the step starts and
  stop after the last starting at or before its end (bisect; a zero-long step on a range's start is
  that range's one point): the same ranges out.
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
import urllib.parse
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

