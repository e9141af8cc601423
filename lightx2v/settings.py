"""Every environment variable the stack reads, declared once: name, default, parser, one line of doc.

The stack's programs (``serve``, ``tensorboard``, ``trace_browser``, ``capture``) read variables through
``get(NAME)`` only, and check every variable they (or the programs they start) read before doing anything
(``exit_on_bad_values``), so a bad value is one clear line that names the variable and exit status 2, never a
traceback. Each ``Setting`` says which programs read it (``read_by``), which drives that check, the settings part of
each program's ``--help`` (``help_text``) and the tests that try a bad value of every variable in every program.

Scopes: ``user`` settings are listed in docs/settings.md's "Settings (environment variables)" table (and its Chinese
twin), a test keeps both equal to this registry. ``internal`` ones are passed between our own programs
(``docker/supervisord.conf``, ``lightx2v.serve``, the Dockerfile's ``ENV``) and documented next to the
supervisord programs (docs/tensorboard.md); ``compose`` ones are the shell variables ``compose.yaml`` reads
(docs/docker.md).

The drop-in profiler (``lightx2v/utils/torch_trace_profiler.py``) must stand alone in a user's checkout, so it keeps
its own few names (``ENV_ENABLE``, ``ENV_DIR``, ``ENV_PORT``, ``ENV_REMOTE``, ``ENV_MEMORY_SNAPSHOT``); a test checks
that they agree with the entries here. It reads them in the user's process, where a bad value keeps its default
(said once) instead of stopping anything; the rules by which a number and a folder are read are its own
(``whole_number``, ``env_path``), used here too, so a value means the same to the process that writes a trace and to
the viewers that watch for it. So does ``lightx2v.assets`` (``ENV_ASSETS_DIR``): the image's assets build
stage copies that package alone. Modelled on vLLM's ``envs.py``.

The two TensorBoard ports are two different things, kept apart on purpose: ``TENSORBOARD_PORT`` is where our
TensorBoard *listens* (inside a container: the container's port); ``LIGHTX2V_TENSORBOARD_PORT`` is the port the
profiler *prints* in its viewing hints, which is where the user's browser reaches it (the host port a container
publishes, ``TB_PORT`` in compose.yaml). Outside a container ``lightx2v.serve`` sets the second from the first.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import sys
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Callable, NoReturn, Optional

# The drop-in's readings of a number and of a folder (it reads its own variables: one rule, shared, not copied).
from lightx2v.utils.torch_trace_profiler import env_path, whole_number

DEFAULT_TENSORBOARD_PORT = 16006
DEFAULT_TRACE_BROWSER_PORT = 9001  # the one port Perfetto's open-by-URL mode accepts
LOOPBACK = "127.0.0.1"

# The programs, by the name `python -m lightx2v.<program>` runs them under.
SERVE, TENSORBOARD, TRACE_BROWSER, CAPTURE, ASSETS = "serve", "tensorboard", "trace_browser", "capture", "assets"
PROFILER = "profiler"  # the drop-in module, inside the user's process (it parses its own names)
PROGRAMS = (SERVE, TENSORBOARD, TRACE_BROWSER, CAPTURE, ASSETS)
STARTED_BY = {SERVE: (TENSORBOARD, TRACE_BROWSER, ASSETS)}  # serve checks what its children will read, up front

USER, INTERNAL, COMPOSE = "user", "internal", "compose"


class SettingError(ValueError):
    """A variable holds a value its parser refuses; the message names the variable and what it accepts."""


@dataclasses.dataclass(frozen=True)
class Parser:
    """How a variable's text becomes its value: ``read`` raises ValueError with what it expected.

    ``bad_example`` is a value ``read`` refuses (the tests set it in every program that reads the variable); None
    for parsers that accept any text."""

    read: Callable[[str], Any]
    bad_example: Optional[str]

    def __call__(self, text: str) -> Any:
        return self.read(text)


def _port(text: str) -> int:
    value = whole_number(text)
    if value is None or not 1 <= value <= 65535:
        raise ValueError("expected a port number 1-65535")
    return value


ON_WORDS, OFF_WORDS = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def _switch(text: str) -> bool:
    value = text.strip().lower()
    if value in ON_WORDS:
        return True
    if value in OFF_WORDS:
        return False
    raise ValueError(f"expected one of {'/'.join(ON_WORDS)} (on) or {'/'.join(OFF_WORDS)} (off)")


def _text(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("expected a non-empty value")
    return value


def _path(text: str) -> str:
    path = env_path(text)  # the drop-in's reading of its folder variable: one rule for the writer and the viewers
    if path is None:
        raise ValueError("expected a non-empty value")
    return path


def _host(text: str) -> str:
    value = _text(text)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if any(c.isspace() or c in "/@?#" for c in value):
            raise ValueError("expected an IP address or a host name") from None
    return value


def _megabytes(text: str) -> int:
    value = whole_number(text)
    if value is None or value < 1:
        raise ValueError("expected a whole number of megabytes, 1 or more")
    return value


def _url(text: str) -> str:
    value = _text(text)
    if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise ValueError("expected an http:// or https:// URL")
    return value


def split_names(text: str) -> tuple[str, ...]:
    """A comma-separated list (spaces around names ignored, empty items dropped)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def names_among(known: Callable[[], Optional[Collection[str]]]) -> Parser:
    """A comma-separated list whose every name must be one of ``known()`` (called when a value is read, so the
    names can live with their owner); ``known()`` returning None accepts any name (the owner is not installed)."""

    def read(text: str) -> tuple[str, ...]:
        names = split_names(text)
        allowed = known()
        unknown = [name for name in names if allowed is not None and name not in allowed]
        if unknown:
            raise ValueError(f"unknown name{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; known: "
                             + ", ".join(sorted(allowed or ())))
        return names

    return Parser(read, "bogus")


