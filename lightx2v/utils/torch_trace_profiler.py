"""Kernel-level ``torch.profiler`` traces of one call site, once per process session.

Wrap the call you want to see::

    from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext

    with TorchTraceProfileContext("🚀 infer_main", tb_dir="save_results/torch_profile", with_stack=True) as profile:
        result = profile.run(self.model.infer, self.inputs)

The first ``run()`` of a process session calls the target ``wait + warmup + active`` times (1 + 3 + 1 by default)
under ``torch.profiler``, exports the trace and returns the last call's result. Every later ``run()`` -- a new
context at the next denoising step, another call site, a nested call, another thread -- is one plain call.
``TorchTraceProfiler.reset_session()`` arms the next capture; from outside a running process,
``python -m lightx2v.capture arm`` or the trace browser's button does (see "remote arming" at the end of this file).

Where traces go (TensorBoard format): every capture session gets its own run directory, because TensorBoard's
PyTorch Profiler plugin loads a run directory once and never notices files added to it later::

    <tb_dir>/<YYYYmmdd-HHMMSS>_<label>/rank<R>_<host>.pt.trace.json[.gz]

All ranks of a torch.distributed job agree on one run directory through the job's c10d store (a single
non-blocking compare-and-set, no collective), so TensorBoard shows them as workers of one run. Files are written
under a hidden temporary name and renamed, so a reader never sees a partial trace. Chrome format writes
``chrome_path`` (``trace.rank<R>.json`` beside it when the job has several ranks).

Failure policy: profiling never costs the caller the target's result. An exception raised by the target
propagates unchanged after the profiler is stopped; nothing is exported and the session counts as done (the
target is not re-run five times on the next step; ``reset_session()`` retries). Profiler or export failures are
logged with the path and the result is returned.

Environment switches: ``LIGHTX2V_TORCH_PROFILE=0`` (or ``false``/``off``/``no``) makes every context a plain
call; ``LIGHTX2V_TORCH_PROFILE_DIR`` replaces ``tb_dir``; ``LIGHTX2V_TENSORBOARD_PORT`` replaces the port shown
in the viewing hints (e.g. the host port a container publishes); ``LIGHTX2V_TORCH_PROFILE_REMOTE=0`` keeps the
process from being armed from outside; ``LIGHTX2V_TORCH_PROFILE_MEMORY_SNAPSHOT=1`` (or ``0``) replaces
``memory_snapshot`` (see "the CUDA memory snapshot"). A value the drop-in does not take (a switch that is no on/off
word, a port that is not ASCII digits in 1..65535) keeps its default and is warned about once; no value raises into
``run()``. ``LIGHTX2V_TORCH_PROFILE_DIR`` is read as the viewers read it: spaces around ignored, blank is unset, a
leading ``~`` is the home folder (``env_path``).

Settings live in ``TorchTraceProfileConfig`` (defaults, a doc per field, the one check). The original LightX2V
module's other names keep working: ``TorchTraceProfiler(cfg)`` with ``try_claim(label)`` / ``run(step_fn)`` /
``ran``, ``make_on_trace_ready(cfg)``, ``log_profile_start(cfg, name)``, ``log_profile_done(cfg)`` and
``cfg.steps`` (see "the original module's names"). After each trace, a summary handler may add a few log lines
(``TorchTraceProfiler.set_summary_handler``; see ``_summary_handler`` for the default).

This file depends on torch and the standard library only (nothing of this project, not even lazily), imports
torch lazily, and can be copied over ``lightx2v/utils/torch_trace_profiler.py`` in an existing LightX2V checkout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import gzip
import json
import logging
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Optional, TypeVar, Union

__all__ = ["CaptureResult", "TorchTraceProfileConfig", "TorchTraceProfileContext", "TorchTraceProfiler",
           "log_profile_done", "log_profile_start", "make_on_trace_ready", "resolve_log_dir"]

T = TypeVar("T")

ENV_ENABLE = "LIGHTX2V_TORCH_PROFILE"
ENV_DIR = "LIGHTX2V_TORCH_PROFILE_DIR"
ENV_PORT = "LIGHTX2V_TENSORBOARD_PORT"
ENV_REMOTE = "LIGHTX2V_TORCH_PROFILE_REMOTE"  # see "remote arming"
ENV_MEMORY_SNAPSHOT = "LIGHTX2V_TORCH_PROFILE_MEMORY_SNAPSHOT"  # see "the CUDA memory snapshot"
PROFILE_FORMATS = ("tensorboard", "chrome")
# The file names TensorBoard's PyTorch Profiler plugin lists; anything else in a run directory is invisible.
TENSORBOARD_TRACE_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$")
DEFAULT_TB_DIR = os.path.join("save_results", "torch_profile")  # relative to the cwd when a capture starts
DEFAULT_CHROME_PATH = os.path.join("save_results", "trace.json")
# Written by `python -m lightx2v.trace_browser` into the folder it serves, while it runs: one file per server,
# `<folder>/.trace_browser/<host>_<pid>.json` = {"pid", "port", "url", "started"}, so several servers on one folder
# never remove each other's. TRACE_BROWSER_FILE is the single file older versions wrote; it is still read.
TRACE_BROWSER_DIR = ".trace_browser"
TRACE_BROWSER_FILE = ".trace_browser.json"

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- configuration
ON_WORDS = ("1", "true", "yes", "on")  # an on/off switch's words, any case, spaces around ignored
OFF_WORDS = ("0", "false", "no", "off")
_FLAGS_WARNED: set[tuple[str, str]] = set()  # (variable, value) pairs already warned about
_FLAGS_WARNED_LOCK = threading.Lock()


# The environment is read on the caller's path (each capture's start, its hints), so every reading below keeps its
# default on a value it does not take, says so once, and never raises: no value may cost the caller the result.
# The stack's registry (lightx2v.settings) reads the same variables through these rules, refusing what they refuse.


def _env_flag(name: str, default: bool = True) -> bool:
    """An on/off switch from the environment: a word of ``ON_WORDS`` is on, of ``OFF_WORDS`` off; unset or empty is
    ``default``. Any other word (a typo: ``flase``) keeps ``default`` and warns once per variable and value. The one
    parser of the drop-in's switches (``ENV_ENABLE``, ``ENV_REMOTE``, ``ENV_MEMORY_SNAPSHOT``)."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in ON_WORDS:
        return True
    if value in OFF_WORDS:
        return False
    _warn_env_once(name, raw, f"an on/off word ({'/'.join(ON_WORDS)} or {'/'.join(OFF_WORDS)}, any case)",
                   "on" if default else "off")
    return default


def _warn_env_once(name: str, raw: str, expected: str, default: str) -> None:
    """Say once per variable and value that ``raw`` is not ``expected`` and ``default`` is kept."""
    with _FLAGS_WARNED_LOCK:
        first = (name, raw) not in _FLAGS_WARNED
        _FLAGS_WARNED.add((name, raw))
    if first:
        _log(logging.WARNING, f"[Profile] {name}={raw!r} is not {expected}; keeping the default: {default}")


WHOLE_NUMBER_DIGITS = 18  # longer digit strings are no port, rank or size (and int() refuses past 4300 digits)


def whole_number(text: Optional[str]) -> Optional[int]:
    """``text`` as a whole number when it is ASCII digits (spaces around ignored), else None.

    The one reading of a number someone else wrote (the environment, a plan in the job's store), here and in the
    stack's settings: ``str.isdigit()`` also takes ``¹`` (which int() refuses) and ``٣`` (which int() reads as 3),
    and int() takes ``+7`` and ``7_000``."""
    value = (text or "").strip()
    if value.isascii() and value.isdigit() and len(value) <= WHOLE_NUMBER_DIGITS:
        return int(value)
    return None


def env_path(text: Optional[str]) -> Optional[str]:
    """A folder from the environment: spaces around ignored, a leading ``~`` expanded; None when blank (unset).

    The one reading of ``ENV_DIR``, here and in the stack's settings (every viewer watches what this returns)."""
    value = (text or "").strip()
    return os.path.expanduser(value) if value else None


@dataclasses.dataclass(frozen=True)
class TorchTraceProfileConfig:
    """Validated settings of one call site; paths are resolved when a capture starts (cwd at that time).

    The one place that holds the defaults and the checks: ``TorchTraceProfileContext(**settings)`` builds one by
    keyword (and caches it per distinct settings, so a context at every step stays cheap). A bad value raises a
    ``ValueError`` that names the field.
    """

    profile_format: str = "tensorboard"
    """``"tensorboard"`` (a run directory per capture, for TensorBoard's PyTorch Profiler plugin) or ``"chrome"``
    (one Chrome-trace JSON file for Perfetto / chrome://tracing)."""
    tb_dir: Optional[Union[str, os.PathLike]] = None
    """The TensorBoard logdir; None: ``save_results/torch_profile`` under the cwd. ``LIGHTX2V_TORCH_PROFILE_DIR``
    replaces it."""
    chrome_path: Optional[Union[str, os.PathLike]] = None
    """The chrome-format trace file; None: ``save_results/trace.json`` under the cwd."""
    wait: int = 1
    """Calls run under the profiler but not recorded (lets lazy initialisation happen outside the trace)."""
    warmup: int = 3
    """Calls recorded but discarded (the profiler's own start-up cost lands here)."""
    active: int = 1
    """Calls recorded and exported (at least 1); each is one ``ProfilerStep#N`` in the trace."""
    with_stack: bool = False
    """Record Python call stacks of ops (bigger trace, slower capture)."""
    tensorboard_port: int = 16006
    """The port named in the viewing hints (``LIGHTX2V_TENSORBOARD_PORT`` replaces it)."""
    use_gzip: bool = False
    """Write ``.json.gz`` (TensorBoard and Perfetto read it directly)."""
    record_shapes: bool = False
    """Record input shapes of ops."""
    profile_memory: bool = False
    """Record tensor allocations and frees (``[memory]`` events: the running totals per device)."""
    memory_snapshot: bool = False
    """CUDA only: record the allocator's history over the active calls and write it, with the Python stack of
    each allocation, as ``rank<R>_<host>.memory_snapshot.pickle`` beside the trace: what holds the peak.
    ``ENV_MEMORY_SNAPSHOT`` replaces it. On a CPU it says "CUDA only" once and the capture goes on."""
    with_flops: bool = False
    """Estimate FLOPs of matrix multiplications and convolutions."""
    exported_chrome_path: str = dataclasses.field(default="", init=False, compare=False, repr=False)
    """Set by a ``make_on_trace_ready(cfg)`` handler after a chrome export (the original module's field)."""

    def __post_init__(self) -> None:
        problem = _find_bad_field(self)
        if problem:
            raise ValueError(problem)

    @property
    def calls(self) -> int:
        """How many times a capture calls the target."""
        return self.wait + self.warmup + self.active

    @property
    def steps(self) -> int:
        """The original LightX2V module's name for ``calls``: wait + warmup + active."""
        return self.calls


_FLAGS = ("with_stack", "use_gzip", "record_shapes", "profile_memory", "with_flops", "memory_snapshot")


