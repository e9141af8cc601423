"""The trace list page (`lightx2v.trace_browser.page`), fast: hand-made traces (two runs of one label and a
Perfetto file), the page's rows cell by cell (path, size, time, the Perfetto buttons and links, the offline views'
links, "Compare with previous"), its text above the list, and what it says with no traces or without the offline
Timeline. Modification times read in UTC here. tests/test_trace_browser.py asks a running server for the page."""

from __future__ import annotations

import re
import time

import pytest

from lightx2v.trace_browser import page as page_module
from lightx2v.trace_browser.files import Trace
from lightx2v.trace_browser.page import file_url, render_index

NEW = Trace("runs/20261202-044934_infer/rank0.pt.trace.json", 1_234_567, 3661.0)
OLD = Trace("runs/20261201-010101_infer/rank0.pt.trace.json", 999, 61.0)
BINARY = Trace("a b&c.pftrace", 5000, 86399.0)
UI = "https://ui.example"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def timeline_ready(monkeypatch):
    monkeypatch.setattr(page_module, "timeline_missing", lambda: [])


def body_of(html: str) -> list[str]:
    return html.split("<body>\n", 1)[1].split("\n</body>", 1)[0].split("\n")


def rows_of(html: str) -> list[str]:
    return re.findall(r"<tr>.*?</tr>", html.split("<tbody>\n", 1)[1].split("\n</tbody>", 1)[0])


def test_a_trace_file_is_reached_under_files_with_its_path_percent_encoded():
    assert file_url("runs/a b/x#1.json") == "/files/runs/a%20b/x%231.json"


def test_each_row_has_the_path_size_time_the_perfetto_ways_and_the_offline_views(timeline_ready):
    html = render_index([NEW, OLD, BINARY], root="/data/res", host="127.0.0.1:9001", perfetto_ui=UI)
    assert rows_of(html) == [
        "<tr><td class=path>runs/20261202-044934_infer/rank0.pt.trace.json</td><td class=num>1.2 MB</td>"
        "<td>1970-01-01 01:01:01</td>"
        '<td><button class=open data-url="/files/runs/20261202-044934_infer/rank0.pt.trace.json" '
        'data-name="rank0.pt.trace.json">Open in Perfetto</button> '
        '<a class=deep href="https://ui.example/#!/?url=http%3A%2F%2F127.0.0.1%3A9001%2Ffiles%2Fruns%2F'
        '20261202-044934_infer%2Frank0.pt.trace.json" target=_blank rel=noopener>Open by URL</a> '
        '<a class=download href="/files/runs/20261202-044934_infer/rank0.pt.trace.json?download=1">Download</a></td>'
        '<td class=offline><a class=timeline href="/timeline/runs/20261202-044934_infer/rank0.pt.trace.json" '
        'target=_blank>Timeline</a> <a class=overview href="/overview/runs/20261202-044934_infer/rank0.pt.trace.json"'
        ' target=_blank>Overview</a> <a class=compare-previous href="/compare?base=runs%2F20261201-010101_infer%2F'
        '&amp;new=runs%2F20261202-044934_infer%2F" target=_blank title="runs/20261201-010101_infer/ → '
        'runs/20261202-044934_infer/">Compare with previous infer</a></td></tr>',
        "<tr><td class=path>runs/20261201-010101_infer/rank0.pt.trace.json</td><td class=num>999 B</td>"
        "<td>1970-01-01 00:01:01</td>"
        '<td><button class=open data-url="/files/runs/20261201-010101_infer/rank0.pt.trace.json" '
        'data-name="rank0.pt.trace.json">Open in Perfetto</button> '
        '<a class=deep href="https://ui.example/#!/?url=http%3A%2F%2F127.0.0.1%3A9001%2Ffiles%2Fruns%2F'
        '20261201-010101_infer%2Frank0.pt.trace.json" target=_blank rel=noopener>Open by URL</a> '
        '<a class=download href="/files/runs/20261201-010101_infer/rank0.pt.trace.json?download=1">Download</a></td>'
        '<td class=offline><a class=timeline href="/timeline/runs/20261201-010101_infer/rank0.pt.trace.json" '
        'target=_blank>Timeline</a> <a class=overview href="/overview/runs/20261201-010101_infer/rank0.pt.trace.json"'
        ' target=_blank>Overview</a></td></tr>',
        "<tr><td class=path>a b&amp;c.pftrace</td><td class=num>5.0 KB</td><td>1970-01-01 23:59:59</td>"
        '<td><button class=open data-url="/files/a%20b%26c.pftrace" data-name="a b&amp;c.pftrace">Open in Perfetto'
        '</button> <a class=deep href="https://ui.example/#!/?url=http%3A%2F%2F127.0.0.1%3A9001%2Ffiles%2Fa%2520b'
        '%2526c.pftrace" target=_blank rel=noopener>Open by URL</a> <a class=download href="/files/a%20b%26c.pftrace'
        '?download=1">Download</a></td><td class=offline><span class=offline-none title="Perfetto\'s own format: '
        'open it in Perfetto">–</span></td></tr>',
    ]
    assert html.count("</td></tr>\n<tr><td class=path>") == 2  # a row a line