parse_port = Parser(_port, "abc")
parse_switch = Parser(_switch, "maybe")
parse_host = Parser(_host, "not a host")
parse_url = Parser(_url, "ftp:/nowhere")
parse_megabytes = Parser(_megabytes, "lots")
parse_text = Parser(_text, None)
parse_path = Parser(_path, None)
parse_names = Parser(split_names, None)


def _tensorboard_fix_names() -> frozenset[str]:
    """The plugin fixes' names (declared beside the fix machinery, which imports nothing of ours) and `all`."""
    from lightx2v.tensorboard.fix import FIX_NAMES

    return frozenset([*FIX_NAMES, "all"])


@dataclasses.dataclass(frozen=True)
class Setting:
    """One environment variable: its name, the value used when it is unset or empty, how its text is read."""

    name: str
    default: Any
    parse: Parser
    doc: str
    read_by: tuple[str, ...]
    scope: str = USER
    default_doc: Optional[str] = None  # the default in words, when it is not a constant (``None`` means: none)

    @property
    def shown_default(self) -> str:
        if self.default_doc is not None:
            return self.default_doc
        if self.default is None or self.default == ():
            return "unset"
        return str(self.default)


SETTINGS: dict[str, Setting] = {}


def _declare(name: str, default: Any, parse: Parser, doc: str, read_by: Iterable[str] = (), scope: str = USER,
             default_doc: Optional[str] = None) -> str:
    assert name not in SETTINGS, f"{name} declared twice"
    SETTINGS[name] = Setting(name, default, parse, doc, tuple(read_by), scope, default_doc)
    return name


# The drop-in profiler's own names (it reads them itself; declared here for the docs, the programs that read them
# too, and the agreement test).
TORCH_PROFILE = _declare("LIGHTX2V_TORCH_PROFILE", True, parse_switch,
                         "0/false/off/no makes every profiled call site a plain call", (PROFILER,),
                         default_doc="1 (on)")
TORCH_PROFILE_DIR = _declare("LIGHTX2V_TORCH_PROFILE_DIR", None, parse_path,
                             "the TensorBoard logdir captures land in (replaces tb_dir); the viewers watch it too",
                             (PROFILER, SERVE, TENSORBOARD, CAPTURE), default_doc="save_results/torch_profile")
TORCH_PROFILE_REMOTE = _declare("LIGHTX2V_TORCH_PROFILE_REMOTE", True, parse_switch,
                                "0 keeps a process from being armed from outside (python -m lightx2v.capture)",
                                (PROFILER,), default_doc="1 (on)")
TORCH_PROFILE_MEMORY_SNAPSHOT = _declare("LIGHTX2V_TORCH_PROFILE_MEMORY_SNAPSHOT", None, parse_switch,
                                         "1: record the CUDA allocator's history over a capture's active calls and "
                                         "write rank<R>_<host>.memory_snapshot.pickle beside the trace; 0: not "
                                         "(replaces memory_snapshot; CUDA only)", (PROFILER,),
                                         default_doc="the config's memory_snapshot (off)")