def _find_bad_field(cfg: TorchTraceProfileConfig) -> Optional[str]:
    """The first invalid setting, described for a ValueError, or None."""
    if cfg.profile_format not in PROFILE_FORMATS:
        return f"profile_format must be one of {PROFILE_FORMATS}, got {cfg.profile_format!r}"
    for field, minimum in (("wait", 0), ("warmup", 0), ("active", 1)):
        value = getattr(cfg, field)
        if type(value) is not int:
            return f"{field} must be an int, got {type(value).__name__} {value!r}"
        if value < minimum:
            return f"{field} must be >= {minimum}, got {value}"
    port = cfg.tensorboard_port
    if type(port) is not int or not 1 <= port <= 65535:
        return f"tensorboard_port must be an int in 1..65535, got {port!r}"
    for field in ("tb_dir", "chrome_path"):
        value = getattr(cfg, field)
        if value is not None and not isinstance(value, (str, os.PathLike)):
            return f"{field} must be a path (str or os.PathLike) or None, got {type(value).__name__}"
        if value is not None and not os.fspath(value):
            return f"{field} must not be empty"
    for field in _FLAGS:
        value = getattr(cfg, field)
        if type(value) is not bool:
            return f"{field} must be a bool, got {type(value).__name__} {value!r}"
    return None


_DEFAULT = TorchTraceProfileConfig()  # the defaults of TorchTraceProfileContext's keywords come from here
_CONFIGS: dict[tuple, TorchTraceProfileConfig] = {}  # validated configs by their settings
_CONFIGS_MAX = 256  # distinct call-site settings a process keeps; beyond that, each context validates anew
_SITES: dict[tuple, "_Site"] = {}  # call sites by (name, settings): their call counters live as long as the process
# The settings tuple's order: the config's fields, as a context's keywords spell them (its key follows this order)
_SETTING_FIELDS = tuple(f.name for f in dataclasses.fields(TorchTraceProfileConfig) if f.init)


# ------------------------------------------------------------------------------------------ session state
@dataclasses.dataclass(frozen=True)
class CaptureResult:
    """What one capture produced, as seen by this process (one rank)."""

    label: str
    profile_format: str
    trace_paths: list[str]
    run_dir: Optional[str]  # tensorboard: the run directory shared by all ranks; chrome: None
    log_dir: Optional[str]  # tensorboard: the logdir to give TensorBoard; chrome: None
    rank: int
    world_size: int
    calls: int  # target calls made during the capture
    seconds: float
    error: Optional[str] = None  # why nothing (or not everything) was exported
    finished_at: Optional[float] = None  # epoch seconds (time.time()) when the capture ended


class ArmOutcome(str, enum.Enum):
    """How this process answered a request to arm it: ``last_request.outcome`` in the status file, as the bare
    word (why it refused is ``last_request.reason``). ``python -m lightx2v.capture`` compares against these."""

    ARMED = "armed"
    ALREADY_ARMED = "already armed"  # armed before (by reset_session(), or another request): one capture
    CAPTURING_NOW = "capturing now"  # the capture under way answers the request
    REFUSED = "refused"


_Answer = tuple[ArmOutcome, Optional[str]]  # (outcome, why it was refused)


class _Session:
    """Process-wide capture state, and the one owner of its transitions. Every context reads it, none copies it.

    Every change happens here, under ``lock`` (the fast path reads ``claimed`` without it: a plain bool)::

        transition      from                          to                            called by
        claim()         armed, not capturing          claimed + capturing           run(), try_claim()
        release()       capturing                     not capturing (a job arm's:   run()'s finally
                                                      CAPTURED)
        record(result)  --                            last = result, captures + 1   _Capture (recording)
        arm()           any                           armed, generation + 1         reset_session()
        request_arm()   claimed, not capturing        armed, generation + 1         the remote-arming watcher
                        (else: ArmOutcome REFUSED / CAPTURING_NOW / ALREADY_ARMED, nothing changes)
        join_job(job)   not capturing, no job         job, not claimed (slow path)  the watcher (a job arm)
        plan_job(plan)  job WAITING                   job ARMED, or ABANDONED       the watcher
        job_turn(site)  job ARMED, at its call        claimed + capturing,          run() (a job's ranks)
                                                      job CAPTURING

    A job arm (several ranks, see "remote arming: jobs") keeps ``claimed`` False until it ends, so every ``run()``
    takes the slow path and asks ``job_turn`` whether this call is the one the ranks agreed on. The job arm's own
    states move only as ``JOB_ARM_MOVES`` allows (``_JobArm.move``), and a move refused there changes nothing here.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.claimed = False  # read without the lock on the fast path: a plain bool, set once per session
        self.capturing = False
        self.generation = 0  # bumped by every arm; names the run-directory rendezvous key
        self.last: Optional[CaptureResult] = None
        self.captures = 0  # captures finished in this process, successful or not
        self.last_site: Optional[_Site] = None  # the call site of the last capture: where a job arm captures
        self.job: Optional[_JobArm] = None  # the job arm in progress on this rank
        self.last_job: Optional[_JobArm] = None  # the latest job arm this rank took part in (for the status)
        self.job_changes = 0  # bumped by every job-arm transition (the watcher rewrites the status on a change)

    def claim(self) -> Optional[int]:
        """The session's generation if the caller may capture now, else None (caller runs a plain call)."""
        with self.lock:
            if self.claimed or self.capturing or self.job is not None:
                return None
            self.claimed = True
            if not _env_flag(ENV_ENABLE):
                return None
            self.capturing = True
            return self.generation

    def release(self) -> None:
        """The capture that claim() (or job_turn()) allowed is over (successful or not)."""
        with self.lock:
            self.capturing = False
            if self.last_job is not None and self.last_job.move(JobArmState.CAPTURED):  # a job arm's capture
                self.job_changes += 1

    def record(self, result: CaptureResult) -> None:
        """A capture finished: it is the last one, and one more."""
        with self.lock:
            self.last = result
            self.captures += 1

    def arm(self) -> int:
        """Start a new session: the next first ``run()`` captures. Returns the new generation."""
        with self.lock:
            return self._arm_locked()

    def _arm_locked(self) -> int:
        self.claimed = False
        self.generation += 1
        return self.generation

    def request_arm(self, refusal: Optional[str], note: Callable[[_Answer, int, int], None]) -> _Answer:
        """Arm on a request from outside, only when this session's capture is done; returns the answer.

        ``note(answer, generation, captures)`` runs under the lock, so whoever reports the request (the status
        file) never sees the session armed without knowing who armed it.
        """
        with self.lock:
            answer: _Answer
            if refusal:
                answer = ArmOutcome.REFUSED, refusal
            elif not _env_flag(ENV_ENABLE):
                answer = ArmOutcome.REFUSED, f"profiling is off in this process ({ENV_ENABLE})"
            elif self.capturing:
                answer = ArmOutcome.CAPTURING_NOW, None
            elif not self.claimed:
                answer = ArmOutcome.ALREADY_ARMED, None
            else:
                self._arm_locked()
                answer = ArmOutcome.ARMED, None
            note(answer, self.generation, self.captures)
            return answer

    # -- job arms (see "remote arming: jobs") ----------------------------------------------------------------
    def join_job(self, job: "_JobArm") -> Optional[str]:
        """The watcher: take part in ``job``; its ``index`` is this rank's call count now. Returns why not yet
        (a capture under way, another job arm not over), or None."""
        with self.lock:
            if self.capturing:
                return "capturing now"
            if self.job is not None:
                return f"job arm {self.job.number} is not over"
            self.job, self.last_job = job, job
            self.claimed = False  # from here every run() asks job_turn() ...
            job.index = job.site.calls  # ... so no call numbered above index + 1 runs without asking
            self.job_changes += 1
            return None

    def plan_job(self, job: "_JobArm", target: Optional[int], reason: Optional[str] = None) -> None:
        """The watcher (or a rank that gave up waiting): the plan every rank agreed on, call ``target``, or None
        and why not. Only the first plan of an arm counts (``JOB_ARM_MOVES``: a waiting arm moves once)."""
        with self.lock:
            if target is not None and job.move(JobArmState.ARMED):
                job.target = target
                self.job_changes += 1
            elif target is None and job.move(JobArmState.ABANDONED, reason):
                self._end_job_locked(job)
                self.job_changes += 1
        job.decided.set()

    def _end_job_locked(self, job: "_JobArm") -> None:
        if self.job is job:
            self.job = None
            self.claimed = True  # back to the steady path

    def job_turn(self, site: _Site) -> Optional[int]:
        """run()'s slow path: ``claim()`` when no job arm is in progress; while one is, the generation when this
        call is the agreed one, else None.

        The one wait on the caller's thread: a rank does not pass call ``index + JOB_AHEAD`` before the plan is
        known, because the agreed call may be that one (the plan's call is at least ``index + JOB_AHEAD``).
        """
        job = self.job
        if job is None:
            return self.claim()
        if site is not job.site:
            return None
        if job.state is JobArmState.WAITING and job.index is not None and site.calls >= job.index + JOB_AHEAD:
            if not job.decided.wait(JOB_ANSWER_SECONDS + JOB_WAIT_MARGIN_SECONDS):
                self.plan_job(job, None, f"no plan within {JOB_ANSWER_SECONDS + JOB_WAIT_MARGIN_SECONDS:.0f} s (the "
                                         "job's c10d store did not answer this rank); this rank does not capture")
        with self.lock:
            if self.job is not job or job.state is not JobArmState.ARMED or job.target is None:
                return None
            calls = site.calls
            if calls < job.target:
                return None
            if calls > job.target:  # cannot happen (docs/capture.md); never capture out of step
                if job.move(JobArmState.MISSED, f"call {calls} ran before the plan for call {job.target} arrived"):
                    self._end_job_locked(job)
                    self.job_changes += 1
                return None
            if not job.move(JobArmState.CAPTURING):
                return None
            self.job = None
            self.claimed = self.capturing = True
            self.generation += 1
            job.generation = self.generation
            self.job_changes += 1
            return self.generation

    def rendezvous_of(self, generation: int) -> str:
        """The store key naming a capture's run directory: per job arm for a job's capture, else per session."""
        job = self.last_job
        if job is not None and job.generation == generation:
            return f"job_arm/{job.number}/run_dir"
        return f"run_dir/{generation}"


_SESSION = _Session()


def resolve_log_dir(tb_dir: Optional[Union[str, os.PathLike]] = None) -> str:
    """The absolute TensorBoard logdir captures write to: ``LIGHTX2V_TORCH_PROFILE_DIR``, else ``tb_dir``, else
    ``save_results/torch_profile`` under the cwd. The TensorBoard launcher and ``lightx2v.serve`` watch the same."""
    return os.path.abspath(os.fspath(env_path(os.environ.get(ENV_DIR)) or tb_dir or DEFAULT_TB_DIR))


SummaryHandler = Callable[[str], Iterable[str]]


