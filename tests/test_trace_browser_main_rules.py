"""`python -m lightx2v.trace_browser`'s command line (`lightx2v.trace_browser.__main__.main`), in this process: its
refusals (a port out of range, a malformed --allowed-host, a root that is missing or a file), a port already taken,
and a real serve of a temporary root that answers the Host names it was given until an interrupt stops it.
tests/test_trace_browser.py and tests/test_serve_host.py run the same command as a child process."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lightx2v.trace_browser.__main__ import main

from conftest import free_port

ENV = ("LIGHTX2V_RESULTS_DIR", "TRACE_BROWSER_PORT", "LIGHTX2V_BIND_HOST", "LIGHTX2V_TRACE_BROWSER_URL",
       "LIGHTX2V_PERFETTO_UI", "LIGHTX2V_ALLOWED_HOSTS")


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def refused(capsys, argv: list[str]) -> str:
    """The one usage line main exits 2 with."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_port_out_of_range_is_refused_with_its_value(capsys, tmp_path):
    prog = "python -m lightx2v.trace_browser: error: "
    assert refused(capsys, ["--root", str(tmp_path), "--port", "65536"]) == prog + "--port must be 0-65535, got 65536"
    assert refused(capsys, ["--root", str(tmp_path), "--port", "-1"]) == prog + "--port must be 0-65535, got -1"


def test_a_malformed_allowed_host_is_refused_naming_it(capsys, tmp_path):
    assert refused(capsys, ["--root", str(tmp_path), "--allowed-host", "a b"]) == (
        "python -m lightx2v.trace_browser: error: --allowed-host: 'a b' is not a host name")


