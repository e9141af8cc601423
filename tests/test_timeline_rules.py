"""The offline Timeline's page and what it needs (`lightx2v.trace_browser.timeline`), fast: where the trace viewer is
found (a torch_tb_profiler package made here on the import path, or none), the polyfill in an assets folder made
here, what the page says is missing, and the page itself: its config, scripts, step bar and progress line.
tests/test_offline_views.py and tests/test_timeline_steps.py draw real traces with it in Chromium."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import types
from pathlib import Path

import pytest

from lightx2v.assets import ENV_ASSETS_DIR, INSTALL_COMMAND, WEBCOMPONENTS, find
from lightx2v.trace_browser import timeline
from lightx2v.trace_browser.timeline import missing, polyfill_path, render_timeline, viewer_path

from conftest import missing_tool

POLYFILL_MISSING = f"the Web Components polyfill (webcomponents.js@0.7.24): run `{INSTALL_COMMAND}`"
VIEWER_MISSING = "Chromium's trace viewer, installed with torch-tb-profiler: run `pip install torch-tb-profiler`"


@pytest.fixture
def import_path(tmp_path, monkeypatch) -> Path:
    """An import path of one empty folder, where no torch_tb_profiler is until a test makes one."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.delitem(sys.modules, "torch_tb_profiler", raising=False)
    monkeypatch.setattr(sys, "path", [str(folder)])
    return folder


def plugin(folder: Path, *, package: bool = True, viewer: bool = True) -> Path:
    """torch_tb_profiler in `folder`: a package (or a namespace folder) with its static viewer (or without)."""
    pkg = folder / "torch_tb_profiler"
    (pkg / "static").mkdir(parents=True)
    if package:
        (pkg / "__init__.py").write_text("")
    if viewer:
        (pkg / "static" / "trace_viewer_full.html").write_text("<html></html>")
    importlib.invalidate_caches()  # the import system lists a folder once: it has changed
    return pkg / "static" / "trace_viewer_full.html"


@pytest.fixture
def polyfill(tmp_path, monkeypatch) -> Path:
    """An assets folder holding the installed polyfill (a copy of the one this machine has)."""
    installed = find(WEBCOMPONENTS)
    if installed is None:
        missing_tool("the polyfill is not installed here: python -m lightx2v.assets install")
    folder = tmp_path / "assets"
    (folder / "webcomponents.js-0.7.24").mkdir(parents=True)
    shutil.copy(installed, folder / "webcomponents.js-0.7.24" / "webcomponents.min.js")
    monkeypatch.setenv(ENV_ASSETS_DIR, str(folder))
    return folder / "webcomponents.js-0.7.24" / "webcomponents.min.js"


