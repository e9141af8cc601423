"""The HTML of the trace list. Opening in Perfetto uses the two ways Perfetto documents
(perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui):

* "Open in Perfetto": this page fetches the trace, opens the Perfetto UI with `window.open`, sends
  'PING' until the UI answers 'PONG', then posts `{perfetto: {buffer, title, fileName}}`. Pages served
  from localhost / 127.0.0.1 are trusted by the UI (no consent prompt); works on any port.
* "Open by URL": `<ui>/#!/?url=http://127.0.0.1:9001/files/<trace>`; the UI fetches the file itself,
  which its content security policy only allows from http://127.0.0.1:9001, with CORS headers.
"""

from __future__ import annotations

import html
import time
import urllib.parse
from collections.abc import Sequence

from lightx2v.trace_browser import compare, offline
from lightx2v.trace_browser.files import Trace
from lightx2v.trace_browser.timeline import missing as timeline_missing
from lightx2v.trace_summary.render import format_bytes  # one byte unit: the Overview's and the summary's


def file_url(trace_path: str) -> str:
    return "/files/" + urllib.parse.quote(trace_path)


def render_index(traces: Sequence[Trace], *, root: str, host: str, perfetto_ui: str) -> str:
    problems = timeline_missing()
    previous = compare.previous_runs(traces)
    rows = []
    for t in traces:
        url = file_url(t.path)
        deep = f"{perfetto_ui}/#!/?url=" + urllib.parse.quote(f"http://{host}{url}", safe="")
        name = t.path.rsplit("/", 1)[-1]
        rows.append(
            "<tr>"
            f"<td class=path>{html.escape(t.path)}</td>"
            f"<td class=num>{format_bytes(t.size)}</td>"
            f"<td>{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t.mtime))}</td>"
            f"<td><button class=open data-url=\"{html.escape(url)}\" data-name=\"{html.escape(name)}\">"
            "Open in Perfetto</button> "
            f"<a class=deep href=\"{html.escape(deep)}\" target=_blank rel=noopener>Open by URL</a> "
            f"<a class=download href=\"{html.escape(url)}?download=1\">Download</a></td>"
            f"<td class=offline>{offline.row_links(t, not problems)}{compare.previous_link(t, previous)}</td>"
            "</tr>"
        )
    body = "\n".join(rows) or "<tr><td colspan=5>No traces yet. Run a capture; this page lists it on reload.</td></tr>"
    return _TEMPLATE.format(root=html.escape(root), count=len(traces), rows=body,
                            offline_notice=offline.notice(problems), runs=offline.runs_section(traces),
                            ui=html.escape(perfetto_ui), ui_js=perfetto_ui.replace("\\", "").replace("'", ""))


_TEMPLATE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>Traces · LightX2V</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }} td, th {{ padding: .3em .8em; border-bottom: 1px solid #ddd; text-align: left; }}
td.num {{ text-align: right; }} td.path {{ font-family: monospace; }}
#status {{ color: #555; margin: 1em 0; min-height: 1.2em; }}
#offline-notice.missing {{ border-left: 4px solid #c0392b; padding: .1em 1em; background: #fdf3f2; }}
.timeline.disabled {{ color: #999; }}
</style></head>
<body>
<h1>Traces</h1>
<p>{count} trace file(s) under <code>{root}</code>, newest first.
"Open in Perfetto" sends the trace to <a href="{ui}">{ui}</a> from this page;
"Open by URL" lets Perfetto fetch it and needs this page at http://127.0.0.1:9001.</p>
{offline_notice}
<p><a id=compare href="/compare">Compare two captures</a> (traces or runs: what got faster, what got slower, which
kernels changed), or use a row's "Compare with previous" link.</p>
<div id=status></div>
{runs}
<table id=traces><thead><tr><th>Trace</th><th>Size</th><th>Modified</th><th>Perfetto (online)</th>
<th>Offline views</th></tr></thead>
<tbody>
{rows}
</tbody></table>
<script>
const PERFETTO = '{ui_js}';
const status = (text) => {{ document.getElementById('status').textContent = text; }};
async function openInPerfetto(url, name) {{
  const ui = window.open(PERFETTO + '/#!/');  // synchronously, inside the click: popup blockers allow it
  if (!ui) {{ status('The browser blocked the Perfetto window; allow pop-ups for this page.'); return; }}
  status('Loading ' + name + ' ...');
  const response = await fetch(url);
  if (!response.ok) {{ status('Could not read ' + name + ': HTTP ' + response.status); return; }}
  const buffer = await response.arrayBuffer();
  status('Waiting for Perfetto to answer ...');
  const ping = setInterval(() => ui.postMessage('PING', PERFETTO), 50);
  const onMessage = (event) => {{
    if (event.source !== ui || event.data !== 'PONG') return;
    clearInterval(ping);
    window.removeEventListener('message', onMessage);
    ui.postMessage({{perfetto: {{buffer: buffer, title: name, fileName: name}}}}, PERFETTO);
    status('Opened ' + name + ' in Perfetto.');
  }};
  window.addEventListener('message', onMessage);
  setTimeout(() => clearInterval(ping), 60000);
}}
for (const button of document.querySelectorAll('button.open')) {{
  button.addEventListener('click', () => openInPerfetto(button.dataset.url, button.dataset.name));
}}
</script>
</body></html>
"""
