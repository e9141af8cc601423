"""The plugin's pages with no internet in the browser: two fixes (registered in `patches.FIXES`).

- `offline_trace`: the Trace view's frame (`static/trace_embedding.html`) loads the Web Components polyfill from
  a CDN; we serve that page with the polyfill from the asset folder (`lightx2v.assets`) instead, so the Trace
  view works offline.
- `charts_notice`: the plugin's page (`static/index.html`) loads Google Charts from www.gstatic.com and shows a
  spinner until it has; without it every view, Trace included, spins forever. Right after Google's loader tag we
  add a small script that, only when the loader did not load, says so in a banner (the missing host, and the
  trace browser URL whose views work offline), stands in for the charts with that notice where each chart would
  be, and lets the page go on (tables, Trace, the Memory view's tables: its curve is a Google chart too, the
  trace browser's Overview draws one offline). Google Charts cannot be served locally (its terms require loading
  it from Google), so this is a notice, not a replacement.

Both serve rewritten copies of the installed files through the plugin's own routes; nothing on disk changes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from lightx2v import settings
from lightx2v.tensorboard.fix import code_names, is_fixed, mark_fixed, missing
from lightx2v.utils.torch_trace_profiler import trace_browser_url as discovered_url

CDN_POLYFILL_TAG = '<script src="https://cdnjs.cloudflare.com/ajax/libs/webcomponentsjs/0.7.24/webcomponents.min.js"></script>'
CHARTS_LOADER_TAG = '<script src="https://www.gstatic.com/charts/loader.js"></script>'
CHARTS_HOST = "www.gstatic.com"
POLYFILL_ROUTE = "/webcomponents.min.js"  # next to /trace_embedding.html under the plugin's prefix


def static_file(name: str) -> Path:
    import torch_tb_profiler

    return Path(torch_tb_profiler.__file__).parent / "static" / name


# --- the Trace view's frame with the local polyfill ----------------------------------------------------------

def check_offline_trace() -> str | None:
    from lightx2v.assets import INSTALL_COMMAND, WEBCOMPONENTS, find

    problem = check_routes("/trace_embedding.html")
    if problem:
        return problem
    if CDN_POLYFILL_TAG not in static_file("trace_embedding.html").read_text(errors="replace"):
        return "static/trace_embedding.html no longer loads webcomponents.min.js 0.7.24 from cdnjs"
    if find(WEBCOMPONENTS) is None:
        return f"the polyfill {WEBCOMPONENTS.spec} is not installed (run `{INSTALL_COMMAND}`); the Trace view " \
               "loads it from cdnjs, which needs internet in the browser"
    return None


def local_polyfill(page: str) -> str:
    return page.replace(CDN_POLYFILL_TAG, f'<script src=".{POLYFILL_ROUTE}"></script>')


def trace_embedding_html() -> bytes:
    """The Trace view's frame with every applied fix's rewrite (the local polyfill, the large-trace notice)."""
    page = static_file("trace_embedding.html").read_text()
    for rewrite in _embedding_rewrites:
        page = rewrite(page)
    return page.encode()


def polyfill_bytes() -> bytes | None:
    from lightx2v.assets import WEBCOMPONENTS, find

    path = find(WEBCOMPONENTS)
    return path.read_bytes() if path else None


# --- a notice instead of a spinner where Google Charts cannot load ---------------------------------------------

def check_charts_notice() -> str | None:
    problem = check_routes("/index.html")
    if problem:
        return problem
    page = static_file("index.html").read_text(errors="replace")
    if CHARTS_LOADER_TAG not in page or "google.charts.load" not in page:
        return "static/index.html no longer loads Google Charts with the loader tag this fix expects"
    return None


def index_html(trace_browser_url: str, known: bool) -> bytes:
    original = static_file("index.html").read_text()
    config = json.dumps({"host": CHARTS_HOST, "url": trace_browser_url, "known": known}).replace("<", "\\u003c")
    return original.replace(CHARTS_LOADER_TAG, CHARTS_LOADER_TAG + _FALLBACK.replace("@CONFIG@", config), 1).encode()


def trace_browser_url(logdir: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, bool]:
    """(URL of the trace browser, whether one is known to run): $LIGHTX2V_TRACE_BROWSER_URL, else the discovery
    file of a trace browser serving the logdir or a folder above it, else its default port as a guess.

    A bad value of either variable falls back to the guess: this only words a notice (the servers that read the
    variables refuse it at start)."""
    try:
        configured = settings.get(settings.TRACE_BROWSER_URL, environ)
    except settings.SettingError:
        configured = None
    if configured:
        return configured, True
    if logdir and "://" not in logdir:
        found = discovered_url(os.path.join(os.path.abspath(logdir), "_"))
        if found:
            return found, True
    try:
        port = settings.get(settings.TRACE_BROWSER_PORT, environ)
    except settings.SettingError:
        port = settings.SETTINGS[settings.TRACE_BROWSER_PORT].default
    return f"http://127.0.0.1:{port}/", False


# --- the routes ------------------------------------------------------------------------------------------------

def check_routes(route: str) -> str | None:
    from torch_tb_profiler import plugin

    cls = plugin.TorchProfilerPlugin
    problem = missing(cls, "get_plugin_apps", "static_file_route", "headers")
    if problem:
        return problem
    if "static_file_route" not in code_names(getattr(cls.get_plugin_apps, "__wrapped__", cls.get_plugin_apps)):
        return f"TorchProfilerPlugin.get_plugin_apps no longer serves {route} with static_file_route"
    return None


_routes: dict[str, object] = {}  # route -> function(plugin, request) -> werkzeug Response, added by applied fixes
_embedding_rewrites: list[Callable[[str], str]] = []  # applied to static/trace_embedding.html, in order


def add_embedding_rewrite(rewrite: Callable[[str], str]) -> None:
    """Serve the Trace view's frame rewritten by `rewrite` too (after the rewrites added before it)."""
    if rewrite not in _embedding_rewrites:
        _embedding_rewrites.append(rewrite)
    add_route("/trace_embedding.html", _embedding)


