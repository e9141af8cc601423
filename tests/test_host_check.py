"""The one Host check (DNS rebinding, `lightx2v.hostcheck`) on real servers: the trace browser and our TensorBoard
launcher answer 403 to a foreign Host on every route, and keep answering their own names (loopback on any port, as
through an SSH forward; IP literals; the container's hostname; the public URL's host; names the user adds). A
headless Chromium page whose own name resolves to 127.0.0.1 (a rebinding page) cannot read traces."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys

import pytest

from conftest import H200_TRACE, free_port, subprocess_env
from helpers.procs import PLUGIN, Server, launcher, wait_until

FOREIGN = "evil.example.com"
RUN = "20261129-120000_infer_main"
TRACE = f"torch_profile/{RUN}/rank0_host.pt.trace.json.gz"
PUBLIC_URL = "http://gpu-host.example:9001/"
FLAG_NAME, ENV_NAMES = "lan-box.example", "proxy.example, jupyter.example.org"


def runs_of(port: int) -> list[str]:
    return json.loads(request(port, f"{PLUGIN}/runs", "127.0.0.1")[1])["runs"]


def request(port: int, path: str, host: str, method: str = "GET", body: bytes | None = None,
            **headers: str) -> tuple[int, bytes]:
    """One request with exactly this Host header (http.client sends it as given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers={"Host": host, **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostcheck") / "save_results"
    (root / TRACE).parent.mkdir(parents=True)
    (root / TRACE).write_bytes(H200_TRACE.read_bytes())
    return root


@pytest.fixture(scope="module")
def browser_port(results):
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(results), "--port", str(port),
                     "--host", "127.0.0.1", "--url", PUBLIC_URL, "--allowed-host", FLAG_NAME],
                    LIGHTX2V_ALLOWED_HOSTS=ENV_NAMES, LIGHTX2V_BIND_HOST="")
    try:
        wait_until(lambda: request(port, "/api/traces", "127.0.0.1")[0] == 200, 30, what="the trace browser")
        yield port
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tensorboard_port(results):
    port = free_port()
    server = launcher(results / "torch_profile", port, "--allowed-host", FLAG_NAME, LIGHTX2V_ALLOWED_HOSTS=ENV_NAMES,
                      LIGHTX2V_TRACE_BROWSER_URL=PUBLIC_URL)
    try:
        wait_until(lambda: RUN in runs_of(port), 120, what="TensorBoard listing the run")
        yield port
    finally:
        server.stop()


BROWSER_ROUTES = [
    ("GET", "/"), ("GET", "/index.html"), ("HEAD", "/"), ("GET", "/api/traces"), ("HEAD", "/api/traces"),
    ("GET", "/api/capture"), ("POST", "/api/capture"), ("GET", f"/files/{TRACE}"), ("HEAD", f"/files/{TRACE}"),
    ("GET", f"/files/{TRACE}?download=1"), ("GET", f"/timeline/{TRACE}"),
    ("GET", f"/api/timeline/index/{TRACE}"), ("GET", f"/api/timeline/window/{TRACE}?step=0"), ("GET", "/overview"),
    ("GET", f"/overview/{TRACE}"), ("GET", "/overview/torch_profile/20261129-120000_infer_main/"),
    ("GET", f"/timeline/torch_profile/{RUN}/"), ("GET", f"/api/timeline/run/torch_profile/{RUN}/"),
    ("GET", f"/api/merged/torch_profile/{RUN}/?step=ProfilerStep%234"),
    ("GET", "/assets/webcomponents.min.js"), ("GET", "/vendor/trace_viewer_full.html"), ("GET", "/no/such/page"),
    ("GET", "/files/../secret.json"), ("POST", f"/files/{TRACE}"), ("PUT", "/"), ("DELETE", f"/files/{TRACE}"),
    ("OPTIONS", "/api/traces"), ("PATCH", "/"), ("PROPFIND", "/"),
]


def browser_call(port: int, method: str, path: str, host: str) -> tuple[int, bytes]:
    if method == "POST" and path == "/api/capture":  # what the page itself sends: its own Origin, JSON
        return request(port, path, host, method, json.dumps({"id": "host_1"}).encode(), Origin=f"http://{host}",
                       **{"Content-Type": "application/json"})
    return request(port, path, host, method)