HINT_PORT = _declare("LIGHTX2V_TENSORBOARD_PORT", None, parse_port,
                     "the port the profiler prints in its viewing hints: where your browser reaches TensorBoard "
                     "(e.g. the host port a container publishes); not where it listens", (PROFILER, SERVE),
                     default_doc="the config's tensorboard_port, 16006; serve sets its --port")

# The stack.
TENSORBOARD_PORT = _declare("TENSORBOARD_PORT", DEFAULT_TENSORBOARD_PORT, parse_port,
                            "the port TensorBoard listens on", (SERVE, TENSORBOARD))
TRACE_BROWSER_PORT = _declare("TRACE_BROWSER_PORT", DEFAULT_TRACE_BROWSER_PORT, parse_port,
                              "the trace browser's port (9001 is the one Perfetto's open-by-URL mode accepts)",
                              (SERVE, TRACE_BROWSER, TENSORBOARD))
BIND_HOST = _declare("LIGHTX2V_BIND_HOST", LOOPBACK, parse_host,
                     "the address TensorBoard and the trace browser listen on (the Docker image sets 0.0.0.0)",
                     (SERVE, TENSORBOARD, TRACE_BROWSER))
RESULTS_DIR = _declare("LIGHTX2V_RESULTS_DIR", "save_results", parse_path,
                       "the folder the trace browser lists (captures, chrome traces, the demo's outputs)",
                       (SERVE, TRACE_BROWSER, CAPTURE, TENSORBOARD))
TRACE_BROWSER_URL = _declare("LIGHTX2V_TRACE_BROWSER_URL", None, parse_url,
                             "the trace browser's URL as users open it (printed in hints and TensorBoard's notices)",
                             (TRACE_BROWSER, TENSORBOARD), default_doc="http://127.0.0.1:<its port>/")
ALLOWED_HOSTS = _declare("LIGHTX2V_ALLOWED_HOSTS", (), parse_names,
                         "more Host names TensorBoard and the trace browser answer to (comma-separated; `*`: any)",
                         (TENSORBOARD, TRACE_BROWSER), default_doc="none")
PERFETTO_UI = _declare("LIGHTX2V_PERFETTO_UI", "https://ui.perfetto.dev", parse_url,
                       "the Perfetto UI the trace browser's links open", (TRACE_BROWSER,))
TB_SKIP_FIXES = _declare("LIGHTX2V_TB_SKIP_FIXES", (), names_among(_tensorboard_fix_names),
                         "TensorBoard plugin fixes to leave out, by name, comma-separated, or `all`", (TENSORBOARD,),
                         default_doc="none")
TB_TRACE_VIEW_MAX_MB = _declare("LIGHTX2V_TB_TRACE_VIEW_MAX_MB", 256, parse_megabytes,
                                "TensorBoard's Trace view opens traces up to this many MB of JSON; past it, a notice "
                                "links the trace browser's Timeline (a browser cannot take much more)", (TENSORBOARD,))
ASSETS_DIR = _declare("LIGHTX2V_ASSETS_DIR", None, parse_path,
                      "where the offline views' browser files are installed and looked up",
                      (ASSETS, SERVE, TRACE_BROWSER, TENSORBOARD), default_doc="<sys.prefix>/share/lightx2v/assets")
# Read by lightx2v.assets itself (it stands alone in the image's assets stage), so no program here checks it.
NPM_REGISTRY = _declare("LIGHTX2V_NPM_REGISTRY", None, parse_text,
                        "an npm registry (a mirror) `python -m lightx2v.assets install` fetches from; also a build "
                        "argument of the image", default_doc="npm's own setting")
SUPERVISOR_CONF = _declare("LIGHTX2V_SUPERVISOR_CONF", None, parse_path,
                           "the supervisord config `python -m lightx2v.serve` runs", (SERVE,),
                           default_doc="docker/supervisord.conf")
INFER_CMD = _declare("LIGHTX2V_INFER_CMD", None, parse_text,
                     "your own inference command (run by sh) instead of the embedded demo", (SERVE,),
                     default_doc="the embedded demo")

# Passed between our own programs: supervisord.conf, docker/*.sh, serve and the Dockerfile set and read these.
SUPERVISOR_RUN_DIR = _declare("LIGHTX2V_SUPERVISOR_RUN_DIR", None, parse_path,
                              "supervisord's socket and pid folder (serve: a new temporary one)", scope=INTERNAL)