def _embedding(_plugin, _request):
    return _response(trace_embedding_html(), "text/html; charset=utf-8")


def add_route(route: str, handler) -> None:
    """Serve `route` with `handler(plugin, request)`; installs one wrapper of get_plugin_apps on first use."""
    from torch_tb_profiler import plugin
    from werkzeug import wrappers

    _routes[route] = handler
    cls = plugin.TorchProfilerPlugin
    if is_fixed(cls.get_plugin_apps):
        return
    original = cls.get_plugin_apps

    def get_plugin_apps(self):
        apps = original(self)
        for path, func in _routes.items():
            apps[path] = wrappers.Request.application(lambda request, func=func: func(self, request))
        return apps

    mark_fixed(get_plugin_apps, original)
    cls.get_plugin_apps = get_plugin_apps


def _response(body: bytes, mimetype: str):
    from torch_tb_profiler import plugin
    from werkzeug import wrappers

    return wrappers.Response(body, content_type=mimetype, headers=plugin.TorchProfilerPlugin.headers)


def apply_offline_trace() -> None:
    from werkzeug import exceptions

    def polyfill(_plugin, _request):
        body = polyfill_bytes()
        if body is None:
            raise exceptions.NotFound("the polyfill is not installed: python -m lightx2v.assets install")
        return _response(body, "application/javascript; charset=utf-8")

    add_embedding_rewrite(local_polyfill)
    add_route(POLYFILL_ROUTE, polyfill)


def apply_charts_notice() -> None:
    def index(plugin, _request):
        url, known = trace_browser_url(getattr(plugin, "logdir", None))
        return _response(index_html(url, known), "text/html; charset=utf-8")

    add_route("/index.html", index)


# Runs right after Google's loader tag, before the plugin's app: a no-op when the loader loaded.
_FALLBACK = """<script>
(function () {
  if (window.google && window.google.charts) return;
  var C = @CONFIG@;
  var text = 'Google Charts did not load: this browser cannot reach ' + C.host + '. The charts of the Overview, '
    + 'Operator, Kernel and Memory views need it; their tables and the Trace view work without it (the offline '
    + 'Overview below draws the memory curve).';
  function link() {
    var a = document.createElement('a'); a.href = C.url; a.target = '_blank'; a.textContent = C.url; return a;
  }
  var short = 'Chart not drawn: Google Charts could not load from ' + C.host + ' (no internet in this browser).';
  function notice(message) {
    var box = document.createElement('div'); box.className = 'lightx2v-offline-notice';
    box.style.cssText = 'padding:8px 12px;margin:4px 0;background:#fff4e5;border-left:4px solid #e67e22;'
      + 'font:14px sans-serif;color:#222;position:relative;z-index:1300;';
    box.appendChild(document.createTextNode(message + ' Offline Overview and Timeline of every trace: '));
    box.appendChild(link());
    if (!C.known) box.appendChild(document.createTextNode(' (start it with `python -m lightx2v.trace_browser`)'));
    return box;
  }
  function Chart(element) { this.element = element; }
  Chart.prototype.draw = function () {
    if (this.element && this.element.appendChild) {
      this.element.textContent = ''; this.element.appendChild(notice(short));
    }
  };
  function stand_in(target) {
    return new Proxy(target, {get: function (t, key) {
      if (key in t) return t[key];
      if (key === Symbol.toPrimitive) return function () { return 0; };
      if (key === 'then') return undefined;
      return function () { return stand_in({}); };
    }});
  }
  var visualization = new Proxy({}, {get: function (t, key) {
    if (key === 'events') {
      return {addListener: function () {}, addOneTimeListener: function () {}, removeListener: function () {}};
    }
    if (key === 'arrayToDataTable') return function () { return stand_in({}); };
    return function (element) { return stand_in(new Chart(element)); };
  }});
  window.google = {charts: {load: function () { return Promise.resolve(); },
                            setOnLoadCallback: function (f) { Promise.resolve().then(f); }},
                   visualization: visualization};
  window.lightx2vChartsMissing = true;
  document.addEventListener('DOMContentLoaded', function () {
    var banner = notice(text); banner.id = 'lightx2v-charts-banner';
    document.body.insertBefore(banner, document.body.firstChild);
  });
})();
</script>"""
