"""The trace browser answers every request (issue 36, B1), for real on loopback.

A file or folder under the results root whose name is not UTF-8 (bytes such as ``\\xff``; Python sees it with
surrogate escapes) is listed like any other: the list, `/api/traces`, the Compare form and its folder's Overview
answer; its name is shown with the undecodable bytes as ``\\xff``; every link to it reaches the same file. And
whatever fails inside a route, the client gets HTTP 500 and one line, and the server's log the traceback once.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import sys

import pytest

from conftest import H200_TRACE, free_port
from helpers.procs import Server, get_json, http_get, trace_browser, wait_until

ODD_DIR, ODD_FILE = b"\xffrun", b"rank0_\xfe.pt.trace.json.gz"  # neither is UTF-8


def odd_root(base):
    """A results folder with one ordinary trace and one under a folder and file name that are not UTF-8."""
    root = base / "save_results"
    (root / "run").mkdir(parents=True)
    (root / "run" / "rank0_host.pt.trace.json.gz").write_bytes(H200_TRACE.read_bytes())
    odd_dir = os.path.join(os.fsencode(root), ODD_DIR)
    os.mkdir(odd_dir)
    with open(os.path.join(odd_dir, ODD_FILE), "wb") as f:
        f.write(gzip.compress(gzip.decompress(H200_TRACE.read_bytes()).replace(b"ProfilerStep#4", b"ProfilerStep#9")))
    return root, os.path.join(odd_dir, ODD_FILE)


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    root, odd_file = odd_root(tmp_path_factory.mktemp("odd_names"))
    with trace_browser(root) as (server, port):
        yield {"port": port, "root": root, "odd_file": odd_file, "server": server}


def get(odd, path: str):
    return http_get(f"http://127.0.0.1:{odd['port']}{path}", timeout=60)


def test_the_list_shows_a_name_that_is_not_utf8_with_its_bytes_escaped(odd):
    status, _, body = get(odd, "/")
    assert status == 200
    page = body.decode()  # valid UTF-8
    assert "\\xffrun/rank0_\\xfe.pt.trace.json.gz" in page and "run/rank0_host.pt.trace.json.gz" in page
    listing = get_json(f"http://127.0.0.1:{odd['port']}/api/traces")
    (entry,) = [t for t in listing if t["path"] != "run/rank0_host.pt.trace.json.gz"]
    assert entry["path"] == "\\xffrun/rank0_\\xfe.pt.trace.json.gz"
    assert entry["url"] == "/files/%FFrun/rank0_%FE.pt.trace.json.gz"


def test_every_link_to_it_reaches_the_same_file(odd):
    with open(odd["odd_file"], "rb") as f:
        stored = f.read()
    page = get(odd, "/")[2].decode()
    links = sorted(set(re.findall(r'(?:href|data-url)="(/[^"]*%FFrun[^"]*)"', page)))
    assert {link.split("/")[1].split("?")[0] for link in links} >= {"files", "timeline", "overview"}, links
    for link in links:
        status, headers, body = get(odd, link.replace("&amp;", "&"))
        assert status == 200, (link, body[:300])
        if link.startswith("/files/"):
            assert body == stored, link
            if "download=1" in link:
                assert "rank0_%FE.pt.trace.json.gz" in headers["Content-Disposition"]
        elif link.startswith("/overview/"):
            assert b"ProfilerStep#9" in body and b"ProfilerStep#4" not in body, link  # this file's summary
            assert b"rank0_\\xfe.pt.trace.json.gz" in body
    status, _, body = get(odd, "/api/timeline/window/%FFrun/rank0_%FE.pt.trace.json.gz?step=0")
    assert status == 200 and b"ProfilerStep#9" in body and b"ProfilerStep#4" not in body
    # its folder's Timeline (a run of one rank): the page, the index and the merged step
    status, _, body = get(odd, "/timeline/%FFrun/")
    assert status == 503 or (status == 200 and b'"index": "/api/timeline/run/%FFrun/"' in body), (status, body[:300])
    status, _, body = get(odd, "/api/timeline/run/%FFrun/")
    assert status == 200 and [s["name"] for s in json.loads(body)["steps"]] == ["ProfilerStep#9"], body[:300]
    status, headers, body = get(odd, "/api/merged/%FFrun/?step=ProfilerStep%239")
    assert status == 200 and "%FFrun.ProfilerStep9.merged.json" in headers["Content-Disposition"]


def test_its_folders_overview_and_the_compare_pages_answer(odd):
    status, _, body = get(odd, "/overview/%FFrun/")
    assert status == 200 and b"\\xffrun" in body
    status, _, body = get(odd, "/compare")
    assert status == 200
    assert b"not offered: their names are not UTF-8" in body  # a form cannot send those bytes
    status, _, body = get(odd, "/compare?base=%FFrun/&new=run/")
    assert status == 200, body[:300]
    status, _, body = get(odd, "/compare?base=%FFrun/rank0_%FE.pt.trace.json.gz&new=run/rank0_host.pt.trace.json.gz")
    assert status == 200, body[:300]


def test_a_name_that_does_not_decode_and_names_no_file_is_a_404(odd):
    for path in ("/files/%FFrun/nothing%FE.json", "/overview/%FEnothing/", "/timeline/%FFrun/x%FF.json"):
        status, _, body = get(odd, path)
        assert status == 404, (path, body)


# --- any failure inside a route: HTTP 500, one line; the traceback logged once -----------------------------------

FAILING = """
import sys
from lightx2v.trace_browser import __main__, capture_panel, offline, server

