"""The offline views' routes (`lightx2v.trace_browser.offline`), fast and in this process: a results folder made
here (the hand-made steps trace of tests/helpers/steps_trace.py, a truncated trace, a Perfetto file, a run folder),
and what each route answers for it: status, content type, the download name, the refusals with their reasons, and
the trace list's offline links. tests/test_offline_views.py and tests/test_trace_browser_compare.py ask a running
server in Chromium and over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from lightx2v.assets import ENV_ASSETS_DIR, WEBCOMPONENTS, find
from lightx2v.trace_browser import offline
from lightx2v.trace_browser.files import Refused, Trace
from lightx2v.trace_browser.offline import (
    compare_page,
    notice,
    overview_page,
    overview_url,
    row_links,
    run_overview_url,
    run_timeline_url,
    runs_section,
    static_file,
    timeline_index,
    timeline_page,
    timeline_url,
    timeline_window,
)
from lightx2v.trace_files import CHROME, FOREIGN, TENSORBOARD

from conftest import missing_tool
from helpers.steps_trace import steps_trace

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
TRUNCATED = '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}, '


@pytest.fixture
def root(tmp_path) -> Path:
    """results/: w.pt.trace.json (three steps), run/r0.json and run/r1.json (copies of it), bad.json (cut off),
    p.pftrace (Perfetto's own format)."""
    res = tmp_path / "results"
    res.mkdir()
    steps_trace(res / "w.pt.trace.json")
    (res / "run").mkdir()
    shutil.copy(res / "w.pt.trace.json", res / "run" / "r0.json")
    shutil.copy(res / "w.pt.trace.json", res / "run" / "r1.json")
    (res / "bad.json").write_text(TRUNCATED)
    (res / "p.pftrace").write_bytes(b"\x0a\x00binary")
    return res


def refused(call) -> tuple[int, str]:
    with pytest.raises(Refused) as err:
        call()
    return err.value.status, str(err.value)


@pytest.fixture
def viewer_ready(root):
    if offline.timeline.missing():
        missing_tool("the offline Timeline is not installed here: python -m lightx2v.assets install")


# --- URLs ---------------------------------------------------------------------------------------------------------


def test_the_views_urls_percent_encode_the_path_and_a_run_ends_with_a_slash():
    assert timeline_url("run/a b#1.json") == "/timeline/run/a%20b%231.json"
    assert overview_url("run/a b.json") == "/overview/run/a%20b.json"
    assert run_overview_url("run/a b") == "/overview/run/a%20b/"
    assert run_overview_url("") == "/overview/"
    assert run_timeline_url("run/a b") == "/timeline/run/a%20b/"
    assert run_timeline_url("", "ProfilerStep#2") == "/timeline/?step=ProfilerStep%232"


# --- the Timeline -------------------------------------------------------------------------------------------------


def test_the_timeline_page_loads_the_traces_index_and_windows_from_its_routes(root, viewer_ready):
    page = timeline_page(str(root), "w.pt.trace.json")
    assert (page.status, page.content_type, page.cache, page.download) == (200, HTML, "no-cache", None)
    assert (b'const CONFIG = {"name": "w.pt.trace.json", "index": "/api/timeline/index/w.pt.trace.json", "window": '
            b'"/api/timeline/window/w.pt.trace.json"') in page.body


def test_the_timeline_page_of_an_encoded_name_keeps_it_encoded_once(root, viewer_ready):
    shutil.copy(root / "w.pt.trace.json", root / "a b.json")
    page = timeline_page(str(root), "a%20b.json")
    assert b'{"name": "a b.json", "index": "/api/timeline/index/a%20b.json", "window": ' \
           b'"/api/timeline/window/a%20b.json"' in page.body


def test_the_timeline_refuses_what_is_no_json_trace(root):
    for call in (lambda: timeline_page(str(root), "p.pftrace"), lambda: timeline_index(str(root), "p.pftrace"),
                 lambda: timeline_window(str(root), "p.pftrace", "step=0")):
        assert refused(call) == (404, "the Timeline opens JSON traces; open this one in Perfetto")
    assert refused(lambda: timeline_page(str(root), "../x.json")) == (403, "path leaves the results folder")
    assert refused(lambda: timeline_index(str(root), "nope.json")) == (404, "no such trace")


def test_without_the_viewer_the_timeline_page_says_what_to_install_and_answers_503(root, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_ASSETS_DIR, str(tmp_path / "none"))
    monkeypatch.delitem(sys.modules, "torch_tb_profiler", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "none")])
    page = timeline_page(str(root), "w.pt.trace.json")
    assert page.status == 503
    assert (b"<h1>Timeline not installed</h1><p class=error>The offline Timeline needs the Web Components polyfill "
            b"(webcomponents.js@0.7.24): run `") in page.body
    assert (b"`; and Chromium&#x27;s trace viewer, installed with torch-tb-profiler: run `pip install "
            b"torch-tb-profiler`. Then reload this page. The Overview works without it.</p>") in page.body


