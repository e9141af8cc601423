"""The HTTP server: stdlib ThreadingHTTPServer, GET/HEAD (and one same-origin POST, the capture panel's), files
only from under the results root.

Routes: `/` (the trace list), `/api/traces` (the same as JSON), `/files/<trace>` (the file as stored;
`?download=1` adds Content-Disposition), `/api/capture` (the "Capture next call" panel: `capture_panel`),
and the offline views' pages and files (`offline`: `/timeline/...` with `/api/timeline/...` (its step index
and windows; a run folder's: `/api/timeline/run/...` and `/api/merged/...`), `/overview/...`, `/assets/...`,
`/vendor/...`; `/compare?base=...&new=...`: two captures compared). Trace files carry
`Access-Control-Allow-Origin` for the Perfetto UI's origin only, so Perfetto
may fetch them and other web sites may not.

Every request passes one Host check first (`lightx2v.hostcheck`: a DNS-rebinding page gets 403, whatever it asks).
Every method answers through one error path (`Handler._answer_safely`): a refusal is its status and one line; any
other failure is HTTP 500 and one line, its traceback logged once on stderr, never a connection closed unanswered.

Under load: the listen backlog holds a burst of connects (socketserver's default of 5 made clients wait for SYN
retries, 1, 3, 7 ... 63 s), and a connection that sends no whole request within `READ_TIMEOUT_S` is closed, so
half-open clients cannot hold threads forever (`benchmarks/bench_server_load.py`).

While it runs, `<root>/.trace_browser/<host>_<pid>.json` = {"pid", "port", "url", "started"} tells the profiler
where users can open the page (written atomically, removed on a clean exit). One file per server, so several
servers on one folder never remove each other's; the profiler takes the newest that answers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lightx2v import settings
from lightx2v.fileio import write_atomically
from lightx2v.hostcheck import LOOPBACK_ONLY, HostCheck
from lightx2v.profiler_notice import add_banner
from lightx2v.trace_browser import capture_panel, compare, offline
from lightx2v.trace_browser.files import Refused, content_type, list_traces, resolve, shown, url_quote
from lightx2v.trace_browser.page import file_url, render_index
from lightx2v.utils.torch_trace_profiler import TRACE_BROWSER_DIR

DEFAULT_PERFETTO_UI: str = settings.SETTINGS[settings.PERFETTO_UI].default
LISTEN_BACKLOG = 1024  # connects the kernel holds until accepted (capped by net.core.somaxconn)
READ_TIMEOUT_S = 15.0  # a socket read or write that waits longer closes the connection (a client that sends nothing)


class TraceBrowserServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    public_url: str | None = None  # the URL users open (--url), also an allowed origin for the capture POST

    def __init__(self, address, root: str, perfetto_ui: str = DEFAULT_PERFETTO_UI,
                 hosts: HostCheck = LOOPBACK_ONLY, read_timeout: float = READ_TIMEOUT_S):
        self.root = os.path.abspath(root)
        self.perfetto_ui = perfetto_ui.rstrip("/")
        self.hosts = hosts
        self.read_timeout = read_timeout
        super().__init__(address, Handler)


class Handler(BaseHTTPRequestHandler):
    server: TraceBrowserServer
    _answering = False  # a status line was sent for the current request: too late to answer an error instead

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout)  # reads and writes: handle_one_request closes on it

    def version_string(self) -> str:
        return "lightx2v-trace-browser"

    def send_response(self, code, message=None) -> None:
        self._answering = True
        super().send_response(code, message)

    def parse_request(self) -> bool:
        """The request line and headers, then the Host check, before any method or route is looked at."""
        if not super().parse_request():
            return False
        problem = self.server.hosts.refusal(self.headers.get("Host"))
        if problem is None:
            return True
        self.close_connection = True
        if self.path.startswith("/api/"):  # the API answers JSON, refusals included
            body = json.dumps({"ok": False, "message": problem}).encode()
            self._send_bytes(body, "application/json", self.command != "HEAD", HTTPStatus.FORBIDDEN)
        else:
            self._send_text(HTTPStatus.FORBIDDEN, problem + "\n", self.command != "HEAD")
        return False

    def do_GET(self) -> None:
        self._answer_safely(lambda: self._answer(send_body=True))

    def do_HEAD(self) -> None:
        self._answer_safely(lambda: self._answer(send_body=False))

    def _answer_safely(self, answer: Callable[[], None]) -> None:
        """The one error path of every method: a refusal answers its status; a client that left or stalled is let go
        (one log line); anything else answers 500 with one line and logs its traceback once."""
        self._answering = False
        send_body = self.command != "HEAD"
        try:
            answer()
        except Refused as refused:
            self._send_text(refused.status, f"{refused}\n", send_body)
        except (ConnectionError, TimeoutError) as exc:
            self.close_connection = True
            self.log_error("client gone while answering %r: %r", shown(self.path), exc)
        except Exception as exc:
            self.close_connection = True
            self.log_error("internal error answering %s %r:\n%s", self.command, shown(self.path),
                           traceback.format_exc().rstrip())
            if not self._answering:
                line = (str(exc).splitlines() or [""])[0]
                self._send_text(HTTPStatus.INTERNAL_SERVER_ERROR,
                                f"internal error: {type(exc).__name__}: {line} (the server's log has the details)\n",
                                send_body)

    def _refuse_method(self) -> None:
        self._send_text(HTTPStatus.METHOD_NOT_ALLOWED, "read-only: GET and HEAD only\n", True,
                        extra={"Allow": "GET, HEAD"})

    def do_POST(self) -> None:
        self._answer_safely(self._post)

    def _post(self) -> None:
        """The one write: the capture panel's "Capture next call" (same-origin only; see capture_panel)."""
        if self.path.partition("?")[0] != capture_panel.ROUTE:
            return self._refuse_method()
        length = self.headers.get("Content-Length") or "0"
        body = (self.rfile.read(min(int(length), capture_panel.MAX_BODY)) if length.isascii() and length.isdigit()
                else b"")  # isdigit alone also takes "¹", which int() refuses
        status, answer = capture_panel.post(self.server.root, self.headers, body, self.server.public_url)
        self._send_bytes(json.dumps(answer).encode(), "application/json", True, status)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse_method

    def _answer(self, send_body: bool) -> None:
        path, _, query = self.path.partition("?")
        if path in ("/", "/index.html"):
            page = render_index(list_traces(self.server.root), root=self.server.root,
                                host=self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}",
                                perfetto_ui=self.server.perfetto_ui, server_port=self.server.server_address[1])
            page = capture_panel.with_panel(page)
            page = add_banner(page, self.server.root)  # LightX2V's original profiler module at work?
            self._send_bytes(page.encode(), "text/html; charset=utf-8", send_body)
        elif path == "/api/traces":
            listing = [{"path": shown(t.path), "size": t.size, "mtime": t.mtime, "url": file_url(t.path)}
                       for t in list_traces(self.server.root)]
            self._send_bytes(json.dumps(listing).encode(), "application/json", send_body)
        elif path == capture_panel.ROUTE:
            listing = capture_panel.listing(self.server.root)
            self._send_bytes(json.dumps(listing).encode(), "application/json", send_body)
        elif path.startswith("/files/"):
            self._send_file(resolve(self.server.root, path[len("/files/"):]),
                            "download=1" in query.split("&"), send_body)
        elif path.startswith(offline.INDEX_ROUTE):
            self._send_page(offline.timeline_index(self.server.root, path[len(offline.INDEX_ROUTE):]), send_body)
        elif path.startswith(offline.WINDOW_ROUTE):
            rel = path[len(offline.WINDOW_ROUTE):]
            self._send_page(offline.timeline_window(self.server.root, rel, query), send_body)
        elif path.startswith(offline.RUN_INDEX_ROUTE):
            rel = path[len(offline.RUN_INDEX_ROUTE):]
            self._send_page(offline.run_timeline_index(self.server.root, rel), send_body)
        elif path.startswith(offline.MERGED_ROUTE):
            self._send_page(offline.merged_page(self.server.root, path[len(offline.MERGED_ROUTE):], query), send_body)
        elif path.startswith("/timeline/"):
            self._send_page(offline.timeline_page(self.server.root, path[len("/timeline/"):]), send_body)
        elif path == "/overview" or path.startswith("/overview/"):
            self._send_page(offline.overview_page(self.server.root, path[len("/overview/"):]), send_body)
        elif path == compare.ROUTE:
            self._send_page(offline.compare_page(self.server.root, query), send_body)
        elif path.startswith(("/assets/", "/vendor/")):
            self._send_page(offline.static_file(path[1:]), send_body)
        else:
            raise Refused(404, "not found")

    def _send_file(self, real: str, download: bool, send_body: bool) -> None:
        name = os.path.basename(real)
        with open(real, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type(name))
            self.send_header("Content-Length", str(size))
            self.send_header("Access-Control-Allow-Origin", self.server.perfetto_ui)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("X-Content-Type-Options", "nosniff")
            if download:
                quoted = url_quote(name)
                self.send_header("Content-Disposition", f"attachment; filename=\"{quoted}\"; filename*=UTF-8''{quoted}")
            self.end_headers()
            if send_body:
                shutil.copyfileobj(f, self.wfile)

    def _send_page(self, page: offline.Page, send_body: bool) -> None:
        extra = None
        if page.download:
            quoted = url_quote(page.download)
            extra = {"Content-Disposition": f"attachment; filename=\"{quoted}\"; filename*=UTF-8''{quoted}"}
        self._send_bytes(page.body, page.content_type, send_body, page.status, extra, cache=page.cache)

    def _send_bytes(self, body: bytes, ctype: str, send_body: bool, status=HTTPStatus.OK, extra=None,
                    cache: str = "no-cache") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def _send_text(self, status, text: str, send_body: bool, extra=None) -> None:
        self._send_bytes(shown(text).encode(), "text/plain; charset=utf-8", send_body, status, extra)