def refused(status: int, body: bytes, method: str, name: str = FOREIGN) -> bool:
    if status != 403:
        return False
    if method == "HEAD":
        return body == b""
    text = body.decode()
    if text.startswith("{"):  # the API answers JSON
        text = json.loads(text)["message"]
    return f"--allowed-host {name}" in text and "LIGHTX2V_ALLOWED_HOSTS" in text and text.count("\n") <= 1


@pytest.mark.parametrize("method,path", BROWSER_ROUTES)
@pytest.mark.slow
def test_trace_browser_refuses_a_foreign_host_on_every_route(browser_port, method, path):
    status, body = browser_call(browser_port, method, path, f"{FOREIGN}:{browser_port}")
    assert refused(status, body, method), (status, body[:300])
    # the same request with the server's own name is not refused (so the 403 above is the Host check's)
    status, body = browser_call(browser_port, method, path, f"127.0.0.1:{browser_port}")
    assert status != 403 or path.startswith("/files/.."), (status, body[:300])


def tensorboard_routes() -> list[str]:
    """Every route TensorBoard serves here: the core plugin's, the app's own, each of the profiler plugin's (read
    from the installed plugins, so a new route is covered too) and the ones our fixes add."""
    from tensorboard.plugins.core import core_plugin
    from torch_tb_profiler import plugin

    class Anything:
        def __getattr__(self, name):
            return lambda *args, **kwargs: {}

    core = list(core_plugin.CorePlugin.get_plugin_apps(Anything()))
    profiler = list(plugin.TorchProfilerPlugin.get_plugin_apps(Anything()))
    assert "/data/runs" in core and "/trace" in profiler and len(profiler) > 20
    return ["/", "/index.html", "/data/plugins_listing", "/data/plugin_entry.html?name=pytorch_profiler",
            "/no/such/page", *core, *(PLUGIN + route for route in [*profiler, "/webcomponents.min.js"])]


@pytest.mark.slow
def test_tensorboard_refuses_a_foreign_host_on_every_route(tensorboard_port):
    routes = tensorboard_routes()
    for path in routes:
        for method in ("GET", "HEAD", "POST"):
            status, body = request(tensorboard_port, path, f"{FOREIGN}:{tensorboard_port}", method)
            assert refused(status, body, method), (method, path, status, body[:300])
    answered = {path: request(tensorboard_port, path, f"localhost:{tensorboard_port}")[0] for path in routes}
    assert all(status != 403 for status in answered.values()), answered
    assert answered["/"] == 200 and answered[f"{PLUGIN}/runs"] == 200


ALLOWED = [
    "127.0.0.1", "127.0.0.1:19001", "localhost:19001", "LOCALHOST", "box.localhost:1", "[::1]:9001", "[::1]",
    "10.1.2.3:9001",  # SSH forwards to another local port; IP literals (a LAN address under --bind-all)
    f"{socket.gethostname()}:9001",  # compose's other containers, `docker run --hostname`
    "gpu-host.example:9001", "gpu-host.example.",  # the public URL's host
    f"{FLAG_NAME}:8080", "proxy.example", "jupyter.example.org:443",  # --allowed-host, $LIGHTX2V_ALLOWED_HOSTS
]
REFUSED = [f"{FOREIGN}:9001", FOREIGN, "gpu-host.example.evil.com", "localhost.evil.com:9001", "127.0.0.1.nip.io",
           f"x.{FLAG_NAME}", "evil.com:abc", "", "a b", "user@127.0.0.1"]


@pytest.mark.parametrize("host", ALLOWED)
@pytest.mark.slow
def test_own_names_are_answered(browser_port, tensorboard_port, host):
    status, body = request(browser_port, "/api/traces", host)
    assert status == 200 and [t["path"] for t in json.loads(body)] == [TRACE]
    status, body = request(browser_port, f"/files/{TRACE}", host)
    assert status == 200 and body == H200_TRACE.read_bytes()
    status, body = request(tensorboard_port, f"{PLUGIN}/runs", host)
    assert status == 200 and RUN in json.loads(body)["runs"]


@pytest.mark.parametrize("host", REFUSED)
def test_other_names_are_refused(browser_port, tensorboard_port, host):
    assert request(browser_port, "/api/traces", host)[0] == 403
    assert request(browser_port, f"/files/{TRACE}", host)[0] == 403
    assert request(tensorboard_port, f"{PLUGIN}/runs", host)[0] == 403