def test_the_index_names_the_steps_as_json(root):
    page = timeline_index(str(root), "w.pt.trace.json")
    assert (page.status, page.content_type) == (200, JSON)
    assert [s["name"] for s in json.loads(page.body)["steps"]] == ["ProfilerStep#1", "ProfilerStep#2",
                                                                   "ProfilerStep#3"]
    assert (root / ".trace_browser" / "index").is_dir()  # built once, kept beside the traces


def test_a_trace_cut_off_answers_422_with_the_reason(root):
    page = timeline_index(str(root), "bad.json")
    assert (page.status, page.content_type) == (422, TEXT)
    assert page.body.decode().endswith("bad.json: truncated trace: the JSON ends early (the file was cut off while "
                                       "being written?)")
    page = timeline_window(str(root), "bad.json", "step=0")
    assert (page.status, page.content_type) == (422, TEXT)
    assert page.body.decode().endswith("truncated trace: the JSON ends early (the file was cut off while being "
                                       "written?)")
    assert timeline_window(str(root), "bad.json", "lo=0&end=5").status == 422


def events(page) -> list[dict]:
    return json.loads(page.body)["traceEvents"]


def test_a_steps_window_is_json_and_python_frames_come_only_when_asked(root):
    page = timeline_window(str(root), "w.pt.trace.json", "step=1")
    assert (page.status, page.content_type, page.download) == (200, JSON, None)
    names = {e["name"] for e in events(page)}
    assert "k_step2" in names and "k_step1" not in names
    assert not any(e.get("cat") == "python_function" for e in events(page))
    framed = timeline_window(str(root), "w.pt.trace.json", "step=1&frames=1")
    assert "model.py(2): forward" in {e["name"] for e in events(framed)}
    assert events(timeline_window(str(root), "w.pt.trace.json", "step=1&frames=true")) == events(page)


def test_a_window_by_time_holds_what_ran_then(root):
    page = timeline_window(str(root), "w.pt.trace.json", "lo=1700000002000.125&end=1700000003000.125")
    assert (page.status, page.content_type, page.download) == (200, JSON, None)
    names = {e["name"] for e in events(page)}
    assert "k_step3" in names and "k_step2" not in names
    assert not any(e.get("cat") == "python_function" for e in events(page))
    framed = timeline_window(str(root), "w.pt.trace.json", "lo=1700000002000.125&end=1700000003000.125&frames=1")
    assert "model.py(3): forward" in {e["name"] for e in events(framed)}


def test_a_downloaded_window_is_named_after_the_trace_and_the_window(root):
    shutil.copy(root / "w.pt.trace.json", root / "x.json")
    assert timeline_window(str(root), "w.pt.trace.json", "step=0&download=1").download == "w.step0.json"
    assert timeline_window(str(root), "w.pt.trace.json", "step=2&frames=1&download=1").download == \
        "w.step2.frames.json"
    assert timeline_window(str(root), "x.json", "lo=5&end=7.5&download=1").download == "x.5-7.5us.json"
    assert timeline_window(str(root), "x.json", "lo=5&end=7.5&frames=1&download=1").download == \
        "x.5-7.5us.frames.json"
    assert timeline_window(str(root), "x.json", "step=0&download=0").download is None
    page = timeline_window(str(root), "w.pt.trace.json", "step=0&download=1")
    assert (page.content_type, page.status) == (JSON, 200)
    assert page.body == timeline_window(str(root), "w.pt.trace.json", "step=0").body


def test_a_gzip_traces_download_drops_every_trace_suffix(root):
    import gzip

    (root / "z.pt.trace.json.gz").write_bytes(gzip.compress((root / "w.pt.trace.json").read_bytes()))
    assert timeline_window(str(root), "z.pt.trace.json.gz", "step=1&download=1").download == "z.step1.json"


@pytest.mark.parametrize("step", ["3", "-1", "x", "1.0"])
def test_a_step_the_trace_has_not_is_404_saying_how_many_it_has(root, step):
    assert refused(lambda: timeline_window(str(root), "w.pt.trace.json", f"step={step}")) == (
        404, f"no step {step}: the trace has 3 (0-based)")


