"""Every environment variable the stack reads, declared once: name, default, parser, one line of doc.

The stack's programs (``serve``, ``tensorboard``, ``trace_browser``, ``capture``, ``assets``) read variables through
``get(NAME)`` only, so a bad value is one clear line that names the variable (``SettingError``), never a traceback,
and the README's settings table can be checked against ``SETTINGS``. The drop-in profiler
(``lightx2v/utils/torch_trace_profiler.py``) must stand alone in a user's checkout, so it keeps its own few names;
a test checks that they agree with the entries here. Modelled on vLLM's ``envs.py``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Mapping
from typing import Any, Callable, Optional


class SettingError(ValueError):
    """A variable holds a value its parser refuses; the message names the variable and what it accepts."""


def parse_port(text: str) -> int:
    """A TCP port, 1-65535."""
    value = text.strip()
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ValueError("expected a port number 1-65535")
    return int(value)


_ON, _OFF = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def parse_switch(text: str) -> bool:
    """On/off: 1/true/on/yes or 0/false/off/no (any case)."""
    value = text.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"expected one of {'/'.join(_ON)} or {'/'.join(_OFF)}")


def parse_text(text: str) -> str:
    """Any non-empty text (surrounding spaces removed)."""
    value = text.strip()
    if not value:
        raise ValueError("expected a non-empty value")
    return value


def parse_path(text: str) -> str:
    """A filesystem path (``~`` expanded); whether it must exist is for the program to say."""
    return os.path.expanduser(parse_text(text))


def parse_host(text: str) -> str:
    """A listen address: an IP literal or a host name."""
    value = parse_text(text)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if any(c.isspace() or c in "/@?#" for c in value):
            raise ValueError("expected an IP address or a host name") from None
    return value


def parse_names(text: str) -> tuple[str, ...]:
    """A comma-separated list (spaces around names ignored, empty items dropped)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


@dataclasses.dataclass(frozen=True)
class Setting:
    """One environment variable: its name, the value used when it is unset or empty, how its text is read."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    doc: str


SETTINGS: dict[str, Setting] = {}


def _declare(name: str, default: Any, parse: Callable[[str], Any], doc: str) -> str:
    SETTINGS[name] = Setting(name, default, parse, doc)
    return name


# The drop-in profiler's own names (it reads them itself; declared here for the docs and the agreement test).
TORCH_PROFILE = _declare("LIGHTX2V_TORCH_PROFILE", True, parse_switch,
                         "0/false/off/no makes every profiled call site a plain call")
TORCH_PROFILE_DIR = _declare("LIGHTX2V_TORCH_PROFILE_DIR", None, parse_path,
                             "the TensorBoard logdir captures land in (replaces tb_dir); the viewers watch it too")
TORCH_PROFILE_REMOTE = _declare("LIGHTX2V_TORCH_PROFILE_REMOTE", True, parse_switch,
                                "0 keeps a process from being armed from outside (python -m lightx2v.capture)")
HINT_PORT = _declare("LIGHTX2V_TENSORBOARD_PORT", None, parse_port,
                     "the port printed in the profiler's viewing hints (e.g. the host port a container publishes)")

# The stack.
TENSORBOARD_PORT = _declare("TENSORBOARD_PORT", 16006, parse_port, "TensorBoard's port")
TRACE_BROWSER_PORT = _declare("TRACE_BROWSER_PORT", 9001, parse_port,
                              "the trace browser's port (9001 is the one Perfetto's open-by-URL mode accepts)")
BIND_HOST = _declare("LIGHTX2V_BIND_HOST", "127.0.0.1", parse_host,
                     "the address TensorBoard and the trace browser listen on")
RESULTS_DIR = _declare("LIGHTX2V_RESULTS_DIR", "save_results", parse_path,
                       "the folder the trace browser lists (captures, chrome traces, the demo's outputs)")
TRACE_BROWSER_URL = _declare("LIGHTX2V_TRACE_BROWSER_URL", None, parse_text,
                             "the trace browser's URL as users open it (printed in hints and TensorBoard's notices)")
ALLOWED_HOSTS = _declare("LIGHTX2V_ALLOWED_HOSTS", (), parse_names,
                         "more Host names TensorBoard and the trace browser answer to (comma-separated; `*`: any)")
PERFETTO_UI = _declare("LIGHTX2V_PERFETTO_UI", "https://ui.perfetto.dev", parse_text,
                       "the Perfetto UI the trace browser's links open")
TB_SKIP_FIXES = _declare("LIGHTX2V_TB_SKIP_FIXES", (), parse_names,
                         "plugin fixes to leave out, by name, comma-separated, or `all`")
ASSETS_DIR = _declare("LIGHTX2V_ASSETS_DIR", None, parse_path,
                      "where the offline views' browser files are installed and looked up")
SUPERVISOR_CONF = _declare("LIGHTX2V_SUPERVISOR_CONF", None, parse_path,
                           "the supervisord config `python -m lightx2v.serve` runs (default: docker/supervisord.conf)")
INFER_CMD = _declare("LIGHTX2V_INFER_CMD", None, parse_text,
                     "your own inference command (run by sh) instead of the embedded demo")


def get(name: str, environ: Optional[Mapping[str, str]] = None) -> Any:
    """The parsed value of ``name`` from ``environ`` (default ``os.environ``); its default when unset or empty.

    Raises ``SettingError`` (one line, naming the variable) when the value cannot be parsed.
    """
    setting = SETTINGS[name]
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip():
        return setting.default
    try:
        return setting.parse(raw)
    except ValueError as exc:
        raise SettingError(f"{name}={raw!r}: {exc}") from None