def test_a_bad_setting_is_refused_before_anything_else(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_BROWSER_PORT", "http")
    line = refused(capsys, ["--root", str(tmp_path)])
    assert line.startswith("trace_browser: TRACE_BROWSER_PORT='http': "), line


def test_a_missing_root_is_refused_unless_asked_to_create_it_and_a_file_always(capsys, tmp_path):
    missing, a_file = tmp_path / "missing", tmp_path / "trace.json"
    a_file.write_text("{}")
    assert refused(capsys, ["--root", str(missing)]) == (
        f"python -m lightx2v.trace_browser: error: --root {missing} does not exist (create it, or pass --create-root)")
    assert refused(capsys, ["--root", str(a_file), "--create-root"]) == (
        f"python -m lightx2v.trace_browser: error: --root {a_file} is a file, not a folder")
    assert not missing.exists()


def taken_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_port_in_use_exits_1_naming_the_root_the_address_and_why(capsys, tmp_path, monkeypatch):
    """The defaults come from the environment: the root, the port and the listen address the message names."""
    with taken_port() as s:
        port = s.getsockname()[1]
        monkeypatch.setenv("LIGHTX2V_RESULTS_DIR", str(tmp_path))
        monkeypatch.setenv("TRACE_BROWSER_PORT", str(port))
        monkeypatch.setenv("LIGHTX2V_BIND_HOST", "127.0.0.1")
        assert main([]) == 1
        assert capsys.readouterr().err.strip() == (
            f"trace_browser: cannot serve {tmp_path} on 127.0.0.1:{port}: Address already in use")
        new_root = tmp_path / "made"
        assert main(["--root", str(new_root), "--create-root", "--port", str(port)]) == 1
        assert new_root.is_dir()  # --create-root made it before the port was tried
        assert f"cannot serve {new_root} on 127.0.0.1:{port}: " in capsys.readouterr().err


def fetch(port: int, path: str, host: str) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def serve_and_ask(root: Path, argv: list[str], hosts: list[str]) -> tuple[int, dict, list[tuple[int, str]]]:
    """Run main(argv) here (serve() needs the main thread for its signal handler) while a thread reads the
    discovery file, asks "/" with each Host name, then interrupts the server (only once it answered, so the
    interrupt always lands inside serve_forever). Returns main's status, the discovery entry and the answers."""
    found: dict = {}
    answers: list[tuple[int, str]] = []

    def client() -> None:
        deadline = time.monotonic() + 30
        folder = root / ".trace_browser"
        while time.monotonic() < deadline and not found:
            for entry in folder.glob("*.json") if folder.is_dir() else []:
                found.update(json.loads(entry.read_text()))
            time.sleep(0.05)
        if found:
            answers.extend(fetch(found["port"], "/", host) for host in hosts)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    status = main(argv)
    thread.join(timeout=30)
    return status, found, answers


def test_it_serves_the_root_on_the_host_names_it_was_given_until_interrupted(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "host_1.pt.trace.json").write_text('{"traceEvents": []}')
    status, found, answers = serve_and_ask(
        tmp_path, ["--root", str(tmp_path), "--port", "0", "--host", "127.0.0.1", "--url", "http://gpu-box:9001/",
                   "--perfetto-ui", "https://perfetto.example", "--allowed-host", "lan-name"],
        ["127.0.0.1", "lan-name", "gpu-box", "evil.example"])
    assert status == 0
    assert found["url"] == "http://gpu-box:9001/" and found["pid"] == os.getpid()
    (ok, page), (lan, _), (public, _), (other, refusal) = answers
    assert (ok, lan, public, other) == (200, 200, 200, 403)
    assert "run/host_1.pt.trace.json" in page and "https://perfetto.example" in page
    assert "evil.example" in refusal
    out = capsys.readouterr().out
    assert f"Trace browser: http://gpu-box:9001/ (serving {tmp_path} on 127.0.0.1:{found['port']})" in out
    assert not list((tmp_path / ".trace_browser").glob("*.json"))  # its discovery file went with it


def test_without_options_it_serves_the_results_dir_of_the_environment_on_loopback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LIGHTX2V_RESULTS_DIR", str(tmp_path))
    port = free_port()
    monkeypatch.setenv("TRACE_BROWSER_PORT", str(port))
    status, found, answers = serve_and_ask(tmp_path, [], ["localhost", "lan-name"])
    assert status == 0
    assert found["port"] == port and found["url"] == f"http://127.0.0.1:{port}/"
    assert [code for code, _ in answers] == [200, 403]
    assert "https://ui.perfetto.dev" in answers[0][1]
    assert f"(serving {tmp_path} on 127.0.0.1:{found['port']})" in capsys.readouterr().out


# --help at 120 columns: what each option says, as a user reads it
OPTIONS = """\
options:
  -h, --help            show this help message and exit
  --root ROOT           the folder to list (default $LIGHTX2V_RESULTS_DIR, else save_results)
  --port PORT           default $TRACE_BROWSER_PORT, else 9001
  --host HOST           listen address (default $LIGHTX2V_BIND_HOST, else 127.0.0.1)
  --url URL             the URL users open (written to <root>/.trace_browser/; default $LIGHTX2V_TRACE_BROWSER_URL,
                        else http://127.0.0.1:<port>/)
  --perfetto-ui PERFETTO_UI
                        default $LIGHTX2V_PERFETTO_UI, else https://ui.perfetto.dev
  --allowed-host NAME   one more Host name to answer to (repeatable; also $LIGHTX2V_ALLOWED_HOSTS): a LAN name, or the
                        Host a proxy forwards. Loopback, IP addresses, this hostname and the --url host are always
                        allowed
  --create-root         create --root when it is missing (the stack's supervisord does; else an error)
"""


def test_help_says_what_each_option_does_and_lists_the_environment_it_reads(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m lightx2v.trace_browser [-h] [--root ROOT] [--port PORT] [--host HOST] "
                          "[--url URL]\n")
    assert "\n`python -m lightx2v.trace_browser`: list captured traces; open them in Perfetto or in the offline " \
           "views.\n\nDefaults come from the environment: root $LIGHTX2V_RESULTS_DIR (else save_results under the " \
           "working\ndirectory), port" in out  # the docstring as written (its line breaks kept)
    assert "\n\n" + OPTIONS + "\nenvironment (each flag's default comes from its variable; docs/settings.md):\n" in out
    assert "\n  TRACE_BROWSER_PORT          the trace browser's port" in out


def test_the_public_url_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGHTX2V_TRACE_BROWSER_URL", "http://gpu-box:9001/")
    status, found, answers = serve_and_ask(tmp_path, ["--root", str(tmp_path), "--port", "0"], ["gpu-box"])
    assert (status, found["url"], [code for code, _ in answers]) == (0, "http://gpu-box:9001/", [200])


def test_the_highest_port_is_accepted(capsys, tmp_path):
    """65535 is a port: main goes on to serve it (here it is taken, or the bind fails: status 1, not a usage error)."""
    try:
        held = socket.socket()
        held.bind(("127.0.0.1", 65535))
        held.listen()
    except OSError:
        held = None  # someone else has it: the bind fails all the same
    try:
        assert main(["--root", str(tmp_path), "--port", "65535", "--host", "127.0.0.1"]) == 1
        assert f"cannot serve {tmp_path} on 127.0.0.1:65535: " in capsys.readouterr().err
    finally:
        if held is not None:
            held.close()
