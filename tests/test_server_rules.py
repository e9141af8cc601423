"""The trace browser's HTTP handling (`lightx2v.trace_browser.server`), fast and in this process: the request
handler fed raw requests from memory (no socket, no thread), on a server bound to a free loopback port and a
results folder made here, and what it answers: status, the headers a browser acts on (type, length, caching,
nosniff, CORS for Perfetto, downloads), the Host check's refusals, the routes, the one POST; and the discovery file
and root checks. tests/test_trace_browser.py and tests/test_server_inputs.py ask a real server in a child process."""

from __future__ import annotations

import gzip
import io
import json
import os
import socket
from pathlib import Path

import pytest

from lightx2v.assets import WEBCOMPONENTS, find
from lightx2v.hostcheck import HostCheck
from lightx2v.trace_browser import offline
from lightx2v.trace_browser import server as server_module
from lightx2v.trace_browser.server import (
    Handler,
    TraceBrowserServer,
    _remove_stale,
    remove_discovery,
    root_problem,
    write_discovery,
)

from conftest import missing_tool
from helpers.steps_trace import steps_trace

UI = "https://ui.example"
DEAD_PID = 99_999_999  # above any pid_max: no such process
GZIPPED = gzip.compress(b'{"traceEvents": []}', mtime=0)


@pytest.fixture
def root(tmp_path) -> Path:
    res = tmp_path / "results"
    (res / "run").mkdir(parents=True)
    (res / "run" / "a b.json").write_text('{"traceEvents": []}')
    (res / "t.json.gz").write_bytes(GZIPPED)
    (res / "p.pftrace").write_bytes(b"\x0a\x00binary")
    os.utime(res / "run" / "a b.json", (1000.0, 1000.0))
    os.utime(res / "t.json.gz", (2000.0, 2000.0))
    os.utime(res / "p.pftrace", (500.0, 500.0))
    return res


@pytest.fixture
def server(root):
    srv = TraceBrowserServer(("127.0.0.1", 0), str(root), perfetto_ui=UI + "/")
    yield srv
    srv.server_close()


class Answer:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.status = int(lines[0].split()[1])
        self.headers = dict(line.split(": ", 1) for line in lines[1:])


def ask(srv, method: str, path: str, headers: dict | None = None, body: bytes = b"", version: str = "HTTP/1.1"):
    """The handler's answer to one request read from memory."""
    headers = {"Host": "127.0.0.1:9001", **(headers or {})}
    raw = f"{method} {path} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items() if v is not None)
    handler = Handler.__new__(Handler)
    handler.server, handler.client_address = srv, ("127.0.0.1", 40000)
    try:  # as a client sends headers (http.client: latin-1), so the handler reads back the same text
        head = raw.encode("latin-1")
    except UnicodeEncodeError:
        head = raw.encode()
    handler.rfile, handler.wfile = io.BytesIO(head + b"\r\n" + body), io.BytesIO()
    handler.close_connection = True
    handler.handle_one_request()
    return Answer(handler.wfile.getvalue()), handler


def get(srv, path: str, **kw) -> Answer:
    return ask(srv, "GET", path, **kw)[0]


# --- the server and the Host check --------------------------------------------------------------------------------


def test_the_server_keeps_its_root_absolute_and_the_perfetto_origin_without_its_slash(root, monkeypatch):
    monkeypatch.chdir(root.parent)
    srv = TraceBrowserServer(("127.0.0.1", 0), "results", perfetto_ui="https://ui.example//")
    try:
        assert (srv.root, srv.perfetto_ui, srv.public_url) == (str(root), "https://ui.example", None)
        assert srv.RequestHandlerClass is Handler
        assert srv.hosts == HostCheck(frozenset())
        assert srv.daemon_threads is True
    finally:
        srv.server_close()


def test_the_perfetto_origins_last_letter_stays(root):
    srv = TraceBrowserServer(("127.0.0.1", 0), str(root), perfetto_ui="https://ui.example/X/")
    try:
        assert srv.perfetto_ui == "https://ui.example/X"
    finally:
        srv.server_close()


def test_every_answer_names_the_server_and_is_never_sniffed(server):
    answer = get(server, "/")
    assert answer.headers["Server"] == "lightx2v-trace-browser"
    assert (answer.headers["X-Content-Type-Options"], answer.headers["Cache-Control"]) == ("nosniff", "no-cache")


