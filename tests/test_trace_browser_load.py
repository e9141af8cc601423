"""The trace browser under a burst of connects and against clients that send nothing (issue 36, B2).

Measured before: socketserver's listen backlog of 5 made clients of a 200-request burst wait for SYN retries (1, 3,
7 ... 63 s), and a client that connected and sent nothing (or half a request) held a server thread forever. Here the
burst is made deterministic by stopping the server (SIGSTOP) while 100 clients connect: only the kernel's accept
queue holds them, so every one must complete its handshake there, and each gets its answer once the server runs
again. Timings in `benchmarks/bench_server_load.py`.
"""

from __future__ import annotations

import http.client
import os
import select
import signal
import socket
import sys
import threading
import time

import pytest

from lightx2v.trace_browser.server import READ_TIMEOUT_S, TraceBrowserServer

from conftest import H200_TRACE
from helpers.procs import http_get, trace_browser

BURST = 100


def results_root(base):
    root = base / "save_results"
    (root / "run").mkdir(parents=True)
    (root / "run" / "rank0_host.pt.trace.json.gz").write_bytes(H200_TRACE.read_bytes())
    return root


def connect_all(port: int, n: int, within: float) -> tuple[list[socket.socket], list[socket.socket]]:
    """`n` non-blocking connects at once: (those whose handshake completed within `within` s, the others)."""
    pending = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        pending.append(s)
    done: list[socket.socket] = []
    deadline = time.monotonic() + within
    while pending and time.monotonic() < deadline:
        _, writable, _ = select.select([], pending, [], max(0.0, deadline - time.monotonic()))
        for s in writable:
            pending.remove(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                done.append(s)
            else:
                s.close()
    return done, pending


def answer_of(s: socket.socket, port: int) -> int:
    s.setblocking(True)
    s.settimeout(60)
    s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
    response = http.client.HTTPResponse(s)
    response.begin()
    response.read()
    return response.status


def test_a_burst_of_connects_is_held_by_the_listen_queue_and_every_one_answered(tmp_path):
    with trace_browser(results_root(tmp_path)) as (server, port):
        os.kill(server.pid, signal.SIGSTOP)  # nothing accepts: the kernel's queue alone holds the connects
        try:
            done, dropped = connect_all(port, BURST, within=3.0)  # on loopback a queued handshake is immediate
        finally:
            os.kill(server.pid, signal.SIGCONT)
        try:
            assert len(dropped) == 0, f"{len(dropped)} of {BURST} connects not queued (listen backlog too small)"
            statuses = [0] * len(done)

            def ask(i: int) -> None:
                statuses[i] = answer_of(done[i], port)

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(done))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(90)
            assert statuses == [200] * BURST
        finally:
            for s in done + dropped:
                s.close()


@pytest.fixture
def quick_timeout_server(tmp_path):
    """The real server class on loopback, in this process, with a 1 s read timeout (the default is 15 s)."""
    server = TraceBrowserServer(("127.0.0.1", 0), str(results_root(tmp_path)), read_timeout=1.0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def closed_after(s: socket.socket, bound: float) -> float:
    """Seconds until the server closed `s` (reading whatever it sent first); AssertionError past `bound`."""
    start = time.monotonic()
    s.settimeout(bound)
    try:
        while s.recv(4096):
            pass
    except TimeoutError:
        raise AssertionError(f"the server did not close a half-open connection within {bound} s") from None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def test_half_open_clients_are_closed_by_the_read_timeout_and_others_still_answered(quick_timeout_server):
    port = quick_timeout_server
    silent = socket.create_connection(("127.0.0.1", port))
    partial = socket.create_connection(("127.0.0.1", port))
    partial.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")  # the headers never end
    try:
        assert http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200  # not blocked by them
        assert closed_after(silent, 20) < 20
        assert closed_after(partial, 20) < 20
    finally:
        silent.close()
        partial.close()


@pytest.mark.slow
def test_the_default_read_timeout_closes_a_silent_client(tmp_path):
    assert 0 < READ_TIMEOUT_S <= 60
    with trace_browser(results_root(tmp_path)) as (_, port):
        with socket.create_connection(("127.0.0.1", port)) as silent:
            waited = closed_after(silent, READ_TIMEOUT_S + 30)
    assert waited >= READ_TIMEOUT_S - 1  # the timeout's, not an earlier close


if sys.platform != "linux":  # pragma: no cover - SIGSTOP, /proc and ss are Linux's
    pytestmark = pytest.mark.skip("Linux only")