def test_a_window_by_time_needs_numbers(root):
    assert refused(lambda: timeline_window(str(root), "w.pt.trace.json", "lo=a&end=5")) == (
        400, "lo and end are times in the trace's microseconds")
    assert refused(lambda: timeline_window(str(root), "w.pt.trace.json", "lo=5&end=")) == (
        400, "name a window: ?step=K or ?lo=T&end=T (and &frames=1 for Python frames)")


@pytest.mark.parametrize("query", ["", "lo=5", "end=5", "frames=1"])
def test_a_window_must_be_named(root, query):
    assert refused(lambda: timeline_window(str(root), "w.pt.trace.json", query)) == (
        400, "name a window: ?step=K or ?lo=T&end=T (and &frames=1 for Python frames)")


def test_a_trace_replaced_while_being_read_answers_409(root):
    path = root / "w.pt.trace.json"
    timeline_index(str(root), "w.pt.trace.json")
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(b"x" * len(data))  # the same size and time: the kept index no longer fits the file
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    page = timeline_window(str(root), "w.pt.trace.json", "step=1")
    assert (page.status, page.content_type, page.body) == (409, TEXT, b"the trace changed while being read; reload "
                                                                      b"the page")


# --- the Overview and Compare -------------------------------------------------------------------------------------


def test_the_overview_of_a_trace_links_its_timeline_relative_to_the_root(root):
    page = overview_page(str(root), "w.pt.trace.json")
    assert (page.status, page.content_type) == (200, HTML)
    assert b'<a href="/timeline/w.pt.trace.json">Timeline</a>' in page.body
    assert b"<title>w.pt.trace.json" not in page.body


def test_the_overview_of_a_run_folder_compares_its_ranks(root):
    page = overview_page(str(root), "run/")
    assert page.status == 200
    assert f"<h1>Run run: 2 ranks</h1><p class=path>{root / 'run'}</p>".encode() in page.body
    assert b'<a href="/timeline/run/r0.json">Timeline</a>' in page.body
    assert b'<a href="/timeline/run/r1.json">Timeline</a>' in page.body


def test_the_overview_of_the_root_is_the_root_folders_run(root):
    (root / "w.pt.trace.json").unlink()
    (root / "bad.json").unlink()
    shutil.copy(root / "run" / "r0.json", root / "only.json")
    page = overview_page(str(root), "")
    assert page.status == 200 and b'<a href="/timeline/only.json">Timeline</a>' in page.body
    assert b"<h1>Run " not in page.body


def test_the_overview_of_a_root_given_through_a_link_links_timelines_inside_it(root, tmp_path):
    (tmp_path / "link").symlink_to(root)
    page = overview_page(str(tmp_path / "link"), "run/")
    assert b'<a href="/timeline/run/r0.json">Timeline</a>' in page.body


def test_the_overview_refuses_what_is_no_json_trace_and_says_why_a_trace_cannot_be_read(root):
    assert refused(lambda: overview_page(str(root), "p.pftrace")) == (
        404, "the Overview reads JSON traces; open this one in Perfetto")
    assert refused(lambda: overview_page(str(root), "nope/")) == (404, "no such run")
    page = overview_page(str(root), "bad.json")
    assert (page.status, page.content_type) == (422, HTML)
    assert b"<h1>Cannot summarize this trace</h1><p class=error>" in page.body
    assert b"bad.json: truncated trace: the JSON ends early" in page.body


def test_compare_without_sides_offers_the_choices(root):
    page = compare_page(str(root), "")
    assert (page.status, page.content_type) == (200, HTML)
    assert b"<option value=\"run/\"" in page.body and b"<option value=\"w.pt.trace.json\"" in page.body


@pytest.mark.parametrize("query", ["base=w.pt.trace.json", "new=run/", "base="])
def test_compare_with_one_side_is_refused(root, query):
    assert refused(lambda: compare_page(str(root), query)) == (
        400, "name both sides: /compare?base=<trace or run folder/>&new=<...>")


def test_compare_of_a_run_and_a_trace_links_each_sides_overview_and_compares_the_runs_ranks(root):
    page = compare_page(str(root), "base=run%2F&new=w.pt.trace.json")
    assert (page.status, page.content_type) == (200, HTML)
    assert b'<h1>Compare run \xe2\x86\x92 w.pt.trace.json</h1>' in page.body
    assert b'<td><a href="/overview/run/">run/</a></td><td>2 ranks, step 1.100 ms, straggler r0</td>' in page.body
    assert b'<td><a href="/overview/w.pt.trace.json">w.pt.trace.json</a></td><td>1 rank,' in page.body
    assert b"<section id=ranks>" in page.body  # BASE has two ranks