def write_discovery(root: str, port: int, url: str) -> str:
    """Write this server's `<root>/.trace_browser/<host>_<pid>.json` (atomically); returns its path.

    Files other servers of this host left behind when killed (their pid is gone) are removed first."""
    folder = os.path.join(root, TRACE_BROWSER_DIR)
    os.makedirs(folder, exist_ok=True)
    host = socket.gethostname()
    _remove_stale(folder, host)
    path = os.path.join(folder, f"{host}_{os.getpid()}.json")
    write_atomically(path, json.dumps({"pid": os.getpid(), "port": port, "url": url, "started": time.time()}))
    return path


def _remove_stale(folder: str, host: str) -> None:
    for name in os.listdir(folder):
        stem, _, pid = name.removesuffix(".json").rpartition("_")
        if (stem != host or not name.endswith(".json") or not (pid.isascii() and pid.isdigit())
                or int(pid) == os.getpid()):
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
        except OSError:  # alive, another user's
            pass


def remove_discovery(path: str) -> None:
    """Remove this server's discovery file (never another server's: each has its own)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def root_problem(root: str, create: bool) -> str | None:
    """Why `root` cannot be served (one line), or None; with `create`, a missing folder is made first."""
    if os.path.isdir(root):
        return None
    if os.path.exists(root):
        return f"--root {root} is a file, not a folder"
    if not create:
        return f"--root {root} does not exist (create it, or pass --create-root)"
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:
        return f"cannot create --root {root}: {exc.strerror or exc}"
    return None


def serve(root: str, host: str, port: int, public_url: str | None, perfetto_ui: str,
          hosts: HostCheck = LOOPBACK_ONLY) -> None:
    """Serve an existing folder until SIGTERM / SIGINT, keeping the discovery file meanwhile."""
    server = TraceBrowserServer((host, port), root, perfetto_ui, hosts)
    server.public_url = public_url
    actual_port = server.server_address[1]
    url = public_url or f"http://127.0.0.1:{actual_port}/"
    try:
        discovery: str | None = write_discovery(server.root, actual_port, url)
    except OSError as exc:  # a read-only folder can still be browsed; only the profiler's hint is lost
        discovery = None
        print(f"trace_browser: no discovery file in {server.root} ({exc.strerror or exc}): the profiler will not "
              "print this page's URL", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"Trace browser: {url} (serving {server.root} on {host}:{actual_port})", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if discovery:
            remove_discovery(discovery)
        server.server_close()