def test_a_foreign_host_is_refused_with_403_in_text_or_in_json_for_the_api(server):
    reason = ("Host 'evil.example' refused: this server answers only to its own names (a guard against DNS "
              "rebinding). To allow it, start the server with --allowed-host evil.example or set "
              "LIGHTX2V_ALLOWED_HOSTS=evil.example")
    answer, handler = ask(server, "GET", "/", headers={"Host": "evil.example"})
    assert (answer.status, answer.headers["Content-Type"], answer.body) == (403, "text/plain; charset=utf-8",
                                                                            reason.encode() + b"\n")
    assert answer.headers["Content-Length"] == str(len(reason) + 1)
    assert handler.close_connection is True
    answer = get(server, "/api/traces", headers={"Host": "evil.example"})
    assert (answer.status, answer.headers["Content-Type"]) == (403, "application/json")
    assert json.loads(answer.body) == {"ok": False, "message": reason}


def test_a_refused_head_request_gets_the_headers_without_a_body(server):
    answer = ask(server, "HEAD", "/", headers={"Host": "evil.example"})[0]
    assert (answer.status, answer.body) == (403, b"")
    assert int(answer.headers["Content-Length"]) > 0
    answer = ask(server, "HEAD", "/api/capture", headers={"Host": "evil.example"})[0]
    assert (answer.status, answer.headers["Content-Type"], answer.body) == (403, "application/json", b"")