def test_compare_of_a_run_named_with_more_slashes_links_its_overview_once_slashed(root):
    shutil.copytree(root / "run", root / "ranksX")
    page = compare_page(str(root), "base=ranksX%2F%2F&new=w.pt.trace.json")
    assert page.status == 200
    assert b'<a href="/overview/ranksX/">ranksX//</a>' in page.body


def test_compare_of_the_root_links_the_roots_overview(root):
    (root / "bad.json").unlink()
    page = compare_page(str(root), "base=&new=w.pt.trace.json")
    assert page.status == 200
    assert b'href="/overview/"' in page.body


def test_compare_checks_each_side_as_the_overview_does(root):
    assert refused(lambda: compare_page(str(root), "base=p.pftrace&new=w.pt.trace.json")) == (
        404, "the Compare page reads JSON traces; open this one in Perfetto")
    assert refused(lambda: compare_page(str(root), "base=w.pt.trace.json&new=..%2Fx.json")) == (
        403, "path leaves the results folder")
    page = compare_page(str(root), "base=w.pt.trace.json&new=bad.json")
    assert page.status == 422
    assert b"<h1>Cannot summarize this trace</h1><p class=error>bad.json: " in page.body


def test_compare_of_the_root_that_cannot_be_read_names_it_dot_slash(root):
    for name in ("w.pt.trace.json",):
        (root / name).unlink()
    page = compare_page(str(root), "base=&new=run%2F")
    assert page.status == 422
    assert b"<p class=error>./: " in page.body


# --- the polyfill and the viewer ----------------------------------------------------------------------------------


def test_the_polyfill_and_viewer_are_served_from_where_they_are_installed(root, viewer_ready):
    page = static_file("assets/webcomponents.min.js")
    assert (page.content_type, page.cache, page.status) == ("application/javascript; charset=utf-8", "max-age=3600",
                                                            200)
    assert page.body == find(WEBCOMPONENTS).read_bytes()
    page = static_file("vendor/trace_viewer_full.html")
    assert (page.content_type, page.cache) == (HTML, "max-age=3600")
    assert page.body == offline.timeline.viewer_path().read_bytes()


def test_other_static_names_are_not_found_and_a_missing_one_says_what_to_install(tmp_path, monkeypatch):
    assert refused(lambda: static_file("assets/other.js")) == (404, "not found")
    assert refused(lambda: static_file("vendor/webcomponents.min.js")) == (404, "not found")
    monkeypatch.setenv(ENV_ASSETS_DIR, str(tmp_path / "none"))
    status, reason = refused(lambda: static_file("assets/webcomponents.min.js"))
    assert status == 404 and reason.startswith("assets/webcomponents.min.js is not installed: the Web Components "
                                               "polyfill (webcomponents.js@0.7.24): run `")
    monkeypatch.delitem(sys.modules, "torch_tb_profiler", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "none")])
    status, reason = refused(lambda: static_file("vendor/trace_viewer_full.html"))
    assert status == 404 and reason.startswith("vendor/trace_viewer_full.html is not installed: the Web ")
    assert reason.endswith("; Chromium's trace viewer, installed with torch-tb-profiler: run `pip install "
                           "torch-tb-profiler`")


# --- the trace list's part ----------------------------------------------------------------------------------------


def test_a_json_traces_row_links_its_timeline_and_overview():
    assert row_links(Trace("run/a&b.json", 1, 0.0), True) == (
        '<a class=timeline href="/timeline/run/a%26b.json" target=_blank>Timeline</a> '
        '<a class=overview href="/overview/run/a%26b.json" target=_blank>Overview</a>')


def test_without_the_timeline_the_row_greys_it_and_keeps_the_overview():
    assert row_links(Trace("a.json.gz", 1, 0.0), False) == (
        '<span class="timeline disabled" title="not installed: see the notice above">Timeline</span> '
        '<a class=overview href="/overview/a.json.gz" target=_blank>Overview</a>')


def test_a_perfetto_files_row_has_no_offline_view():
    assert row_links(Trace("p.pftrace", 1, 0.0), True) == (
        "<span class=offline-none title=\"Perfetto's own format: open it in Perfetto\">–</span>")


