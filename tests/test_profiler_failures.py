"""Nothing is lost: target errors propagate untouched, export errors are reported, readers never see partial files."""

from __future__ import annotations

import ast
import dataclasses
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

from lightx2v.utils import torch_trace_profiler
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileConfig, TorchTraceProfileContext, TorchTraceProfiler

from conftest import REPO_ROOT, missing_tool, subprocess_env
from helpers.procs import wait_until
from helpers.traces import PLUGIN_TRACE_RE, event_names, load_trace, plugin_traces

pytestmark = pytest.mark.usefixtures("fresh_profiler_session")


class Boom(RuntimeError):
    pass


@pytest.fixture
def profilers_left_open(monkeypatch):
    """The torch.profiler.profile objects entered but not exited so far (the real ones, only watched).

    On torch 2.13 a profiler left in its wait or warmup phase holds no state that torch reports (collection starts
    with the active phase), so besides asking autograd whether a profiler is enabled, the tests check that every
    profiler the drop-in entered was also exited.
    """
    open_now: list = []
    enter, exit_ = torch.profiler.profile.__enter__, torch.profiler.profile.__exit__

    def watched_enter(self):
        open_now.append(self)
        return enter(self)

    def watched_exit(self, *exc):
        open_now.remove(self)
        return exit_(self, *exc)

    monkeypatch.setattr(torch.profiler.profile, "__enter__", watched_enter)
    monkeypatch.setattr(torch.profiler.profile, "__exit__", watched_exit)
    return open_now


@pytest.mark.parametrize("failing_call", [1, 3, 5])  # wait, warmup, active phase
@pytest.mark.slow
def test_target_exception_propagates_unchanged_and_releases_the_profiler(tmp_path, failing_call,
                                                                        profilers_left_open):
    raised = Boom("out of memory, say")
    calls = 0

    def target():
        nonlocal calls
        calls += 1
        if calls == failing_call:
            raise raised
        return torch.ones(3).sum()

    with pytest.raises(Boom) as info:
        with TorchTraceProfileContext("fails", tb_dir="tb") as profile:
            profile.run(target)
    assert info.value is raised and info.value.__traceback__ is not None
    assert calls == failing_call

    # Nothing visible, nothing half-written, no empty run left behind (the remote-arming status folder aside:
    # the first capture of this pytest process starts the watcher that writes it).
    assert [p for p in (tmp_path / "tb").rglob("*") if ".capture" not in p.parts] == []
    capture = TorchTraceProfiler.last_capture()
    assert capture.trace_paths == [] and "raised" in capture.error

    # The profiler was stopped: autograd reports none enabled (a new torch.profiler.profile() would start even
    # over a leaked one on torch 2.13, so that proves nothing), and a fresh one records on this thread.
    assert not torch._C._autograd._profiler_enabled() and profilers_left_open == []
    with torch.profiler.profile() as prof:
        torch.ones(2) + 1
    assert prof.key_averages()

    # Documented policy: the failed capture ends the session (no 5x re-run on the next step) ...
    target_calls_before = calls
    TorchTraceProfileContext("fails").run(lambda: "plain")
    assert calls == target_calls_before
    # ... and reset_session() lets the next call capture again.
    TorchTraceProfiler.reset_session()
    calls = 100
    TorchTraceProfileContext("retry", tb_dir="tb").run(target)
    assert calls == 105 and len(plugin_traces(tmp_path / "tb")) == 1


@pytest.mark.parametrize("interrupted_call", [1, 5])  # wait phase, active phase (collecting)
def test_keyboard_interrupt_propagates_and_stops_profiler(interrupted_call, profilers_left_open):
    calls = 0

    def target():
        nonlocal calls
        calls += 1
        if calls == interrupted_call:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        TorchTraceProfileContext("ctrl-c").run(target)
    assert calls == interrupted_call
    assert not torch._C._autograd._profiler_enabled() and profilers_left_open == []


