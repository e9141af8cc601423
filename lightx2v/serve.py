"""`python -m lightx2v.serve`: the container's supervisor stack (TensorBoard, one inference run, the trace
browser) on this machine, in the foreground, without Docker.

For a LightX2V checkout whose inference runs elsewhere (another shell, another container):
`python -m lightx2v.serve --checkout ~/LightX2V --no-inference` watches `~/LightX2V/save_results`. The viewers
import this project's `lightx2v` from its source tree, whatever the user's PYTHONPATH or working directory
brings (LightX2V's package has the same name); the inference command keeps the user's environment.

It runs supervisord with the project's `docker/supervisord.conf` (needs a source checkout or an editable
install, and the serving extra: `pip install -e '.[serve]'`), sets the environment that file reads, prints
the URLs, and stops the whole stack on Ctrl-C or SIGTERM. It listens on 127.0.0.1 only unless told otherwise
(`--bind-all`, `--host ADDR`, or $LIGHTX2V_BIND_HOST, which the Docker image sets to 0.0.0.0): TensorBoard and
the trace browser have no login. From a laptop, use the printed `ssh -L` line.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lightx2v import hostcheck, settings
from lightx2v.ports import bind_problem
from lightx2v.program import program
from lightx2v.relay import Relay
from lightx2v.utils.torch_trace_profiler import resolve_log_dir

SOURCE_ROOT = Path(__file__).resolve().parent.parent
ALL_INTERFACES = "0.0.0.0"
# The laptop's ends of the printed `ssh -L` line: the URLs the docs give, and the one origin Perfetto's "Open by
# URL" fetches from (http://127.0.0.1:9001), whatever ports the servers use here
LAPTOP_TENSORBOARD_PORT, LAPTOP_BROWSER_PORT = 16006, 9001
# supervisord's control socket lives in the run folder; a Unix socket's path has room for 107 bytes on Linux,
# 103 on macOS, and supervisord cannot start with a longer one (a deep $TMPDIR: CI runners, pytest's folders)
SOCKET_PATH_MAX = 100
LEFTOVER_STOP_S = 3.0  # how long a process the stack left behind gets after SIGTERM, before SIGKILL


def find_conf(environ=os.environ) -> Path:
    """docker/supervisord.conf of this checkout (or $LIGHTX2V_SUPERVISOR_CONF); SystemExit if missing."""
    conf = Path(settings.get(settings.SUPERVISOR_CONF, environ) or SOURCE_ROOT / "docker" / "supervisord.conf")
    if not conf.is_file():
        raise SystemExit(
            f"serve: {conf} not found. `python -m lightx2v.serve` runs the supervisor config shipped in the "
            "source tree: run it from a clone of the project (or after `pip install -e .`), or point "
            "LIGHTX2V_SUPERVISOR_CONF at a copy of docker/supervisord.conf.")
    return conf


def listen_host(args: argparse.Namespace, environ=os.environ) -> str:
    """Where the viewers listen: what the user said (--bind-all, --host, $LIGHTX2V_BIND_HOST), else loopback.

    Never guessed from the machine (a `/.dockerenv` is also found in dev containers, some VMs and containers on
    the host network, where all interfaces would expose the viewers, which have no login): the Docker image says
    so itself, by setting LIGHTX2V_BIND_HOST=0.0.0.0."""
    if args.bind_all:
        return ALL_INTERFACES
    return args.host or settings.get(settings.BIND_HOST, environ)


def answers(port: int, host: str = "127.0.0.1") -> bool:
    if host in (ALL_INTERFACES, "::"):
        host = "127.0.0.1"
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def parse_args(argv=None) -> argparse.Namespace:
    settings.exit_on_bad_values(settings.SERVE)  # its own variables and those of the programs it starts
    p = argparse.ArgumentParser(prog=program("lightx2v.serve"), description=__doc__,
                                epilog=settings.help_text(settings.SERVE),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=settings.get(settings.TENSORBOARD_PORT),
                   help="TensorBoard port (default $TENSORBOARD_PORT, else 16006)")
    p.add_argument("--browser-port", type=int, default=settings.get(settings.TRACE_BROWSER_PORT),
                   help="trace browser (Perfetto page) port (default $TRACE_BROWSER_PORT, else 9001)")
    p.add_argument("--checkout", type=Path, default=None,
                   help="a LightX2V checkout: serve its save_results (logdir save_results/torch_profile)")
    p.add_argument("--logdir", default=None,
                   help="TensorBoard logdir, where captures land (default <results-dir>/torch_profile with "
                        "--checkout or --results-dir, else $LIGHTX2V_TORCH_PROFILE_DIR or save_results/torch_profile)")
    p.add_argument("--results-dir", default=None,
                   help="folder the trace browser lists (default <checkout>/save_results, else "
                        "$LIGHTX2V_RESULTS_DIR or save_results)")
    bind = p.add_mutually_exclusive_group()
    bind.add_argument("--bind-all", action="store_true", help="listen on all interfaces (0.0.0.0)")
    bind.add_argument("--host", default=None,
                      help="listen address (default $LIGHTX2V_BIND_HOST, else 127.0.0.1: loopback only)")
    p.add_argument("--no-inference", action="store_true", help="do not run the default inference at start")
    p.add_argument("--infer-cmd", default=None, help="your own inference command instead of the default "
                   "(default $LIGHTX2V_INFER_CMD, else the embedded tiny Qwen-Image run)")
    p.add_argument("--no-trace-browser", action="store_true", help="do not start the Perfetto page")
    p.add_argument(hostcheck.FLAG, dest="allowed_host", action="append", default=[], metavar="NAME",
                   help="one more Host name both servers answer to (repeatable; also $LIGHTX2V_ALLOWED_HOSTS): a "
                        "LAN name under --bind-all, the Host a reverse proxy forwards; '*' turns the check off")
    p.add_argument("--no-assets-install", action="store_true",
                   help="do not install the offline Timeline's polyfill when it is missing (see lightx2v.assets)")
    args = p.parse_args(argv)
    if args.checkout is not None:
        args.checkout = args.checkout.expanduser()
        if not args.checkout.is_dir():
            p.error(f"--checkout {args.checkout}: no such folder")
        if args.results_dir is None:
            args.results_dir = str(args.checkout / "save_results")
    if args.logdir is None:
        args.logdir = (os.path.join(args.results_dir, "torch_profile") if args.results_dir is not None
                       else resolve_log_dir())
    if args.results_dir is None:
        args.results_dir = settings.get(settings.RESULTS_DIR)
    for name in ("port", "browser_port"):
        if not 1 <= getattr(args, name) <= 65535:
            p.error(f"--{name.replace('_', '-')} must be 1-65535, got {getattr(args, name)}")
    for name in args.allowed_host:
        try:
            hostcheck.normalize(name)
        except ValueError as exc:
            p.error(f"{hostcheck.FLAG}: {exc}")
    return args


def write_stack_python(run_dir: str) -> str:
    """An interpreter command for the viewers that imports this source tree's `lightx2v` first, whatever the
    working directory (`python -m` puts it first on sys.path) or the user's PYTHONPATH holds."""
    path = os.path.join(run_dir, "stack-python")
    root, python = shlex.quote(str(SOURCE_ROOT)), shlex.quote(sys.executable)
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\ncd {root} && PYTHONPATH={root} exec {python} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def stack_env(args: argparse.Namespace, run_dir: str, environ=os.environ) -> dict[str, str]:
    """The environment docker/supervisord.conf and its programs read. PYTHONPATH stays the user's: only the
    viewers (through `stack-python`) and the embedded demo get this source tree on theirs."""
    env = dict(environ)
    host = listen_host(args, environ)
    env.update({
        "LIGHTX2V_SUPERVISOR_RUN_DIR": run_dir,
        "LIGHTX2V_STACK_PYTHON": write_stack_python(run_dir),
        "LIGHTX2V_PYTHON": sys.executable,
        "LIGHTX2V_DEMO_PYTHONPATH": str(SOURCE_ROOT),
        "LIGHTX2V_BIND_HOST": host,
        "TENSORBOARD_PORT": str(args.port),
        "TRACE_BROWSER_PORT": str(args.browser_port),
        "LIGHTX2V_TORCH_PROFILE_DIR": os.path.abspath(args.logdir),
        "LIGHTX2V_RESULTS_DIR": os.path.abspath(args.results_dir),
        "PYTHONUNBUFFERED": "1",
    })
    env.setdefault("LIGHTX2V_TENSORBOARD_PORT", str(args.port))  # the port the profiler's hints print
    if args.checkout is not None:  # the profiler notice's fix names it (lightx2v.profiler_notice.ENV_CHECKOUT)
        env["LIGHTX2V_CHECKOUT"] = os.path.abspath(args.checkout)
    if args.infer_cmd:
        env["LIGHTX2V_INFER_CMD"] = args.infer_cmd
    if args.no_inference:
        env["LIGHTX2V_INFERENCE"] = "0"
    if args.no_trace_browser:
        env["LIGHTX2V_TRACE_BROWSER"] = "0"
    if args.allowed_host:  # both servers read it; the user's own names stay
        env[settings.ALLOWED_HOSTS] = ",".join([*settings.get(settings.ALLOWED_HOSTS, environ), *args.allowed_host])
    return env


