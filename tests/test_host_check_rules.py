"""The Host check's rules as pure logic (`lightx2v.hostcheck`), fast: which Host headers pass, how a user's entry
is read, how `--allowed-host` is taken off a command line, what the 403 says. tests/test_host_check.py checks the
same rules end to end on the real servers."""

from __future__ import annotations

import socket

import pytest

from lightx2v import hostcheck, settings
from lightx2v.hostcheck import HostCheck


@pytest.fixture
def no_host_env(monkeypatch):
    monkeypatch.delenv("LIGHTX2V_ALLOWED_HOSTS", raising=False)
    monkeypatch.delenv("LIGHTX2V_TRACE_BROWSER_URL", raising=False)


@pytest.mark.parametrize("header,name", [
    ("localhost", "localhost"), ("LocalHost:6006", "localhost"), ("gpu-host.example.:9001", "gpu-host.example"),
    ("[::1]:9001", "::1"), ("127.0.0.1", "127.0.0.1"), ("  box  ", "box"), ("BOXX:1", "boxx"),
])
def test_host_name_is_lower_case_without_port_brackets_or_trailing_dot(header, name):
    assert hostcheck.host_name(header) == name


@pytest.mark.parametrize("header", ["", "   ", "a b", "evil/x", "a\\b", "user@box", "box?q", "box#f", "box:port",
                                    ":9001", "."])
def test_a_malformed_host_header_has_no_name(header):
    assert hostcheck.host_name(header) is None


def test_loopback_names_and_ip_literals_pass_without_being_listed():
    check = HostCheck(frozenset())
    for header in ("localhost", "localhost:1234", "app.localhost", "a.b.localhost:9", "127.0.0.1:6006", "[::1]",
                   "10.1.2.3", "[fe80::1]:80"):
        assert check.allows(header), header


@pytest.mark.parametrize("header", ["evillocalhost", "notlocalhost:9001", "localhost.evil.example", "1.2.3.4.evil",
                                    "localhos"])
def test_a_name_that_only_ends_or_starts_with_localhost_is_refused(header):
    assert not HostCheck(frozenset()).allows(header)


def test_listed_names_pass_and_others_are_refused():
    check = HostCheck(frozenset({"gpu-host.example"}))
    assert check.allows("gpu-host.example:9001")
    assert check.allows("GPU-HOST.example")
    assert not check.allows("other.example")
    assert not check.allows("gpu-host.example.evil")


def test_a_missing_host_header_passes_and_a_malformed_one_is_refused():
    check = HostCheck(frozenset({"box"}))
    assert check.allows(None)
    assert not check.allows("box/evil")


def test_a_star_entry_turns_the_check_off():
    check = HostCheck(frozenset({"*"}))
    assert check.allows("evil.example")
    assert check.allows("a b")  # even a malformed one: the user asked for no check


def test_the_refusal_names_the_host_the_flag_and_the_variable():
    check = HostCheck(frozenset())
    assert check.refusal("localhost") is None
    assert check.refusal("evil.example:9001") == (
        "Host 'evil.example:9001' refused: this server answers only to its own names (a guard against DNS "
        "rebinding). To allow it, start the server with --allowed-host evil.example or set "
        "LIGHTX2V_ALLOWED_HOSTS=evil.example")


@pytest.mark.parametrize("header", ["a b", ""])
def test_the_refusal_of_a_malformed_or_empty_host_suggests_a_placeholder_name(header):
    assert HostCheck(frozenset()).refusal(header).endswith("--allowed-host NAME or set LIGHTX2V_ALLOWED_HOSTS=NAME")


@pytest.mark.parametrize("entry,name", [
    ("box", "box"), ("Box.Example:8080", "box.example"), ("http://proxy.example:9001/", "proxy.example"),
    ("https://User.Example/some/path", "user.example"), ("  lan-box.  ", "lan-box"), ("*", "*"), (" * ", "*"),
])
def test_a_users_entry_is_normalized_to_its_name(entry, name):
    assert hostcheck.normalize(entry) == name


