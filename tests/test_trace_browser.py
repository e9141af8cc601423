"""`python -m lightx2v.trace_browser` for real on loopback: listing, headers, downloads, refusals, discovery file."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import socket
import sys
import time

import pytest

from conftest import H200_TRACE, free_port
from helpers.procs import Server, get_json, http_get, wait_until


def make_root(base):
    """A results folder holding traces of every kind, files that are not traces, and links in and out."""
    root = base / "save_results"
    run = root / "torch_profile" / "20261129-120000_infer_main"
    run.mkdir(parents=True)
    (run / "rank0_host.pt.trace.json.gz").write_bytes(H200_TRACE.read_bytes())
    (root / "trace.json").write_text(json.dumps({"traceEvents": []}))
    (root / "trace.rank1.json").write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x"}]}))
    (root / "preview.png").write_bytes(b"\x89PNG")  # not a trace: not listed
    (root / "qwen_image_t2i.json").write_text(json.dumps({"prompt": "run metadata, not a trace"}))  # nor this
    (root / ".hidden.json").write_text("{}")
    (base / "secret.json").write_text('{"secret": 1}')  # next to the root, outside it
    (root / "escape.json").symlink_to(base / "secret.json")
    (root / "inside.json").symlink_to(root / "trace.json")
    now = time.time()
    for age, path in enumerate([run / "rank0_host.pt.trace.json.gz", root / "trace.rank1.json", root / "trace.json"]):
        os.utime(path, (now - 100 * age, now - 100 * age))
    return root


def start_browser(base) -> dict:
    root = make_root(base)
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port)],
                    LIGHTX2V_BIND_HOST="", LIGHTX2V_TRACE_BROWSER_URL="http://127.0.0.1:19001/")
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200, 30, what="the browser")
    except BaseException:
        server.stop()
        raise
    return {"port": port, "root": root, "server": server, "base": base}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One browser for the read-only tests; a test that stops a browser starts its own (any order works)."""
    started = start_browser(tmp_path_factory.mktemp("browser"))
    try:
        yield started
    finally:
        started["server"].stop()


@pytest.fixture
def own_browser(tmp_path):
    started = start_browser(tmp_path)
    try:
        yield started
    finally:
        started["server"].stop()


def url(browser, path: str) -> str:
    return f"http://127.0.0.1:{browser['port']}{path}"


def raw_status(browser, path: str, method: str = "GET") -> int:
    """Send `path` byte for byte (no client-side normalisation of ../)."""
    conn = http.client.HTTPConnection("127.0.0.1", browser["port"], timeout=10)
    conn.request(method, path)
    status = conn.getresponse().status
    conn.close()
    return status


def test_lists_traces_newest_first(browser):
    paths = [t["path"] for t in get_json(url(browser, "/api/traces"))]
    assert paths[:2] == ["torch_profile/20261129-120000_infer_main/rank0_host.pt.trace.json.gz", "trace.rank1.json"]
    assert sorted(paths[2:]) == ["inside.json", "trace.json"]  # a link within the root: the target's age
    # not listed: the png, the run metadata JSON, the hidden file, the link leading out of the root
    assert raw_status(browser, "/files/qwen_image_t2i.json") == 404


def test_index_page_links(browser):
    status, headers, body = http_get(url(browser, "/"))
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert page.count("Open in Perfetto</button>") == 4 and page.count(">Download</a>") == 4
    # served on another port than 9001, where Perfetto cannot fetch by URL: each row says which forward makes it work
    assert page.count("Open by URL: needs 9001") == 4 and "#!/?url=" not in page
    assert f"ssh -N -L 9001:127.0.0.1:{browser['port']} user@this-host" in page
    assert "postMessage('PING'" in page and "perfetto: {buffer: buffer, title: name, fileName: name}" in page


def test_serves_gzip_trace_with_perfetto_headers(browser):
    status, headers, body = http_get(url(browser, "/files/torch_profile/20261129-120000_infer_main/"
                                                  "rank0_host.pt.trace.json.gz"))
    assert status == 200 and body == H200_TRACE.read_bytes()
    assert json.loads(gzip.decompress(body))["traceEvents"]
    assert headers["Content-Type"] == "application/gzip" and "Content-Encoding" not in headers
    assert headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
    assert headers["Content-Length"] == str(len(body))


def test_json_download_and_head(browser):
    status, headers, body = http_get(url(browser, "/files/trace.rank1.json?download=1"))
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert headers["Content-Disposition"].startswith('attachment; filename="trace.rank1.json"')
    status, headers, body = http_get(url(browser, "/files/trace.json"), method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


@pytest.mark.parametrize("path,expected", [
    ("/files/../secret.json", 403),
    ("/files/torch_profile/../../secret.json", 403),
    ("/files/%2e%2e/secret.json", 403),
    ("/files/%2E%2E%2Fsecret.json", 403),
    ("/files/..%2fsecret.json", 403),
    ("/files//etc/passwd", 403),
    ("/files/%2Fetc%2Fpasswd", 403),
    ("/files/escape.json", 403),  # a link inside the root pointing outside it
    ("/files/.hidden.json", 404),
    ("/files/preview.png", 404),
    ("/files/nope.json", 404),
    ("/files/torch_profile", 404),
    ("/etc/passwd", 404),
])
def test_refuses_paths_outside_or_not_traces(browser, path, expected):
    assert raw_status(browser, path) == expected


def test_symlink_inside_the_root_is_served(browser):
    assert http_get(url(browser, "/files/inside.json"))[0] == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_read_only(browser, method):
    assert raw_status(browser, "/files/trace.json", method) == 405
    assert (browser["root"] / "trace.json").exists()


def test_discovery_file_written_then_removed_on_sigterm(own_browser):
    discovery = own_browser["root"] / ".trace_browser" / f"{socket.gethostname()}_{own_browser['server'].pid}.json"
    data = json.loads(discovery.read_text())
    assert data.pop("started") <= time.time()
    assert data == {"pid": own_browser["server"].pid, "port": own_browser["port"], "url": "http://127.0.0.1:19001/"}
    own_browser["server"].stop()
    assert own_browser["server"].proc.returncode == 0
    assert not discovery.exists()


def test_port_in_use_is_a_clear_error(tmp_path):
    import socket
    import subprocess

    from conftest import subprocess_env

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(tmp_path),
                                 "--port", str(port), "--host", "127.0.0.1"], env=subprocess_env(),
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and f"127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr


def test_another_tools_trace_is_listed_for_its_timeline_and_perfetto_and_has_no_overview(tmp_path):
    """A Chrome DevTools recording: opened as any Chrome trace, never summarized as if torch.profiler wrote it."""
    from test_trace_summary_files import DEVTOOLS

    from helpers.procs import trace_browser

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "devtools.json").write_bytes(DEVTOOLS)
    (tmp_path / "run" / "cut.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [')
    with trace_browser(tmp_path) as (_, port):
        page = http_get(f"http://127.0.0.1:{port}/")[2].decode()
        status, _, body = http_get(f"http://127.0.0.1:{port}/overview/run/devtools.json")
        timeline = http_get(f"http://127.0.0.1:{port}/api/timeline/index/run/devtools.json")[0]
    assert ">not torch.profiler</span>" in page and 'href="/overview/run/devtools.json"' not in page
    assert "Runs with several traces" not in page  # the DevTools file and the cut trace are no 2-trace run
    assert status == 422 and b"not written by torch.profiler" in body
    assert timeline == 200