def test_a_malformed_request_line_is_answered_by_the_base_handler(server):
    handler = Handler.__new__(Handler)
    handler.server, handler.client_address = server, ("127.0.0.1", 40000)
    handler.rfile, handler.wfile = io.BytesIO(b"GET / x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), io.BytesIO()
    handler.handle_one_request()
    assert Answer(handler.wfile.getvalue()).status == 400


# --- the routes ---------------------------------------------------------------------------------------------------


def test_the_list_page_has_the_traces_the_capture_panel_and_links_for_the_host_asked(server):
    for path in ("/", "/index.html", "/?x=1"):
        answer = get(server, path)
        assert (answer.status, answer.headers["Content-Type"]) == (200, "text/html; charset=utf-8")
        assert answer.headers["Content-Length"] == str(len(answer.body))
        page = answer.body.decode()
        assert "<p>3 trace file(s) under <code>" + str(server.root) + "</code>, newest first." in page
        assert "%2F%2F127.0.0.1%3A9001%2Ffiles%2Ft.json.gz" in page
        assert "const PERFETTO = 'https://ui.example';" in page
        assert "<section id=capture>" in page


def test_a_request_without_host_is_judged_at_the_servers_own_port(server):
    """HTTP/1.0 may send no Host: the page is then taken as at 127.0.0.1:<this port>, which is not 9001, so the
    rows say so and name the forward to this port."""
    port = server.server_address[1]
    page = ask(server, "GET", "/", headers={"Host": None}, version="HTTP/1.0")[0].body.decode()
    assert f"this page is at 127.0.0.1:{port}" in page
    assert f"ssh -N -L 9001:127.0.0.1:{port} user@this-host" in page
    assert "Open by URL: needs 9001" in page


def test_head_of_the_list_page_sends_its_length_and_no_body(server):
    answer = ask(server, "HEAD", "/")[0]
    assert (answer.status, answer.body) == (200, b"")
    assert int(answer.headers["Content-Length"]) == len(get(server, "/").body)


def test_the_trace_list_as_json(server):
    answer = get(server, "/api/traces")
    assert (answer.status, answer.headers["Content-Type"]) == (200, "application/json")
    assert json.loads(answer.body) == [
        {"path": "t.json.gz", "size": len(GZIPPED), "mtime": 2000.0, "url": "/files/t.json.gz"},
        {"path": "run/a b.json", "size": 19, "mtime": 1000.0, "url": "/files/run/a%20b.json"},
        {"path": "p.pftrace", "size": 8, "mtime": 500.0, "url": "/files/p.pftrace"}]


def test_the_capture_panels_listing_as_json(server):
    answer = get(server, "/api/capture")
    assert (answer.status, answer.headers["Content-Type"], answer.body) == (200, "application/json", b"[]")


def test_a_trace_file_is_served_as_stored_for_perfetto_only(server):
    answer = get(server, "/files/t.json.gz")
    assert (answer.status, answer.body) == (200, GZIPPED)
    assert answer.headers["Content-Type"] == "application/gzip"
    assert answer.headers["Content-Length"] == str(len(GZIPPED))
    assert answer.headers["Access-Control-Allow-Origin"] == "https://ui.example"
    assert (answer.headers["Cache-Control"], answer.headers["X-Content-Type-Options"]) == ("no-cache", "nosniff")
    assert "Content-Disposition" not in answer.headers
    answer = get(server, "/files/run/a%20b.json")
    assert (answer.status, answer.headers["Content-Type"], answer.body) == (200, "application/json",
                                                                            b'{"traceEvents": []}')


def test_a_download_is_an_attachment_of_the_files_name(server):
    answer = get(server, "/files/run/a%20b.json?x=2&download=1")
    assert answer.headers["Content-Disposition"] == "attachment; filename=\"a%20b.json\"; filename*=UTF-8''a%20b.json"
    assert "Content-Disposition" not in get(server, "/files/run/a%20b.json?xdownload=1").headers


def test_head_of_a_file_sends_its_headers_only(server):
    answer = ask(server, "HEAD", "/files/t.json.gz")[0]
    assert (answer.status, answer.headers["Content-Length"], answer.body) == (200, str(len(GZIPPED)), b"")


@pytest.mark.parametrize("path, status, text", [
    ("/files/../etc/passwd", 403, b"path leaves the results folder\n"),
    ("/files/nope.json", 404, b"no such trace\n"),
    ("/nowhere", 404, b"not found\n"),
    ("/overviewx", 404, b"not found\n"),
    ("/api/tracesx", 404, b"not found\n"),
    ("/timeline/p.pftrace", 404, b"the Timeline opens JSON traces; open this one in Perfetto\n"),
    ("/api/timeline/index/p.pftrace", 404, b"the Timeline opens JSON traces; open this one in Perfetto\n"),
    ("/api/timeline/window/p.pftrace?step=0", 404, b"the Timeline opens JSON traces; open this one in Perfetto\n"),
    ("/overview/p.pftrace", 404, b"the Overview reads JSON traces; open this one in Perfetto\n"),
    ("/compare?base=x", 400, b"name both sides: /compare?base=<trace or run folder/>&new=<...>\n"),
    ("/assets/other.js", 404, b"not found\n"),
    ("/vendor/other.html", 404, b"not found\n"),
])
def test_refusals_are_plain_text_with_their_status(server, path, status, text):
    answer = get(server, path)
    assert (answer.status, answer.headers["Content-Type"], answer.body) == (status, "text/plain; charset=utf-8",
                                                                            text)
    assert answer.headers["Content-Length"] == str(len(text))


def test_head_of_a_refusal_has_no_body(server):
    answer = ask(server, "HEAD", "/nowhere")[0]
    assert (answer.status, answer.body) == (404, b"")


@pytest.fixture
def steps(root) -> str:
    steps_trace(root / "w.pt.trace.json")
    return "w.pt.trace.json"


def test_the_timeline_routes_answer_their_pages(server, steps):
    index = get(server, "/api/timeline/index/" + steps)
    assert (index.status, index.headers["Content-Type"]) == (200, "application/json")
    assert len(json.loads(index.body)["steps"]) == 3
    window = get(server, "/api/timeline/window/" + steps + "?step=1")
    assert (window.status, window.headers["Content-Type"]) == (200, "application/json")
    assert "Content-Disposition" not in window.headers
    assert "k_step2" in {e["name"] for e in json.loads(window.body)["traceEvents"]}
    page = get(server, "/timeline/" + steps)
    assert page.status in (200, 503) and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"Timeline" in page.body


def test_a_downloaded_window_is_an_attachment_named_after_the_trace_and_step(server, steps):
    window = get(server, "/api/timeline/window/" + steps + "?step=1&download=1&frames=1")
    assert window.headers["Content-Disposition"] == ("attachment; filename=\"w.step1.frames.json\"; "
                                                     "filename*=UTF-8''w.step1.frames.json")
    assert ask(server, "HEAD", "/api/timeline/window/" + steps + "?step=1")[0].body == b""


def test_the_overview_and_compare_routes_answer_their_pages(server, steps, root):
    for path in ("/overview/" + steps, "/overview/", "/overview", "/compare", "/compare?base=&new=" + steps):
        answer = get(server, path)
        assert (answer.status, answer.headers["Content-Type"]) == (200, "text/html; charset=utf-8"), path
        assert answer.headers["Content-Length"] == str(len(answer.body)) and b"</html>" in answer.body, path
    assert get(server, "/overview").body == get(server, "/overview/").body  # the root's run
    assert b"<h1>Compare " in get(server, "/compare?base=&new=" + steps).body


def test_the_static_files_are_served_with_a_long_cache(server):
    if offline.timeline.missing():
        missing_tool("the offline Timeline is not installed here: python -m lightx2v.assets install")
    answer = get(server, "/assets/webcomponents.min.js")
    assert (answer.status, answer.headers["Content-Type"], answer.headers["Cache-Control"]) == (
        200, "application/javascript; charset=utf-8", "max-age=3600")
    assert answer.headers["Content-Length"] == str(len(answer.body))
    assert answer.body == find(WEBCOMPONENTS).read_bytes()
    answer = get(server, "/vendor/trace_viewer_full.html")
    assert (answer.status, answer.headers["Content-Type"], answer.headers["Cache-Control"]) == (
        200, "text/html; charset=utf-8", "max-age=3600")
    assert answer.body == offline.timeline.viewer_path().read_bytes()


# --- methods and the one POST -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"])
def test_other_methods_are_refused_as_read_only(server, method):
    answer = ask(server, method, "/")[0]
    assert (answer.status, answer.headers["Allow"], answer.body) == (405, "GET, HEAD",
                                                                     b"read-only: GET and HEAD only\n")
    assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_a_post_anywhere_but_the_capture_route_is_refused_as_read_only(server):
    answer = ask(server, "POST", "/files/t.json.gz", body=b"")[0]
    assert (answer.status, answer.headers["Allow"]) == (405, "GET, HEAD")


JSON_POST = {"Origin": "http://127.0.0.1:9001", "Content-Type": "application/json"}


def post(server, body: bytes, length: str | None = None, path: str = "/api/capture", **headers) -> Answer:
    sent = {**JSON_POST, "Content-Length": str(len(body)) if length is None else length, **headers}
    return ask(server, "POST", path, headers=sent, body=body)[0]


def test_the_capture_post_answers_in_json(server):
    answer = post(server, b'{"id": "h_1"}')
    assert (answer.status, answer.headers["Content-Type"]) == (409, "application/json")
    assert json.loads(answer.body) == {"ok": False, "message": "no process with id 'h_1' writes captures here"}
    assert post(server, b'{"id": "h_1"}', path="/api/capture?now=1").status == 409


def test_the_capture_post_reads_only_the_length_it_is_told(server):
    answer = post(server, b'{"id": "h_1"}xyz', length="13")
    assert json.loads(answer.body)["message"] == "no process with id 'h_1' writes captures here"
    for length in ("x", "¹"):  # not ASCII digits: nothing is read ("¹" passes str.isdigit, int() refuses it)
        answer = post(server, b'{"id": "h_1"}', length=length)
        assert json.loads(answer.body) == {"ok": False, "message": "bad request: id must be a string"}
    answer = ask(server, "POST", "/api/capture", headers=JSON_POST, body=b'{"id": "h_1"}')[0]
    assert json.loads(answer.body) == {"ok": False, "message": "bad request: id must be a string"}


def test_the_capture_post_reads_at_most_4096_bytes(server):
    body = b'{"id": "h_1", "pad": "' + b"x" * 4100 + b'"}'
    answer = post(server, body)
    assert answer.status == 400
    assert json.loads(answer.body)["message"].startswith("bad request: Unterminated string starting at: line 1 "
                                                         "column 22 (char 21)")
    fits = b'{"id": "h_1", "pad": "' + b"x" * (4096 - 24) + b'"}'
    assert len(fits) == 4096 and post(server, fits).status == 409


def test_a_capture_post_from_elsewhere_is_forbidden(server):
    answer = post(server, b'{"id": "h_1"}', Origin="http://evil.example")
    assert (answer.status, json.loads(answer.body)) == (403, {"ok": False, "message": "cross-origin request from "
                                                                                      "http://evil.example refused"})


def test_the_public_urls_origin_may_post(server):
    server.public_url = "https://tb.example/"
    assert post(server, b'{"id": "h_1"}', Origin="https://tb.example").status == 409


# --- the discovery file and the root ------------------------------------------------------------------------------


def test_the_discovery_file_says_where_the_page_is(tmp_path):
    path = write_discovery(str(tmp_path), 9001, "http://127.0.0.1:9001/")
    assert path == str(tmp_path / ".trace_browser" / f"{socket.gethostname()}_{os.getpid()}.json")
    doc = json.loads(Path(path).read_text())
    assert {k: doc[k] for k in ("pid", "port", "url")} == {"pid": os.getpid(), "port": 9001,
                                                          "url": "http://127.0.0.1:9001/"}
    assert isinstance(doc["started"], float) and doc["started"] > 1.7e9
    remove_discovery(path)
    assert not os.path.exists(path)
    remove_discovery(path)  # gone already: nothing to do


ALIVE_PID = 4242


@pytest.fixture
def kills(monkeypatch) -> list:
    """os.kill for these tests: ALIVE_PID exists, no other pid does; the calls made, recorded (no real process is
    ever signalled, whatever the code under test asks)."""
    calls: list = []

    def kill(pid, sig):
        calls.append((pid, sig))
        if pid != ALIVE_PID:
            raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(server_module.os, "kill", kill)
    return calls


def test_files_of_dead_servers_of_this_host_are_removed_and_no_others(tmp_path, kills):
    folder = tmp_path / ".trace_browser"
    folder.mkdir()
    host = socket.gethostname()
    names = [f"{host}_{DEAD_PID}.json", f"{host}_{os.getpid()}.json", f"{host}_{ALIVE_PID}.json",
             f"other_{DEAD_PID}.json", f"{host}_{DEAD_PID}.txt", f"{host}_x.json", f"{host}.json",
             f"{host}_{DEAD_PID + 1}", f"x{host}_{DEAD_PID}.json"]
    for name in names:
        (folder / name).write_text("{}")
    (folder / f"{host}_{DEAD_PID + 2}.json").mkdir()  # cannot be unlinked: left
    write_discovery(str(tmp_path), 1, "u")
    assert sorted(os.listdir(folder)) == sorted(names[1:] + [f"{host}_{DEAD_PID + 2}.json"])
    assert sorted(kills) == [(ALIVE_PID, 0), (DEAD_PID, 0), (DEAD_PID + 2, 0)]  # asked whether each one exists


def test_a_host_name_with_underscores_is_read_up_to_the_last_one(tmp_path, kills):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / f"my_host_{DEAD_PID}.json").write_text("{}")
    (folder / f"my_host_{ALIVE_PID}.json").write_text("{}")
    _remove_stale(str(folder), "my_host")
    assert os.listdir(folder) == [f"my_host_{ALIVE_PID}.json"]


