"""`python -m lightx2v.tensorboard [TensorBoard flags]`: TensorBoard with the fixed PyTorch Profiler plugin.

Every TensorBoard flag passes through (`--logdir`, `--port`, `--bind_all` / `--host`, ...). Our defaults, used
where you give no such flag (TensorBoard's own help, printed below this, shows its stock defaults instead):
  --logdir  $LIGHTX2V_TORCH_PROFILE_DIR, else save_results/torch_profile under the working directory
            (created when missing, so TensorBoard can start before the first capture)
  --port    $TENSORBOARD_PORT, else 16006
  --host    $LIGHTX2V_BIND_HOST when set and neither --host nor --bind_all is given (else TensorBoard's:
            localhost, loopback only)
Set LIGHTX2V_TB_SKIP_FIXES=name,... (or `all`) to start with some or all plugin fixes left out.
Every request passes a Host check (DNS rebinding): add names with --allowed-host NAME (repeatable) or
LIGHTX2V_ALLOWED_HOSTS=name,... (see lightx2v/hostcheck.py).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from lightx2v import hostcheck, ports, settings
from lightx2v.program import whole_lines
from lightx2v.utils.torch_trace_profiler import DEFAULT_TB_DIR, ENV_DIR

PROG = "lightx2v.tensorboard"
DEFAULT_PORT = settings.DEFAULT_TENSORBOARD_PORT
HELP_FLAGS = ("--help", "-h", "--helpfull")


def _has_flag(argv: Sequence[str], *names: str) -> bool:
    return any(arg == name or arg.startswith(name + "=") for arg in argv for name in names)


def with_defaults(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """TensorBoard's argv with our defaults added where the user gave none (SettingError for a bad variable)."""
    args = list(argv)
    if not _has_flag(args, "--logdir", "--logdir_spec", "--db", "--inspect"):
        logdir = settings.get(ENV_DIR, environ) or DEFAULT_TB_DIR
        args += ["--logdir", os.path.abspath(logdir)]  # where captures land
    if not _has_flag(args, "--port"):
        args += ["--port", str(settings.get(settings.TENSORBOARD_PORT, environ))]
    if not _has_flag(args, "--host", "--bind_all") and settings.is_set(settings.BIND_HOST, environ):
        args += ["--host", settings.get(settings.BIND_HOST, environ)]
    return args


def _value_of(args: Sequence[str], flag: str) -> str | None:
    """The last value given to ``flag`` (``--flag V`` or ``--flag=V``), as TensorBoard's parser takes it."""
    found = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def listen_problem(args: Sequence[str]) -> str | None:
    """Why TensorBoard could not listen where ``args`` ask, in one line, before it loads every run for seconds
    and then fails with a traceback per worker; None when it can (or the port is not a number: its own error)."""
    port = _value_of(args, "--port")
    if port is None or not port.isdigit():
        return None
    if _has_flag(args, "--bind_all"):
        host, source = "0.0.0.0", "--bind_all"
    else:
        host = _value_of(args, "--host") or "localhost"
        source = "--host" if _has_flag(args, "--host") else "TensorBoard's default"
    return ports.bind_problem(host, int(port), "TensorBoard", "--port", source, all_flag="--bind_all")


CSP_NOTE = ("lightx2v.tensorboard: the PyTorch profiler plugin serves its pages without a Content-Security-Policy "
            "header (torch-tb-profiler 0.4.3, the last release); TensorBoard 2.x warns about that on every page (\"In "
            "3.0, this warning will become an error\") and serves them all the same. Said once; nothing to do.")


class CspWarningOnce(logging.Filter):
    """TensorBoard's security validator warns on each plugin page it serves (no CSP header: the plugin's, which
    no one maintains). One line saying what it is replaces them all."""

    def __init__(self, say: Callable[[str], object]) -> None:
        super().__init__()
        self.say, self.said = say, False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("In 3.0, this warning will become an error") or "Content-Security-Policy" \
                not in message:
            return True
        if not self.said:
            self.said = True
            self.say(CSP_NOTE)
        return False


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("lightx2v.tensorboard")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    logging.getLogger("tensorboard").addFilter(CspWarningOnce(log.info))  # tensorboard.util.tb_logging's logger


def main(argv: Sequence[str] | None = None) -> int:
    whole_lines()
    settings.exit_on_bad_values(settings.TENSORBOARD, label=PROG)
    try:  # --allowed-host is ours: TensorBoard's own parser never sees it
        allowed, argv = hostcheck.take_flags(sys.argv[1:] if argv is None else argv)
        hosts = hostcheck.build(allowed)
    except ValueError as exc:  # settings.SettingError included
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    args = with_defaults(argv, os.environ)
    asking_only = _has_flag(args, *HELP_FLAGS, "--version_tb")
    if _has_flag(args, *HELP_FLAGS):
        print(f"{__doc__.strip()}\n\n{settings.help_text(settings.TENSORBOARD)}\n\n"
              f"Ours: {hostcheck.FLAG} NAME (repeatable): one more Host name to answer to.\n\n"
              "TensorBoard's own flags:\n", flush=True)
    logdir = _value_of(args, "--logdir")
    if logdir and not asking_only and "://" not in logdir:
        try:
            os.makedirs(logdir, exist_ok=True)
        except OSError as exc:
            print(f"lightx2v.tensorboard: cannot create logdir {logdir}: {exc.strerror}", file=sys.stderr)
            return 2

    _setup_logging()
    try:
        from tensorboard import main as tensorboard_main  # the real TensorBoard (absolute import)
    except ImportError as exc:
        print(f"lightx2v.tensorboard: TensorBoard is not installed ({exc}). "
              "Install the serving extra: pip install '.[serve]'", file=sys.stderr)
        return 2
    if not asking_only:
        problem = listen_problem(args)
        if problem:
            print(f"{PROG}: {problem}", file=sys.stderr)
            return 2
        from lightx2v.tensorboard.patches import apply_fixes, guard_hosts

        try:
            guard_hosts(hosts)
            results = apply_fixes()
        except (RuntimeError, settings.SettingError) as exc:
            print(f"lightx2v.tensorboard: {exc}", file=sys.stderr)
            return 2
        applied = [name for name, problem in results.items() if problem is None]
        logging.getLogger("lightx2v.tensorboard").info(
            "lightx2v.tensorboard: plugin fixes applied: %s; logdir %s", ", ".join(applied) or "none", logdir)
        if logdir and "://" not in logdir:  # says once if LightX2V's original profiler module wrote there
            from lightx2v.profiler_notice import watch_in_background

            watch_in_background(logdir, logging.getLogger("lightx2v.tensorboard").warning)

    sys.argv = ["tensorboard", *args]
    tensorboard_main.run_main()  # absl's app.run: exits the process itself
    return 0


if __name__ == "__main__":
    sys.exit(main())
