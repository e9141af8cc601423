"""The offline Timeline: Chromium's trace viewer, as torch-tb-profiler installs it, on a page of ours.

torch-tb-profiler ships the viewer (`static/trace_viewer_full.html`, catapult's vulcanized trace viewer) but its
page loads the Web Components V0 polyfill it needs from a CDN. Ours loads the polyfill from the asset folder
(`lightx2v.assets`) and never hands the viewer the file: the viewer holds one string of at most 512 MiB, and a
with_stack capture is often more. The page asks this server for the trace's step index (`step_index`, built
once per file) and then for one step's window (`window`) at a time, with previous / next buttons and Python
frames as a layer the user turns on; `?step=K&frames=1` in the page's URL opens that step. Beside the buttons,
a link downloads the same window as a `.json` file (`&download=1`) for Perfetto UI, whose in-browser limit a
whole large trace is past.

A step's window opens zoomed to that step (from its start to its GPU work's end): the window also holds events
that run across it, such as kineto's "Process Spans" over the whole capture, which the viewer's own first view
would fit instead, leaving the step a sliver. The viewer makes that fit once its viewport is sized (it polls every
250 ms after a new model), so the page waits for it before zooming; a zoom set earlier would be undone. A `?step=K`
that is no step of the trace is refused with the range, never shown as another step.

A run folder's Timeline is the same page and script in run mode (`run=True`): its index is the steps every rank
has (`merged.run_steps`: their times on the first rank's clock, after the offsets the summary applied), each
window that step of every rank merged into one Chrome trace (`merged.merged_step`: each rank's processes under
`rank R · ...`, a `collectives` track per rank, an arrow from the last rank to arrive to each rank that waited),
which the download link gives Perfetto as it is; `?step=NAME` (`ProfilerStep%232`) opens a step by its name.

The page reports its progress in `window.lightx2vTimeline` (`state`: loading / drawn / failed, `model`, `error`,
`ms`: phase times, `steps`: the index, `step`: the window shown, `loaded`: its URL, `visible`: the time range in
view, in the trace's microseconds) and in `<body data-state>`, for tests and benchmarks. An index the server cannot
make (422 for a damaged file, with why) is said in the step bar too, where "indexing …" stood.
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


def render_timeline(name: str, index_url: str, window_url: str, run: bool = False) -> str:
    """The page: the step bar, then the viewer, which draws one window (`window_url?step=K`, or `?lo=&end=` for a
    trace without steps) at a time, never the whole file. `run`: a run's Timeline, whose windows are
    `window_url?step=NAME` (the merged steps)."""
    config = json.dumps({"name": name, "index": index_url, "window": window_url, "viewer": VIEWER_URL,
                         "run": run}).replace("<", "\\u003c")
    head = (f"<script>\nconst CONFIG = {config};\n{_BEFORE_VIEWER}</script>\n"
            f'<script src="{POLYFILL_URL}"></script>\n'
            f'<link rel="import" href="{VIEWER_URL}" onerror="viewerImportFailed()">\n')
    body = ("<div id=steps><button id=prev-step type=button disabled>&#9664; previous</button> "
            "<span id=step-name>indexing …</span> "
            "<button id=next-step type=button disabled>next &#9654;</button> "
            "<a id=perfetto-download download hidden title=\"This window as a Chrome-trace .json file: open it in "
            "Perfetto UI (Open trace file), for a trace past Perfetto's in-browser limit\">&#8595; this step for "
            "Perfetto (.json)</a> "
            "<label><input id=frames type=checkbox> Python frames</label> <span id=window-size class=meta></span>"
            "</div>\n<div id=progress>Loading the trace viewer …</div>\n"
            f"<script>\n{_SHOW_TRACE}</script>")
    return page(f"{name} · Timeline", body, css=TIMELINE_STYLE, head=head, body_attrs="data-state=loading")


# The Timeline's own rules, after the base's (html_page.STYLE): the step bar on top, the viewer fills the rest of
# the window, in its own text colour
TIMELINE_STYLE = """
html { overflow: hidden; }
#steps { position: fixed; top: 0; left: 0; right: 0; height: 30px; padding: 4px 10px; box-sizing: border-box;
         background: #f4f4f4; border-bottom: 1px solid #ddd; font-size: 13px; z-index: 20; }
#step-name { display: inline-block; min-width: 16em; text-align: center; font-family: monospace; }
#trace-viewer { position: fixed; top: 30px; left: 0; right: 0; bottom: 0; color: initial; }
#trace-viewer:focus { outline: none; }
#progress { position: fixed; top: 40%; width: 100%; text-align: center; color: #444; z-index: 10; }
#progress.failed { color: """ + WARN + """; }
"""

# Before the viewer loads: the progress record, and the failure path its import's onerror takes (CONFIG is set)
_BEFORE_VIEWER = """window.__hideTraceViewerPolyfillWarning = true;
window.lightx2vTimeline = {state: 'loading', model: null, error: null, ms: {}, steps: null, step: null,
                           frames: false, loaded: null, visible: null};
