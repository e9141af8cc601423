"""The offline Timeline: Chromium's trace viewer, as torch-tb-profiler installs it, on a page of ours.

torch-tb-profiler ships the viewer (`static/trace_viewer_full.html`, catapult's vulcanized trace viewer) but its
page loads the Web Components V0 polyfill it needs from a CDN. Ours loads the polyfill from the asset folder
(`lightx2v.assets`), fetches the trace file from this server (plain or gzip, TensorBoard or chrome format),
unpacks gzip with the browser's own DecompressionStream and hands the text to the viewer's importer.

The page reports its progress in `window.lightx2vTimeline` (`state`: loading / drawn / failed, `model`, `error`,
`ms`: phase times) and in `<body data-state>`, for tests and benchmarks.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from lightx2v.assets import INSTALL_COMMAND, WEBCOMPONENTS, find

from .html_page import WARN, page

VIEWER_FILE = "trace_viewer_full.html"
POLYFILL_URL = "/assets/" + WEBCOMPONENTS.file
VIEWER_URL = "/vendor/" + VIEWER_FILE


def viewer_path() -> Path | None:
    """The trace viewer installed with torch-tb-profiler (found without importing the plugin), or None."""
    try:
        spec = importlib.util.find_spec("torch_tb_profiler")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "static" / VIEWER_FILE
    return path if path.is_file() else None


def polyfill_path() -> Path | None:
    return find(WEBCOMPONENTS)


def missing() -> list[str]:
    """What the Timeline lacks on this machine, each with the command that adds it; empty when ready."""
    problems = []
    if polyfill_path() is None:
        problems.append(f"the Web Components polyfill ({WEBCOMPONENTS.spec}): run `{INSTALL_COMMAND}`")
    if viewer_path() is None:
        problems.append("Chromium's trace viewer, installed with torch-tb-profiler: "
                        "run `pip install torch-tb-profiler`")
    return problems


def render_timeline(name: str, file_url: str) -> str:
    config = json.dumps({"name": name, "url": file_url, "viewer": VIEWER_URL}).replace("<", "\\u003c")
    head = (f"<script>\nconst CONFIG = {config};\n{_BEFORE_VIEWER}</script>\n"
            f'<script src="{POLYFILL_URL}"></script>\n'
            f'<link rel="import" href="{VIEWER_URL}" onerror="viewerImportFailed()">\n')
    body = f"<div id=progress>Loading the trace viewer …</div>\n<script>\n{_SHOW_TRACE}</script>"
    return page(f"{name} · Timeline", body, css=TIMELINE_STYLE, head=head, body_attrs="data-state=loading")


# The Timeline's own rules, after the base's (html_page.STYLE): the viewer fills the window, in its own text colour
TIMELINE_STYLE = """
html { overflow: hidden; }
#trace-viewer { position: fixed; inset: 0; color: initial; } #trace-viewer:focus { outline: none; }
#progress { position: fixed; top: 40%; width: 100%; text-align: center; color: #444; z-index: 10; }
#progress.failed { color: """ + WARN + """; }
"""

# Before the viewer loads: the progress record, and the failure path its import's onerror takes (CONFIG is set)
_BEFORE_VIEWER = """window.__hideTraceViewerPolyfillWarning = true;
window.lightx2vTimeline = {state: 'loading', model: null, error: null, ms: {}};
const T0 = performance.now();
function timelineFailed(message) {
  const t = window.lightx2vTimeline;
  t.state = 'failed'; t.error = message; document.body.dataset.state = 'failed';
  const p = document.getElementById('progress'); p.textContent = message; p.className = 'failed';
}
function viewerImportFailed() {
  document.addEventListener('DOMContentLoaded',
    () => timelineFailed('Could not load the trace viewer (' + CONFIG.viewer + ').'));
}
"""

# Once the viewer is there: fetch the trace, unpack it, import it, draw it
_SHOW_TRACE = """(function () {
  const MAX_TEXT = 536870888;  // V8's longest string (64-bit): the viewer imports the trace as one string
  const t = window.lightx2vTimeline;
  const progress = (text) => { document.getElementById('progress').textContent = text; };
  const mark = (phase) => { t.ms[phase] = Math.round(performance.now() - T0); };

  async function traceText() {
    progress('Downloading ' + CONFIG.name + ' …');
    const response = await fetch(CONFIG.url);
    if (!response.ok) throw new Error('HTTP ' + response.status + ' for ' + CONFIG.url);
    let bytes = await response.arrayBuffer();
    mark('downloaded');
    const head = new Uint8Array(bytes, 0, Math.min(2, bytes.byteLength));
    if (head[0] === 0x1f && head[1] === 0x8b) {
      progress('Unpacking ' + CONFIG.name + ' …');
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
      bytes = await new Response(stream).arrayBuffer();
      mark('unpacked');
    }
    if (bytes.byteLength > MAX_TEXT)
      throw new Error((bytes.byteLength / 1e6).toFixed(0) + ' MB of JSON is more than this viewer can hold (one '
        + 'browser string, 512 MiB); use the Overview, `python -m lightx2v.trace_summary`, or Perfetto');
    return new TextDecoder().decode(bytes);
  }

  async function show(viewer) {
    const text = await traceText();
    mark('decoded');
    progress('Importing ' + (text.length / 1e6).toFixed(1) + ' MB of trace events …');
    const model = new tr.Model();
    await new tr.importer.Import(model).importTracesWithProgressDialog([text]);
    mark('imported');
    if (model.getAllProcesses().length === 0) throw new Error('the trace holds no events the viewer can show');
    viewer.model = model;
    viewer.viewTitle = CONFIG.name;
    t.model = model;
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    mark('drawn');
    document.getElementById('progress').remove();
    t.state = 'drawn';
    document.body.dataset.state = 'drawn';
  }

  document.addEventListener('WebComponentsReady', function () {
    if (typeof tr === 'undefined') {
      timelineFailed('The trace viewer did not load (' + CONFIG.viewer + ').');
      return;
    }
    mark('viewer');
    const container = document.createElement('track-view-container');
    container.id = 'track_view_container';
    const viewer = document.createElement('tr-ui-timeline-view');
    viewer.track_view_container = container;
    Polymer.dom(viewer).appendChild(container);
    viewer.id = 'trace-viewer';
    viewer.globalMode = true;
    Polymer.dom(document.body).appendChild(viewer);
    show(viewer).catch(
      (error) => timelineFailed('Could not open ' + CONFIG.name + ': ' + (error && error.message || error)));
  });
})();
"""