def test_a_discovery_file_whose_pid_is_not_ascii_digits_is_left_alone(tmp_path, kills):
    folder = tmp_path / "d"
    folder.mkdir()
    for name in ("h_¹.json", "h_٣.json"):
        (folder / name).write_text("{}")
    _remove_stale(str(folder), "h")
    assert sorted(os.listdir(folder)) == ["h_¹.json", "h_٣.json"] and kills == []


def test_a_server_of_another_user_is_alive(tmp_path, monkeypatch):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "h_5.json").write_text("{}")

    def kill(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(server_module.os, "kill", kill)
    _remove_stale(str(folder), "h")
    assert os.listdir(folder) == ["h_5.json"]


def test_a_root_that_is_a_folder_is_fine(tmp_path):
    assert root_problem(str(tmp_path), False) is None
    assert root_problem(str(tmp_path), True) is None


def test_a_root_that_is_a_file_or_missing_is_named_as_such(tmp_path):
    (tmp_path / "f").write_text("x")
    assert root_problem(str(tmp_path / "f"), True) == f"--root {tmp_path / 'f'} is a file, not a folder"
    assert root_problem(str(tmp_path / "m"), False) == (f"--root {tmp_path / 'm'} does not exist (create it, or pass "
                                                        "--create-root)")
    assert not (tmp_path / "m").exists()


def test_create_root_makes_the_folders_or_says_why_it_cannot(tmp_path):
    assert root_problem(str(tmp_path / "a" / "b"), True) is None
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "f").write_text("x")
    assert root_problem(str(tmp_path / "f" / "sub"), True) == (
        f"cannot create --root {tmp_path / 'f' / 'sub'}: Not a directory")