const T0 = performance.now();
function timelineFailed(message) {
  const t = window.lightx2vTimeline;
  t.state = 'failed'; t.error = message; document.body.dataset.state = 'failed';
  const p = document.getElementById('progress'); p.textContent = message; p.className = 'failed';
  p.style.display = '';
}
function viewerImportFailed() {
  document.addEventListener('DOMContentLoaded',
    () => timelineFailed('Could not load the trace viewer (' + CONFIG.viewer + ').'));
}
"""

# Once the viewer is there: fetch the step index, then one window at a time: fetch, import, draw
_SHOW_TRACE = """(function () {
  const MAX_TEXT = 536870888;  // V8's longest string (64-bit): the viewer imports a window as one string
  const t = window.lightx2vTimeline;
  const $ = (id) => document.getElementById(id);
  const progress = (text) => { const p = $('progress'); p.textContent = text; p.className = ''; p.style.display = ''; };
  const mark = (phase) => { t.ms[phase] = Math.round(performance.now() - T0); };
  let viewer = null;

  async function fetchOk(url) {
    const response = await fetch(url);
    if (!response.ok) {
      const reason = (await response.text()).trim();
      const error = new Error('HTTP ' + response.status + ' for ' + url + ': ' + reason);
      error.answer = 'HTTP ' + response.status + ': ' + reason;  // what the server said, for the step bar
      throw error;
    }
    return response;
  }

  // The index could not be had (a damaged file answers 422, saying why): the step bar says so, not "indexing".
  function indexFailed(error) {
    timelineFailed('Could not open ' + CONFIG.name + ': ' + (error && error.message || error));
    if (t.steps === null) $('step-name').textContent = 'not indexed: ' + (error && (error.answer || error.message)
      || error);
  }

  // A step in URLs: one trace's by its place in the index (?step=K), a run's by its name (the merged route's)
  const stepParam = (k) => CONFIG.run ? t.steps.steps[k].name : String(k);

  function windowUrl(k) {
    const frames = t.frames ? '&frames=1' : '';
    if (t.steps.steps.length) return CONFIG.window + '?step=' + encodeURIComponent(stepParam(k)) + frames;
    const span = t.steps.span;  // no ProfilerStep: the whole trace is one window
    return CONFIG.window + '?lo=' + (span.length ? span[0] : 0) + '&end=' + (span.length ? span[1] + 1 : 0) + frames;
  }

  function showControls() {
    const steps = t.steps.steps, k = t.step;
    const download = $('perfetto-download');
    download.href = windowUrl(k) + '&download=1';  // the window drawn, as a file Perfetto opens
    download.hidden = false;
    $('prev-step').disabled = !steps.length || k <= 0 || t.state === 'loading';
    $('next-step').disabled = !steps.length || k >= steps.length - 1 || t.state === 'loading';
    $('step-name').textContent = steps.length
      ? steps[k].name + ' (' + (k + 1) + ' of ' + steps.length + (CONFIG.run ? ', ' + t.steps.ranks.length
        + ' ranks' : '') + ')' : 'no ProfilerStep: the whole trace';
  }

  async function load(k) {
    t.state = 'loading'; document.body.dataset.state = 'loading'; t.step = k; showControls();
    const url = windowUrl(k);
    progress('Loading ' + (t.steps.steps.length ? t.steps.steps[k].name : CONFIG.name) + ' …');
    const bytes = await (await fetchOk(url)).arrayBuffer();
    mark('downloaded');
    if (bytes.byteLength > MAX_TEXT)
      throw new Error((bytes.byteLength / 1e6).toFixed(0) + ' MB of JSON in one window is more than this viewer '
        + 'can hold (one browser string, 512 MiB); turn Python frames off, or use the Overview');
    const text = new TextDecoder().decode(bytes);
    $('window-size').textContent = (text.length / 1e6).toFixed(1) + ' MB';
    progress('Importing ' + (text.length / 1e6).toFixed(1) + ' MB of trace events …');
    const model = new tr.Model();
    await new tr.importer.Import(model).importTracesWithProgressDialog([text]);
    mark('imported');
    if (model.getAllProcesses().length === 0) throw new Error('the window holds no events the viewer can show');
    viewer.model = model;
    viewer.viewTitle = CONFIG.name;
    t.model = model;
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    await viewerFitted(model);
    if (t.steps.steps.length) zoomTo(model, t.steps.steps[k].lo, t.steps.steps[k].end);
    t.visible = visibleRange(model);
    mark('drawn');
    $('progress').style.display = 'none';
    t.loaded = url;
    t.state = 'drawn';
    document.body.dataset.state = 'drawn';
    if (t.steps.steps.length)
      history.replaceState(null, '', '?step=' + encodeURIComponent(stepParam(k)) + (t.frames ? '&frames=1' : ''));
    showControls();
  }

  // The viewer fits its first view to everything in the window; a step's window is shown from the step's start to
  // its end (GPU tail included), with a 2% margin, in the viewer's own display transform. Model times are ms,
  // shifted so the window starts at 0 (the model's timestampShiftToZeroAmount_, what its own clock conversion
  // adds, which needs clock-sync markers a kineto trace lacks); the index's times are the trace's microseconds.
  const toModel = (model, us) => us / 1000 + (model.timestampShiftToZeroAmount_ || 0);
  const fromModel = (model, ms) => (ms - (model.timestampShiftToZeroAmount_ || 0)) * 1000;

  // The viewer fits its own first view to the whole window once the viewport is attached and sized: a new model's
  // track view polls for that every 250 ms (pollIfViewportAttachedInterval_, cleared once it fitted), so a zoom set
  // before would be undone by it. Wait for that fit (at most FIT_WAIT_MS: a viewer that never fits is left as it is).
  const FIT_WAIT_MS = 10000;
  async function viewerFitted(model) {
    const until = performance.now() + FIT_WAIT_MS;
    while (performance.now() < until) {
      const view = viewer.trackView;
      if (view && view.model === model && view.pollIfViewportAttachedInterval_ === undefined) return;
      await new Promise((done) => setTimeout(done, 20));
    }
  }

  function zoomTo(model, lo, end) {
    const view = viewer.trackView;
    if (!view || !view.viewport || !(end > lo)) return;
    const from = toModel(model, lo), to = toModel(model, end);
    const margin = (to - from) * 0.02;
    const transform = new tr.ui.TimelineDisplayTransform();
    transform.set(view.viewport.currentDisplayTransform);
    transform.xSetWorldBounds(from - margin, to + margin, view.modelTrackContainer_.canvas.width);
    view.viewport.setDisplayTransformImmediately(transform);
  }

  function visibleRange(model) {
    const view = viewer.trackView;
    if (!view || !view.viewport) return null;
    const shown = view.viewport.currentDisplayTransform, width = view.modelTrackContainer_.canvas.width;
    return [shown.xViewToWorld(0), shown.xViewToWorld(width)].map((x) => fromModel(model, x));
  }

  function go(k) {
    load(k).catch((error) => {
      timelineFailed('Could not open ' + CONFIG.name + ': ' + (error && error.message || error));
      showControls();
    });
  }

  async function start() {
    progress('Indexing ' + CONFIG.name + ' (once per file) …');
    t.steps = await (await fetchOk(CONFIG.index)).json();
    mark('indexed');
    const asked = new URLSearchParams(location.search);
    t.frames = asked.get('frames') === '1';
    $('frames').checked = t.frames;
    const steps = t.steps.steps, asked_step = asked.get('step');
    const k = asked_step === null ? 0
      : CONFIG.run ? steps.findIndex((s) => s.name === asked_step) : Number(asked_step);
    $('prev-step').addEventListener('click', () => go(t.step - 1));
    $('next-step').addEventListener('click', () => go(t.step + 1));
    $('frames').addEventListener('change', (e) => { t.frames = e.target.checked; go(t.step); });
    if (asked_step === '' || !Number.isInteger(k) || k < 0 || k >= Math.max(steps.length, 1)) {
      t.step = 0;
      timelineFailed(CONFIG.run ? notRunStep(asked_step) : '?step=' + asked_step + ' is not a step of ' + CONFIG.name
        + ': ' + (steps.length
        ? 'it has ' + steps.length + ' step' + (steps.length > 1 ? 's' : '') + ', ?step=0 (' + steps[0].name
          + ')' + (steps.length > 1 ? ' to ?step=' + (steps.length - 1) + ' (' + steps[steps.length - 1].name + ')'
            : '')
        : 'it has no ProfilerStep, so the whole trace is one window: ?step=0, or no ?step'));
      showControls();
      return;
    }
    go(k);
  }

  function notRunStep(asked) {
    const steps = t.steps.steps, n = steps.length;
    const lacking = t.steps.left_out.find((s) => s.name === asked);
    return '?step=' + asked + ' is not a step of every rank of ' + CONFIG.name + ': '
      + (lacking ? 'not on ' + lacking.missing.join(', ') + '; ' : '') + 'they share ' + n + ' step'
      + (n > 1 ? 's' : '') + ', ?step=' + steps[0].name + (n > 1 ? ' to ?step=' + steps[n - 1].name : '');
  }

  document.addEventListener('WebComponentsReady', function () {
    if (typeof tr === 'undefined') {
      timelineFailed('The trace viewer did not load (' + CONFIG.viewer + ').');
      return;
    }
    mark('viewer');
    const container = document.createElement('track-view-container');
    container.id = 'track_view_container';
    viewer = document.createElement('tr-ui-timeline-view');
    viewer.track_view_container = container;
    Polymer.dom(viewer).appendChild(container);
    viewer.id = 'trace-viewer';
    viewer.globalMode = true;
    Polymer.dom(document.body).appendChild(viewer);
    start().catch(indexFailed);
  });
})();
"""