class TorchTraceProfiler:
    """Process-level control of captures; the state it controls is shared by every context in the process.

    ``TorchTraceProfiler(cfg)`` with ``try_claim(label)`` / ``run(step_fn)`` / ``ran`` is the original LightX2V
    module's lower-level API, kept for code written against it (see "the original module's names" below).
    """

    def __init__(self, cfg: Optional[TorchTraceProfileConfig] = None) -> None:
        self.cfg = cfg if cfg is not None else TorchTraceProfileConfig()
        self._ran = False
        self._claim: Optional[tuple[str, int]] = None  # (label, generation) of a try_claim() not yet run

    @staticmethod
    def reset_session() -> None:
        """Start a new session: the next first ``run()`` captures again. Existing contexts stay usable.

        A capture in progress on another thread finishes undisturbed; the new session's capture starts after it.
        """
        _SESSION.arm()

    @staticmethod
    def session_done() -> bool:
        """Whether this session's capture has been taken (or profiling is switched off)."""
        return _SESSION.claimed

    @staticmethod
    def last_capture() -> Optional[CaptureResult]:
        """The most recent capture of this process, successful or not (``finished_at`` says when)."""
        return _SESSION.last

    @staticmethod
    def capture_status() -> dict[str, Any]:
        """Whether a capture is armed, who armed it, how many ran, the last one: what the status file shows."""
        return _REMOTE.status()

    @staticmethod
    def set_summary_handler(handler: Optional[SummaryHandler]) -> None:
        """Call ``handler(trace_path)`` after each written trace and log the lines it returns; None: no summary.

        Without a call here, the handler is the one the package holding this file declares (see _summary_handler).
        """
        global _summary_handler_set, _summary_handler_value
        _summary_handler_set, _summary_handler_value = True, handler

    # -- the original module's lower-level API ---------------------------------------------------------------
    @property
    def ran(self) -> bool:
        """Whether this profiler's ``run()`` made a capture."""
        return self._ran

    def try_claim(self, label: str) -> bool:
        """Whether ``label`` may capture now: True for the first claim of the process session (and again for the
        same label until ``run()``), False once the session's capture is taken, by any call site or profiler."""
        if self._claim is not None:
            return self._claim[0] == label
        generation = _SESSION.claim()
        if generation is None:
            return False
        self._claim = (label, generation)
        return True

    def run(self, step_fn: Callable[[], T]) -> T:
        """Capture ``step_fn`` (called ``cfg.steps`` times, the last result returned) if this profiler holds the
        session's claim or can take it now; otherwise one plain call, as every later step of the session."""
        if self._claim is None and not self.try_claim(_qualified_name(step_fn)):
            return step_fn()
        assert self._claim is not None
        (label, generation), self._claim = self._claim, None
        result = _capture_claimed(self.cfg, label, generation, step_fn, (), {})
        self._ran = _SESSION.last is not None and bool(_SESSION.last.trace_paths)
        return result


# -------------------------------------------------------------------------------------------- call site
class TorchTraceProfileContext:
    """A profiled call site. Cheap to create at every step: only the session's first ``run()`` captures.

    The keywords are the fields of ``TorchTraceProfileConfig`` (documented there, defaults taken from there),
    checked here, so a typo fails on the first step rather than when a capture would start.
    """

    __slots__ = ("name", "site")

    def __init__(
        self,
        name: Optional[str] = None,
        *,
        profile_format: str = _DEFAULT.profile_format,
        tb_dir: Optional[Union[str, os.PathLike]] = _DEFAULT.tb_dir,
        chrome_path: Optional[Union[str, os.PathLike]] = _DEFAULT.chrome_path,
        wait: int = _DEFAULT.wait,
        warmup: int = _DEFAULT.warmup,
        active: int = _DEFAULT.active,
        with_stack: bool = _DEFAULT.with_stack,
        tensorboard_port: int = _DEFAULT.tensorboard_port,
        use_gzip: bool = _DEFAULT.use_gzip,
        record_shapes: bool = _DEFAULT.record_shapes,
        profile_memory: bool = _DEFAULT.profile_memory,
        with_flops: bool = _DEFAULT.with_flops,
        memory_snapshot: bool = _DEFAULT.memory_snapshot,
    ) -> None:
        if name is not None and type(name) is not str:
            raise ValueError(f"name must be a str or None, got {type(name).__name__}")
        self.name = name
        # A call site per distinct name and settings (its call counter lines ranks up, see "remote arming"), holding
        # a validated config per distinct settings: a context at every step costs one tuple and one dict lookup.
        # Keys compare by value, so a value equal to a validated one (True or 1.0 where 1 was validated) gets that
        # validated config: the config a context holds always has its fields' exact types, and behaves as the
        # value given. A value that equals nothing validated yet goes through the config's check (and its error).
        key = (name, profile_format, tb_dir, chrome_path, wait, warmup, active, with_stack, tensorboard_port,
               use_gzip, record_shapes, profile_memory, memory_snapshot, with_flops)  # name + _SETTING_FIELDS
        try:
            site, cacheable = _SITES.get(key), True
        except TypeError:  # an unhashable path: validated each time, and the config's check names it
            site, cacheable = None, False
        if site is None:
            site = _new_site(key, cacheable)
        self.site = site

    @property
    def config(self) -> TorchTraceProfileConfig:
        """The validated settings of this call site."""
        return self.site.config

    def __enter__(self) -> "TorchTraceProfileContext":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        return None

    def run(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Call ``func(*args, **kwargs)``; the session's first call is the capture (see the module docstring)."""
        self.site.calls += 1  # the call index that lines a job's ranks up (see "remote arming")
        if _SESSION.claimed:
            return func(*args, **kwargs)
        generation = _SESSION.job_turn(self.site)  # claim(), or this rank's turn while a job arm is under way
        if generation is None:
            return func(*args, **kwargs)
        return _capture_claimed(self.config, self.name or _qualified_name(func), generation, func, args, kwargs,
                                self.site)


class _Site:
    """A call site: a context name with its settings. Counts its ``run()`` calls, the index a job's ranks agree on."""

    __slots__ = ("config", "calls")

    def __init__(self, config: TorchTraceProfileConfig) -> None:
        self.config = config
        self.calls = 0


def _new_site(key: tuple, cacheable: bool) -> _Site:
    """The call site for a context's settings ``key`` (name first), validated; cached while the cache has room."""
    settings = key[1:]
    config = _CONFIGS.get(settings) if cacheable else None
    if config is None:
        config = TorchTraceProfileConfig(**dict(zip(_SETTING_FIELDS, settings, strict=True)))
        if cacheable and len(_CONFIGS) < _CONFIGS_MAX:
            _CONFIGS[settings] = config
    site = _Site(config)
    if cacheable and len(_SITES) < _CONFIGS_MAX:  # beyond that a context is its own site: it never joins a job arm
        _SITES[key] = site
    return site


def _capture_claimed(cfg: TorchTraceProfileConfig, label: str, generation: int, func: Callable[..., T],
                     args: tuple, kwargs: dict, site: Optional[_Site] = None) -> T:
    """Run the capture that ``_SESSION.claim()`` allowed, and release the session whatever happens."""
    capture: Optional[_Capture] = None
    try:
        if site is not None:
            _SESSION.last_site = site  # a job arm captures at this call site again (see "remote arming")
        _REMOTE.start_once(cfg.profile_format, cfg.tb_dir)  # see "remote arming"; never raises
        capture = _Capture(cfg, label, generation, _SESSION.rendezvous_of(generation))
        return capture.run(func, args, kwargs)
    finally:
        _unpin_process_group_defaults()  # before the caller can reach destroy_process_group()
        _SESSION.release()
        _REMOTE.after_capture(capture.write_fault_in if capture else None)  # see "remote arming"; never raises


def _qualified_name(func: Callable[..., Any]) -> str:
    inner = getattr(func, "func", func)  # functools.partial
    return getattr(inner, "__qualname__", None) or type(inner).__qualname__


# -------------------------------------------------------------------------------------------- a capture
class _Capture:
    """One capture: resolve where files go, drive torch.profiler over the target, export, report."""

    def __init__(self, config: TorchTraceProfileConfig, label: str, generation: int, rendezvous: str) -> None:
        self.config = config
        self.label = label
        self.generation = generation
        self.rendezvous = rendezvous  # the store key naming the ranks' run directory (_Session.rendezvous_of)
        self.rank, self.world_size, self.store = _distributed_identity()
        self.run_dir: Optional[str] = None  # set by _plan_outputs (tensorboard format)
        self.log_dir: Optional[str] = None
        self.trace_paths: list[str] = []
        self.export_stats: dict[str, _ExportStats] = {}  # by trace path: the export's time and peak RSS
        self.errors: list[str] = []
        self.target_failed = False
        self.write_fault_in: Optional[str] = None  # the logdir a write into failed (said in this capture's report)

    def run(self, func: Callable[..., T], args: tuple, kwargs: dict) -> T:
        import torch
        import torch.profiler as tp

        cfg = self.config
        started = time.perf_counter()
        try:
            self.run_dir, self.log_dir, targets = self._plan_outputs()
        except OSError as exc:
            self.write_fault_in = self._output_root()
            self._report_failure(f"cannot create the trace directory in {self._output_root()}: {exc}; "
                                 "running unprofiled")
            return func(*args, **kwargs)

        use_cuda = torch.cuda.is_available()
        activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if use_cuda else [])
        _log(logging.INFO, f"[Profile] {self.label}: capturing {cfg.calls} calls (wait {cfg.wait}, warmup "
                           f"{cfg.warmup}, active {cfg.active}){self._rank_tag()} -> {self.run_dir or targets[0]}")
        prof = tp.profile(
            activities=activities,
            schedule=tp.schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=1),
            on_trace_ready=lambda p: self._export(p, targets),
            record_shapes=cfg.record_shapes,
            profile_memory=cfg.profile_memory,
            with_stack=cfg.with_stack,
            with_flops=cfg.with_flops,
        )
        if hasattr(prof, "preset_metadata_json"):  # versions and label travel in the trace's top-level metadata
            for key, value in (("torch_version", torch.__version__), ("cuda_version", torch.version.cuda),
                               ("capture_label", self.label)):
                if value:
                    prof.preset_metadata_json(key, json.dumps(value))
        try:
            prof.__enter__()
        except Exception as exc:  # e.g. "Profiler is already enabled on this thread" (the caller's own profiler)
            self._report_failure(f"torch.profiler could not start: {exc!r}; running unprofiled")
            return func(*args, **kwargs)

        calls = 0
        result: Any = None
        memory = _MemoryHistory(_snapshot_path(targets[0]) if _memory_snapshot_on(cfg) else None)
        try:
            for _ in range(cfg.calls):
                if calls == cfg.wait + cfg.warmup:
                    memory.start()  # the active calls: the ones the trace keeps
                result = None  # let the previous result go before the next call allocates its own
                result = func(*args, **kwargs)
                calls += 1
                try:
                    if use_cuda and torch.cuda.is_initialized():
                        torch.cuda.synchronize()  # GPU work lands inside its ProfilerStep#N
                    prof.step()  # exports inside the step that follows the last active call
                except Exception as exc:
                    self.errors.append(f"torch.profiler failed after call {calls}: {exc!r}")
                    break
            self.errors += memory.stop(write=calls == cfg.calls)  # before the summary handler looks for it
        except BaseException:
            self.target_failed = True
            memory.stop(write=False)
            self._stop(prof)
            self._finish(calls, started, "the target raised; capture discarded, nothing exported")
            raise
        self._stop(prof)
        self._finish(calls, started, None)
        return result

    # -- outputs -------------------------------------------------------------------------------------------
    def _output_root(self) -> str:
        """tensorboard: the logdir; chrome: the trace file (both absolute, resolved against the cwd now)."""
        cfg = self.config
        if cfg.profile_format == "chrome":
            return os.path.abspath(os.fspath(cfg.chrome_path or DEFAULT_CHROME_PATH))
        return resolve_log_dir(cfg.tb_dir)

    def _plan_outputs(self) -> tuple[Optional[str], Optional[str], list[str]]:
        cfg = self.config
        if cfg.profile_format == "chrome":
            path = self._output_root()
            if cfg.use_gzip and not path.endswith(".gz"):
                path += ".gz"
            if self.world_size > 1:
                path = _with_rank_suffix(path, self.rank, self.world_size)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return None, None, [path]
        log_dir = self._output_root()
        run_dir = _shared_run_dir(log_dir, self.label, self.rendezvous, self.store, self.world_size)
        width = len(str(max(self.world_size - 1, 0)))
        worker = f"rank{self.rank:0{width}d}_{_slug(socket.gethostname(), 40) or 'host'}"
        return run_dir, log_dir, [os.path.join(run_dir, worker + ".pt.trace.json" + (".gz" if cfg.use_gzip else ""))]

    def _export(self, prof, targets: list[str]) -> None:
        """on_trace_ready: write each file under a hidden name, then rename; never raise into torch."""
        if self.target_failed:
            return
        for path in targets:
            try:
                self.export_stats[path] = _export_atomically(prof, path, self.config.use_gzip)
                self.trace_paths.append(path)
            except Exception as exc:
                if isinstance(exc, OSError):
                    self.write_fault_in = self.log_dir or os.path.dirname(path)
                self.errors.append(f"could not write {path}: {exc!r}")

    @staticmethod
    def _stop(prof) -> None:
        try:
            prof.__exit__(None, None, None)
        except Exception as exc:
            _log(logging.WARNING, f"[Profile] stopping torch.profiler failed: {exc!r}")

    # -- reporting -----------------------------------------------------------------------------------------
    def _rank_tag(self) -> str:
        return f" [rank {self.rank}/{self.world_size}]" if self.world_size > 1 else ""

    def _report_failure(self, message: str) -> None:
        self.errors.append(message)
        self._finish(0, time.perf_counter(), None)

    def _finish(self, calls: int, started: float, abort_reason: Optional[str]) -> None:
        self._report(self._record(calls, started, abort_reason), abort_reason)

    def _record(self, calls: int, started: float, abort_reason: Optional[str]) -> CaptureResult:
        """Recording: the result, into the session; no empty run directory left behind."""
        error = abort_reason or ("; ".join(self.errors) if self.errors else None)
        if not self.trace_paths and not error:
            error = "torch.profiler produced no trace (was the schedule cut short?)"
        result = CaptureResult(
            label=self.label, profile_format=self.config.profile_format, trace_paths=list(self.trace_paths),
            run_dir=self.run_dir, log_dir=self.log_dir, rank=self.rank,
            world_size=self.world_size, calls=calls, seconds=time.perf_counter() - started, error=error,
            finished_at=time.time(),
        )
        _SESSION.record(result)
        if not result.trace_paths and result.run_dir and self.world_size == 1:
            try:
                os.rmdir(result.run_dir)  # leave no empty run behind; with several ranks others may still write
            except OSError:
                pass
        return result

    def _report(self, result: CaptureResult, abort_reason: Optional[str]) -> None:
        """Reporting: the error or the written files, each file's summary lines, the viewing hints (rank 0)."""
        if result.error:
            level = logging.WARNING if abort_reason else logging.ERROR
            _log(level, f"[Profile] {self.label}{self._rank_tag()}: {result.error}. The session is done; call "
                        "TorchTraceProfiler.reset_session() to capture again.")
        for path in result.trace_paths:
            stats = self.export_stats.get(path)
            _log(logging.INFO, f"[Profile] {self.label}{self._rank_tag()}: wrote {path} ({_size(path)}"
                               f"{'; ' + stats.describe() if stats else ''})")
            for line in _capture_summary_lines(path):
                _log(logging.INFO, f"[Profile]   {line}")
        if result.trace_paths and self.rank == 0:
            _log(logging.INFO, "\n".join(_viewing_hints(result, self.config)))