def test_unwritable_trace_directory_still_returns_the_result(tmp_path, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    calls = 0

    def target():
        nonlocal calls
        calls += 1
        return "the inference result"

    with caplog.at_level("ERROR", logger=torch_trace_profiler.__name__):
        result = TorchTraceProfileContext("ro", tb_dir=str(blocker / "tb")).run(target)
    assert result == "the inference result"
    assert calls == 1  # no pointless 5x capture when nothing can be written
    assert str(blocker / "tb") in caplog.text and "cannot create the trace directory" in caplog.text


@pytest.mark.slow
def test_read_only_directory_for_an_unprivileged_user():
    """A real permission failure: the child drops root and writes into a directory it may only read."""
    with tempfile.TemporaryDirectory() as parent:  # pytest's tmp_path sits in a 0700 tree
        os.chmod(parent, 0o755)
        _write_into_read_only_dir_as_nobody(Path(parent) / "ro")


def _write_into_read_only_dir_as_nobody(read_only: Path) -> None:
    read_only.mkdir()
    os.chmod(read_only, 0o555)
    script = textwrap.dedent(f"""
        import os, torch, torch.profiler  # imported as root: the interpreter may live under /root
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
        os.setgid(65534); os.setuid(65534)
        print(TorchTraceProfileContext("ro", tb_dir={str(read_only)!r}).run(lambda: "result kept"))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(), cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "result kept"
    assert "cannot create the trace directory" in proc.stderr and str(read_only) in proc.stderr
    assert list(read_only.iterdir()) == []


@pytest.mark.slow
def test_disk_full_during_export_is_reported_and_leaves_no_partial_file(tmp_path):
    """RLIMIT_FSIZE makes every write past 20 kB fail (EFBIG), as a full disk would, inside torch's exporter."""
    script = textwrap.dedent("""
        import resource, signal, torch
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
        def target(x):
            for _ in range(50):
                x = torch.relu(x @ x)
            return x.shape
        print(TorchTraceProfileContext("full disk", tb_dir="tb", with_stack=True).run(target, torch.ones(8, 8)))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "torch.Size([8, 8])"
    assert "could not write" in proc.stderr and str(tmp_path / "tb") in proc.stderr
    leftovers = [p for p in (tmp_path / "tb").rglob("*") if p.is_file() and ".capture" not in p.parts]
    assert leftovers == []  # beside the process's remote-arming status file (tb/.capture/), nothing


# A logdir that cannot take a file, five real ways, as root (tests run as root, where a chmod stops nothing): a file
# where a folder should be (ENOTDIR), a file size limit (EFBIG, as a full disk: RLIMIT_FSIZE), and, in a mount
# namespace of its own (`unshare -m`, root), a tmpfs that is full (ENOSPC), fills up during the export, or is
# mounted read-only (EROFS).
FAULTS = {
    "a file in the way": "touch {root}/tb",
    "files limited to 100 bytes": "",
    "a full disk": "mount -t tmpfs -o size=64k tmpfs {root} && (head -c 1000000 /dev/zero > {root}/fill || true)",
    "a disk that fills during the export": "mount -t tmpfs -o size=1m tmpfs {root} && "
                                           "head -c $((1048576 - 24576)) /dev/zero > {root}/fill",
    "a read-only disk": "mount -t tmpfs -o ro tmpfs {root}",
}
NEEDS_A_MOUNT = ("a full disk", "a disk that fills during the export", "a read-only disk")


def mount_namespaces_work() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.slow
@pytest.mark.parametrize("fault,calls", [  # calls: matmuls in the target; 0 is a trace small enough for one write
    ("a file in the way", 0), ("files limited to 100 bytes", 0), ("files limited to 100 bytes", 50),
    ("a full disk", 0), ("a full disk", 50), ("a disk that fills during the export", 50), ("a read-only disk", 0)])
def test_a_logdir_that_cannot_take_a_file_is_one_line_and_the_result(tmp_path, fault, calls):
    """One fault, one line: the capture says its logdir cannot take the trace; the remote-arming watcher, which
    cannot write its status there either, says nothing more. The caller gets the result; no trace is visible, not
    even an empty one (torch's exporter does not notice when the one write of a small trace fails at close: the
    drop-in does, by the file's end)."""
    if fault in NEEDS_A_MOUNT and not mount_namespaces_work():
        missing_tool("needs a mount namespace (`unshare -m`, root) for a real full or read-only filesystem")
    root = tmp_path / "disk"
    root.mkdir()
    script = textwrap.dedent(f"""
        import resource, signal, torch
        if {fault == "files limited to 100 bytes"}:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
        def target(x):
            for _ in range({calls}):
                x = torch.relu(x @ x)
            return x.shape
        print(TorchTraceProfileContext("faulty", tb_dir={str(root / "tb")!r}, with_stack={calls > 0}).run(
            target, torch.ones(8, 8)))
        import os  # what is left in the logdir, seen from inside the mount namespace (its tmpfs goes with it)
        print(sorted(os.path.join(d, f) for d, _, files in os.walk({str(root / "tb")!r}) for f in files
                     if ".capture" not in d))  # the process's status file is the only one that should be there
    """)
    prepare = FAULTS[fault].format(root=root)
    command = [sys.executable, "-c", script]
    if prepare:
        command = ["unshare", "-m", "sh", "-c", f'{prepare} && exec "$@"', "sh", *command] if fault in NEEDS_A_MOUNT \
            else ["sh", "-c", f'{prepare} && exec "$@"', "sh", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, env=subprocess_env(
        LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_TORCH_PROFILE_REMOTE=""), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["torch.Size([8, 8])", "[]"]  # the result; no file left in the logdir
    said = [line for line in proc.stderr.splitlines() if line.startswith("[Profile]") and " capturing " not in line]
    assert len(said) == 1, proc.stderr
    assert str(root / "tb") in said[0] and ("cannot create the trace directory" in said[0]
                                            or "could not write" in said[0]), said


@pytest.mark.slow
@pytest.mark.parametrize("use_gzip", [False, True])
def test_sigterm_during_the_export_finishes_the_trace_then_ends_the_process(tmp_path, use_gzip):
    """A real SIGTERM sent while a large trace is being exported (its hidden temporary file is on disk: kineto's
    ``.….tmp.tmp``, or ours): the process still ends by SIGTERM, and the run folder holds the whole trace and
    nothing hidden. Before, it died where it stood: a hidden temporary file in an otherwise empty run folder, forever.

    The trace is large (80,000 ops with their Python stacks: about 100 MB), so its export takes a while; when the
    signal comes makes no difference to what must be left, only to which part of the export it interrupts."""
    script = textwrap.dedent(f"""
        import torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler
        TorchTraceProfiler.set_summary_handler(None)
        def target(x):
            for _ in range(80_000):
                x = x + 1
            return x.sum()
        TorchTraceProfileContext("term", tb_dir="tb", wait=0, warmup=0, active=1, with_stack=True,
                                 use_gzip={use_gzip}).run(target, torch.ones(2))
        print("the capture returned", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=subprocess_env(LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_TORCH_PROFILE_REMOTE="0"),
                            cwd=tmp_path)
    def exporting_or_ended() -> bool:
        return proc.poll() is not None or any(p.name.endswith((".tmp", ".plain"))
                                              for p in (tmp_path / "tb").glob("*/.*"))

    try:
        wait_until(exporting_or_ended, 120, interval=0.005, what="the export's hidden temporary file")
        assert proc.poll() is None, f"the child ended before its export was seen: {proc.communicate()[1][-3000:]}"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGTERM, err[-3000:]
    assert "the capture returned" not in out  # SIGTERM still ends the process, once the trace is whole
    (run,) = (tmp_path / "tb").iterdir()
    (trace,) = run.iterdir()  # the whole trace, and nothing hidden beside it
    assert trace.name.endswith(".pt.trace.json.gz" if use_gzip else ".pt.trace.json")
    assert "aten::add" in event_names(load_trace(trace))


def test_partial_trace_is_never_visible_to_a_polling_reader(tmp_path, monkeypatch):
    """A reader that looks at the logdir while our gzip is half-written must find no trace, or a whole one.

    torch's exporter already renames its own output, so the write that matters is ours: compressing to the final
    name (``use_gzip``). The copy into the gzip stream is done in small flushed pieces, and the reader scans the
    logdir after each piece, so the half-written state is looked at every time, not by chance.
    """
    seen: dict[str, bool] = {}
    scans = 0

    def scan():
        nonlocal scans
        scans += 1
        for path in (tmp_path / "tb").rglob("*"):
            if PLUGIN_TRACE_RE.match(path.name):
                try:
                    json.loads(gzip.decompress(path.read_bytes()))
                    seen.setdefault(str(path), True)
                except (OSError, EOFError, ValueError):
                    seen[str(path)] = False

    def copy_in_pieces(src, dst, length=0):
        while piece := src.read(16_384):
            dst.write(piece)
            dst.flush()  # the bytes so far reach the file, as a slow disk would leave them
            scan()

    monkeypatch.setattr(torch_trace_profiler.shutil, "copyfileobj", copy_in_pieces)

    def target(x):
        for _ in range(300):
            x = torch.tanh(x @ x)
        return x

    TorchTraceProfileContext("big", tb_dir="tb", with_stack=True, use_gzip=True).run(target, torch.ones(16, 16))
    scan()
    (path,) = TorchTraceProfiler.last_capture().trace_paths
    assert path.endswith(".pt.trace.json.gz") and scans > 10  # looked at the logdir mid-write, many times
    assert seen == {path: True}


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"profile_format": "perfetto"}, "profile_format"),
        ({"wait": -1}, "wait"),
        ({"warmup": -2}, "warmup"),
        ({"active": 0}, "active"),
        ({"wait": 1.5}, "wait"),
        ({"active": "1"}, "active"),
        ({"warmup": True}, "warmup"),
        ({"tensorboard_port": 0}, "tensorboard_port"),
        ({"tensorboard_port": 65536}, "tensorboard_port"),
        ({"tensorboard_port": "16006"}, "tensorboard_port"),
        ({"with_stack": "yes"}, "with_stack"),
        ({"use_gzip": 1}, "use_gzip"),
        ({"tb_dir": 42}, "tb_dir"),
        ({"chrome_path": ""}, "chrome_path"),
        ({"name": 3}, "name"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        TorchTraceProfileContext(**kwargs)


def test_bad_arguments_raise_even_after_the_session_is_done():
    TorchTraceProfileContext("first").run(lambda: None)
    assert TorchTraceProfiler.session_done()
    with pytest.raises(ValueError, match="active"):
        TorchTraceProfileContext("late", active=0)


@pytest.mark.parametrize("valid, equal_but_invalid", [
    ({"with_stack": True}, {"with_stack": 1}), ({"use_gzip": False}, {"use_gzip": 0}),
    ({"wait": 1}, {"wait": True}), ({"warmup": 2}, {"warmup": 2.0}),
    ({"tensorboard_port": 6006}, {"tensorboard_port": 6006.0}),
])
def test_the_config_cache_only_ever_serves_a_valid_config(valid, equal_but_invalid):
    """Contexts reuse a validated config per distinct settings. 1 == True == 1.0: a value of the wrong type is an
    error while nothing equal was validated, and gets the validated (exact-typed) config once something was."""
    (field,) = equal_but_invalid
    with pytest.raises(ValueError, match=field):  # nothing equal validated yet (a tb_dir no other test uses)
        TorchTraceProfileContext("first", tb_dir="only-here", **equal_but_invalid)
    config = TorchTraceProfileContext("cached", tb_dir="x", **valid).config
    assert TorchTraceProfileContext("again", tb_dir="x", **valid).config is config
    served = TorchTraceProfileContext("equal", tb_dir="x", **equal_but_invalid).config
    assert served is config and type(getattr(served, field)) is type(valid[field])


def test_every_keyword_reaches_its_own_config_field():
    """Each keyword, set alone to a value no other field takes, lands in the field of its name: the settings key
    and the config's fields are in one order, so two flags swapped in one of them would show here."""
    odd = {"profile_format": "chrome", "tb_dir": "tb-only-here", "chrome_path": "only-here.json", "wait": 7,
           "warmup": 6, "active": 5, "tensorboard_port": 17123}
    fields = [f.name for f in dataclasses.fields(TorchTraceProfileConfig) if f.init]
    assert set(odd) | {f for f in fields if type(getattr(TorchTraceProfileConfig(), f)) is bool} == set(fields)
    for field in fields:
        value = odd.get(field, not getattr(TorchTraceProfileConfig(), field))
        config = TorchTraceProfileContext("keywords", **{field: value}).config
        assert [f for f in fields if getattr(config, f) != getattr(TorchTraceProfileConfig(), f)] == [field]
        assert getattr(config, field) == value


@pytest.mark.slow
def test_hints_are_visible_in_a_plain_script(tmp_path):
    """No logging configuration at all: the done-message still reaches the terminal, with every hint."""
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent("""
        import torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
        with TorchTraceProfileContext("🚀 infer_main", tensorboard_port=17007) as profile:
            profile.run(torch.ones(4).sum)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    log = proc.stderr
    log_dir = tmp_path / "save_results" / "torch_profile"
    (trace,) = plugin_traces(log_dir)
    assert "🚀 infer_main" in log
    assert str(trace) in log
    assert f"tensorboard --logdir {log_dir} --port 17007" in log
    assert "http://127.0.0.1:17007/#pytorch_profiler" in log
    assert "ssh -N -L 17007:127.0.0.1:17007" in log


@pytest.mark.slow
def test_hint_port_follows_the_published_port_and_chrome_hint(tmp_path):
    script = textwrap.dedent("""
        import torch
        from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
        TorchTraceProfileContext("c", profile_format="chrome").run(torch.ones(4).sum)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(LIGHTX2V_TENSORBOARD_PORT="18008"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / "save_results" / "trace.json") in proc.stderr
    assert "https://ui.perfetto.dev" in proc.stderr and "chrome://tracing" in proc.stderr

    script = script.replace('"c", profile_format="chrome"', '"t"')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(LIGHTX2V_TENSORBOARD_PORT="18008"), cwd=tmp_path)
    assert "http://127.0.0.1:18008/#pytorch_profiler" in proc.stderr


def test_module_is_self_contained_and_imports_torch_lazily():
    source = (REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py").read_text()
    top_level = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            top_level |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            top_level.add(node.module.split(".")[0])
    # torch and the standard library only: nothing of this project, not even lazily (the summary hook is a
    # handler the host package names, see _summary_handler).
    assert top_level - set(sys.stdlib_module_names) == {"torch"}

    proc = subprocess.run(
        [sys.executable, "-c", "import sys, lightx2v.utils.torch_trace_profiler; print(sorted("
         "m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'lightx2v')))"],
        capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['lightx2v', 'lightx2v.utils', 'lightx2v.utils.torch_trace_profiler']"