def make_run_dir() -> str:
    """A private folder for supervisord's socket and pid file: in $TMPDIR, or in /tmp when $TMPDIR is so deep
    that the socket's path would not fit."""
    run_dir = tempfile.mkdtemp(prefix="lightx2v-serve-")
    if len(os.fsencode(os.path.join(run_dir, "supervisor.sock"))) > SOCKET_PATH_MAX and os.path.isdir("/tmp"):
        os.rmdir(run_dir)
        run_dir = tempfile.mkdtemp(prefix="lightx2v-serve-", dir="/tmp")
    return run_dir


def _die_with_parent() -> None:
    """In the supervisord child: get SIGTERM if `serve` itself is killed (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv=None) -> int:
    args = parse_args(argv)
    conf = find_conf()
    try:
        import supervisor  # noqa: F401
    except ImportError:
        print("serve: supervisor is not installed; install the serving extra: pip install -e '.[serve]'",
              file=sys.stderr)
        return 2
    run_dir = make_run_dir()
    env = stack_env(args, run_dir)
    host = env["LIGHTX2V_BIND_HOST"]
    host_source = ("--bind-all" if args.bind_all else "--host" if args.host else
                   f"${settings.BIND_HOST}" if settings.is_set(settings.BIND_HOST) else "the default")
    ports = [("TensorBoard", args.port, "--port")]
    if not args.no_trace_browser:
        ports.append(("trace browser", args.browser_port, "--browser-port"))
    for what, port, flag in ports:
        problem = bind_problem(host, port, what, flag, host_source)
        if problem:
            shutil.rmtree(run_dir, ignore_errors=True)
            print(f"serve: {problem}", file=sys.stderr)
            return 2
    os.makedirs(env["LIGHTX2V_TORCH_PROFILE_DIR"], exist_ok=True)
    timeline_ready = args.no_trace_browser or ensure_offline_assets(install=not args.no_assets_install)

    print(f"serve: starting supervisord with {conf}", flush=True)
    relay = Relay()
    supervisord = subprocess.Popen([sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(conf)],
                                   env=env, stdin=subprocess.DEVNULL, stdout=relay.child_stdout,
                                   stderr=relay.child_stderr, start_new_session=True, preexec_fn=_die_with_parent)
    relay.started()
    stopping = False

    def stop(signum, _frame):
        nonlocal stopping
        if not stopping:
            stopping = True
            relay.say(f"serve: {signal.Signals(signum).name} received; stopping the stack ...")
        if supervisord.poll() is None:
            supervisord.send_signal(signal.SIGTERM)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)

    relay.say(_banner(args, env, conf, timeline_ready))
    announced, started = False, time.monotonic()
    try:
        while supervisord.poll() is None:
            if not announced and not stopping and answers(args.port, host):
                announced = True
                relay.say(f"serve: TensorBoard answers after {time.monotonic() - started:.1f} s: "
                          f"http://127.0.0.1:{args.port}/#pytorch_profiler")
            time.sleep(0.2)
    finally:
        if supervisord.poll() is None:
            supervisord.send_signal(signal.SIGTERM)
        code = supervisord.wait()
        left = stop_leftovers(supervisord.pid)
        if left:
            relay.say(f"serve: stopped {len(left)} process(es) the stack left behind: {', '.join(left)}", error=True)
        relay.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    return code if code >= 0 else 1


def _session_members(session: int) -> dict[int, str]:
    """{pid: command name} of the live processes in `session` (Linux /proc; empty elsewhere)."""
    members: dict[int, str] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == session:  # after the name: state, ppid, pgrp, session
            members[int(entry)] = name
    return members


def stop_leftovers(session: int, grace: float = LEFTOVER_STOP_S) -> list[str]:
    """Stop what is still running in supervisord's session after supervisord has ended: a program it could not
    stop (it died first, say), or a helper a program started and left. SIGTERM, then SIGKILL after `grace`.
    The names of what was found, so the user learns of it."""
    left = _session_members(session)
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid in _session_members(session) for pid in left):
        time.sleep(0.05)
    for pid in _session_members(session):
        _signal(pid, signal.SIGKILL)
    return [f"{name} (pid {pid})" for pid, name in sorted(left.items())]


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:  # gone meanwhile
        pass


def ensure_offline_assets(install: bool = True, timeout: float = 90) -> bool:
    """Whether the offline Timeline's files are installed, installing them first when missing (the views are on
    by default). A failed install (no registry reachable) is one warning; the stack starts anyway."""
    from lightx2v.assets import ASSETS, INSTALL_COMMAND, assets_dir, find

    if all(find(asset) for asset in ASSETS):
        return True
    if not install:
        return False
    from lightx2v.assets.install import InstallError
    from lightx2v.assets.install import install as install_assets

    print(f"serve: installing the offline views' browser files into {assets_dir()} ({INSTALL_COMMAND}) ...",
          flush=True)
    try:
        install_assets(ASSETS, assets_dir(), timeout=timeout, log=lambda line: print(f"serve: {line}", flush=True))
        return True
    except (InstallError, OSError) as exc:
        print(f"serve: warning: the offline Timeline stays off: {exc}. The Overview works; add the Timeline later "
              f"with `{INSTALL_COMMAND}`.", file=sys.stderr, flush=True)
        return False


def _banner(args, env, conf, timeline_ready: bool = True) -> str:
    tb, browser = args.port, args.browser_port
    lines = [
        f"  TensorBoard     http://127.0.0.1:{tb}/#pytorch_profiler   (logdir {env['LIGHTX2V_TORCH_PROFILE_DIR']})",
    ]
    if not args.no_trace_browser:
        lines.append(f"  Trace browser   http://127.0.0.1:{browser}/   (lists {env['LIGHTX2V_RESULTS_DIR']})")
        lines.append("  Offline views   " + ("Timeline + Overview of every trace on that page, no internet needed in "
                                          "the browser" if timeline_ready else
                                          "Overview only; Timeline: python -m lightx2v.assets install"))
    forward = f"-L {LAPTOP_TENSORBOARD_PORT}:127.0.0.1:{tb}" + (
        "" if args.no_trace_browser else f" -L {LAPTOP_BROWSER_PORT}:127.0.0.1:{browser}")
    laptop = f"http://127.0.0.1:{LAPTOP_TENSORBOARD_PORT}/#pytorch_profiler" + (
        "" if args.no_trace_browser else f" and http://127.0.0.1:{LAPTOP_BROWSER_PORT}/")
    lines += [
        f"  Listening on    {env['LIGHTX2V_BIND_HOST']}"
        + ("   (loopback only; --bind-all to expose)" if env["LIGHTX2V_BIND_HOST"] == "127.0.0.1" else ""),
        f"  From a laptop   ssh -N {forward} user@this-host",
        f"                  then open {laptop} on the laptop",
        f"  Status          supervisorctl -s unix://{env['LIGHTX2V_SUPERVISOR_RUN_DIR']}/supervisor.sock status",
        "  Stop            Ctrl-C",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