def test_the_capture_post_still_needs_its_own_origin(browser_port):
    """Past the Host check, a write must also come from the server's own page (Origin) and be JSON."""
    body = json.dumps({"id": "host_1"}).encode()
    own = f"127.0.0.1:{browser_port}"
    json_type = {"Content-Type": "application/json"}
    status, answer = request(browser_port, "/api/capture", own, "POST", body, Origin="http://other.example",
                             **json_type)
    assert status == 403 and "cross-origin" in json.loads(answer)["message"]
    status, answer = request(browser_port, "/api/capture", own, "POST", body, **json_type)
    assert status == 403 and "missing Origin" in json.loads(answer)["message"]
    status, answer = request(browser_port, "/api/capture", "gpu-host.example:9001", "POST", body,
                             Origin="http://gpu-host.example:9001", **json_type)  # the public URL's own page
    assert status == 409 and "no process with id 'host_1'" in json.loads(answer)["message"]


@pytest.mark.parametrize("program", ["trace_browser", "tensorboard"])
@pytest.mark.parametrize("args,env,expected", [
    (["--allowed-host", "a b"], {}, "--allowed-host: 'a b' is not a host name"),
    ([], {"LIGHTX2V_ALLOWED_HOSTS": "ok.example,bad/name"}, "LIGHTX2V_ALLOWED_HOSTS: 'bad/name' is not a host name"),
])
@pytest.mark.slow
def test_a_bad_allowed_name_is_a_clear_error(tmp_path, program, args, env, expected):
    command = [sys.executable, "-m", f"lightx2v.{program}", "--port", str(free_port()), *args]
    command += ["--root", str(tmp_path)] if program == "trace_browser" else ["--logdir", str(tmp_path)]
    result = subprocess.run(command, env=subprocess_env(**env), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr, result.stderr


# --- a page whose own name resolves to 127.0.0.1 (DNS rebinding), in a real browser -----------------------------

READ = """const done = arguments[arguments.length - 1];
fetch(arguments[0]).then(async r => done({status: r.status, text: await r.text()}),
                         e => done({status: 0, text: String(e)}));"""


@pytest.mark.browser
def test_a_rebinding_page_in_chromium_cannot_read_traces(results, browser_port, tensorboard_port):
    """evil.test is mapped to 127.0.0.1, so a page at http://evil.test:PORT/ is same-origin with our servers, as
    after a rebinding. Its scripts get 403 from both servers; a trace browser that allows the name (the control)
    shows the page would otherwise read every trace. A page of another origin is stopped by CORS as well."""
    from helpers.browser import chromium

    allowing_port = free_port()
    allowing = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(results), "--port",
                       str(allowing_port), "--host", "127.0.0.1", "--allowed-host", "evil.test"])
    try:
        wait_until(lambda: request(allowing_port, "/api/traces", "127.0.0.1")[0] == 200, 30, what="the browser")
        with chromium(offline=False, extra_args=("--host-resolver-rules=MAP evil.test 127.0.0.1",)) as driver:
            for port, paths in ((browser_port, ["/api/traces", f"/files/{TRACE}", "/"]),
                                (tensorboard_port, [f"{PLUGIN}/runs", f"{PLUGIN}/index.html", "/data/logdir"])):
                driver.get(f"http://evil.test:{port}/")
                assert "--allowed-host evil.test" in driver.find_element("tag name", "body").text
                for path in paths:
                    answer = driver.execute_async_script(READ, path)
                    assert answer["status"] == 403 and "DNS rebinding" in answer["text"], (port, path, answer)
                    assert TRACE not in answer["text"] and "infer_main" not in answer["text"]
            other_origin = driver.execute_async_script(READ, f"http://127.0.0.1:{browser_port}/api/traces")
            assert other_origin["status"] == 0 and "Failed to fetch" in other_origin["text"]  # CORS

            driver.get(f"http://evil.test:{allowing_port}/")  # the control: the same page, the name allowed
            answer = driver.execute_async_script(READ, "/api/traces")
            assert answer["status"] == 200 and [t["path"] for t in json.loads(answer["text"])] == [TRACE]
    finally:
        allowing.stop()