# ------------------------------------------------------------------------------ the CUDA memory snapshot
# memory_snapshot=True (or LIGHTX2V_TORCH_PROFILE_MEMORY_SNAPSHOT=1): torch's allocator history
# (torch.cuda.memory._record_memory_history) over the capture's active calls, then torch.cuda.memory._snapshot():
# every segment and block, with the Python stack that allocated it, and the alloc/free events in order. Written
# with pickle, as torch's own _dump_snapshot does, as rank<R>_<host>.memory_snapshot.pickle beside the trace: a
# name TensorBoard's plugin does not list (TENSORBOARD_TRACE_RE), under a hidden temporary name first. Recording
# is always stopped, whatever happens; a failure here is reported with the capture, never raised.
MEMORY_SNAPSHOT_SUFFIX = ".memory_snapshot.pickle"
MEMORY_HISTORY_MAX_ENTRIES = 1_000_000  # alloc/free events kept (a ring buffer): a few active calls of a DiT
_memory_cpu_logged = False


def _memory_snapshot_on(cfg: TorchTraceProfileConfig) -> bool:
    """Whether this capture records a snapshot: the switch, else the config; on a CPU, no (said once)."""
    global _memory_cpu_logged
    if not _env_flag(ENV_MEMORY_SNAPSHOT, cfg.memory_snapshot):
        return False
    if _cuda_memory_history_available():
        return True
    if not _memory_cpu_logged:
        _memory_cpu_logged = True
        _log(logging.WARNING, "[Profile] memory_snapshot: CUDA only (torch.cuda is not available here); the "
                              "capture goes on without it")
    return False


def _cuda_memory_history_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _snapshot_path(trace_path: str) -> str:
    """``<run dir>/rank<R>_<host>.memory_snapshot.pickle`` for ``<run dir>/rank<R>_<host>.pt.trace.json[.gz]``
    (chrome format: beside the trace file, its name without ``.json[.gz]``)."""
    directory, name = os.path.split(trace_path)
    for ext in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".gz"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return os.path.join(directory, name + MEMORY_SNAPSHOT_SUFFIX)


def write_memory_snapshot(snapshot: dict, path: str) -> None:
    """Pickle ``snapshot`` (the dict ``torch.cuda.memory._snapshot()`` returns) to ``path``, atomically."""
    import pickle

    with _replaced_atomically(path) as tmp, open(tmp, "wb") as f:
        pickle.dump(snapshot, f, protocol=pickle.HIGHEST_PROTOCOL)


class _MemoryHistory:
    """The allocator history of one capture: ``start()`` at the first active call, ``stop()`` once or more."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path  # None: memory_snapshot is off for this capture
        self.recording = False

    def start(self) -> None:
        if self.path is None:
            return
        try:
            import torch

            torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                                     max_entries=MEMORY_HISTORY_MAX_ENTRIES)
            self.recording = True
        except Exception as exc:
            _log(logging.WARNING, f"[Profile] memory_snapshot: could not start recording: {exc!r}")
            self.path = None

    def stop(self, write: bool) -> list[str]:
        """Stop recording (always), writing the snapshot first if asked; the problems, for the capture's report."""
        if not self.recording:
            return []
        import torch

        problems = []
        path, self.path = self.path, None
        try:
            if write and path:
                write_memory_snapshot(torch.cuda.memory._snapshot(), path)
                _log(logging.INFO, f"[Profile] wrote {path} ({_size(path)})")
        except Exception as exc:
            problems.append(f"could not write the memory snapshot {path}: {exc!r}")
        finally:
            try:
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception as exc:
                problems.append(f"could not stop the CUDA memory history: {exc!r}")
            self.recording = False
        return problems