@pytest.fixture
def no_polyfill(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(ENV_ASSETS_DIR, str(tmp_path / "empty"))


# --- what the Timeline needs --------------------------------------------------------------------------------------


def test_the_viewer_is_the_one_in_the_plugins_static_folder(import_path):
    viewer = plugin(import_path)
    assert viewer_path() == viewer


def test_no_plugin_or_a_plugin_without_the_viewer_has_no_viewer(import_path):
    assert viewer_path() is None
    plugin(import_path, viewer=False)
    assert viewer_path() is None


def test_a_namespace_folder_of_that_name_has_no_viewer(import_path):
    plugin(import_path, package=False)
    assert viewer_path() is None


def test_a_plugin_that_cannot_be_looked_up_has_no_viewer(import_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_tb_profiler", types.ModuleType("torch_tb_profiler"))  # no __spec__
    sys.modules["torch_tb_profiler"].__spec__ = None
    assert viewer_path() is None

    class Broken:
        def find_spec(self, *args):
            raise ImportError("a finder that fails")

    monkeypatch.delitem(sys.modules, "torch_tb_profiler")
    monkeypatch.setattr(sys, "meta_path", [Broken()])
    assert viewer_path() is None


def test_the_polyfill_is_the_one_in_the_assets_folder(polyfill):
    assert polyfill_path() == polyfill


def test_without_the_polyfill_there_is_none(no_polyfill):
    assert polyfill_path() is None


def test_nothing_is_missing_when_both_are_installed(polyfill, import_path):
    plugin(import_path)
    assert missing() == []


def test_each_missing_part_is_named_with_the_command_that_adds_it(no_polyfill, import_path):
    assert missing() == [POLYFILL_MISSING, VIEWER_MISSING]
    plugin(import_path)
    assert missing() == [POLYFILL_MISSING]


def test_a_missing_viewer_alone_is_named(polyfill, import_path):
    assert missing() == [VIEWER_MISSING]


# --- the page -----------------------------------------------------------------------------------------------------


def test_the_page_loads_the_polyfill_and_the_viewer_from_this_server_with_its_config_first():
    html = render_timeline("run/a.json", "/api/timeline/index/run/a.json", "/api/timeline/window/run/a.json")
    head = html.split("</style>\n", 1)[1].split("</head>", 1)[0].split("\n")
    assert head[:3] == ["<script>", 'const CONFIG = {"name": "run/a.json", "index": "/api/timeline/index/run/a.json", '
                        '"window": "/api/timeline/window/run/a.json", "viewer": "/vendor/trace_viewer_full.html", '
                        '"run": false};',
                        "window.__hideTraceViewerPolyfillWarning = true;"]
    assert head[-4:] == ["</script>", '<script src="/assets/webcomponents.min.js"></script>',
                         '<link rel="import" href="/vendor/trace_viewer_full.html" onerror="viewerImportFailed()">', ""]
    assert "<title>run/a.json · Timeline · LightX2V</title>" in html


def test_a_runs_page_is_the_same_page_and_script_in_run_mode():
    """One page, one script: a run's Timeline differs from a trace's only by its config."""
    trace = render_timeline("run/", "/i", "/w")
    run = render_timeline("run/", "/i", "/w", run=True)
    assert run.replace('"run": true}', '"run": false}', 1) == trace


def test_a_name_cannot_close_the_config_script():
    html = render_timeline("</script><b>.json", "/i", "/w")
    config = html.split("const CONFIG = ", 1)[1].split(";\n", 1)[0]
    assert config == '{"name": "\\u003c/script>\\u003cb>.json", "index": "/i", "window": "/w", "viewer": ' \
                     '"/vendor/trace_viewer_full.html", "run": false}'
    assert json.loads(config)["name"] == "</script><b>.json"
    assert "<title>&lt;/script&gt;&lt;b&gt;.json · Timeline · LightX2V</title>" in html


def test_the_body_is_the_step_bar_the_progress_line_and_the_script_that_fills_them():
    html = render_timeline("a.json", "/i", "/w")
    body = html.split("<body data-state=loading>\n", 1)[1]
    assert body.startswith(
        "<div id=steps><button id=prev-step type=button disabled>&#9664; previous</button> "
        "<span id=step-name>indexing …</span> <button id=next-step type=button disabled>next &#9654;</button> "
        '<a id=perfetto-download download hidden title="This window as a Chrome-trace .json file: open it in '
        "Perfetto UI (Open trace file), for a trace past Perfetto's in-browser limit\">&#8595; this step for "
        "Perfetto (.json)</a> <label><input id=frames type=checkbox> Python frames</label> <span id=window-size "
        "class=meta></span></div>\n<div id=progress>Loading the trace viewer …</div>\n<script>\n(function () {\n")
    assert body.endswith("})();\n</script>\n</body></html>\n")


def test_the_page_carries_the_timelines_own_style():
    html = render_timeline("a.json", "/i", "/w")
    assert "#progress.failed { color: #c0392b; }" in html.split("</style>", 1)[0]
    assert timeline.VIEWER_URL == "/vendor/trace_viewer_full.html"
