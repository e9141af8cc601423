"""The trace browser's files (`lightx2v.trace_browser.files`), fast: a results folder made in a temporary folder
(traces, hidden files, links inside and outside it), and which traces it lists, which URL paths reach a file or a
run folder and which are refused with which status and reason, each written here by hand.
tests/test_trace_browser.py asks the same of a running server."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from lightx2v.trace_browser import files
from lightx2v.trace_browser.files import (
    Refused,
    Trace,
    _inside,
    content_type,
    is_json_trace,
    list_traces,
    resolve,
    resolve_run,
)

from helpers.made_files import CHROME, put


def refused(call) -> tuple[int, str]:
    with pytest.raises(Refused) as err:
        call()
    return err.value.status, str(err.value)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """results/: traces a.json (mtime 100), run/r0.pt.trace.json.gz (300), run/r1.pt.trace.json.gz (300),
    old/x.pftrace (50); and files that are no traces or must not be listed."""
    res = tmp_path / "results"
    put(res / "a.json", mtime=100.0)
    put(res / "run" / "r1.pt.trace.json.gz", "{}", mtime=300.0)
    put(res / "run" / "r0.pt.trace.json.gz", "{}", mtime=300.0)
    put(res / "old" / "x.pftrace", "binary", mtime=50.0)
    put(res / "notes.txt", "x")
    put(res / "config.json", '{"steps": 4}')
    put(res / ".hidden.json")
    put(res / ".cache" / "b.json")
    put(tmp_path / "results2" / "outside.json")  # a sibling whose name starts with the root's
    (res / "sibling").symlink_to(tmp_path / "results2")
    (res / "out.json").symlink_to(tmp_path / "results2" / "outside.json")
    (res / "dangling.json").symlink_to(tmp_path / "gone.json")
    (res / "broken.json").symlink_to(res / "gone.json")  # inside the root, to nothing
    os.mkfifo(res / "pipe.json")
    return res


# --- the listing --------------------------------------------------------------------------------------------------

def test_traces_are_listed_newest_first_by_path_relative_to_the_root_then_by_path(root):
    listed = list_traces(str(root))
    assert [(t.path, t.mtime) for t in listed] == [("run/r0.pt.trace.json.gz", 300.0),
                                                   ("run/r1.pt.trace.json.gz", 300.0), ("a.json", 100.0),
                                                   ("old/x.pftrace", 50.0)]
    assert listed[2] == Trace(path="a.json", size=len(CHROME), mtime=100.0, kind="chrome")


def test_a_file_left_out_does_not_end_the_listing_of_its_folder(root, monkeypatch):
    walk = os.walk

    def skipped_files_first(top):  # the names in reverse order: a.json after every file left out beside it
        for folder, dirs, names in walk(top):
            yield folder, dirs, sorted(names, reverse=True)

    monkeypatch.setattr(files.os, "walk", skipped_files_first)
    assert "a.json" in [t.path for t in list_traces(str(root))]


def test_a_link_is_judged_by_its_own_name(root):
    put(root / "store" / "blob", "{}")  # no trace by its own name, content or suffix
    (root / "latest.pt.trace.json").symlink_to(root / "store" / "blob")
    assert "latest.pt.trace.json" in [t.path for t in list_traces(str(root))]
    assert resolve(str(root), "latest.pt.trace.json") == str(root / "store" / "blob")
    (root / "run" / "r2.pt.trace.json").symlink_to(root / "store" / "blob")
    assert resolve_run(str(root), "run")[1][-1] == str(root / "run" / "r2.pt.trace.json")


def test_a_file_the_listing_shows_is_served_whatever_spaces_its_name_holds(root):
    put(root / "run 1" / " .x.json")
    assert "run 1/ .x.json" in [t.path for t in list_traces(str(root))]
    assert resolve(str(root), "run%201/%20.x.json") == str(root / "run 1" / " .x.json")


def test_a_trace_is_judged_by_its_own_name_not_its_folders(root):
    put(root / "a\nb" / "r0.pt.trace.json", "{}")  # a TensorBoard name; its content says nothing
    assert resolve(str(root), "a%0Ab/r0.pt.trace.json") == str(root / "a\nb" / "r0.pt.trace.json")


def test_a_link_to_a_trace_inside_the_root_is_listed_under_the_links_name(root):
    (root / "latest.json").symlink_to(root / "a.json")
    os.utime(root / "a.json", (400.0, 400.0))
    assert [t.path for t in list_traces(str(root))][:2] == ["a.json", "latest.json"]


def test_the_root_may_be_named_through_a_link(root, tmp_path):
    (tmp_path / "link").symlink_to(root, target_is_directory=True)
    assert [t.path for t in list_traces(str(tmp_path / "link"))][-1] == "old/x.pftrace"


@pytest.mark.parametrize("real, root_real, inside", [
    ("/r", "/r", True), ("/r/a", "/r", True), ("/r2/a", "/r", False), ("/r/a", "/r/", True), ("/x", "/", True),
    ("/", "/", True),
])
def test_a_path_is_inside_the_root_when_it_is_the_root_or_below_it(real, root_real, inside):
    assert _inside(real, root_real) is inside


# --- a file by its URL path ---------------------------------------------------------------------------------------

def test_a_url_path_names_the_real_file_under_the_root_percent_decoded(root):
    put(root / "my run" / "t.json")
    assert resolve(str(root), "my%20run/t.json") == str(root / "my run" / "t.json")
    assert resolve(str(root), "run/r0.pt.trace.json.gz") == str(root / "run" / "r0.pt.trace.json.gz")
    assert resolve(str(root), "old/x.pftrace") == str(root / "old" / "x.pftrace")


@pytest.mark.parametrize("url, status, reason", [
    ("a%00.json", 403, "bad characters in path"),
    ("run%5Cr0.pt.trace.json.gz", 403, "bad characters in path"),
    ("/a.json", 403, "absolute path"),
    ("%2Fa.json", 403, "absolute path"),
    ("C:/a.json", 403, "absolute path"),
    ("C:", 403, "absolute path"),
    ("x", 404, "no such trace"),
    ("../results2/outside.json", 403, "path leaves the results folder"),
    ("run/../a.json", 403, "path leaves the results folder"),
    ("./a.json", 403, "path leaves the results folder"),
    ("out.json", 403, "link points outside the results folder"),
    ("sibling/outside.json", 403, "link points outside the results folder"),
    (".hidden.json", 404, "no such trace"),
    (".cache/b.json", 404, "no such trace"),
    ("run//r0.pt.trace.json.gz", 404, "no such trace"),
    ("missing.json", 404, "no such trace"),
    ("run", 404, "no such trace"),
    ("notes.txt", 404, "no such trace"),
    ("pipe.json", 404, "no such trace"),
    ("config.json", 404, "not a trace"),
])
def test_a_url_path_that_leaves_the_root_or_names_no_trace_is_refused(root, url, status, reason):
    assert refused(lambda: resolve(str(root), url)) == (status, reason)


def test_a_one_letter_name_is_no_drive_letter(root):
    put(root / "b" / "t.json")
    assert resolve(str(root), "b/t.json") == str(root / "b" / "t.json")


@pytest.mark.parametrize("name, kind", [("t.json.gz", "application/gzip"), ("t.json", "application/json"),
                                        ("t.pftrace", "application/octet-stream"), ("t.gz", "application/gzip")])
def test_a_trace_is_served_as_its_stored_format(name, kind):
    assert content_type(name) == kind


def test_only_json_traces_open_in_the_offline_views():
    assert is_json_trace("run/t.json") and is_json_trace("t.pt.trace.json.gz")
    assert not is_json_trace("t.pftrace") and not is_json_trace("t.perfetto-trace")


# --- a run folder by its URL path ---------------------------------------------------------------------------------

def test_a_run_folder_gives_its_tensorboard_traces_by_name(root):
    put(root / "run" / "trace.json")  # a chrome trace beside TensorBoard ones: another capture
    put(root / "run" / ".tmp.pt.trace.json")
    (root / "run" / "sub").mkdir()
    (root / "run" / "a_sub").mkdir()  # before the traces by name: the ones after it still count
    assert resolve_run(str(root), "run") == (str(root / "run"), [str(root / "run" / "r0.pt.trace.json.gz"),
                                                                 str(root / "run" / "r1.pt.trace.json.gz")])
    assert resolve_run(str(root), "/run/")[1] == resolve_run(str(root), "run")[1]


def test_a_run_path_loses_only_its_slashes_at_either_end(root):
    put(root / "runX" / "t.json")
    assert resolve_run(str(root), "/runX/") == (str(root / "runX"), [str(root / "runX" / "t.json")])


def test_the_empty_path_is_the_root_whose_json_traces_are_its_chrome_ones(root):
    # not out.json (a link outside), not the FIFO or config.json (no traces), not old/ (a folder)
    assert resolve_run(str(root), "") == (str(root), [str(root / "a.json")])


def test_a_link_inside_a_run_to_a_trace_inside_the_root_counts(root):
    (root / "run" / "r2.pt.trace.json.gz").symlink_to(root / "run" / "r0.pt.trace.json.gz")
    assert resolve_run(str(root), "run")[1][-1] == str(root / "run" / "r2.pt.trace.json.gz")


@pytest.mark.parametrize("url, status, reason", [
    ("missing", 404, "no such run"),
    ("a.json", 404, "no such run"),
    (".cache", 404, "no such run"),
    ("run/../old", 403, "path leaves the results folder"),
    ("sibling", 403, "link points outside the results folder"),
    ("old", 404, "no JSON trace in this folder"),
])
def test_a_run_path_that_leaves_the_root_or_holds_no_json_trace_is_refused(root, url, status, reason):
    assert refused(lambda: resolve_run(str(root), url)) == (status, reason)


# --- damaged files: cheap checks ----------------------------------------------------------------------------------

WHOLE = b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}'
CUT = WHOLE[:40]


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def written(tmp_path: Path, data: bytes, name: str = "t.pt.trace.json") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("data, reason", [
    (b"", "empty file (0 bytes)"),
    (WHOLE, ""),
    (WHOLE + b" \n\t\r\n", ""),  # whitespace after the closing brace
    (b'[{"ph": "X"}]', ""),  # Chrome's array of events
    (CUT, "cut off: 40 bytes of JSON that do not end with } or ]"),
    (WHOLE + b"\n" + b" " * 70, "cut off: 160 bytes of JSON that do not end with } or ]"),  # } before the last 64
    (gzipped(WHOLE), ""),
    (gzipped(WHOLE[:50]) + gzipped(WHOLE[50:]), ""),  # two members, as gzip reads them
    (gzipped(WHOLE) + b"\0\0\0", ""),  # zero padding after the member
    (gzipped(WHOLE)[:-8], f"cut off: its gzip stream stops after {len(WHOLE)} bytes of JSON"),  # no trailer
    (gzipped(WHOLE)[:19], "cut off: 19 bytes, fewer than any gzip file has"),
    (gzipped(WHOLE)[:20], "cut off: its gzip stream stops after 9 bytes of JSON"),
    (gzipped(CUT), "cut off: gzip of 40 bytes of JSON that do not end with } or ]"),  # whole gzip of a cut trace
    (gzipped(WHOLE)[:12] + b"\xff" * 30 + gzipped(WHOLE)[42:], "corrupt gzip data"),
], ids=["empty", "json", "json-whitespace", "array", "json-cut", "json-brace-too-early", "gzip", "gzip-members",
        "gzip-padding", "gzip-no-trailer", "gzip-19-bytes", "gzip-20-bytes", "gzip-of-cut-json", "gzip-corrupt"])
def test_a_damaged_file_says_why_a_whole_one_nothing(tmp_path, data, reason):
    assert files.damage(written(tmp_path, data)) == reason


def test_a_small_gzip_is_read_to_its_end_in_pieces_whatever_it_decompresses_to(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_PIECE", 7)
    doc = b'{"traceEvents": [' + b'{"ph": "X"},' * 3000 + b'{"ph": "X"}]}'
    assert files.damage(written(tmp_path, gzipped(doc))) == ""
    cut = gzipped(doc)[:-30]
    assert files.damage(written(tmp_path, cut, "c.json.gz")).startswith("cut off: its gzip stream stops after ")


@pytest.mark.parametrize("stated, reason", [(1032 * 100, ""),
                                            (1032 * 100 + 1, "cut off: its gzip stream ends without its trailer")])
def test_a_large_gzip_is_cut_when_its_trailer_states_more_than_deflate_can_make_of_it(tmp_path, monkeypatch, stated,
                                                                                      reason):
    """Past WHOLE_GZIP_CHECK bytes only the last 4 are read (the stated size, mod 2**32): no deflate stream
    decompresses to more than 1032 times its size."""
    monkeypatch.setattr(files, "WHOLE_GZIP_CHECK", 99)
    data = b"\x1f\x8b" + b"\xff" * 94 + stated.to_bytes(4, "little")  # 100 bytes: not decompressed (no gzip)
    assert files.damage(written(tmp_path, data)) == reason
    monkeypatch.setattr(files, "WHOLE_GZIP_CHECK", 100)
    assert files.damage(written(tmp_path, data, "d.json.gz")) == "corrupt gzip data"  # at the limit: read whole


def test_a_file_is_checked_again_once_rewritten_and_one_gone_cannot_be_read(tmp_path):
    path = written(tmp_path, b"")
    assert files.damage(path) == "empty file (0 bytes)"
    written(tmp_path, WHOLE)
    assert files.damage(path) == ""
    assert files.damage(str(tmp_path / "gone.json")) == "cannot read (No such file or directory)"


def test_the_listing_marks_each_damaged_json_trace_and_no_perfetto_file(root):
    put(root / "run" / "r0.pt.trace.json.gz", "")
    (root / "run" / "r1.pt.trace.json.gz").write_bytes(gzipped(WHOLE)[:30])
    put(root / "old" / "x.pftrace", "")  # Perfetto's binary: not JSON, not checked
    damaged = {t.path: t.damaged for t in list_traces(str(root))}
    assert damaged == {"run/r0.pt.trace.json.gz": "empty file (0 bytes)",
                       "run/r1.pt.trace.json.gz": "cut off: its gzip stream stops after 19 bytes of JSON",
                       "a.json": "", "old/x.pftrace": ""}