def fail(*args, **kwargs):
    raise RuntimeError("planted failure\\nsecond line of its message")

server.list_traces = server.resolve = fail
offline.overview_page = offline.timeline_window = offline.compare_page = offline.merged_page = fail
offline.run_timeline_index = fail
capture_panel.listing = capture_panel.post = fail
sys.exit(__main__.main(sys.argv[1:]))
"""

ROUTES = ["/", "/api/traces", "/files/run/rank0_host.pt.trace.json.gz", "/overview/run/", "/compare",
          "/api/timeline/window/run/rank0_host.pt.trace.json.gz?step=0", "/api/capture",
          "/api/merged/run/?step=ProfilerStep%231", "/api/timeline/run/run/"]


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """A real trace browser whose routes' work raises (planted in the child before it serves)."""
    root, _ = odd_root(tmp_path_factory.mktemp("failing"))
    port = free_port()
    server = Server([sys.executable, "-c", FAILING, "--root", str(root), "--port", str(port), "--host", "127.0.0.1"])
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/timeline/")[0] == 404, 30, what="the browser")
        yield server, port
    finally:
        server.stop()


def raw(port: int, method: str, path: str, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ROUTES)
def test_a_failure_inside_any_route_answers_500_and_one_line(failing, path):
    server, port = failing
    before = server.output().count("Traceback")
    status, body = raw(port, "GET", path)
    assert status == 500
    text = body.decode()
    assert text.count("\n") == 1 and text.endswith("\n"), text
    assert text.startswith("internal error: RuntimeError: planted failure") and "second line" not in text
    wait_until(lambda: server.output().count("Traceback") == before + 1, 10, what="the traceback in the log")
    assert server.output().count("RuntimeError: planted failure") == before + 1
    assert raw(port, "HEAD", path) == (500, b"")
    # the HEAD's failure is logged once too: wait for it, so the next route's count starts after it (the log is
    # read by another thread: without this wait its line could land inside the next test's count)
    wait_until(lambda: server.output().count("Traceback") == before + 2, 10, what="the HEAD's traceback in the log")


def test_a_failure_answering_a_post_answers_500(failing):
    server, port = failing
    origin = f"http://127.0.0.1:{port}"
    status, body = raw(port, "POST", "/api/capture", {"Origin": origin, "Content-Type": "application/json"})
    assert status == 500 and body.decode().startswith("internal error: RuntimeError"), body
    assert http_get(f"http://127.0.0.1:{port}/timeline/")[0] == 404  # and it goes on serving