def test_a_damaged_file_is_marked_beside_its_name_with_why(timeline_ready):
    cut = Trace("r/rank0.pt.trace.json.gz", 30, 0.0, "tensorboard", "cut off: its gzip stream stops after 19 bytes")
    html = render_index([cut, NEW], root="r", host="h:1", perfetto_ui=UI)
    assert ("<tr class=damaged><td class=path>r/rank0.pt.trace.json.gz <span class=damaged>damaged: cut off: its "
            "gzip stream stops after 19 bytes</span></td><td class=num>30 B</td>") in html
    assert html.count("damaged:") == 1  # a whole file is listed as before
    assert "span.damaged { color: #c0392b;" in html


def test_a_file_in_a_folder_is_offered_to_perfetto_under_its_own_name(timeline_ready):
    html = render_index([Trace("deep/er/x.json", 1, 0.0)], root="r", host="h:1", perfetto_ui=UI)
    assert 'data-name="x.json">Open in Perfetto' in html


def test_the_text_above_the_list_names_the_root_the_count_and_the_perfetto_ui(timeline_ready):
    html = render_index([NEW], root="/data/<res>", host="127.0.0.1:9001", perfetto_ui=UI)
    assert html.startswith("<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>Traces · LightX2V")
    assert body_of(html)[:14] == [
        "<h1>Traces</h1>",
        "<p>1 trace file(s) under <code>/data/&lt;res&gt;</code>, newest first.",
        '"Open in Perfetto" sends the trace to <a href="https://ui.example">https://ui.example</a> from this page;',
        '"Open by URL" lets Perfetto fetch it and needs this page at http://127.0.0.1:9001.</p>',
        "<p id=offline-notice class=ok><strong>Timeline</strong> and <strong>Overview</strong> open in this browser "
        "with no internet (served from this machine).</p>",
        '<p><a id=compare href="/compare">Compare two captures</a> (traces or runs: what got faster, what got '
        "slower, which",
        'kernels changed), or use a row\'s "Compare with previous" link.</p>',
        "<div id=status></div>",
        "",
        "<table id=traces><thead><tr><th>Trace</th><th>Size</th><th>Modified</th><th>Perfetto (online)</th>",
        "<th>Offline views</th></tr></thead>",
        "<tbody>",
        rows_of(html)[0],
        "</tbody></table>",
    ]
    assert body_of(html)[14:17] == ["<script>", "const PERFETTO = 'https://ui.example';",
                                    "const status = (text) => { document.getElementById('status').textContent = "
                                    "text; };"]


def test_the_perfetto_origin_in_the_script_has_no_quote_or_backslash_to_break_out_of_its_string(timeline_ready):
    html = render_index([], root="r", host="h:1", perfetto_ui="https://ui.example/it's\\x")
    assert "const PERFETTO = 'https://ui.example/itsx';" in body_of(html)
    assert '<a href="https://ui.example/it&#x27;s\\x">https://ui.example/it&#x27;s\\x</a>' in html


