"""The HTML of the trace list. Opening in Perfetto uses the two ways Perfetto documents
(perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui):

* "Open in Perfetto": this page fetches the trace, opens the Perfetto UI with `window.open`, sends
  'PING' until the UI answers 'PONG', then posts `{perfetto: {buffer, title, fileName}}`. Pages served
  from localhost / 127.0.0.1 are trusted by the UI (no consent prompt); works on any port.
* "Open by URL": `<ui>/#!/?url=http://127.0.0.1:9001/files/<trace>`; the UI fetches the file itself,
  which its content security policy only allows from http://127.0.0.1:9001, with CORS headers. Offered only on a
  page reached at that address; elsewhere the row says how to get there (a laptop's 9001 forwarded here).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Sequence

from lightx2v.trace_browser import compare, offline
from lightx2v.trace_browser.files import Trace, url_quote
from lightx2v.trace_browser.timeline import missing as timeline_missing
from lightx2v.trace_summary.render import format_bytes  # one byte unit: the Overview's and the summary's

from .html_page import WARN, escape, num_cell, page

OPEN_BY_URL_ORIGIN = "127.0.0.1:9001"  # the one origin Perfetto UI fetches a trace from by URL


def file_url(trace_path: str) -> str:
    return "/files/" + url_quote(trace_path)


def _by_url(deep: str, host: str, server_port: int | None) -> str:
    """The row's "Open by URL": the link where it can work, else why not and the forward that makes it work."""
    if host.lower() == OPEN_BY_URL_ORIGIN:
        return f"<a class=deep href=\"{escape(deep)}\" target=_blank rel=noopener>Open by URL</a> "
    forward = f"ssh -N -L 9001:127.0.0.1:{server_port or 'PORT'} user@this-host"
    why = (f"Perfetto fetches a trace by URL only from http://{OPEN_BY_URL_ORIGIN}, and this page is at "
           f"{host}: use Open in Perfetto, or forward your laptop's 9001 here ({forward}) and open "
           f"http://{OPEN_BY_URL_ORIGIN}/")
    return f"<span class=deep-off title=\"{escape(why)}\">Open by URL: needs 9001</span> "


def render_index(traces: Sequence[Trace], *, root: str, host: str, perfetto_ui: str,
                 server_port: int | None = None) -> str:
    """The trace list as seen at `host` (the request's Host: a laptop's end of a forward, say); `server_port` is
    the port this server listens on, for the forward a row may suggest."""
    problems = timeline_missing()
    previous = compare.previous_runs(traces)
    rows = []
    for t in traces:
        url = file_url(t.path)
        deep = f"{perfetto_ui}/#!/?url=" + urllib.parse.quote(f"http://{host}{url}", safe="")
        name = t.path.rsplit("/", 1)[-1]
        rows.append(
            f"<tr{' class=damaged' if t.damaged else ''}>"
            f"<td class=path>{escape(t.path)}{_damaged_label(t)}</td>"
            f"{num_cell(format_bytes(t.size))}"
            f"<td>{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t.mtime))}</td>"
            f"<td><button class=open data-url=\"{escape(url)}\" data-name=\"{escape(name)}\">"
            "Open in Perfetto</button> "
            f"{_by_url(deep, host, server_port)}"
            f"<a class=download href=\"{escape(url)}?download=1\">Download</a></td>"
            f"<td class=offline>{offline.row_links(t, not problems)}{compare.previous_link(t, previous)}</td>"
            "</tr>"
        )
    listing = "\n".join(rows) or ("<tr><td colspan=5>No traces yet. Run a capture; this page lists it on reload."
                                  "</td></tr>")
    ui, ui_js = escape(perfetto_ui), perfetto_ui.replace("\\", "").replace("'", "")
    by_url_note = ("" if host.lower() == OPEN_BY_URL_ORIGIN else
                   f" (this page is at {escape(host)}: forward your laptop's 9001 here to use it)")
    body = f"""<h1>Traces</h1>
<p>{len(traces)} trace file(s) under <code>{escape(root)}</code>, newest first.
"Open in Perfetto" sends the trace to <a href="{ui}">{ui}</a> from this page;
"Open by URL" lets Perfetto fetch it and needs this page at http://127.0.0.1:9001{by_url_note}.</p>
{offline.notice(problems)}
<p><a id=compare href="/compare">Compare two captures</a> (traces or runs: what got faster, what got slower, which
kernels changed), or use a row's "Compare with previous" link.</p>
<div id=status></div>
{offline.runs_section(traces, not problems)}
<table id=traces><thead><tr><th>Trace</th><th>Size</th><th>Modified</th><th>Perfetto (online)</th>
<th>Offline views</th></tr></thead>
<tbody>
{listing}
</tbody></table>
<script>
const PERFETTO = '{ui_js}';
{_OPEN_IN_PERFETTO}</script>"""
    return page("Traces", body, css=INDEX_STYLE)


def _damaged_label(trace: Trace) -> str:
    """A damaged file's mark beside its name: it looks like any other until opened (`files.damage` says why)."""
    if not trace.damaged:
        return ""
    return f' <span class=damaged>damaged: {escape(trace.damaged)}</span>'


# The trace list's own rules, after the base's (html_page.STYLE)
INDEX_STYLE = """
#status { color: #555; margin: 1em 0; min-height: 1.2em; }
#offline-notice.missing { border-left: 4px solid """ + WARN + """; padding: .1em 1em; background: #fdf3f2; }
.timeline.disabled { color: #999; }
.deep-off { color: #999; cursor: help; }
span.damaged { color: """ + WARN + """; font-family: system-ui, sans-serif; font-weight: 600; }
"""

# "Open in Perfetto": PERFETTO (the UI's origin) is set before it
_OPEN_IN_PERFETTO = """const status = (text) => { document.getElementById('status').textContent = text; };
async function openInPerfetto(url, name) {
  const ui = window.open(PERFETTO + '/#!/');  // synchronously, inside the click: popup blockers allow it
  if (!ui) { status('The browser blocked the Perfetto window; allow pop-ups for this page.'); return; }
  status('Loading ' + name + ' ...');
  const response = await fetch(url);
  if (!response.ok) { status('Could not read ' + name + ': HTTP ' + response.status); return; }
  const buffer = await response.arrayBuffer();
  status('Waiting for Perfetto to answer ...');
  const ping = setInterval(() => ui.postMessage('PING', PERFETTO), 50);
  const onMessage = (event) => {
    if (event.source !== ui || event.data !== 'PONG') return;
    clearInterval(ping);
    window.removeEventListener('message', onMessage);
    ui.postMessage({perfetto: {buffer: buffer, title: name, fileName: name}}, PERFETTO);
    status('Opened ' + name + ' in Perfetto.');
  };
  window.addEventListener('message', onMessage);
  setTimeout(() => clearInterval(ping), 60000);
}
for (const button of document.querySelectorAll('button.open')) {
  button.addEventListener('click', () => openInPerfetto(button.dataset.url, button.dataset.name));
}
"""
