"""Where `python -m lightx2v.serve` listens: loopback unless told (`--bind-all`, `--host`, `$LIGHTX2V_BIND_HOST`),
whatever the machine looks like (a `/.dockerenv` exists in dev containers and some VMs too), and a bind error that
names its real cause: the address or the port."""

from __future__ import annotations

import argparse
import http.client
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v import ports, serve, settings

from conftest import free_port, subprocess_env
from helpers.procs import Server, answers, wait_until

UNUSED_TEST_NET = "198.51.100.7"  # TEST-NET-2 (RFC 5737): never an address of this machine


def flags(host=None, bind_all=False) -> argparse.Namespace:
    return argparse.Namespace(host=host, bind_all=bind_all)


def test_the_listen_address_is_loopback_unless_told():
    assert serve.listen_host(flags(), {}) == "127.0.0.1"
    assert serve.listen_host(flags(), {"LIGHTX2V_BIND_HOST": ""}) == "127.0.0.1"
    assert serve.listen_host(flags(), {"LIGHTX2V_BIND_HOST": "0.0.0.0"}) == "0.0.0.0"  # what the image sets
    assert serve.listen_host(flags(host="10.1.2.3"), {"LIGHTX2V_BIND_HOST": "0.0.0.0"}) == "10.1.2.3"
    assert serve.listen_host(flags(bind_all=True), {}) == "0.0.0.0"
    with pytest.raises(settings.SettingError, match="LIGHTX2V_BIND_HOST"):
        serve.listen_host(flags(), {"LIGHTX2V_BIND_HOST": "a b"})


def test_supervisord_conf_defaults_to_loopback_too():
    conf = (Path(serve.SOURCE_ROOT) / "docker" / "supervisord.conf").read_text()
    assert conf.count('--host "${LIGHTX2V_BIND_HOST:-127.0.0.1}"') == 2 and "BIND_HOST:-0.0.0.0" not in conf


def test_each_bind_error_names_its_cause():
    unresolvable = ports.bind_problem("999.9.9.9", free_port(), "TensorBoard", "--port")
    assert "'999.9.9.9'" in unresolvable and "--host" in unresolvable and "--port" not in unresolvable
    foreign = ports.bind_problem(UNUSED_TEST_NET, free_port(), "TensorBoard", "--port")
    assert "not an address of this machine" in foreign and "--host" in foreign and "--port" not in foreign
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        busy = ports.bind_problem("127.0.0.1", port, "trace browser", "--browser-port")
    assert f"cannot use port {port} for the trace browser" in busy and busy.endswith("--browser-port.")
    assert ports.bind_problem("127.0.0.1", free_port(), "TensorBoard", "--port") is None


@pytest.mark.parametrize("args,env,blamed", [
    (["--host", "999.9.9.9"], {}, "(--host)"),
    ([], {"LIGHTX2V_BIND_HOST": UNUSED_TEST_NET}, "($LIGHTX2V_BIND_HOST)"),
])
def test_serve_with_a_bad_address_blames_the_address(args, env, blamed, tmp_path):
    result = subprocess.run([sys.executable, "-m", "lightx2v.serve", *args, "--port", str(free_port()),
                             "--browser-port", str(free_port()), "--no-inference"], cwd=tmp_path,
                            env=subprocess_env(**env), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert blamed in line and "--port" not in line and "Traceback" not in result.stderr


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the LISTEN sockets on ``port``, from the kernel's own tables (/proc/net/tcp{,6})."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                raw = bytes.fromhex(address)
                if len(raw) == 4:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four little-endian 32-bit words
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def other_local_address() -> str | None:
    """A non-loopback address of this machine (the source address of a route outward), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((UNUSED_TEST_NET, 9))  # UDP: no packet is sent
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def refused(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except OSError:
        return True


@pytest.mark.slow
def test_serve_listens_on_loopback_only_by_default(tmp_path):
    """A real stack started with no address given: both servers listen on 127.0.0.1 alone (the kernel's table
    says so) and refuse a connection to this machine's other address, even where /.dockerenv exists. The name
    given with --allowed-host (the one the 403 page tells the user to add) is answered by both; others are not."""
    tb, browser = free_port(), free_port()
    stack = Server([sys.executable, "-m", "lightx2v.serve", "--port", str(tb), "--browser-port", str(browser),
                    "--no-inference", "--no-assets-install", "--allowed-host", "gpubox.lan"], cwd=tmp_path,
                   LIGHTX2V_BIND_HOST="", LIGHTX2V_ALLOWED_HOSTS="")
    try:
        wait_until(lambda: answers(tb) and answers(browser), 120,
                   what=f"TensorBoard and the trace browser; output so far:\n{stack.output()[-3000:]}")
        assert "Listening on    127.0.0.1" in stack.output()
        for port in (tb, browser):
            assert listening_addresses(port) == {"127.0.0.1"}
            other = other_local_address()
            if other is not None:
                assert refused(other, port)
            assert status_as(port, "gpubox.lan:80") == 200
            assert status_as(port, "evil.example") == 403
    finally:
        stack.stop()


def status_as(port: int, host: str) -> int:
    """The status of GET / with `host` as the Host header (what a browser sends when it reached us by that name)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/", headers={"Host": host})
        return connection.getresponse().status
    finally:
        connection.close()


def test_allowed_hosts_from_the_flag_join_the_users_own(tmp_path):
    args = serve.parse_args(["--allowed-host", "gpubox.lan", "--allowed-host", "proxy.example:8080"])
    env = serve.stack_env(args, str(tmp_path), {"LIGHTX2V_ALLOWED_HOSTS": "mine.lan"})
    assert env["LIGHTX2V_ALLOWED_HOSTS"] == "mine.lan,gpubox.lan,proxy.example:8080"
    assert "LIGHTX2V_ALLOWED_HOSTS" not in serve.stack_env(serve.parse_args([]), str(tmp_path), {})


def test_a_malformed_allowed_host_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "lightx2v.serve", "--allowed-host", "a b"], capture_output=True,
                            text=True, timeout=60, env=subprocess_env())
    assert result.returncode == 2 and "--allowed-host: 'a b' is not a host name" in result.stderr
    assert "Traceback" not in result.stderr