def _distributed_identity() -> tuple[int, int, Any]:
    """(rank, world_size, c10d store or None) of this process."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            try:
                store = dist.distributed_c10d._get_default_store()
            except Exception:  # private API; without it ranks still agree per node (see _shared_run_dir)
                store = None
            return dist.get_rank(), dist.get_world_size(), store
    except ImportError:
        pass
    return _env_int("RANK", 0), _env_int("WORLD_SIZE", 1), None


def _env_int(name: str, default: int) -> int:
    """A launcher's integer from the environment; unset, empty or not a whole number (``WORLD_SIZE=``): ``default``.
    Never raises: it is read on the caller's path (a capture's start, capture_status(), an on_trace_ready export)."""
    value = whole_number(os.environ.get(name))
    return default if value is None else value


_unpin_skip_logged = False


def _unpin_process_group_defaults() -> None:
    """Stop ``torch.distributed.nn.functional`` from keeping the process group alive past ``destroy_process_group()``.

    Why: starting a trace probes ``torch._inductor`` (``_KinetoProfile.prepare_trace``, pytorch/pytorch PR #155243),
    which imports dynamo and with it ``torch.distributed.nn.functional``, whose collectives declare
    ``group=group.WORLD`` defaults. Evaluated at import while a process group exists, those defaults hold it:
    ``destroy_process_group()`` cannot free it, its gloo threads live on into interpreter shutdown, and a rank may
    abort there with "terminate called without an active exception" (the shape of pytorch/pytorch#190489).
    Those functions already treat ``group=None`` as the default group, so a ProcessGroup-valued ``group`` default
    is reset to None: nothing changes while the group lives, and destroy frees it. Called after each capture only;
    never imports the module; when torch no longer looks like this, logs once and leaves it alone.
    """
    global _unpin_skip_logged
    functional = sys.modules.get("torch.distributed.nn.functional")
    if functional is None or _unpin_skip_logged:
        return
    problem = "it does not look as expected"
    try:
        import types

        process_group: Any = getattr(sys.modules.get("torch.distributed"), "ProcessGroup", None)
        functions = [f for f in vars(functional).values() if isinstance(f, types.FunctionType)
                     and f.__module__ == functional.__name__ and "group" in f.__code__.co_varnames]
        if isinstance(process_group, type) and functions:
            problem = ""
        for func in functions if not problem else ():
            positional = func.__code__.co_varnames[: func.__code__.co_argcount]
            defaults = func.__defaults__ or ()
            names = positional[len(positional) - len(defaults):]
            if any(n == "group" and isinstance(v, process_group) for n, v in zip(names, defaults, strict=False)):
                func.__defaults__ = tuple(None if n == "group" and isinstance(v, process_group) else v
                                          for n, v in zip(names, defaults, strict=False))
            if isinstance((func.__kwdefaults__ or {}).get("group"), process_group):
                func.__kwdefaults__ = {**(func.__kwdefaults__ or {}), "group": None}
    except Exception as exc:  # never cost the caller the capture's result
        problem = repr(exc)
    if problem:
        _unpin_skip_logged = True
        _log(logging.WARNING, f"[Profile] torch.distributed.nn.functional's group defaults left alone ({problem}); "
                              "a torchrun job may abort at exit, pytorch/pytorch#190489")


def _shared_run_dir(log_dir: str, label: str, rendezvous: str, store: Any, world_size: int) -> str:
    """The capture's run directory, the same one on every rank of a job, a new one for every job and session.

    The first rank to get here creates ``<time>_<label>`` exclusively (``_2``, ``_3``... when it exists) and
    publishes the name with one compare-and-set on the job's c10d store; the others adopt it. Nobody waits for
    anybody, so ranks that never reach the call site cannot hang the ones that do.
    """
    os.makedirs(log_dir, exist_ok=True)
    base = f"{time.strftime('%Y%m%d-%H%M%S')}_{_slug(label, 60) or 'capture'}"
    if world_size > 1 and store is None:
        # No store (torchrun without init_process_group): local ranks share their launcher, so its pid and start
        # time name the job on this node.
        ppid = os.getppid()
        started = _process_start_time(ppid)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started)) if started else time.strftime("%Y%m%d")
        path = os.path.join(log_dir, f"{stamp}_{_slug(label, 60) or 'capture'}_job{ppid}")
        os.makedirs(path, exist_ok=True)
        return path
    path = _make_unique_dir(log_dir, base)
    if world_size > 1:
        key = f"lightx2v/torch_trace_profiler/{rendezvous}"
        name = os.path.basename(path)
        agreed = _text(store.compare_set(key, "", name))
        if agreed != name:
            os.rmdir(path)  # another rank was first; ours is still empty
            path = os.path.join(log_dir, agreed)
            os.makedirs(path, exist_ok=True)
    return path


def _make_unique_dir(parent: str, base: str) -> str:
    for n in range(1, 1000):
        path = os.path.join(parent, base if n == 1 else f"{base}_{n}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise OSError(f"no free run directory name for {base!r} in {parent}")


def _process_start_time(pid: int) -> Optional[float]:
    """Epoch seconds at which ``pid`` started (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _with_rank_suffix(path: str, rank: int, world_size: int) -> str:
    """``trace.json`` -> ``trace.rank1.json`` (``.json.gz`` kept together)."""
    width = len(str(world_size - 1))
    for ext in (".json.gz", ".json", ".gz"):
        if path.endswith(ext):
            return f"{path[: -len(ext)]}.rank{rank:0{width}d}{ext}"
    return f"{path}.rank{rank:0{width}d}"


@contextlib.contextmanager
def _replaced_atomically(path: str) -> Iterator[str]:
    """A hidden temporary name beside ``path`` that no reader matches, renamed onto ``path`` when the block ends
    without an error and removed whatever happens: readers see the old file or the whole new one, never a part.
    A SIGTERM meanwhile ends the process once the block is over (``_sigterm_held``), so no temporary file outlives
    it and what was being written is kept."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    with _sigterm_held():
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            _remove_if_there(tmp)


@contextlib.contextmanager
def _sigterm_held() -> Iterator[None]:
    """Hold SIGTERM over a block that writes a file, then end the process by it as it would have ended.

    SIGTERM's default action kills the process where it stands: in an export, that left a hidden temporary file in
    an otherwise empty run folder, forever, and the trace lost. Here a SIGTERM that comes during the block is noted;
    when the block is over (the trace whole and in place, every temporary file renamed or removed) the default
    action is put back and the signal raised again: the process ends by SIGTERM, as whoever sent it expects.

    Only where SIGTERM has its default action (a handler of the caller's own runs as Python runs it, between the
    export's steps, and the blocks' ``finally`` clean up), and only in the main thread, the one thread that may set
    a handler: a capture in another thread is not held (docs/profile.md: "No partial files"). Never raises on its own
    account."""
    received: list[int] = []
    held = False
    try:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
            held = True
    except (ValueError, OSError, AttributeError):  # not the main interpreter; no SIGTERM on this platform
        pass
    try:
        yield
    finally:
        if held:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if received:
                signal.raise_signal(signal.SIGTERM)


def _remove_if_there(*paths: str) -> None:
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


# The export of a large trace (issue "large traces"): kineto writes the plain JSON (holding the GIL the whole time,
# so nothing in this process runs meanwhile, and only once per capture: "Trace is already saved"), then, with
# use_gzip, it is compressed here at GZIP_LEVEL in GZIP_CHUNK pieces (zlib releases the GIL). torch's own path
# (export_chrome_trace("x.json.gz"), tensorboard_trace_handler(use_gzip=True)) writes the plain JSON to /tmp and
# recompresses it line by line at level 9: several times slower (benchmarks/bench_export.py measures both).
# An export running past EXPORT_PROGRESS_SECONDS says how far it got every EXPORT_PROGRESS_EVERY seconds
# ("gzip: 412.0 MB of 1.0 GB"); the log line of each written file gives the export's time and the process's peak
# RSS during it.
GZIP_LEVEL = 6  # zlib's default: within 5 % of level 9's size on traces, about 5x faster
GZIP_CHUNK = 4 << 20  # bytes read and compressed at a time
EXPORT_PROGRESS_SECONDS = 5.0  # an export taking longer than this reports progress on stderr (the logger) ...
EXPORT_PROGRESS_EVERY = 5.0  # ... this often
_RSS_SAMPLE_SECONDS = 0.1


@dataclasses.dataclass
class _ExportStats:
    """What one export cost: seconds, the process's peak RSS during it (bytes; None where unknown)."""

    seconds: float = 0.0
    peak_rss: Optional[int] = None
    progress_lines: int = 0

    def describe(self) -> str:
        rss = f", peak RSS {_format_bytes(self.peak_rss)} during export" if self.peak_rss else ""
        return f"exported in {self.seconds:.1f} s{rss}"


def _rss_bytes() -> tuple[Optional[int], Optional[int]]:
    """This process's (resident set, high-water mark of it) in bytes, from /proc (Linux); elsewhere
    (None, ru_maxrss)."""
    try:
        with open("/proc/self/status", "rb") as f:
            fields = dict(line.split(b":", 1) for line in f if line.startswith((b"VmRSS:", b"VmHWM:")))
        return int(fields[b"VmRSS"].split()[0]) * 1024, int(fields[b"VmHWM"].split()[0]) * 1024
    except (OSError, KeyError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return None, peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
    except (ImportError, OSError, ValueError):
        return None, None


class _ExportWatch:
    """Around one export: the peak RSS of this process during it, and progress lines while it runs long.

    A daemon thread samples the resident set every _RSS_SAMPLE_SECONDS. It runs only while the GIL is free: the
    gzip pass, not kineto's write, which holds it (a progress line comes after it). The peak is the high-water mark
    when the export raised it, else the largest sample. The export sets ``phase``, ``done`` and ``total`` (bytes)
    for the progress lines.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.phase = "torch.profiler writing"
        self.done = 0
        self.total: Optional[int] = None
        self.growing: Optional[str] = None  # a file being written whose size is ``done`` (kineto's temporary file)
        self.stats = _ExportStats()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lightx2v-export-watch", daemon=True)

    def __enter__(self) -> "_ExportWatch":
        self.started = time.monotonic()
        rss, self._hwm_before = _rss_bytes()
        self._peak = rss
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had (a process at its limit): the export goes on, unwatched
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        _, hwm = _rss_bytes()
        peak = self._peak
        if hwm is not None and (self._hwm_before is None or hwm > self._hwm_before or peak is None):
            peak = hwm if peak is None else max(peak, hwm)  # the export raised the high-water mark: exact
        self.stats.peak_rss = peak
        self.stats.seconds = time.monotonic() - self.started

    def _run(self) -> None:
        next_report = self.started + EXPORT_PROGRESS_SECONDS
        while not self._stop.wait(min(_RSS_SAMPLE_SECONDS, EXPORT_PROGRESS_EVERY)):
            rss, _ = _rss_bytes()
            if rss is not None:
                self._peak = rss if self._peak is None else max(self._peak, rss)
            now = time.monotonic()
            if now >= next_report and not self._stop.is_set():
                self._report(now)
                next_report = now + EXPORT_PROGRESS_EVERY

    def _report(self, now: float) -> None:
        if self.growing:
            with contextlib.suppress(OSError):
                self.done = os.path.getsize(self.growing)
        done = _format_bytes(self.done)
        if self.total:
            done += f" of {_format_bytes(self.total)} ({100 * self.done / self.total:.0f} %)"
        rss = f", RSS {_format_bytes(self._peak)}" if self._peak else ""
        self.stats.progress_lines += 1
        _log(logging.INFO, f"[Profile] exporting {self.path}: {self.phase}: {done}, {now - self.started:.0f} s"
                           f"{rss}")


class _Counted:
    """A writable that counts the bytes through it into an _ExportWatch."""

    def __init__(self, dst: Any, watch: _ExportWatch) -> None:
        self.dst, self.watch = dst, watch

    def write(self, data: bytes) -> int:
        written = self.dst.write(data)
        self.watch.done += len(data)
        return written

    def flush(self) -> None:
        self.dst.flush()


def _export_atomically(prof, path: str, use_gzip: bool) -> _ExportStats:
    """Export to a hidden temporary name, compress if asked, then rename into place; what it cost."""
    watch = _ExportWatch(path)
    with watch, _replaced_atomically(path) as tmp:
        exported = tmp + ".plain" if use_gzip else tmp
        watch.growing = exported + ".tmp"
        try:
            prof.export_chrome_trace(exported)
            watch.growing = None
            if not os.path.isfile(exported):  # kineto logs its own write errors and returns normally
                raise OSError(f"torch.profiler could not write the trace in {os.path.dirname(path) or '.'} "
                              "(disk full or not writable?)")
            cut = _cut_short(exported)
            if cut:  # ... but not all of them
                raise OSError(f"torch.profiler wrote {cut} in {os.path.dirname(path) or '.'} (disk full or not "
                              "writable?)")
            if use_gzip:
                watch.total = os.path.getsize(exported)
                watch.phase = (f"torch.profiler wrote {_format_bytes(watch.total)} in "
                               f"{time.monotonic() - watch.started:.0f} s; gzip")
                name = os.path.basename(path)[:-3] if path.endswith(".gz") else os.path.basename(path)
                with open(exported, "rb") as src, open(tmp, "wb") as raw, \
                        gzip.GzipFile(name, "wb", GZIP_LEVEL, raw) as dst:
                    shutil.copyfileobj(src, _Counted(dst, watch), GZIP_CHUNK)
        finally:  # kineto writes <path>.tmp, then renames
            _remove_if_there(exported + ".tmp", *([exported] if use_gzip else []))
    return watch.stats


def _cut_short(path: str) -> Optional[str]:
    """What is wrong with the JSON trace torch.profiler just wrote at ``path`` ("an empty trace", "a trace cut off
    after N bytes"), or None when it ends as a whole one does.

    Kineto notices a write that fails while it exports (and then leaves no file), but not one that fails when the
    file is closed: a trace small enough for one write, on a full disk or past a file size limit, is renamed into
    place empty or cut short. A whole trace is one JSON object, so it ends with ``}``; its last bytes say so,
    whatever its size. (A cut that happens to fall right after an event's own ``}`` passes: parsing the whole trace
    to know would cost more than the export itself.)"""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - 64))
        end = f.read().rstrip()
    if not size:
        return "an empty trace"
    return None if end.endswith(b"}") else f"a trace cut off after {size} bytes"


def _slug(text: str, limit: int) -> str:
    """A file-name-safe version of a label: ``"🚀 infer_main"`` -> ``"infer_main"``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:limit]


def _size(path: str) -> str:
    try:
        size = os.path.getsize(path)
    except OSError:
        return "size unknown"
    return _format_bytes(size)


def _format_bytes(size: int) -> str:
    # The stack's byte rule (lightx2v.trace_summary.render.format_bytes, checked equal by a test), kept here
    # because this file stands alone: decimal units, one decimal, so the log says what the trace list says.
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


# ------------------------------------------------------------------------------------------------ output
def _log(level: int, message: str) -> None:
    """Log through stdlib logging; while nothing is configured, print to stderr so a plain script shows it.

    No handler is ever added: "configured" is decided at each message (this logger or an ancestor, the root
    included, has a handler), so an application that calls ``logging.basicConfig()`` after the first capture
    sees every message once, through its own handlers. A message printed while nothing is configured sets this
    logger to INFO unless it has a level (the capture and viewing lines are INFO), which it keeps afterwards.
    """
    if logger.hasHandlers():
        logger.log(level, message)
        return
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if logger.isEnabledFor(level):
        try:  # one write per message, so the watcher's lines and the caller's never interleave mid-line
            sys.stderr.write(message + "\n")
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):  # no stderr (None), a closed or a broken one: not the caller's
            pass


def _viewing_hints(result: CaptureResult, cfg: TorchTraceProfileConfig) -> list[str]:
    """The copy-paste lines a user needs to open the trace, locally or over SSH."""
    lines = [f"[Profile] {result.label}: trace ready ({result.calls} calls, {result.seconds:.2f} s"
             f"{f', {result.world_size} ranks' if result.world_size > 1 else ''})"]
    browser = _trace_browser_url(result.trace_paths[0])
    if cfg.profile_format == "tensorboard":
        serving = _running_tensorboard(result.log_dir) if result.log_dir else None
        port = serving if serving is not None else _hint_port(cfg.tensorboard_port)
        lines.append(f"  run directory: {result.run_dir}")
        if serving is not None:  # under `serve`, in the image, or one the user started: nothing to start
            lines.append(f"  TensorBoard:   already serving this logdir on port {port} (new runs appear in seconds)")
        else:
            lines.append(f"  TensorBoard:   tensorboard --logdir {result.log_dir} --port {port}")
            fixed = _fixed_tensorboard_command()
            if fixed:
                lines.append(f"  or, fixed:     {fixed} --logdir {result.log_dir} --port {port}")
        lines += [
            f"  open:          http://127.0.0.1:{port}/#pytorch_profiler",
            f"  remote (SSH):  ssh -N -L {port}:127.0.0.1:{port} <user>@<this-host>, then open the URL above",
        ]
    else:
        where = os.path.dirname(result.trace_paths[0])
        lines += [
            f"  chrome trace:  {', '.join(result.trace_paths)}",
            "  open in https://ui.perfetto.dev or chrome://tracing (drag the file in)",
            f"  remote (SSH):  scp <user>@<this-host>:{where}/<file> . (or use the Perfetto page below)",
        ]
    if browser:
        lines.append(f"  Perfetto page: {browser} (lists every trace, opens it in Perfetto in one click)")
    return lines


def _running_tensorboard(log_dir: str) -> Optional[int]:
    """The port of a TensorBoard that serves ``log_dir`` now, or None: read from TensorBoard's own info files
    (``<tmp>/.tensorboard-info/pid-*.info``, one per live server; stale ones outlive a killed server, so its
    process must exist and its port answer on loopback)."""
    folder = os.path.join(tempfile.gettempdir(), ".tensorboard-info")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    wanted = os.path.realpath(log_dir)
    for name in names:
        if not name.endswith(".info"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict):
            continue
        pid, port, served = info.get("pid"), info.get("port"), info.get("logdir")
        if not (isinstance(pid, int) and isinstance(port, int) and isinstance(served, str) and served):
            continue
        if os.path.realpath(served) != wanted or not _process_alive(pid):
            continue
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return port
        except OSError:
            continue
    return None


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0; pid 0 or below would name a process group, never asked)."""
    if isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's: it exists
        return True
    except (OSError, OverflowError):  # no such process, or a pid past the system's range
        return False
    return True


def _fixed_tensorboard_command() -> Optional[str]:
    """How this machine starts the project's fixed TensorBoard launcher, or None where it cannot.

    ``lightx2v-tensorboard`` when it is on PATH and works from here: the Docker image's wrapper always does (it runs
    the stack's own interpreter isolated, so a LightX2V checkout's own ``lightx2v`` cannot shadow ours, as it does
    where the image runs the user's code, and there ``python -m lightx2v.tensorboard`` fails); the console script
    pip writes when the project is installed does where this process finds the module (a Python script, it sees
    the same PYTHONPATH). Else ``python -m lightx2v.tensorboard`` where this process finds that module; else
    nothing.
    """
    found = shutil.which("lightx2v-tensorboard")
    available = _module_available("lightx2v.tensorboard")
    if found and (available or not _python_script(found)):
        return "lightx2v-tensorboard"
    if available:
        return "python -m lightx2v.tensorboard"
    return None


def _python_script(path: str) -> bool:
    """Whether the command at ``path`` is a Python script (pip's console scripts), not the image's shell wrapper."""
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _module_available(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _hint_port(default: int) -> int:
    """The port the hints name: ``ENV_PORT`` when it is a port number, else ``default`` (a bad value said once)."""
    raw = os.environ.get(ENV_PORT, "")
    port = whole_number(raw)
    if port is not None and 1 <= port <= 65535:
        return port
    if raw.strip():
        _warn_env_once(ENV_PORT, raw, "a port number 1-65535", str(default))
    return default


def _discovery_entries(directory: str) -> list[dict]:
    """The trace browsers' discovery entries in ``directory``, newest first (older versions' single file last)."""
    entries = []
    try:
        names = os.listdir(os.path.join(directory, TRACE_BROWSER_DIR))
    except OSError:
        names = []
    paths = [os.path.join(directory, TRACE_BROWSER_DIR, n) for n in names if n.endswith(".json")]
    for path in [*paths, os.path.join(directory, TRACE_BROWSER_FILE)]:
        try:
            with open(path) as f:
                info = json.load(f)
            entries.append({"port": int(info["port"]), "url": str(info["url"]),
                            "started": float(info.get("started") or 0) if path in paths else -1.0})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return sorted(entries, key=lambda e: e["started"], reverse=True)


def trace_browser_url(trace_path: str) -> Optional[str]:
    """The Perfetto page's URL if a trace browser serves an ancestor folder of the trace and answers now (the
    newest one that answers, when several serve one folder)."""
    directory = os.path.dirname(os.path.abspath(trace_path))
    for _ in range(8):
        for entry in _discovery_entries(directory):
            try:
                with socket.create_connection(("127.0.0.1", entry["port"]), timeout=0.3):
                    pass
                return entry["url"]
            except (OSError, ValueError, OverflowError):
                continue
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return None


_trace_browser_url = trace_browser_url  # the name before it was public


# The per-capture summary (``<trace>.summary.txt`` and a few log lines) is the viewer stack's, and this file imports
# nothing of the stack, not even lazily: it calls a handler that someone else names. Who names it:
#   1. ``TorchTraceProfiler.set_summary_handler(fn)``, from any code in the process (None switches it off);
#   2. otherwise the package this file sits in, by a ``TORCH_TRACE_SUMMARY_HANDLER = "module:function"``
#      attribute, read from the already imported package (``sys.modules``, no import to find it). This project's
#      ``lightx2v/__init__.py`` declares its ``trace_summary`` hook there, so every process that uses this file
#      from this project gets the summary, as before; a LightX2V checkout's own ``lightx2v`` declares nothing, so
#      the copied file imports nothing there (not even a module of the user's that happens to share the name).
# An entry point (importlib.metadata) would need the project installed, and the demo runs from a plain checkout.
SUMMARY_HANDLER_ATTRIBUTE = "TORCH_TRACE_SUMMARY_HANDLER"
_summary_handler_set = False  # True once set_summary_handler() was called
_summary_handler_value: Optional[SummaryHandler] = None


def _summary_handler() -> Optional[SummaryHandler]:
    """The handler set in code, else the one the host package declares (imported on the first capture), else None.
    Raises what the declared import raises (reported by the caller)."""
    if _summary_handler_set:
        return _summary_handler_value
    host = sys.modules.get(__name__.rpartition(".")[0].rpartition(".")[0])
    spec = getattr(host, SUMMARY_HANDLER_ATTRIBUTE, None)
    if not isinstance(spec, str) or ":" not in spec:
        return None
    import importlib

    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def _capture_summary_lines(trace_path: str) -> list[str]:
    """A few report lines from the summary handler (the stack's also writes ``<trace>.summary.txt``); [] without one.
    Never raises: a failing handler costs one log line, never the capture."""
    try:
        handler = _summary_handler()
        return [] if handler is None else [str(line) for line in handler(trace_path)]
    except Exception as exc:
        return [f"(no summary: {exc!r})"]


# ================================================================================ the original module's names
# LightX2V's own torch_trace_profiler.py exposes a lower-level API beside the context; code written against it
# keeps working when this file replaces it. Each is a thin alias over the machinery above, with the original's
# meaning, and with this file's fixes: one capture per process session (the original's flag lived on each
# object, so every new context captured again), a run directory per capture, atomic writes.


_on_trace_ready_exports = 0


def make_on_trace_ready(cfg: TorchTraceProfileConfig) -> Callable[[Any], None]:
    """An ``on_trace_ready`` handler for your own ``torch.profiler.profile``, as in the original module.

    tensorboard: each call writes one trace into a new run directory of the logdir (TensorBoard's plugin never
    notices files added to a run it has loaded, so the original's "one more file in tb_dir" stayed invisible);
    chrome: writes ``cfg.chrome_path`` (``trace.rank<R>.json`` with several ranks) and sets
    ``cfg.exported_chrome_path``. Both write under a hidden name and rename.
    """
    def handler(prof: Any) -> None:
        global _on_trace_ready_exports
        rank, world_size, store = _distributed_identity()
        with _SESSION.lock:
            _on_trace_ready_exports += 1  # counted alike on every rank: names the ranks' shared run directory
            export = _on_trace_ready_exports
        if cfg.profile_format == "chrome":
            path = os.path.abspath(os.fspath(cfg.chrome_path or DEFAULT_CHROME_PATH))
            if cfg.use_gzip and not path.endswith(".gz"):
                path += ".gz"
            if world_size > 1:
                path = _with_rank_suffix(path, rank, world_size)
            os.makedirs(os.path.dirname(path), exist_ok=True)
        else:
            log_dir = resolve_log_dir(cfg.tb_dir)
            run_dir = _shared_run_dir(log_dir, "on_trace_ready", f"on_trace_ready/{export}", store,
                                      world_size)
            width = len(str(max(world_size - 1, 0)))
            worker = f"rank{rank:0{width}d}_{_slug(socket.gethostname(), 40) or 'host'}"
            path = os.path.join(run_dir, worker + ".pt.trace.json" + (".gz" if cfg.use_gzip else ""))
        stats = _export_atomically(prof, path, cfg.use_gzip)
        if cfg.profile_format == "chrome":
            object.__setattr__(cfg, "exported_chrome_path", path)  # the original's field; compare=False
        _log(logging.INFO, f"[Profile] step={getattr(prof, 'step_num', '?')} wrote {path} ({_size(path)}; "
                           f"{stats.describe()})")

    return handler


def log_profile_start(cfg: TorchTraceProfileConfig, name: Optional[str] = None) -> None:
    """The line a capture logs when it starts: label, schedule, where the trace goes."""
    where = (os.path.abspath(os.fspath(cfg.chrome_path or DEFAULT_CHROME_PATH)) if cfg.profile_format == "chrome"
             else resolve_log_dir(cfg.tb_dir))
    _log(logging.INFO, f"[Profile] {name + ': ' if name else ''}capturing {cfg.steps} calls (wait {cfg.wait}, "
                       f"warmup {cfg.warmup}, active {cfg.active}), format {cfg.profile_format} -> {where}")


def log_profile_done(cfg: TorchTraceProfileConfig) -> None:
    """The viewing hints for ``cfg``'s traces: this process's last capture if it wrote one in that format, else the
    configured logdir (or the chrome file the last ``make_on_trace_ready`` handler wrote)."""
    last = _SESSION.last
    if last is None or not last.trace_paths or last.profile_format != cfg.profile_format:
        log_dir = resolve_log_dir(cfg.tb_dir) if cfg.profile_format == "tensorboard" else None
        path = cfg.exported_chrome_path or os.path.abspath(os.fspath(cfg.chrome_path or DEFAULT_CHROME_PATH))
        rank, world_size, _ = _distributed_identity() if "torch" in sys.modules else (0, 1, None)
        last = CaptureResult(label="torch trace", profile_format=cfg.profile_format,
                             trace_paths=[os.path.join(log_dir, "x") if log_dir else path], run_dir=log_dir,
                             log_dir=log_dir, rank=rank, world_size=world_size, calls=cfg.steps, seconds=0.0)
    lines = _viewing_hints(last, cfg)
    lines[0] = "[Profile] torch trace export finished."
    _log(logging.INFO, "\n".join(lines))


# ========================================================================================== remote arming
# Arm the next capture of this *running* process from outside: `python -m lightx2v.capture` or the trace
# browser's "Capture next call" button. Those run in the project's own stack (maybe another venv, another
# version of this file), so the protocol is plain files under the logdir, nothing imported at run time:
#
#   <logdir>/.capture/<host>_<pid>.status.json   written by this process (atomically); its mtime is a heartbeat
#   <logdir>/.capture/<host>_<pid>.request       written by the outside (atomically); this process consumes it
#
# A daemon thread, started with the process's first capture (the session's first run(), never the steady
# path), looks for the request file every POLL_SECONDS and arms exactly like reset_session(): the capture then
# runs on the caller's own thread at its next run(), into a new run directory. The steady path is one integer add
# (the call site's counter) and the same one bool read: no lock, syscall or collective per call. On by default for the
# tensorboard format; LIGHTX2V_TORCH_PROFILE_REMOTE=0 keeps the thread from starting.
#
# Multi-rank jobs (torchrun) are armed as a whole: see "remote arming: jobs" below and docs/capture.md.

CONTROL_DIR = ".capture"  # hidden: TensorBoard, the trace browser and trace_summary skip it
CONTROL_PROTOCOL = 1
STATUS_SUFFIX = ".status.json"
REQUEST_SUFFIX = ".request"
POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 2.0  # readers call a process gone after several missed heartbeats

# ---------------------------------------------------------------------------- remote arming: jobs
# One request arms the whole job, and every rank captures at the same call index of the same call site, with no
# collective and nothing on the steady path but one integer add (``_Site.calls``). Through the job's c10d store,
# under ``lightx2v/capture/job_arm/<n>/``, only from the watcher thread:
#
#   request      the request, set (compare-and-set: the first one wins) by the rank whose request file came first
#   index/<r>    rank r's call count at the call site of its last capture when its watcher joined arm n
#   plan         "call <T>", T = max(index) + JOB_AHEAD, once every rank published; or "abandoned: <why>" when
#                some rank did not within JOB_ANSWER_SECONDS. Compare-and-set: every rank gets the same one.
#
# Joining arms the slow path *before* reading the count, so no call numbered above index + 1 runs unasked; a rank
# asked at call index + JOB_AHEAD without a plan waits for it (bounded), and T >= index + JOB_AHEAD: no rank can
# be past T when it learns T. So the ranks that reach call T all capture it, and every rank reaches it when the
# target holds a collective (each rank makes the same number of calls). Why that cannot hang: docs/capture.md.
JOB_KEY = "lightx2v/capture/job_arm"
JOB_AHEAD = 3  # K: the agreed call is this many calls past the furthest rank's count (>= 2 for the argument)
JOB_ANSWER_SECONDS = 10.0  # a job arm that not every rank joined within this is abandoned, for all ranks alike
JOB_WAIT_MARGIN_SECONDS = 10.0  # the caller's wait for a plan ends this long after the watchers' deadline
JOB_POLL_SECONDS = 0.05  # the watcher's pace while a job arm waits for its plan
STORE_TIMEOUT_SECONDS = 5.0  # the watcher's own store connection (a clone) gives up after this


class JobArmState(str, enum.Enum):
    """Where this rank's part in a job arm stands: ``job.arm.state`` in the status file, as the bare word (why an
    arm ended without a capture is ``job.arm.reason``). ``python -m lightx2v.capture`` compares against these."""

    WAITING = "waiting"  # joined (published its call count); waiting for every rank to, and for the plan
    ARMED = "armed"  # the plan came: every rank captures call ``target``
    CAPTURING = "capturing"  # this rank's capture of call ``target`` is under way
    CAPTURED = "captured"  # ... and done
    ABANDONED = "abandoned"  # ended without a capture: a rank did not answer, different call sites, no plan
    MISSED = "missed"  # ended without a capture: call ``target`` ran before the plan came (cannot happen)


# A job arm's lifecycle, the one table of its moves: _JobArm.move() makes only these (an arm starts WAITING; the
# states with no move are its ends, after which the rank is back on the steady path).
JOB_ARM_MOVES: dict[JobArmState, frozenset[JobArmState]] = {
    JobArmState.WAITING: frozenset({JobArmState.ARMED, JobArmState.ABANDONED}),  # the plan: call T, or why not
    JobArmState.ARMED: frozenset({JobArmState.CAPTURING, JobArmState.MISSED}),  # this rank's call T runs
    JobArmState.CAPTURING: frozenset({JobArmState.CAPTURED}),  # the capture is over
    JobArmState.CAPTURED: frozenset(),
    JobArmState.ABANDONED: frozenset(),
    JobArmState.MISSED: frozenset(),
}
JOB_PLAN_CALL = "call"  # the plan in the store: "call <T>", or "abandoned: <why>" (every rank reads the same one)


class _JobArm:
    """One arm of a multi-rank job as this rank takes part in it (``_Session`` makes its moves, under its lock)."""

    def __init__(self, number: int, request: dict[str, Any], site: _Site, label: str) -> None:
        self.number = number  # the n of the store keys
        self.request = request  # {"id", "by", "at"}
        self.site = site
        self.label = label
        self.index: Optional[int] = None  # this rank's call count when it joined (published)
        self.target: Optional[int] = None  # the agreed call index
        self.state = JobArmState.WAITING
        self.reason: Optional[str] = None  # why it ended without a capture
        self.generation: Optional[int] = None  # the session generation of the capture it started
        self.decided = threading.Event()
        self.joined_at = time.monotonic()

    def move(self, to: JobArmState, reason: Optional[str] = None) -> bool:
        """Go to state ``to`` if ``JOB_ARM_MOVES`` allows it from the state now; whether it moved."""
        if to not in JOB_ARM_MOVES[self.state]:
            return False
        self.state, self.reason = to, reason
        return True

    def describe(self) -> dict[str, Any]:
        return {"number": self.number, "request_id": self.request.get("id"), "by": self.request.get("by"),
                "site": self.label, "index": self.index, "target": self.target, "calls": self.site.calls,
                "state": self.state.value, "reason": self.reason, "ahead": JOB_AHEAD}


def _job_plan(published: list[dict[str, Any]]) -> str:
    """The plan once every rank published ``{"index", "site"}``: ``call <T>``, T = the furthest rank's count +
    JOB_AHEAD, when all ranks' last captures were at one call site; else why nobody captures (call counts of
    different sites say nothing about each other)."""
    sites = sorted({str(p.get("site")) for p in published})
    if len(sites) != 1:
        return (f"{JobArmState.ABANDONED.value}: the ranks' last captures were at different call sites "
                f"({', '.join(sites)})")
    return f"{JOB_PLAN_CALL} {max(int(p['index']) for p in published) + JOB_AHEAD}"


def _read_plan(plan: str) -> tuple[Optional[int], Optional[str]]:
    """A plan from the store: (the agreed call, None), or (None, why nobody captures)."""
    word, _, rest = plan.partition(" ")
    target = whole_number(rest) if word == JOB_PLAN_CALL else None
    if target is not None:
        return target, None
    prefix = JobArmState.ABANDONED.value + ": "
    return None, plan[len(prefix):] if plan.startswith(prefix) else plan


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _RemoteControl:
    """The watcher thread's state: where it watches, what it last did. One per process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.pid = os.getpid()
        self.log_dir: Optional[str] = None
        self.status_path: Optional[str] = None
        self.request_path: Optional[str] = None
        self.armed_generation: Optional[int] = None  # the generation a remote request armed
        self.armed_at: Optional[float] = None
        self.armed_by: Optional[str] = None
        self.captures_before: int = 0  # captures finished when that request armed
        self.last_request: Optional[dict[str, Any]] = None  # {id, at, by, outcome, reason, captures_before}
        self.exited_at: Optional[float] = None
        self.started_at: Optional[float] = None  # the process's start time, from /proc
        self.written_state: Optional[tuple] = None  # _shown_state() as of the last status write
        self.failure_logged = False
        # One fault, one line: start_once's failure waits for the capture's report (after_capture), and once a
        # capture said that the watcher's logdir cannot be written, the watcher's OSErrors there are that fault.
        self.start_failure: Optional[tuple[BaseException, Optional[str]]] = None  # (error, status path)
        self.logdir_fault_said = False
        self.next_job_arm = 1  # the job arm this rank looks for in the store next
        self.store_clone: Optional[tuple[Any, Any]] = None  # (the job's store, the watcher's own connection to it)

    # -- in the caller's thread, once -----------------------------------------------------------------------
    def start_once(self, profile_format: str, tb_dir: Optional[Union[str, os.PathLike]]) -> None:
        """Start the watcher with the process's first capture. Never raises into the caller."""
        if self.started:
            return
        try:
            with self.lock:
                if self.started:
                    return
                self.started = True
                if profile_format != "tensorboard":
                    return
                if not _env_flag(ENV_REMOTE):
                    return
                self.pid = os.getpid()
                self.started_at = _process_start_time(self.pid)
                self.log_dir = resolve_log_dir(tb_dir)
                control = os.path.join(self.log_dir, CONTROL_DIR)
                ident = f"{_slug(socket.gethostname(), 40) or 'host'}_{self.pid}"
                self.status_path = os.path.join(control, ident + STATUS_SUFFIX)
                self.request_path = os.path.join(control, ident + REQUEST_SUFFIX)
            os.makedirs(control, exist_ok=True)  # here, in the caller's thread, as the capture creates its run
            self._write_status()
            threading.Thread(target=self._watch, name="lightx2v-capture-watcher", daemon=True).start()
            import atexit

            atexit.register(self._mark_exited)
        except Exception as exc:
            self.start_failure = exc, self.status_path  # said by after_capture, unless the capture said it
            self.status_path = None  # no status, no watcher: captures go on as before

    def after_capture(self, write_fault_in: Optional[str] = None) -> None:
        """In the caller's thread, right after a capture and its report: publish what it produced. ``write_fault_in``:
        the logdir the capture said it could not write into (then the watcher's failure there is not said again).
        Never raises."""
        if write_fault_in is not None and write_fault_in == self.log_dir:
            self.logdir_fault_said = True
        if self.start_failure is not None:
            (exc, status_path), self.start_failure = self.start_failure, None
            self._log_failure_once(exc, status_path)
        if self.status_path is None:
            return
        try:
            self._write_status()
        except FileNotFoundError:  # the logdir was removed meanwhile
            pass
        except Exception as exc:
            self._log_failure_once(exc)

    # -- in the watcher thread ------------------------------------------------------------------------------
    def _watch(self) -> None:
        """Poll for a request; otherwise only touch the status file (its mtime is the heartbeat).

        The thread never creates a folder and writes a file only to answer a request or to show an arm done by
        reset_session(), so a caller removing its logdir (a temporary directory, say) does not race with it.
        """
        request_path, status_path = self.request_path, self.status_path
        if request_path is None or status_path is None:
            return
        last_beat = time.monotonic()
        while True:
            job = _SESSION.job
            time.sleep(JOB_POLL_SECONDS if job is not None and job.target is None else POLL_SECONDS)
            try:
                self._poll_job()
            except Exception as exc:  # a store that went away with its job: never reaches the caller
                self._log_failure_once(exc)
            try:
                if os.path.exists(request_path):
                    self._take_request()
                elif self._shown_state() != self.written_state:
                    self._write_status()
                elif time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                    if _SESSION.job is not None:
                        self._write_status()  # a job arm under way: its call count, current in the status
                    else:
                        os.utime(status_path)
                    last_beat = time.monotonic()
            except FileNotFoundError:  # the logdir is gone (removed, or not yet recreated): stay quiet
                pass
            except Exception as exc:  # e.g. a read-only logdir: must never reach the caller
                self._log_failure_once(exc)

    @staticmethod
    def _shown_state() -> tuple:
        """What the watcher keeps current in the status file on its own; captures are written by after_capture."""
        return _SESSION.claimed, _SESSION.generation, _SESSION.job_changes

    def _take_request(self) -> None:
        request_path = self.request_path
        if request_path is None:
            return
        try:
            with open(request_path) as f:
                text = f.read(4096)
            request = json.loads(text) if text.strip() else {"by": "a request file"}  # `touch` arms too
            if not isinstance(request, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            request = {"id": None, "by": f"a request file ({exc})"}
        _remove_if_there(request_path)
        by = str(request.get("by") or "outside")[:200]
        request_id = request.get("id")

        def note(answer: _Answer, generation: int, captures: int) -> None:  # under the session's lock
            outcome, reason = answer
            if outcome in (ArmOutcome.ARMED, ArmOutcome.CAPTURING_NOW) or (
                    outcome is ArmOutcome.ALREADY_ARMED and generation != self.armed_generation):  # reset_session()
                self.captures_before = captures
            if outcome is ArmOutcome.ARMED:
                self.armed_generation = generation
                self.armed_at, self.armed_by = time.time(), by
            self.last_request = {"id": request_id, "at": time.time(), "by": by, "outcome": outcome.value,
                                 "reason": reason, "captures_before": self.captures_before}

        refusal = _multi_rank_refusal()
        store = None if refusal else self._job_store()
        if store is not None:  # a rank of a job: the request arms the job
            answer = self._request_job_arm(store, request_id, by)
            with _SESSION.lock:
                note(answer, _SESSION.generation, _SESSION.captures)
                job = _SESSION.last_job
                self.last_request = {**(self.last_request or {}), "job_arm": job.number if job else None}
        else:
            answer = _SESSION.request_arm(refusal, note)
        outcome, reason = answer
        level = logging.INFO if outcome in (ArmOutcome.ARMED, ArmOutcome.ALREADY_ARMED) else logging.WARNING
        what = ("the job's ranks agree on the call to capture at" if store is not None
                else "the next first run() of any call site captures")
        _log(level, f"[Profile] capture request from {by}: {outcome.value}" + (f": {reason}" if reason else "")
             + (f" ({what})" if outcome is ArmOutcome.ARMED else ""))
        self._write_status()

    def _write_status(self) -> None:
        """Write the status file under a hidden temporary name, then rename (readers never see half of it)."""
        status_path = self.status_path
        if status_path is None:
            return
        status = {"protocol": CONTROL_PROTOCOL, "pid": self.pid, "host": socket.gethostname(),
                  "argv": [str(a)[:200] for a in sys.argv[:12]], "log_dir": self.log_dir,
                  "started_at": self.started_at, "updated_at": time.time(), "exited_at": self.exited_at,
                  "poll_seconds": POLL_SECONDS, "heartbeat_seconds": HEARTBEAT_SECONDS, **self.status()}
        with self.lock:  # the watcher, the caller's thread and the atexit handler share the temporary name
            state = self._shown_state()
            with _replaced_atomically(status_path) as tmp, open(tmp, "w") as f:
                json.dump(status, f, default=str)
            self.written_state = state

    def status(self) -> dict[str, Any]:
        session = _SESSION
        armed = not session.claimed and not session.capturing and _env_flag(ENV_ENABLE)
        remote = armed and session.generation == self.armed_generation
        last = session.last
        rank, world_size, _ = _distributed_identity() if "torch" in sys.modules else (0, 1, None)
        return {
            "armed": armed,
            "capturing": session.capturing,
            "armed_at": self.armed_at if remote else None,
            "armed_by": (self.armed_by if remote else "reset_session()") if armed else None,
            "captures": session.captures,
            "last_capture": dataclasses.asdict(last) if last else None,
            "last_request": self.last_request,
            "rank": rank,
            "world_size": world_size,
            "remote_refused": _multi_rank_refusal(),  # None: `python -m lightx2v.capture` may arm this process
            "job": self._job_status(world_size),
        }

    # -- job arms, in the watcher thread (see "remote arming: jobs") ----------------------------------------
    def _job_store(self) -> Any:
        """The watcher's own connection to the job's c10d store (a clone with a short timeout, so a slow store
        never holds a connection the process group uses), or None outside a live multi-rank job."""
        _, world_size, store = _distributed_identity()
        if world_size <= 1 or store is None:
            self.store_clone = None  # the process group was destroyed: hold nothing of it
            return None
        if self.store_clone is None or self.store_clone[0] is not store:
            clone = store
            try:
                import datetime

                clone = store.clone()
                clone.set_timeout(datetime.timedelta(seconds=STORE_TIMEOUT_SECONDS))
            except Exception:  # a store without clone(): its own connection, its own timeout
                clone = store
            self.store_clone = (store, clone)
        return self.store_clone[1]

    def _key(self, number: int, name: str) -> str:
        return f"{JOB_KEY}/{number}/{name}"

    def _request_job_arm(self, store: Any, request_id: Any, by: str) -> _Answer:
        """A request file reached this rank: arm the job (once, however many ranks' requests arrive)."""
        if not _env_flag(ENV_ENABLE):
            return ArmOutcome.REFUSED, f"profiling is off in this process ({ENV_ENABLE})"
        job = _SESSION.job
        if job is not None:
            return ArmOutcome.ALREADY_ARMED, None
        if _SESSION.last_site is None:
            return (ArmOutcome.REFUSED,
                    "this rank has made no capture with a TorchTraceProfileContext (no call site to arm)")
        number = self.next_job_arm
        payload = json.dumps({"id": request_id, "by": by, "at": time.time()})
        agreed = _text(store.compare_set(self._key(number, "request"), "", payload))
        self._poll_job()  # join it now
        try:
            first = json.loads(agreed)
        except ValueError:
            first = {}
        mine = agreed == payload or (request_id and first.get("id") == request_id)
        return (ArmOutcome.ARMED if mine else ArmOutcome.ALREADY_ARMED), None

    def _poll_job(self) -> None:
        """Join the next job arm when one is in the store; decide the plan of the one in progress."""
        store = self._job_store()
        if store is None:
            return
        rank, world_size, _ = _distributed_identity()
        job = _SESSION.job
        if job is None:
            key = self._key(self.next_job_arm, "request")
            site, last = _SESSION.last_site, _SESSION.last
            if site is None or last is None or not store.check([key]):
                return
            request = json.loads(_text(store.get(key)))
            job = _JobArm(self.next_job_arm, request if isinstance(request, dict) else {}, site, last.label)
            if _SESSION.join_job(job) is not None:
                return  # a capture under way: join at the next poll
            store.set(self._key(job.number, f"index/{rank}"), json.dumps({"index": job.index, "site": job.label}))
            _log(logging.INFO, f"[Profile] job arm {job.number} from {request.get('by')}: rank {rank} joined at "
                               f"call {job.index} of {job.label!r}; waiting for every rank")
        if job.state is not JobArmState.WAITING:
            return  # planned: the caller's thread captures at the agreed call
        plan_key = self._key(job.number, "plan")
        if store.check([plan_key]):
            plan = _text(store.get(plan_key))
        else:
            keys = [self._key(job.number, f"index/{r}") for r in range(world_size)]
            if store.check(keys):
                plan = _job_plan([json.loads(_text(store.get(k))) for k in keys])
            elif time.monotonic() - job.joined_at > JOB_ANSWER_SECONDS:
                missing = [r for r, k in enumerate(keys) if not store.check([k])]
                plan = (f"{JobArmState.ABANDONED.value}: rank{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(str, missing))} did not answer within {JOB_ANSWER_SECONDS:.0f} s (never made "
                        "a capture, so no watcher; busy without releasing the GIL; or gone)")
            else:
                return
            plan = _text(store.compare_set(plan_key, "", plan))  # the first plan set is every rank's plan
        target, reason = _read_plan(plan)
        _SESSION.plan_job(job, target, reason)
        self.next_job_arm = job.number + 1
        _log(logging.INFO if target is not None else logging.WARNING,
             f"[Profile] job arm {job.number}: rank {rank}: "
             + (f"every rank captures at call {target} of {job.label!r} (this rank is at call {job.site.calls})"
                if target is not None else f"{JobArmState.ABANDONED.value}: {reason}"))

    def _job_status(self, world_size: int) -> Optional[dict[str, Any]]:
        if world_size <= 1:
            return None
        job = _SESSION.last_job
        run_id = os.environ.get("TORCHELASTIC_RUN_ID") or ""
        master = f"{os.environ.get('MASTER_ADDR', '')}:{os.environ.get('MASTER_PORT', '')}"
        return {"id": _slug(f"{run_id or 'job'}_{master}", 120), "launcher_pid": os.getppid(),
                "arm": job.describe() if job is not None else None}

    def _mark_exited(self) -> None:
        """atexit: say so in the status file, so `python -m lightx2v.capture` answers 'exited' at once."""
        if os.getpid() != self.pid or self.status_path is None:  # a forked child inherits the handler
            return
        try:
            self.exited_at = time.time()
            self._write_status()
        except Exception:
            pass

    def _log_failure_once(self, exc: BaseException, status_path: Optional[str] = None) -> None:
        if self.failure_logged or (isinstance(exc, OSError) and self.logdir_fault_said):
            return
        self.failure_logged = True
        _log(logging.WARNING, f"[Profile] remote arming: {exc!r} (status {status_path or self.status_path}); "
                              "captures still work, `python -m lightx2v.capture` may not see this process")


def _multi_rank_refusal() -> Optional[str]:
    """Why this process must not be armed from outside, or None. A job's rank is armed through the job's c10d
    store; without one (torchrun without init_process_group) the ranks have no way to agree on a call."""
    world_size = _env_int("WORLD_SIZE", 1)
    store = None
    if "torch" in sys.modules:
        _, size, store = _distributed_identity()
        world_size = max(world_size, size)
    if world_size <= 1 or store is not None:
        return None
    return (f"a {world_size}-rank job without a process group (no c10d store): its ranks cannot agree on the call "
            "to capture at; arm it in code with TorchTraceProfiler.reset_session() at the same step on every rank")


_REMOTE = _RemoteControl()