def test_folders_of_several_json_traces_are_listed_as_runs_and_the_root_reads_dot():
    traces = [Trace("a.json", 1, 0.0), Trace("b.json", 1, 0.0), Trace("r&1/x.json", 1, 0.0),
              Trace("r&1/y.json.gz", 1, 0.0), Trace("r&1/z.pftrace", 1, 0.0), Trace("single/x.json", 1, 0.0),
              Trace("two/p.pftrace", 1, 0.0), Trace("two/q.json", 1, 0.0)]
    assert runs_section(traces) == (
        "<h2>Runs with several traces</h2><p>The Overview of a run compares its ranks and names the straggler; its "
        "Timeline shows every rank on one clock, a step at a time.</p>"
        "<table id=runs><thead><tr><th>Run folder</th><th>Traces</th><th></th></tr></thead><tbody>"
        '<tr><td class=path>./</td><td class=num>2</td><td><a class=run-timeline href="/timeline/" target=_blank>'
        'Timeline</a> <a class=run-overview href="/overview/" target=_blank>Overview</a></td></tr>'
        '<tr><td class=path>r&amp;1/</td><td class=num>2</td><td><a class=run-timeline href="/timeline/r%261/" '
        'target=_blank>Timeline</a> <a class=run-overview href="/overview/r%261/" '
        "target=_blank>Overview</a></td></tr></tbody></table><h2>Trace files</h2>")
    # without the Timeline installed, the run's Timeline is greyed as a trace's is, and its Overview stays
    assert ('<td><span class="timeline disabled" title="not installed: see the notice above">Timeline</span> '
            '<a class=run-overview href="/overview/" target=_blank>Overview</a></td>') in runs_section(traces, False)


def test_another_tools_trace_opens_in_the_timeline_and_says_it_has_no_overview():
    assert row_links(Trace("devtools.json", 1, 0.0, FOREIGN), True) == (
        '<a class=timeline href="/timeline/devtools.json" target=_blank>Timeline</a> <span class=offline-none '
        'title="its events are not torch.profiler\'s: the Overview reads torch.profiler traces">not torch.profiler'
        '</span>')


def test_a_run_counts_the_ranks_the_summary_reads_not_another_tools_trace_nor_one_beside_tensorboard_ones():
    # a DevTools recording beside a cut trace: one capture, no run (the list used to say a "2-trace run")
    assert runs_section([Trace("d/devtools.json", 1, 0.0, FOREIGN), Trace("d/cut.pt.trace.json", 1, 0.0,
                                                                            TENSORBOARD)]) == ""
    section = runs_section([Trace("r/rank0.pt.trace.json", 1, 0.0, TENSORBOARD),
                            Trace("r/rank1.pt.trace.json.gz", 1, 0.0, TENSORBOARD),
                            Trace("r/other.json", 1, 0.0, CHROME), Trace("r/devtools.json", 1, 0.0, FOREIGN)])
    assert '<td class=path>r/</td><td class=num>2</td>' in section  # the TensorBoard-named ranks, as the summary


def test_no_folder_of_several_json_traces_lists_no_runs():
    assert runs_section([Trace("a.json", 1, 0.0), Trace("b.pftrace", 1, 0.0), Trace("c/d.json", 1, 0.0)]) == ""
    assert runs_section([]) == ""


def test_the_notice_says_the_views_work_offline_or_lists_what_is_missing():
    assert notice([]) == ("<p id=offline-notice class=ok><strong>Timeline</strong> and <strong>Overview</strong> "
                          "open in this browser with no internet (served from this machine).</p>")
    assert notice(["a <b>", "c"]) == (
        "<div id=offline-notice class=missing><p><strong>Offline Timeline not installed.</strong> It needs:</p>"
        "<ul><li>a &lt;b&gt;</li><li>c</li></ul><p>The Overview works already; Perfetto needs internet in the "
        "browser.</p></div>")


def test_compare_reads_both_sides_together_and_keeps_each_for_the_overview(root, monkeypatch):
    calls = []
    real = offline.summarize_runs

    def spy(runs, *args, **kwargs):
        calls.append([run.path for run in runs])
        return real(runs, *args, **kwargs)

    monkeypatch.setattr(offline, "summarize_runs", spy)
    offline._SUMMARIES.clear()
    assert compare_page(str(root), "base=run%2F&new=w.pt.trace.json").status == 200
    assert calls == [[str(root / "run"), str(root)]]  # one read of both sides' files

    def read_again(*args, **kwargs):
        raise AssertionError("read again")

    monkeypatch.setattr(offline, "summarize_run", read_again)
    monkeypatch.setattr(offline, "summarize_runs", read_again)
    assert overview_page(str(root), "run/").status == 200 and overview_page(str(root), "w.pt.trace.json").status == 200