@pytest.mark.parametrize("entry", ["", "a b", "http://", "x:y"])
def test_a_malformed_entry_is_a_clear_error(entry):
    with pytest.raises(ValueError, match="is not a host name"):
        hostcheck.normalize(entry)


def test_build_adds_the_hostname_the_public_url_the_variable_and_the_flag(monkeypatch, no_host_env):
    monkeypatch.setattr(socket, "gethostname", lambda: "Container-7.")
    monkeypatch.setenv("LIGHTX2V_ALLOWED_HOSTS", "proxy.example, http://jupyter.example.org:8888/")
    check = hostcheck.build(["LAN-box:9001", "http://lan2/"], public_url="http://gpu-host.example.:9001/")
    assert check.names == frozenset({"container-7", "gpu-host.example", "proxy.example", "jupyter.example.org",
                                     "lan-box", "lan2"})


def test_build_reads_the_public_url_from_the_environment_by_default(monkeypatch, no_host_env):
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setenv("LIGHTX2V_TRACE_BROWSER_URL", "http://public.example:9001/")
    assert hostcheck.build().names == frozenset({"box", "public.example"})


def test_build_with_an_empty_public_url_adds_only_the_hostname(monkeypatch, no_host_env):
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setenv("LIGHTX2V_TRACE_BROWSER_URL", "http://public.example:9001/")
    assert hostcheck.build(public_url="").names == frozenset({"box"})


@pytest.mark.parametrize("extra,env,message", [
    (["a b"], "", "--allowed-host: 'a b' is not a host name"),
    ([], "ok, x/y", "LIGHTX2V_ALLOWED_HOSTS: 'x/y' is not a host name"),
])
def test_build_names_where_a_malformed_entry_came_from(monkeypatch, no_host_env, extra, env, message):
    monkeypatch.setenv("LIGHTX2V_ALLOWED_HOSTS", env)
    with pytest.raises(settings.SettingError) as raised:
        hostcheck.build(extra, public_url="")
    assert str(raised.value) == message


def test_take_flags_takes_both_spellings_and_keeps_the_rest_in_order():
    names, rest = hostcheck.take_flags(["--logdir", "d", "--allowed-host", "a", "--port=6006",
                                        "--allowed-host=b.example", "--allowed-hosts=c", "x"])
    assert names == ["a", "b.example"]
    assert rest == ["--logdir", "d", "--port=6006", "--allowed-hosts=c", "x"]


def test_take_flags_keeps_an_equals_sign_inside_the_value():
    assert hostcheck.take_flags(["--allowed-host=a=b"]) == (["a=b"], [])


@pytest.mark.parametrize("argv", [["--allowed-host"], ["--allowed-host", "--port", "1"]])
def test_take_flags_refuses_the_flag_without_a_value(argv):
    with pytest.raises(ValueError, match="^--allowed-host needs a host name$"):
        hostcheck.take_flags(argv)


def _call(app, host):
    seen = []
    body = b"".join(app({"HTTP_HOST": host} if host is not None else {}, lambda status, headers: seen.append(
        (status, dict(headers)))))
    return seen, body


def test_the_wsgi_guard_answers_403_with_the_reason_and_never_calls_the_app():
    calls = []

    def app(environ, start_response):
        calls.append(environ)
        start_response("200 OK", [])
        return [b"traces"]

    guarded = hostcheck.guard_wsgi(app, HostCheck(frozenset()))
    seen, body = _call(guarded, "evil.example")
    assert calls == []
    expected = (HostCheck(frozenset()).refusal("evil.example") + "\n").encode()
    assert body == expected and body.startswith(b"Host 'evil.example' refused")
    assert seen == [("403 Forbidden", {"Content-Type": "text/plain; charset=utf-8", "Content-Length": str(len(body)),
                                       "X-Content-Type-Options": "nosniff"})]
    seen, body = _call(guarded, "localhost:6006")
    assert (seen, body) == ([("200 OK", {})], b"traces") and calls == [{"HTTP_HOST": "localhost:6006"}]
    seen, body = _call(guarded, None)
    assert body == b"traces"
