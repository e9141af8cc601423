"""One Host check for every request of the trace browser and of TensorBoard: the guard against DNS rebinding.

Neither server has a login, so what keeps a web page from reading the user's traces is the browser's same-origin
rule. DNS rebinding gets around it: a page at ``http://evil.example:9001/`` re-points its own name at 127.0.0.1, and
its scripts then talk to our server as "same origin". What such a request cannot fake is the ``Host`` header: it
says ``evil.example:9001``. So each server answers only requests whose Host (port ignored, so an SSH forward to
another local port still works) is

- a loopback name (``localhost``, ``*.localhost``) or any IP literal (``127.0.0.1``, ``[::1]``, a LAN address:
  a rebinding page always has a name),
- this machine's or container's hostname (``socket.gethostname()``: compose's other containers, ``docker run
  --hostname``),
- the host of the configured public URL (``$LIGHTX2V_TRACE_BROWSER_URL``),
- names the user adds: ``--allowed-host NAME`` (repeatable) or ``$LIGHTX2V_ALLOWED_HOSTS=name,name`` (a LAN name
  under ``--bind-all``, the Host a reverse proxy forwards); ``*`` turns the check off.

Anything else gets 403 with one line that names the Host and the switch that allows it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Optional

from lightx2v import settings

FLAG = "--allowed-host"
ANY = "*"


def host_name(header: str) -> Optional[str]:
    """The name in a Host header, lower case, without port, brackets or a trailing dot; None if malformed."""
    text = header.strip()
    if not text or any(c.isspace() or c in "/\\@?#" for c in text):
        return None
    try:
        parts = urllib.parse.urlsplit(f"//{text}")
        _ = parts.port  # raises ValueError on a port that is not a number
    except ValueError:
        return None
    name = (parts.hostname or "").rstrip(".")
    return name or None


def normalize(entry: str) -> str:
    """A name as the user may write it (``name``, ``name:port``, ``http://name:port/``) -> ``name``."""
    text = entry.strip()
    if text == ANY:
        return ANY
    if "://" in text:
        text = urllib.parse.urlsplit(text).netloc
    name = host_name(text)
    if name is None:
        raise ValueError(f"{entry!r} is not a host name")
    return name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


@dataclasses.dataclass(frozen=True)
class HostCheck:
    """The names one server answers to besides loopback names and IP literals."""

    names: frozenset[str]

    def allows(self, header: Optional[str]) -> bool:
        if header is None:  # HTTP/1.0 tools may omit it; a browser always sends it
            return True
        if ANY in self.names:
            return True
        name = host_name(header)
        if name is None:
            return False
        return name == "localhost" or name.endswith(".localhost") or _is_ip(name) or name in self.names

    def refusal(self, header: Optional[str]) -> Optional[str]:
        """None when ``header`` is allowed, else the one-line reason for the 403."""
        if self.allows(header):
            return None
        name = host_name(header or "") or "NAME"
        return (f"Host {header!r} refused: this server answers only to its own names (a guard against DNS "
                f"rebinding). To allow it, start the server with {FLAG} {name} or set "
                f"{settings.ALLOWED_HOSTS}={name}")


LOOPBACK_ONLY = HostCheck(frozenset())
"""Loopback names and IP literals only: the default of code that builds a server without ``build()``."""


def build(extra: Iterable[str] = (), public_url: Optional[str] = None) -> HostCheck:
    """The check for this process: ``extra`` (``--allowed-host``), ``$LIGHTX2V_ALLOWED_HOSTS``, the public URL's
    host (``public_url``, default ``$LIGHTX2V_TRACE_BROWSER_URL``) and the hostname. Raises
    ``settings.SettingError`` (one line) for a malformed name."""
    names = {socket.gethostname().lower().rstrip(".")}
    if public_url is None:
        public_url = settings.get(settings.TRACE_BROWSER_URL)
    if public_url:
        public = urllib.parse.urlsplit(public_url).hostname
        if public:
            names.add(public.rstrip("."))
    for origin, entries in ((settings.ALLOWED_HOSTS, settings.get(settings.ALLOWED_HOSTS)), (FLAG, extra)):
        for entry in entries:
            try:
                names.add(normalize(entry))
            except ValueError as exc:
                raise settings.SettingError(f"{origin}: {exc}") from None
    return HostCheck(frozenset(names))


def take_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the ``--allowed-host`` values, the other arguments) of a command line that is passed on to another parser
    (TensorBoard's). Raises ValueError when the flag has no value."""
    names: list[str] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == FLAG:
            value = next(args, None)
            if value is None or value.startswith("-"):
                raise ValueError(f"{FLAG} needs a host name")
            names.append(value)
        elif arg.startswith(FLAG + "="):
            names.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return names, rest


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def guard_wsgi(app: WSGIApp, check: HostCheck) -> WSGIApp:
    """``app`` behind the Host check: a refused request gets 403 and never reaches it."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        problem = check.refusal(environ.get("HTTP_HOST"))
        if problem is None:
            return app(environ, start_response)
        body = (problem + "\n").encode()
        start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8"),
                                         ("Content-Length", str(len(body))), ("X-Content-Type-Options", "nosniff")])
        return [body]

    return guarded