def test_with_no_traces_the_list_says_how_one_gets_there(timeline_ready):
    html = render_index([], root="r", host="h:1", perfetto_ui=UI)
    assert "<p>0 trace file(s) under <code>r</code>, newest first." in body_of(html)
    assert rows_of(html) == ["<tr><td colspan=5>No traces yet. Run a capture; this page lists it on reload."
                             "</td></tr>"]


def test_runs_of_several_traces_are_listed_above_the_files(timeline_ready):
    traces = [Trace("run/r0.json", 1, 0.0), Trace("run/r1.json", 1, 0.0)]
    html = render_index(traces, root="r", host="h:1", perfetto_ui=UI)
    assert body_of(html)[8] == (
        "<h2>Runs with several traces</h2><p>The Overview of a run compares its ranks and names the straggler; its "
        "Timeline shows every rank on one clock, a step at a time.</p>"
        "<table id=runs><thead><tr><th>Run folder</th><th>Traces</th><th></th></tr></thead><tbody><tr>"
        "<td class=path>run/</td><td class=num>2</td><td><a class=run-timeline href=\"/timeline/run/\" "
        "target=_blank>Timeline</a> <a class=run-overview href=\"/overview/run/\" "
        "target=_blank>Overview</a></td></tr></tbody></table><h2>Trace files</h2>")


def test_without_the_offline_timeline_the_notice_names_what_is_missing_and_rows_grey_the_link(monkeypatch):
    monkeypatch.setattr(page_module, "timeline_missing", lambda: ["the polyfill <x>: run `pip install y`"])
    runs = render_index([Trace("run/r0.json", 1, 0.0), Trace("run/r1.json", 1, 0.0)], root="r", host="h:1",
                        perfetto_ui=UI)
    assert ('<td class=path>run/</td><td class=num>2</td><td><span class="timeline disabled" title="not installed: '
            'see the notice above">Timeline</span> <a class=run-overview') in runs  # a run's Timeline greyed too
    html = render_index([OLD], root="r", host="h:1", perfetto_ui=UI)
    assert body_of(html)[4] == (
        "<div id=offline-notice class=missing><p><strong>Offline Timeline not installed.</strong> It needs:</p>"
        "<ul><li>the polyfill &lt;x&gt;: run `pip install y`</li></ul><p>The Overview works already; Perfetto needs "
        "internet in the browser.</p></div>")
    assert ('<td class=offline><span class="timeline disabled" title="not installed: see the notice above">Timeline'
            '</span> <a class=overview href="/overview/runs/20261201-010101_infer/rank0.pt.trace.json" target=_blank>'
            "Overview</a></td>") in rows_of(html)[0]


def test_the_page_carries_its_own_style_after_the_common_one(timeline_ready):
    html = render_index([], root="r", host="h:1", perfetto_ui=UI)
    assert "#status { color: #555; margin: 1em 0; min-height: 1.2em; }" in html
    assert html.index("svg.bar {") < html.index("#status {") < html.index("</style>")


@pytest.mark.parametrize("host", ["127.0.0.1:9101", "localhost:9001", "gpubox.lan:9001", "127.0.0.1"])
def test_open_by_url_is_offered_only_where_perfetto_can_fetch_from(timeline_ready, host):
    """Perfetto UI fetches a trace by URL only from http://127.0.0.1:9001: at any other address the link could
    only fail, so the row says why and which forward makes it work, with this server's own port."""
    html = render_index([NEW], root="r", host=host, perfetto_ui=UI, server_port=9101)
    assert "class=deep href" not in html and "Open by URL: needs 9001" in html
    assert "ssh -N -L 9001:127.0.0.1:9101 user@this-host" in html
    assert f"this page is at {host}" in html
    assert "class=deep href" in render_index([NEW], root="r", host="127.0.0.1:9001", perfetto_ui=UI,
                                             server_port=9101)