STACK_PYTHON = _declare("LIGHTX2V_STACK_PYTHON", None, parse_path, "the viewers' interpreter", scope=INTERNAL)
PYTHON = _declare("LIGHTX2V_PYTHON", "python3", parse_path, "the embedded demo's interpreter", scope=INTERNAL)
DEMO_PYTHONPATH = _declare("LIGHTX2V_DEMO_PYTHONPATH", None, parse_text,
                           "prepended to PYTHONPATH for the embedded demo only", scope=INTERNAL)
INFERENCE = _declare("LIGHTX2V_INFERENCE", True, parse_switch, "0: no inference at start (serve --no-inference)",
                     scope=INTERNAL)
TRACE_BROWSER_ON = _declare("LIGHTX2V_TRACE_BROWSER", True, parse_switch,
                            "0: no trace browser (serve --no-trace-browser)", scope=INTERNAL)
STACK_HOME = _declare("LIGHTX2V_STACK_HOME", "/opt/lightx2v-profiling", parse_path,
                      "where the image installs the stack's venv and sources", scope=INTERNAL)
CHECKOUT = _declare("LIGHTX2V_CHECKOUT", None, parse_path,
                    "the checkout the stack serves: the image's mount point (its entrypoint takes the owner; "
                    "/workspace/LightX2V there), serve --checkout's folder; the original-module notice names it",
                    scope=INTERNAL)
TORCH_PROFILE_TB_DIR = _declare("LIGHTX2V_TORCH_PROFILE_TB_DIR", None, parse_path,
                                "the logdir older LightX2V profiler modules read; the image sets it", scope=INTERNAL)

# compose.yaml's own shell variables (docs/docker.md): read by Docker Compose, not by a program of ours.
PATH = _declare("LIGHTX2V_PATH", ".", parse_path, "your checkout, mounted at /workspace/LightX2V", scope=COMPOSE)
BASE_IMAGE = _declare("BASE_IMAGE", None, parse_text, "the image the stack is added onto", scope=COMPOSE)
REQUIRE_ASSETS = _declare("LIGHTX2V_REQUIRE_ASSETS", False, parse_switch,
                          "a build argument: 1 fails the image build when the offline Timeline's polyfill cannot be "
                          "fetched (default: build anyway, with one warning)", scope=COMPOSE)
TB_PORT = _declare("TB_PORT", DEFAULT_TENSORBOARD_PORT, parse_port,
                   "the host port compose publishes TensorBoard on (it becomes LIGHTX2V_TENSORBOARD_PORT inside)",
                   scope=COMPOSE)


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


def is_set(name: str, environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether ``name`` holds a value (not unset or empty): for callers that treat "given" apart from the default."""
    assert name in SETTINGS, name
    return bool((os.environ if environ is None else environ).get(name, "").strip())


def read_by(program: str) -> list[Setting]:
    """The settings ``program`` reads, with those of the programs it starts (registry order)."""
    programs = {program, *STARTED_BY.get(program, ())}
    return [s for s in SETTINGS.values() if programs.intersection(s.read_by)]


def check(program: str, environ: Optional[Mapping[str, str]] = None) -> None:
    """Parse every variable ``program`` (and what it starts) reads; SettingError for the first bad one."""
    for setting in read_by(program):
        get(setting.name, environ)


def exit_on_bad_values(program: str, environ: Optional[Mapping[str, str]] = None, label: Optional[str] = None) -> None:
    """``check``, with a bad value printed as one line on stderr (``label: NAME='value': ...``, label defaulting to
    the program's name) and exit status 2 (a usage error)."""
    try:
        check(program, environ)
    except SettingError as exc:
        usage_error(label or program, str(exc))


def usage_error(program: str, message: str) -> NoReturn:
    print(f"{program}: {message}", file=sys.stderr)
    raise SystemExit(2)


def help_text(program: str) -> str:
    """The environment part of a program's --help: each user setting it reads, its default and what it does."""
    own = [s for s in SETTINGS.values() if program in s.read_by and s.scope == USER]
    lines = ["environment (each flag's default comes from its variable; docs/settings.md):"]
    width = max(len(s.name) for s in own) if own else 0
    for s in own:
        lines.append(f"  {s.name:<{width}}  {s.doc} (default: {s.shown_default})")
    return "\n".join(lines)
