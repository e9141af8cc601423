"""More of the drop-in profiler's rules (`lightx2v.utils.torch_trace_profiler`), fast and in-process, without a
capture: the config's call count, where traces go, call sites and their names, the original module's lower-level
API, file names and moves (atomic rename, hidden partial files, unique run directories), the export's file handling
on a stand-in profiler and its progress line, the output lines (viewing hints, the trace browser's discovery), the
summary handler, and remote arming's files (the status file, requests read from files, the job arm's request).
Expected values are written by hand; tests/test_dropin_rules.py has the rest of the pure rules."""

from __future__ import annotations

import functools
import gzip
import json
import logging
import os
import pickle
import re
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from lightx2v.utils import torch_trace_profiler as dropin
from lightx2v.utils.torch_trace_profiler import (
    ArmOutcome,
    CaptureResult,
    TorchTraceProfileConfig,
    TorchTraceProfileContext,
    TorchTraceProfiler,
)

from conftest import subprocess_env

HOST = re.sub(r"[^A-Za-z0-9._-]+", "_", socket.gethostname()).strip("._-")[:40] or "host"
PROFILE = logging.getLogger("lightx2v.utils.torch_trace_profiler")


@pytest.fixture
def clean(tmp_path, monkeypatch):
    """A new session and empty caches in an empty cwd, the profiler's switches unset, INFO lines captured."""
    monkeypatch.chdir(tmp_path)
    for var in (dropin.ENV_ENABLE, dropin.ENV_DIR, dropin.ENV_PORT, dropin.ENV_REMOTE, dropin.ENV_MEMORY_SNAPSHOT,
                "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dropin, "_CONFIGS", {})
    monkeypatch.setattr(dropin, "_SITES", {})
    monkeypatch.setattr(dropin, "_SESSION", dropin._Session())
    monkeypatch.setattr(dropin, "_summary_handler_set", False)
    monkeypatch.setattr(dropin, "_summary_handler_value", None)
    return tmp_path


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == PROFILE.name]


# ------------------------------------------------------------------------------------------------ configuration
def test_a_config_calls_its_target_wait_plus_warmup_plus_active_times_under_both_names():
    config = TorchTraceProfileConfig(wait=2, warmup=5, active=4)
    assert (config.calls, config.steps) == (11, 11)


def test_traces_go_to_the_switchs_folder_else_tb_dir_else_save_results_under_the_cwd(clean, monkeypatch):
    assert dropin.resolve_log_dir() == str(clean / "save_results" / "torch_profile")
    assert dropin.resolve_log_dir("tb") == str(clean / "tb")
    assert dropin.resolve_log_dir(Path("x/y")) == str(clean / "x" / "y")
    monkeypatch.setenv(dropin.ENV_DIR, "from_env")
    assert dropin.resolve_log_dir("tb") == str(clean / "from_env")


# ---------------------------------------------------------------------------------------------------- call site
def test_a_context_name_that_is_not_a_string_is_refused_by_its_type(clean):
    with pytest.raises(ValueError) as raised:
        TorchTraceProfileContext(3)
    assert str(raised.value) == "name must be a str or None, got int"
    assert TorchTraceProfileContext(None).name is None


def test_each_keyword_reaches_its_own_config_field(clean):
    config = TorchTraceProfileContext("s", profile_format="chrome", tb_dir="tb", chrome_path="c.json", wait=2,
                                      warmup=0, active=3, with_stack=True, tensorboard_port=7000, use_gzip=True,
                                      record_shapes=True, profile_memory=False, with_flops=True,
                                      memory_snapshot=False).config
    assert config == TorchTraceProfileConfig("chrome", "tb", "c.json", 2, 0, 3, True, 7000, True, True, False,
                                             False, True)
    assert (config.with_flops, config.memory_snapshot) == (True, False)
    other = TorchTraceProfileContext("s", memory_snapshot=True).config
    assert (other.with_flops, other.memory_snapshot) == (False, True)


def test_contexts_with_one_name_and_settings_share_their_call_site_and_its_count(clean):
    first, again = TorchTraceProfileContext("step", wait=0), TorchTraceProfileContext("step", wait=0)
    assert first.site is again.site and first.site.calls == 0
    assert TorchTraceProfileContext("other", wait=0).site is not first.site
    assert TorchTraceProfileContext("other", wait=0).config is TorchTraceProfileContext("step", wait=0).config
    assert TorchTraceProfileContext("step", wait=1).site is not first.site
    with TorchTraceProfileContext("step", wait=0) as entered:
        assert entered.site is first.site


def test_a_value_equal_to_a_validated_one_gets_that_config_with_its_exact_type(clean):
    TorchTraceProfileContext("a", with_stack=True)
    assert TorchTraceProfileContext("b", with_stack=1).config.with_stack is True  # type: ignore[arg-type]


def test_a_new_value_is_checked_and_refused_with_the_configs_message(clean):
    with pytest.raises(ValueError, match="^with_stack must be a bool, got int 1$"):
        TorchTraceProfileContext("b", with_stack=1)  # type: ignore[arg-type]


def test_an_unhashable_path_is_checked_each_time_and_refused_by_name(clean):
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^tb_dir must be a path \(str or os.PathLike\) or None, got list$"):
            TorchTraceProfileContext("x", tb_dir=["a"])  # type: ignore[arg-type]
    assert dropin._SITES == {} and dropin._CONFIGS == {}


def test_past_the_cache_bound_each_context_is_its_own_call_site(clean, monkeypatch):
    monkeypatch.setattr(dropin, "_CONFIGS_MAX", 1)
    first = TorchTraceProfileContext("a")
    assert TorchTraceProfileContext("a").site is first.site
    second = TorchTraceProfileContext("b", wait=0)
    assert TorchTraceProfileContext("b", wait=0).site is not second.site
    assert TorchTraceProfileContext("b", wait=0).config is not second.config
    assert len(dropin._SITES) == 1 and len(dropin._CONFIGS) == 1


class _Step:
    def __call__(self) -> None:
        return None


def _infer() -> None:
    return None


def test_a_call_sites_default_label_is_the_functions_qualified_name():
    assert dropin._qualified_name(_infer) == "_infer"
    assert dropin._qualified_name(functools.partial(_infer)) == "_infer"
    assert dropin._qualified_name(_Step.__call__) == "_Step.__call__"
    assert dropin._qualified_name(_Step()) == "_Step"


# ------------------------------------------------------------------------------- the original lower-level API
def test_a_profiler_without_a_config_holds_the_defaults_and_has_not_run(clean):
    profiler = TorchTraceProfiler()
    assert profiler.cfg == TorchTraceProfileConfig() and profiler.ran is False
    config = TorchTraceProfileConfig(wait=0)
    assert TorchTraceProfiler(config).cfg is config


def test_the_first_claim_of_a_session_is_the_labels_until_it_runs(clean):
    profiler, other = TorchTraceProfiler(), TorchTraceProfiler()
    assert TorchTraceProfiler.session_done() is False
    assert profiler.try_claim("a") is True
    assert TorchTraceProfiler.session_done() is True
    assert profiler.try_claim("a") is True and profiler.try_claim("b") is False
    assert other.try_claim("a") is False


def test_with_profiling_off_nobody_claims_and_the_session_is_done(clean, monkeypatch):
    monkeypatch.setenv(dropin.ENV_ENABLE, "0")
    assert TorchTraceProfiler().try_claim("a") is False
    assert TorchTraceProfiler.session_done() is True


def test_an_unclaimed_profiler_runs_its_step_once_plainly_once_the_session_is_taken(clean):
    assert TorchTraceProfiler().try_claim("first")
    calls = []
    assert TorchTraceProfiler().run(lambda: calls.append(1) or 7) == 7
    assert calls == [1]


def test_reset_session_arms_the_next_claim_and_last_capture_is_the_sessions(clean):
    assert TorchTraceProfiler().try_claim("a")
    dropin._SESSION.release()
    TorchTraceProfiler.reset_session()
    assert TorchTraceProfiler.session_done() is False
    assert TorchTraceProfiler.last_capture() is None
    result = CaptureResult("a", "chrome", ["t.json"], None, None, 0, 1, 1, 0.5)
    dropin._SESSION.record(result)
    assert TorchTraceProfiler.last_capture() is result


def test_capture_status_says_armed_by_reset_session_and_no_capture_yet(clean):
    status = TorchTraceProfiler.capture_status()
    assert (status["armed"], status["capturing"], status["armed_by"], status["captures"], status["last_capture"],
            status["rank"], status["world_size"], status["remote_refused"], status["job"]) == (
        True, False, "reset_session()", 0, None, 0, 1, None, None)


def test_the_summary_handler_set_in_code_gives_the_lines_as_text(clean):
    TorchTraceProfiler.set_summary_handler(lambda path: [f"summary of {path}", 3])
    assert dropin._capture_summary_lines("t.json") == ["summary of t.json", "3"]
    TorchTraceProfiler.set_summary_handler(None)
    assert dropin._capture_summary_lines("t.json") == []


def test_a_failing_summary_handler_costs_one_line_never_the_capture(clean):
    def fails(path):
        raise ValueError("no trace")

    TorchTraceProfiler.set_summary_handler(fails)
    assert dropin._capture_summary_lines("t.json") == ["(no summary: ValueError('no trace'))"]


def test_without_a_handler_set_the_host_packages_declared_one_is_imported(clean, monkeypatch):
    import lightx2v

    monkeypatch.setattr(lightx2v, "TORCH_TRACE_SUMMARY_HANDLER", "json:dumps")
    assert dropin._summary_handler() is json.dumps
    for declared in ("json.dumps", 5, None):
        monkeypatch.setattr(lightx2v, "TORCH_TRACE_SUMMARY_HANDLER", declared)
        assert dropin._summary_handler() is None
    monkeypatch.setattr(lightx2v, "TORCH_TRACE_SUMMARY_HANDLER", "no_such_module_here:f")
    assert dropin._capture_summary_lines("t.json") == [
        "(no summary: ModuleNotFoundError(\"No module named 'no_such_module_here'\"))"]


# ----------------------------------------------------------------------------------- the CUDA memory snapshot
def test_a_memory_snapshot_on_a_cpu_is_refused_once_with_a_warning(clean, monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin, "_memory_cpu_logged", False)
    monkeypatch.setattr(dropin, "_cuda_memory_history_available", lambda: False)
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig()) is False
    assert messages(caplog) == []
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig(memory_snapshot=True)) is False
    monkeypatch.setenv(dropin.ENV_MEMORY_SNAPSHOT, "1")
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig()) is False
    assert messages(caplog) == ["[Profile] memory_snapshot: CUDA only (torch.cuda is not available here); the "
                                "capture goes on without it"]
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_a_memory_snapshot_is_taken_where_cuda_is_unless_the_switch_says_off(clean, monkeypatch):
    monkeypatch.setattr(dropin, "_cuda_memory_history_available", lambda: True)
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig(memory_snapshot=True)) is True
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig()) is False
    monkeypatch.setenv(dropin.ENV_MEMORY_SNAPSHOT, "off")
    assert dropin._memory_snapshot_on(TorchTraceProfileConfig(memory_snapshot=True)) is False


@pytest.mark.parametrize("trace,snapshot", [
    ("/r/rank0_h.pt.trace.json.gz", "/r/rank0_h.memory_snapshot.pickle"),
    ("/r/rank1_h.pt.trace.json", "/r/rank1_h.memory_snapshot.pickle"),
    ("/r/trace.rank1.json.gz", "/r/trace.rank1.memory_snapshot.pickle"),
    ("/r/trace.json", "/r/trace.memory_snapshot.pickle"),
    ("/r/trace.gz", "/r/trace.memory_snapshot.pickle"),
    ("/r/trace", "/r/trace.memory_snapshot.pickle"),
    ("trace.json.json", "trace.json.memory_snapshot.pickle"),
])
def test_a_snapshot_is_named_after_its_trace_without_the_trace_endings(trace, snapshot):
    assert dropin._snapshot_path(trace) == snapshot


def test_a_snapshot_is_written_whole_under_its_name_and_nothing_else(tmp_path):
    path = tmp_path / "rank0_h.memory_snapshot.pickle"
    dropin.write_memory_snapshot({"segments": [1, 2]}, str(path))
    assert pickle.loads(path.read_bytes()) == {"segments": [1, 2]}
    assert os.listdir(tmp_path) == [path.name]


# ----------------------------------------------------------------------------------------- ranks, run folders
def test_without_a_process_group_the_rank_and_world_size_come_from_the_environment(clean, monkeypatch):
    assert dropin._distributed_identity() == (0, 1, None)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert dropin._distributed_identity() == (3, 4, None)


def test_a_run_directory_is_named_by_the_time_and_label_and_never_reused(tmp_path):
    logdir = tmp_path / "tb"
    stamp = time.strftime("%Y%m%d-%H%M")
    first = dropin._shared_run_dir(str(logdir), "🚀 infer main", "0", None, 1)
    name = os.path.basename(first)
    assert re.fullmatch(r"\d{8}-\d{6}_infer_main", name) and name.startswith(stamp[:11])
    second = dropin._shared_run_dir(str(logdir), "🚀 infer main", "0", None, 1)
    assert os.path.isdir(first) and os.path.isdir(second) and second != first
    assert dropin._shared_run_dir(str(logdir), "🚀", "0", None, 1).endswith("_capture")


def test_ranks_without_a_store_share_a_folder_named_by_their_launcher(tmp_path):
    path = dropin._shared_run_dir(str(tmp_path), "step", "0", None, 2)
    assert os.path.basename(path).endswith(f"_step_job{os.getppid()}")
    assert dropin._shared_run_dir(str(tmp_path), "step", "0", None, 2) == path
    started = dropin._process_start_time(os.getppid())
    assert started is not None
    assert os.path.basename(path).startswith(time.strftime("%Y%m%d-%H%M%S", time.localtime(started)) + "_")
    assert dropin._shared_run_dir(str(tmp_path), "!", "0", None, 2).endswith(f"_capture_job{os.getppid()}")


def test_ranks_with_a_store_adopt_the_first_ranks_folder_and_leave_no_other(tmp_path):
    import torch.distributed as dist

    store = dist.HashStore()
    store.set("lightx2v/torch_trace_profiler/job/3", "20990101-000000_first")
    path = dropin._shared_run_dir(str(tmp_path), "step", "job/3", store, 2)
    assert path == str(tmp_path / "20990101-000000_first") and os.path.isdir(path)
    assert os.listdir(tmp_path) == ["20990101-000000_first"]
    mine = dropin._shared_run_dir(str(tmp_path), "step", "job/4", store, 2)
    assert store.get("lightx2v/torch_trace_profiler/job/4").decode() == os.path.basename(mine)


def test_a_unique_directory_takes_the_next_free_number_up_to_999(tmp_path):
    assert dropin._make_unique_dir(str(tmp_path), "run") == str(tmp_path / "run")
    assert dropin._make_unique_dir(str(tmp_path), "run") == str(tmp_path / "run_2")
    assert dropin._make_unique_dir(str(tmp_path), "run") == str(tmp_path / "run_3")
    for n in range(4, 1000):
        (tmp_path / f"run_{n}").mkdir()
    with pytest.raises(OSError) as raised:
        dropin._make_unique_dir(str(tmp_path), "run")
    assert str(raised.value) == f"no free run directory name for 'run' in {tmp_path}"
    assert not (tmp_path / "run_1000").exists() and not (tmp_path / "run_1").exists()


def start_time_read(argv: list[str]) -> tuple[float, float | None, float]:
    """The clock before a child starts, _process_start_time of the running child, the clock after the read."""
    before = time.time()
    child = subprocess.Popen(argv)
    try:
        started = dropin._process_start_time(child.pid)
    finally:
        child.kill()
        child.wait()
    return before, started, time.time()


def test_a_process_start_time_is_when_it_started_and_none_for_no_process():
    before, started, after = start_time_read(["sleep", "3"])
    assert started is not None and before - 1.5 <= started <= after + 1.5
    assert dropin._process_start_time(2 ** 22 + 1) is None


# ----------------------------------------------------------------------------------------------- file moves
def test_a_replaced_file_appears_whole_under_its_name_and_the_hidden_name_goes(tmp_path):
    path = tmp_path / "status.json"
    path.write_text("old")
    with dropin._replaced_atomically(str(path)) as tmp:
        assert tmp == str(tmp_path / f".status.json.{os.getpid()}.tmp")
        Path(tmp).write_text("new")
        assert path.read_text() == "old"
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["status.json"]


def test_a_failed_replacement_keeps_the_old_file_and_raises_the_error_unchanged(tmp_path):
    path = tmp_path / "status.json"
    path.write_text("old")
    error = KeyError("k")
    with pytest.raises(KeyError) as raised:
        with dropin._replaced_atomically(str(path)) as tmp:
            Path(tmp).write_text("half")
            raise error
    assert raised.value is error
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["status.json"]


def test_removing_files_that_are_not_there_is_fine_and_other_errors_propagate(tmp_path):
    (tmp_path / "a").write_text("")
    (tmp_path / "c").write_text("")
    dropin._remove_if_there(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c"))
    assert os.listdir(tmp_path) == []
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        dropin._remove_if_there(str(tmp_path / "d"))


# ----------------------------------------------------------------------------------------------- the export
class _Prof:
    """Stands in for torch.profiler.profile: exports as kineto does (``<path>.tmp``, then renamed), or fails."""

    def __init__(self, text: str = '{"traceEvents": []}', *, write: bool = True, leave_tmp: bool = False,
                 error: BaseException | None = None, pause: float = 0.0) -> None:
        self.text, self.write, self.leave_tmp, self.error, self.pause = text, write, leave_tmp, error, pause
        self.step_num = 7
        self.exported: list[str] = []
        self.seen: list[str] = []

    def export_chrome_trace(self, path: str) -> None:
        self.exported.append(path)
        if self.leave_tmp:
            Path(path + ".tmp").write_text("part")
        if self.error is not None:
            raise self.error
        if self.write:
            Path(path + ".tmp").write_text(self.text)
            time.sleep(self.pause)  # a long write: the watch reads the partial file's size meanwhile
            os.replace(path + ".tmp", path)
        self.seen = sorted(os.listdir(os.path.dirname(path) or "."))


def test_a_plain_export_is_written_under_a_hidden_name_then_renamed(tmp_path):
    prof = _Prof()
    stats = dropin._export_atomically(prof, str(tmp_path / "t.json"), False)
    assert prof.exported == [str(tmp_path / f".t.json.{os.getpid()}.tmp")]
    assert prof.seen == [f".t.json.{os.getpid()}.tmp"]
    assert (tmp_path / "t.json").read_text() == '{"traceEvents": []}'
    assert os.listdir(tmp_path) == ["t.json"]
    assert 0 <= stats.seconds < 5 and stats.progress_lines == 0


def test_a_gzip_export_is_compressed_at_level_6_with_the_plain_name_inside(tmp_path):
    text = json.dumps({"traceEvents": [{"name": f"op{i}", "ts": i} for i in range(2000)]})
    prof = _Prof(text)
    dropin._export_atomically(prof, str(tmp_path / "t.json.gz"), True)
    assert prof.exported == [str(tmp_path / f".t.json.gz.{os.getpid()}.tmp.plain")]
    data = (tmp_path / "t.json.gz").read_bytes()
    assert gzip.decompress(data).decode() == text
    assert data[3] & 8 and data[10:17] == b"t.json\0"  # FNAME: the name without .gz
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert data[17:-8] == deflate.compress(text.encode()) + deflate.flush()
    assert os.listdir(tmp_path) == ["t.json.gz"]


def test_a_gzip_export_to_a_name_without_gz_keeps_the_whole_name_inside(tmp_path):
    dropin._export_atomically(_Prof("{}"), str(tmp_path / "t.json"), True)
    data = (tmp_path / "t.json").read_bytes()
    assert data[10:17] == b"t.json\0" and gzip.decompress(data) == b"{}"


@pytest.mark.parametrize("use_gzip", [False, True])
def test_an_export_that_wrote_nothing_fails_naming_the_folder_and_leaves_nothing(tmp_path, use_gzip):
    with pytest.raises(OSError) as raised:
        dropin._export_atomically(_Prof(write=False, leave_tmp=True), str(tmp_path / "t.json"), use_gzip)
    assert str(raised.value) == (f"torch.profiler could not write the trace in {tmp_path} (disk full or not "
                                 "writable?)")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("use_gzip", [False, True])
@pytest.mark.parametrize("text,said", [("", "an empty trace"), ('{"traceEvents": [{"name": "a"}, {"na', "a trace cut "
                                        "off after 36 bytes"), ('{"traceEvents": [{"name": "a"}, ', "a trace cut off "
                                        "after 32 bytes")])
def test_an_export_that_kineto_cut_short_fails_saying_so_and_leaves_nothing(tmp_path, text, said, use_gzip):
    """Kineto renames a trace whose one write failed at close (a full disk) as if it were whole."""
    with pytest.raises(OSError) as raised:
        dropin._export_atomically(_Prof(text), str(tmp_path / "t.json"), use_gzip)
    assert str(raised.value) == f"torch.profiler wrote {said} in {tmp_path} (disk full or not writable?)"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("text", ["{}", '{"traceEvents": []}\n', '{"a": 1}  \n\n', "{" + " " * 100 + "}\n",
                                  "}"])  # the rule reads the end only
def test_a_trace_that_ends_as_a_json_object_is_whole(tmp_path, text):
    dropin._export_atomically(_Prof(text), str(tmp_path / "t.json"), False)
    assert (tmp_path / "t.json").read_text() == text


def test_an_export_into_the_cwd_that_wrote_nothing_names_the_cwd_as_a_dot(clean):
    with pytest.raises(OSError, match=r"could not write the trace in \. \(disk"):
        dropin._export_atomically(_Prof(write=False), "t.json", False)
    with pytest.raises(OSError, match=r"wrote an empty trace in \. \(disk"):
        dropin._export_atomically(_Prof(""), "t.json", False)


@pytest.mark.parametrize("use_gzip", [False, True])
def test_an_export_error_propagates_unchanged_and_leaves_no_partial_file(tmp_path, use_gzip):
    error = RuntimeError("kineto")
    (tmp_path / "t.json").write_text("older trace")
    with pytest.raises(RuntimeError) as raised:
        dropin._export_atomically(_Prof(leave_tmp=True, error=error), str(tmp_path / "t.json"), use_gzip)
    assert raised.value is error
    assert os.listdir(tmp_path) == ["t.json"] and (tmp_path / "t.json").read_text() == "older trace"


def test_an_exports_cost_is_its_time_and_the_peak_rss_when_known():
    assert dropin._ExportStats(2.0).describe() == "exported in 2.0 s"
    assert dropin._ExportStats(0.04, 0).describe() == "exported in 0.0 s"
    assert dropin._ExportStats(12.34, 1_500_000).describe() == "exported in 12.3 s, peak RSS 1.5 MB during export"


def _watch(path: str = "/r/t.json.gz") -> dropin._ExportWatch:
    watch = dropin._ExportWatch(path)
    watch.started = 100.0
    watch._peak = None
    return watch


def test_the_progress_line_says_the_phase_bytes_done_of_total_time_and_rss(caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    watch = _watch()
    watch.phase, watch.done, watch.total, watch._peak = "gzip", 412_000_000, 1_000_000_000, 2_000_000_000
    dropin._ExportWatch._report(watch, 112.4)
    assert messages(caplog) == ["[Profile] exporting /r/t.json.gz: gzip: 412.0 MB of 1.0 GB (41 %), 12 s, "
                                "RSS 2.0 GB"]
    assert watch.stats.progress_lines == 1
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_the_progress_line_before_the_total_is_known_reads_the_growing_files_size(tmp_path, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    watch = _watch()
    growing = tmp_path / "t.json.tmp"
    growing.write_bytes(b"x" * 2500)
    watch.growing = str(growing)
    watch._report(105.6)
    watch.growing = str(tmp_path / "gone")
    watch._report(106.0)
    assert messages(caplog) == ["[Profile] exporting /r/t.json.gz: torch.profiler writing: 2.5 KB, 6 s",
                                "[Profile] exporting /r/t.json.gz: torch.profiler writing: 2.5 KB, 6 s"]
    assert watch.done == 2500 and watch.stats.progress_lines == 2


class _Sink:
    def __init__(self) -> None:
        self.data, self.flushed = b"", 0

    def write(self, data: bytes) -> int:
        self.data += data
        return 1

    def flush(self) -> None:
        self.flushed += 1


def test_counted_writes_pass_through_and_count_every_byte():
    sink, watch = _Sink(), _watch()
    counted = dropin._Counted(sink, watch)
    assert counted.write(b"abc") == 1 and counted.write(b"de") == 1
    counted.flush()
    assert (sink.data, sink.flushed, watch.done) == (b"abcde", 1, 5)


@pytest.mark.parametrize("size,said", [
    (0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (999_949, "999.9 KB"), (1_000_000, "1.0 MB"),
    (999_949_999, "999.9 MB"), (1_000_000_000, "1.0 GB"), (2_500_000_000_000, "2500.0 GB"),
])
def test_bytes_are_said_in_decimal_units(size, said):
    assert dropin._format_bytes(size) == said


# ----------------------------------------------------------------------------------------------------- output
def test_with_logging_configured_a_message_goes_through_it_once(caplog, capsys):
    caplog.set_level(logging.WARNING, PROFILE.name)
    dropin._log(logging.WARNING, "[Profile] w")
    dropin._log(logging.INFO, "[Profile] i")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.WARNING, "[Profile] w")]
    assert capsys.readouterr().err == ""


def _log_in_a_plain_script(body: str) -> subprocess.CompletedProcess:
    """Run `body` in a fresh interpreter where logging is as a plain script has it: pytest's log capture (which,
    from pytest 9.1 on, also attaches to loggers that do not propagate) cannot stand in for "nothing configured"."""
    script = ("import logging\nfrom lightx2v.utils import torch_trace_profiler as dropin\n"
              f"PROFILE = logging.getLogger({PROFILE.name!r})\n{body}")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    return proc


def test_with_nothing_configured_info_lines_go_to_stderr_and_debug_ones_do_not():
    proc = _log_in_a_plain_script(
        "dropin._log(logging.INFO, '[Profile] a')\n"
        "dropin._log(logging.DEBUG, '[Profile] b')\n"
        "print(logging.getLevelName(PROFILE.level))\n")
    assert proc.stderr == "[Profile] a\n" and proc.stdout == "INFO\n"


def test_a_logger_with_no_handler_anywhere_above_prints_one_line_per_message(monkeypatch, capsys):
    """The same rule in this process, on a logger outside the logging tree (so no handler of pytest's is above it):
    what the plain-script tests check in a child, where mutation tests cannot follow."""
    monkeypatch.setattr(dropin, "logger", logging.Logger("a logger of its own"))
    dropin._log(logging.INFO, "[Profile] a")
    dropin._log(logging.DEBUG, "[Profile] b")
    dropin.logger.setLevel(logging.ERROR)
    dropin._log(logging.WARNING, "[Profile] w")
    dropin._log(logging.ERROR, "[Profile] e")
    assert capsys.readouterr().err == "[Profile] a\n[Profile] e\n"


def test_with_nothing_configured_a_level_set_on_the_logger_is_kept():
    proc = _log_in_a_plain_script(
        "PROFILE.setLevel(logging.ERROR)\n"
        "dropin._log(logging.WARNING, '[Profile] w')\n"
        "dropin._log(logging.ERROR, '[Profile] e')\n"
        "print(logging.getLevelName(PROFILE.level))\n")
    assert proc.stderr == "[Profile] e\n" and proc.stdout == "ERROR\n"


@pytest.mark.parametrize("stderr", ["None", "closed"])
def test_without_a_usable_stderr_a_message_is_dropped_not_raised(stderr):
    proc = _log_in_a_plain_script(
        "import io, sys\n"
        "out = sys.stderr\n"
        f"sys.stderr = {stderr if stderr == 'None' else 'io.StringIO()'}\n"
        "if sys.stderr is not None: sys.stderr.close()\n"
        "dropin._log(logging.WARNING, '[Profile] lost')\n"
        "print('returned')\n")
    assert proc.stdout == "returned\n" and proc.stderr == ""


@pytest.mark.parametrize("value,port", [("7007", 7007), (" 7007 ", 7007), ("1", 1), ("65535", 65535), ("0", 16006),
                                        ("65536", 16006), ("70x", 16006), ("-5", 16006), ("", 16006),
                                        ("¹", 16006), ("²³", 16006), ("٣", 16006), ("+7007", 16006),
                                        ("9" * 5000, 16006)])
def test_the_hints_port_is_the_switchs_when_it_is_a_port(monkeypatch, value, port):
    monkeypatch.setenv(dropin.ENV_PORT, value)
    assert dropin._hint_port(16006) == port


def test_a_hint_port_that_is_no_port_is_said_once_and_an_unset_one_not_at_all(clean, monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin, "_FLAGS_WARNED", set())
    assert dropin._hint_port(17000) == 17000
    monkeypatch.setenv(dropin.ENV_PORT, "  ")
    assert dropin._hint_port(17000) == 17000 and messages(caplog) == []
    monkeypatch.setenv(dropin.ENV_PORT, "¹")
    assert dropin._hint_port(17000) == dropin._hint_port(17000) == 17000
    assert messages(caplog) == ["[Profile] LIGHTX2V_TENSORBOARD_PORT='¹' is not a port number 1-65535; keeping the "
                                "default: 17000"]


@pytest.mark.parametrize("text,number", [("0", 0), (" 42 ", 42), ("007", 7), ("9" * 18, int("9" * 18)),
                                         ("9" * 19, None), ("", None), (None, None), ("  ", None), ("¹", None),
                                         ("٣", None), ("+7", None), ("-7", None), ("7_0", None), ("1.0", None)])
def test_a_whole_number_is_up_to_18_ascii_digits(text, number):
    assert dropin.whole_number(text) == number


@pytest.mark.parametrize("text,path", [("/a/b", "/a/b"), (" /a/b ", "/a/b"), ("~/t", "/home/u/t"), ("~", "/home/u"),
                                       ("x/~/y", "x/~/y"), ("", None), ("  \t", None), (None, None)])
def test_a_folder_from_the_environment_is_stripped_and_expanded_and_blank_is_unset(monkeypatch, text, path):
    monkeypatch.setenv("HOME", "/home/u")
    assert dropin.env_path(text) == path


def test_the_fixed_tensorboard_is_the_images_wrapper_else_the_module_else_none(tmp_path, monkeypatch):
    wrapper = tmp_path / "lightx2v-tensorboard"
    wrapper.write_text("#!/bin/sh\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert dropin._fixed_tensorboard_command() == "lightx2v-tensorboard"
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert dropin._fixed_tensorboard_command() == "python -m lightx2v.tensorboard"
    monkeypatch.setattr(dropin, "_module_available", lambda name: name != "lightx2v.tensorboard")
    assert dropin._fixed_tensorboard_command() is None
    monkeypatch.setenv("PATH", str(tmp_path))  # the image's shell wrapper works where our module is shadowed
    assert dropin._fixed_tensorboard_command() == "lightx2v-tensorboard"


def test_pips_console_script_is_the_hint_only_where_this_process_finds_the_module(tmp_path, monkeypatch):
    """pip's console script is Python: under the PYTHONPATH that shadows our module here, it would fail too."""
    script = tmp_path / "lightx2v-tensorboard"
    script.write_text("#!/opt/venv/bin/python3\nfrom lightx2v.tensorboard.__main__ import main\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert dropin._fixed_tensorboard_command() == "lightx2v-tensorboard"
    monkeypatch.setattr(dropin, "_module_available", lambda name: name != "lightx2v.tensorboard")
    assert dropin._fixed_tensorboard_command() is None
    script.unlink()  # unreadable or gone between the lookup and the read: not a Python script
    assert dropin._python_script(str(script)) is False


def test_a_module_is_available_when_it_can_be_found():
    assert dropin._module_available("json") is True
    assert dropin._module_available("no_such_module_here") is False
    assert dropin._module_available("no_such_module_here.sub") is False
    assert dropin._module_available("") is False


def _result(fmt: str, paths: list[str], world_size: int = 1, log_dir: str | None = "/logs") -> CaptureResult:
    return CaptureResult(label="infer", profile_format=fmt, trace_paths=paths,
                         run_dir="/logs/run" if fmt == "tensorboard" else None, log_dir=log_dir, rank=0,
                         world_size=world_size, calls=5, seconds=1.234)


def test_the_tensorboard_hints_give_the_commands_with_the_switchs_port(clean, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    monkeypatch.setenv(dropin.ENV_PORT, "7007")
    lines = dropin._viewing_hints(_result("tensorboard", [str(tmp_path / "t.json")], 2),
                                  TorchTraceProfileConfig(tensorboard_port=6006))
    assert lines == [
        "[Profile] infer: trace ready (5 calls, 1.23 s, 2 ranks)",
        "  run directory: /logs/run",
        "  TensorBoard:   tensorboard --logdir /logs --port 7007",
        "  or, fixed:     python -m lightx2v.tensorboard --logdir /logs --port 7007",
        "  open:          http://127.0.0.1:7007/#pytorch_profiler",
        "  remote (SSH):  ssh -N -L 7007:127.0.0.1:7007 <user>@<this-host>, then open the URL above",
    ]


def test_the_tensorboard_hints_without_a_fixed_launcher_leave_its_line_out(clean, monkeypatch, tmp_path):
    monkeypatch.setattr(dropin, "_fixed_tensorboard_command", lambda: None)
    lines = dropin._viewing_hints(_result("tensorboard", [str(tmp_path / "t.json")]), TorchTraceProfileConfig())
    assert lines[0] == "[Profile] infer: trace ready (5 calls, 1.23 s)"
    assert lines[2:] == ["  TensorBoard:   tensorboard --logdir /logs --port 16006",
                         "  open:          http://127.0.0.1:16006/#pytorch_profiler",
                         "  remote (SSH):  ssh -N -L 16006:127.0.0.1:16006 <user>@<this-host>, then open the URL "
                         "above"]


@pytest.fixture
def tb_info(tmp_path, monkeypatch):
    """TensorBoard's info folder in a temp dir of its own; yields write(name, **fields) for its files."""
    monkeypatch.setattr(dropin.tempfile, "tempdir", str(tmp_path / "tmp"))
    folder = tmp_path / "tmp" / ".tensorboard-info"
    folder.mkdir(parents=True)

    def write(name: str, **fields) -> None:
        (folder / name).write_text(json.dumps(fields) if fields else "not json")
    return write


@pytest.fixture
def listening():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


def test_a_tensorboard_serving_the_logdir_is_found_by_its_info_file(tmp_path, tb_info, listening):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    (tmp_path / "link").symlink_to(logdir)
    assert dropin._running_tensorboard(str(logdir)) is None  # no file
    tb_info("junk.info")
    tb_info("pid-1.json", pid=os.getpid(), port=listening, logdir=str(logdir))  # not an info file's name
    tb_info("pid-2.info", pid=os.getpid(), port=listening, logdir=str(tmp_path / "elsewhere"))
    tb_info("pid-3.info", pid=2**22 + 12345, port=listening, logdir=str(logdir))  # a server gone: stale file
    tb_info("pid-4.info", pid=os.getpid(), port="16006", logdir=str(logdir))  # not a number
    assert dropin._running_tensorboard(str(logdir)) is None
    tb_info("pid-5.info", pid=os.getpid(), port=listening, logdir=str(tmp_path / "link"))  # the same folder
    assert dropin._running_tensorboard(str(logdir)) == listening


def test_a_tensorboard_whose_port_does_not_answer_is_not_serving(tmp_path, tb_info):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    tb_info("pid-1.info", pid=os.getpid(), port=port, logdir=str(tmp_path))
    assert dropin._running_tensorboard(str(tmp_path)) is None


@pytest.mark.parametrize("pid,alive", [(0, False), (-1, False), (True, False), (2**22 + 12345, False),
                                       (2**70, False), (1, True)])
def test_a_process_is_alive_when_signal_0_reaches_it_or_it_is_anothers(pid, alive):
    assert dropin._process_alive(pid) is alive


def test_with_a_tensorboard_serving_the_logdir_the_hint_opens_it_instead_of_starting_another(
        clean, monkeypatch, tmp_path, tb_info, listening):
    """Under `lightx2v-serve`, in the image, or beside a TensorBoard of the user's: its port, nothing to start."""
    monkeypatch.setenv(dropin.ENV_PORT, "7007")
    tb_info("pid-9.info", pid=os.getpid(), port=listening, logdir=str(tmp_path))
    lines = dropin._viewing_hints(_result("tensorboard", [str(tmp_path / "t.json")], log_dir=str(tmp_path)),
                                  TorchTraceProfileConfig())
    assert lines[1:] == [
        "  run directory: /logs/run",
        f"  TensorBoard:   already serving this logdir on port {listening} (new runs appear in seconds)",
        f"  open:          http://127.0.0.1:{listening}/#pytorch_profiler",
        f"  remote (SSH):  ssh -N -L {listening}:127.0.0.1:{listening} <user>@<this-host>, then open the URL above",
    ]


@pytest.fixture
def browser(tmp_path):
    """A trace browser answering on a port, declared in tmp_path's discovery folder."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    (tmp_path / ".trace_browser").mkdir()
    (tmp_path / ".trace_browser" / "b.json").write_text(json.dumps({"port": port, "url": "http://b/", "started": 5}))
    yield port
    server.close()


def test_the_chrome_hints_name_the_files_and_the_perfetto_page_that_serves_them(tmp_path, browser):
    paths = [str(tmp_path / "t.rank0.json"), str(tmp_path / "t.rank1.json")]
    lines = dropin._viewing_hints(_result("chrome", paths, 2, None), TorchTraceProfileConfig(profile_format="chrome"))
    assert lines == [
        "[Profile] infer: trace ready (5 calls, 1.23 s, 2 ranks)",
        f"  chrome trace:  {paths[0]}, {paths[1]}",
        "  open in https://ui.perfetto.dev or chrome://tracing (drag the file in)",
        f"  remote (SSH):  scp <user>@<this-host>:{tmp_path}/<file> . (or use the Perfetto page below)",
        "  Perfetto page: http://b/ (lists every trace, opens it in Perfetto in one click)",
    ]


def test_discovery_entries_come_newest_first_and_the_old_single_file_last(tmp_path):
    folder = tmp_path / ".trace_browser"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps({"port": "8001", "url": "http://a/", "started": 3}))
    (folder / "c.json").write_text(json.dumps({"port": 8003, "url": "http://c/", "started": 9.5}))
    (folder / "d.json").write_text(json.dumps({"port": 8004, "url": "http://d/"}))
    (folder / "e.json").write_text("{broken")
    (folder / "f.json").write_text(json.dumps({"url": "http://f/"}))
    (folder / "g.txt").write_text(json.dumps({"port": 8007, "url": "http://g/", "started": 99}))
    (tmp_path / ".trace_browser.json").write_text(json.dumps({"port": 8000, "url": "http://old/", "started": 50}))
    assert dropin._discovery_entries(str(tmp_path)) == [
        {"port": 8003, "url": "http://c/", "started": 9.5},
        {"port": 8001, "url": "http://a/", "started": 3.0},
        {"port": 8004, "url": "http://d/", "started": 0.0},
        {"port": 8000, "url": "http://old/", "started": -1.0},
    ]
    assert dropin._discovery_entries(str(tmp_path / "none")) == []


def test_the_browser_url_is_the_newest_that_answers_in_the_nearest_folder_up(tmp_path, browser):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()[1]
    closed.close()
    (tmp_path / ".trace_browser" / "z.json").write_text(json.dumps({"port": dead, "url": "http://z/",
                                                                    "started": 9}))
    (tmp_path / ".trace_browser" / "y.json").write_text(json.dumps({"port": 70000, "url": "http://y/",
                                                                    "started": 8}))
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f" / "g"
    deep.mkdir(parents=True)
    assert dropin.trace_browser_url(str(deep / "t.json")) == "http://b/"
    assert dropin.trace_browser_url(str(deep / "h" / "t.json")) is None  # 9 folders up: too far
    assert dropin.trace_browser_url("/t.json") is None


# ------------------------------------------------------------------------------- the original module's names
def test_the_start_line_names_the_label_schedule_format_and_folder(clean, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin.log_profile_start(TorchTraceProfileConfig(wait=0, warmup=2, active=1), "infer")
    dropin.log_profile_start(TorchTraceProfileConfig(profile_format="chrome"))
    dropin.log_profile_start(TorchTraceProfileConfig(profile_format="chrome", chrome_path="o/t.json"), "")
    assert messages(caplog) == [
        f"[Profile] infer: capturing 3 calls (wait 0, warmup 2, active 1), format tensorboard -> "
        f"{clean}/save_results/torch_profile",
        f"[Profile] capturing 5 calls (wait 1, warmup 3, active 1), format chrome -> {clean}/save_results/trace.json",
        f"[Profile] capturing 5 calls (wait 1, warmup 3, active 1), format chrome -> {clean}/o/t.json",
    ]


def test_the_done_line_without_a_capture_gives_the_configured_logdirs_hints(clean, monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin, "_fixed_tensorboard_command", lambda: None)
    dropin.log_profile_done(TorchTraceProfileConfig(tb_dir="tb"))
    assert messages(caplog) == ["\n".join([
        "[Profile] torch trace export finished.",
        f"  run directory: {clean}/tb",
        f"  TensorBoard:   tensorboard --logdir {clean}/tb --port 16006",
        "  open:          http://127.0.0.1:16006/#pytorch_profiler",
        "  remote (SSH):  ssh -N -L 16006:127.0.0.1:16006 <user>@<this-host>, then open the URL above"])]


def test_the_done_line_for_chrome_names_the_file_the_handler_wrote(clean, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    config = TorchTraceProfileConfig(profile_format="chrome")
    dropin.log_profile_done(config)
    object.__setattr__(config, "exported_chrome_path", "/w/t.json")
    dropin.log_profile_done(config)
    lines = [m.splitlines()[1] for m in messages(caplog)]
    assert lines == [f"  chrome trace:  {clean}/save_results/trace.json", "  chrome trace:  /w/t.json"]


def test_the_done_line_after_a_capture_in_that_format_gives_its_hints(clean, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin._SESSION.record(_result("chrome", [str(clean / "x.json")], 1, None))
    dropin.log_profile_done(TorchTraceProfileConfig(profile_format="chrome"))
    dropin._SESSION.record(_result("chrome", [], 1, None))
    dropin.log_profile_done(TorchTraceProfileConfig(profile_format="chrome"))
    monkeypatch.setattr(dropin, "_fixed_tensorboard_command", lambda: None)
    dropin._SESSION.record(_result("chrome", [str(clean / "x.json")], 1, None))
    dropin.log_profile_done(TorchTraceProfileConfig())
    lines = [m.splitlines() for m in messages(caplog)]
    assert [ls[0] for ls in lines] == ["[Profile] torch trace export finished."] * 3
    assert lines[0][1] == f"  chrome trace:  {clean}/x.json"
    assert lines[1][1] == f"  chrome trace:  {clean}/save_results/trace.json"
    assert lines[2][1] == f"  run directory: {clean}/save_results/torch_profile"


def test_on_trace_ready_chrome_writes_the_configured_file_and_says_so(clean, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    config = TorchTraceProfileConfig(profile_format="chrome", chrome_path="out/t.json")
    dropin.make_on_trace_ready(config)(_Prof("{}"))
    path = clean / "out" / "t.json"
    assert path.read_text() == "{}" and config.exported_chrome_path == str(path)
    assert os.listdir(clean / "out") == ["t.json"]
    [line] = messages(caplog)
    assert line.startswith(f"[Profile] step=7 wrote {path} (2 B; exported in 0.0 s")


def test_on_trace_ready_chrome_with_gzip_and_ranks_names_the_ranks_gz_file(clean, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = TorchTraceProfileConfig(profile_format="chrome", use_gzip=True)
    dropin.make_on_trace_ready(config)(_Prof("{}"))
    path = clean / "save_results" / "trace.rank1.json.gz"
    assert gzip.decompress(path.read_bytes()) == b"{}" and config.exported_chrome_path == str(path)
    config = TorchTraceProfileConfig(profile_format="chrome", chrome_path="t.json.gz", use_gzip=True)
    dropin.make_on_trace_ready(config)(_Prof("{}"))
    assert config.exported_chrome_path == str(clean / "t.rank1.json.gz")


def test_on_trace_ready_tensorboard_writes_each_trace_into_a_new_run_directory(clean, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    config = TorchTraceProfileConfig(tb_dir="tb")
    handler = dropin.make_on_trace_ready(config)
    prof = _Prof("{}")
    del prof.step_num
    handler(prof)
    handler(_Prof("{}", ))
    runs = sorted(os.listdir(clean / "tb"))
    assert len(runs) == 2 and all(re.fullmatch(r"\d{8}-\d{6}_on_trace_ready(_2)?", r) for r in runs)
    for run in runs:
        assert os.listdir(clean / "tb" / run) == [f"rank0_{HOST}.pt.trace.json"]
    assert config.exported_chrome_path == ""
    assert messages(caplog)[0].startswith("[Profile] step=? wrote ")
    gz = TorchTraceProfileConfig(tb_dir="gz", use_gzip=True)
    dropin.make_on_trace_ready(gz)(_Prof("{}"))
    [run] = os.listdir(clean / "gz")
    assert os.listdir(clean / "gz" / run) == [f"rank0_{HOST}.pt.trace.json.gz"]


def test_on_trace_ready_tensorboard_ranks_pad_their_number_to_the_widest(clean, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "12")
    dropin.make_on_trace_ready(TorchTraceProfileConfig(tb_dir="tb"))(_Prof("{}"))
    [run] = os.listdir(clean / "tb")
    assert run.endswith(f"_on_trace_ready_job{os.getppid()}")
    assert os.listdir(clean / "tb" / run) == [f"rank03_{HOST}.pt.trace.json"]


# ------------------------------------------------------------------------------------------------ remote arming
@pytest.fixture
def remote(clean, monkeypatch):
    """A watcher's state for this process, its files under clean/tb/.capture (the thread itself not started)."""
    control = dropin._RemoteControl()
    control.log_dir = str(clean / "tb")
    control.status_path = str(clean / "tb" / ".capture" / f"{HOST}_{os.getpid()}.status.json")
    control.request_path = str(clean / "tb" / ".capture" / f"{HOST}_{os.getpid()}.request")
    os.makedirs(clean / "tb" / ".capture")
    monkeypatch.setattr(dropin, "_REMOTE", control)
    return control


def read_status(control) -> dict:
    return json.loads(Path(control.status_path).read_text())


def test_a_process_alone_or_a_job_with_a_store_may_be_armed_from_outside(clean, monkeypatch):
    assert dropin._multi_rank_refusal() is None
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert dropin._multi_rank_refusal() is None


def test_before_torch_is_imported_the_world_size_comes_from_the_environment_alone(clean, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch")  # as in a process that has not imported torch yet
    monkeypatch.setenv("WORLD_SIZE", "x")
    assert dropin._multi_rank_refusal() is None
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert dropin._multi_rank_refusal().startswith("a 3-rank job without a process group (no c10d store)")


def test_a_job_without_a_store_is_refused_with_how_to_arm_it_in_code(clean, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert dropin._multi_rank_refusal() == (
        "a 2-rank job without a process group (no c10d store): its ranks cannot agree on the call to capture at; "
        "arm it in code with TorchTraceProfiler.reset_session() at the same step on every rank")


def test_the_watcher_starts_only_once_for_tensorboard_with_the_switch_on(clean, monkeypatch):
    control = dropin._RemoteControl()
    control.start_once("chrome", "tb")
    control.start_once("tensorboard", "tb")
    assert control.started and control.status_path is None and not (clean / "tb").exists()
    control = dropin._RemoteControl()
    monkeypatch.setenv(dropin.ENV_REMOTE, "0")
    control.start_once("tensorboard", "tb")
    assert control.started and control.status_path is None and not (clean / "tb").exists()


def test_the_watcher_writes_its_status_file_under_the_logdirs_control_folder(clean, monkeypatch):
    monkeypatch.setattr(dropin.threading.Thread, "start", lambda self: None)  # the polling thread: not here
    monkeypatch.setattr("atexit.register", lambda f: None)
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    ident = f"{HOST}_{os.getpid()}"
    assert control.status_path == str(clean / "tb" / ".capture" / f"{ident}.status.json")
    assert control.request_path == str(clean / "tb" / ".capture" / f"{ident}.request")
    assert os.listdir(clean / "tb" / ".capture") == [f"{ident}.status.json"]
    status = read_status(control)
    assert (status["protocol"], status["pid"], status["log_dir"], status["exited_at"], status["poll_seconds"],
            status["heartbeat_seconds"], status["armed"], status["captures"]) == (
        1, os.getpid(), str(clean / "tb"), None, 0.5, 2.0, True, 0)
    assert status["started_at"] == dropin._process_start_time(os.getpid())
    control.log_dir = "changed"
    control.start_once("tensorboard", "tb")
    assert read_status(control)["log_dir"] == str(clean / "tb")


def test_a_watcher_that_cannot_write_says_so_once_and_captures_go_on(clean, monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    (clean / "tb").write_text("a file where the logdir should be")
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    assert control.status_path is None and messages(caplog) == []  # said after the capture's report ...
    control.after_capture()  # ... which said nothing of this logdir
    assert control.failure_logged
    [line] = messages(caplog)
    assert line.startswith("[Profile] remote arming: NotADirectoryError(20, 'Not a directory') ")
    assert line.endswith(f"(status {clean}/tb/.capture/{HOST}_{os.getpid()}.status.json); captures still work, "
                         "`python -m lightx2v.capture` may not see this process")
    control._log_failure_once(OSError("again"))
    assert len(messages(caplog)) == 1


def test_a_watcher_that_cannot_write_where_the_capture_could_not_either_says_nothing_more(clean, caplog):
    """One fault, one line: the capture's report said the logdir cannot be written; the watcher's failure to
    start there, and its later OS errors there, are that fault. Another logdir's fault, or another error, is not."""
    caplog.set_level(logging.INFO, PROFILE.name)
    (clean / "tb").write_text("a file where the logdir should be")
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    control.after_capture(str(clean / "other"))
    assert control.logdir_fault_said is False and control.start_failure is None and len(messages(caplog)) == 1
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    control.after_capture(str(clean / "tb"))
    control._log_failure_once(OSError(28, "No space left on device"))
    assert messages(caplog)[1:] == [] and not control.failure_logged
    control._log_failure_once(TypeError("bad"))
    assert len(messages(caplog)) == 2 and messages(caplog)[1].startswith("[Profile] remote arming: TypeError('bad')")


def test_after_a_capture_the_status_file_shows_it_and_a_removed_logdir_is_no_error(remote, caplog):
    remote.after_capture()
    assert read_status(remote)["captures"] == 0
    dropin._SESSION.record(_result("chrome", ["/t.json"], 1, None))
    remote.after_capture()
    status = read_status(remote)
    assert status["captures"] == 1 and status["last_capture"]["trace_paths"] == ["/t.json"]
    os.remove(remote.status_path)
    os.rmdir(os.path.dirname(remote.status_path))
    remote.after_capture()
    assert not os.path.exists(remote.status_path) and not remote.failure_logged
    remote.status_path = None
    remote.after_capture()


def test_after_a_capture_another_write_error_is_logged_once(remote, monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin.json, "dump", lambda *a, **k: (_ for _ in ()).throw(TypeError("bad")))
    remote.after_capture()
    assert remote.failure_logged and messages(caplog)[0].startswith("[Profile] remote arming: TypeError('bad')")


def test_the_status_file_is_written_whole_and_remembers_what_it_showed(remote):
    remote._write_status()
    assert os.listdir(os.path.dirname(remote.status_path)) == [os.path.basename(remote.status_path)]
    assert remote.written_state == (False, dropin._SESSION.generation, 0)
    status = read_status(remote)
    assert status["host"] == socket.gethostname() and status["argv"] == [a[:200] for a in sys.argv[:12]]
    remote.status_path = None
    remote._write_status()


def test_the_status_says_who_armed_and_what_ran(remote, monkeypatch):
    session = dropin._SESSION
    assert remote.status()["armed_by"] == "reset_session()"
    session.claim()
    status = remote.status()
    assert (status["armed"], status["capturing"], status["armed_by"], status["armed_at"]) == (False, True, None, None)
    session.release()
    assert remote.status()["armed"] is False
    remote.armed_generation, remote.armed_at, remote.armed_by = session.generation + 1, 12.5, "cli"
    session.arm()
    status = remote.status()
    assert (status["armed"], status["armed_by"], status["armed_at"]) == (True, "cli", 12.5)
    monkeypatch.setenv(dropin.ENV_ENABLE, "0")
    assert (remote.status()["armed"], remote.status()["armed_by"]) == (False, None)


def test_a_jobs_rank_shows_its_job_in_the_status(remote, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r 9")
    monkeypatch.setenv("MASTER_ADDR", "n1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    status = remote.status()
    assert (status["rank"], status["world_size"]) == (1, 2)
    assert status["job"] == {"id": "r_9_n1_29500", "launcher_pid": os.getppid(), "arm": None}
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    assert remote._job_status(2)["id"] == "job_n1_29500"
    job = dropin._JobArm(4, {"id": "q", "by": "me"}, dropin._Site(TorchTraceProfileConfig()), "step")
    dropin._SESSION.last_job = job
    assert remote._job_status(3)["arm"]["number"] == 4
    assert remote._job_status(1) is None


def test_job_store_keys_are_under_the_arms_number(remote):
    assert remote._key(3, "plan") == "lightx2v/capture/job_arm/3/plan"
    assert remote._key(12, "index/1") == "lightx2v/capture/job_arm/12/index/1"


def test_the_status_shown_on_its_own_is_claimed_generation_and_job_changes(clean):
    dropin._SESSION.claim()
    dropin._SESSION.job_changes = 4
    assert dropin._RemoteControl._shown_state() == (True, 0, 4)


def test_at_exit_the_status_file_says_when_and_a_forked_child_writes_nothing(remote, monkeypatch):
    remote._mark_exited()
    assert isinstance(read_status(remote)["exited_at"], float)
    os.remove(remote.status_path)
    remote.pid += 1
    remote._mark_exited()
    assert not os.path.exists(remote.status_path)
    remote.pid -= 1
    remote.status_path = None
    remote._mark_exited()
    remote.status_path = str(Path(os.path.dirname(read_status.__code__.co_filename)) / "no" / "such" / "s.json")
    remote._mark_exited()  # a logdir gone at exit: nothing raised


def write_request(control, text: str) -> None:
    Path(control.request_path).write_text(text)


def test_a_request_after_the_capture_arms_the_next_one_and_is_consumed(remote, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    session = dropin._SESSION
    session.claim()
    session.release()
    session.record(_result("chrome", ["/t.json"], 1, None))
    write_request(remote, json.dumps({"id": "r1", "by": "the trace browser"}))
    remote._take_request()
    assert not os.path.exists(remote.request_path)
    assert messages(caplog) == ["[Profile] capture request from the trace browser: armed (the next first run() of "
                                "any call site captures)"]
    assert caplog.records[-1].levelno == logging.INFO
    status = read_status(remote)
    assert (status["armed"], status["armed_by"]) == (True, "the trace browser")
    last = status["last_request"]
    assert (last["id"], last["by"], last["outcome"], last["reason"], last["captures_before"]) == (
        "r1", "the trace browser", "armed", None, 1)
    assert remote.armed_generation == session.generation == 1 and time.time() - remote.armed_at < 60


def test_a_request_while_armed_is_already_armed_and_counts_captures_since_reset(remote, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin._SESSION.record(_result("chrome", ["/t.json"], 1, None))
    write_request(remote, "")  # `touch` arms too
    remote._take_request()
    assert messages(caplog) == ["[Profile] capture request from a request file: already armed"]
    assert caplog.records[-1].levelno == logging.INFO
    last = read_status(remote)["last_request"]
    assert (last["id"], last["outcome"], last["captures_before"]) == (None, "already armed", 1)
    assert remote.armed_generation is None
    remote.armed_generation = dropin._SESSION.generation
    dropin._SESSION.record(_result("chrome", ["/t.json"], 1, None))
    write_request(remote, "{}")
    remote._take_request()
    assert read_status(remote)["last_request"]["captures_before"] == 1
    assert messages(caplog)[-1] == "[Profile] capture request from outside: already armed"


def test_a_request_during_a_capture_is_answered_by_it(remote, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin._SESSION.claim()
    dropin._SESSION.captures = 2
    write_request(remote, json.dumps({"by": "x" * 300}))
    remote._take_request()
    assert messages(caplog) == [f"[Profile] capture request from {'x' * 200}: capturing now"]
    assert caplog.records[-1].levelno == logging.WARNING
    assert read_status(remote)["last_request"]["captures_before"] == 2


@pytest.mark.parametrize("text,by", [
    ("[1]", "a request file (not a JSON object)"),
    ("{oops", "a request file (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
])
def test_a_request_that_is_not_a_json_object_still_arms_and_says_why(remote, caplog, text, by):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin._SESSION.claim()
    dropin._SESSION.release()
    write_request(remote, text)
    remote._take_request()
    assert messages(caplog)[0].startswith(f"[Profile] capture request from {by}: armed")
    assert read_status(remote)["last_request"]["id"] is None


def test_a_request_with_profiling_off_is_refused_with_the_switch_named(remote, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setenv(dropin.ENV_ENABLE, "0")
    write_request(remote, json.dumps({"id": 5, "by": "me"}))
    remote._take_request()
    assert messages(caplog) == ["[Profile] capture request from me: refused: profiling is off in this process "
                                "(LIGHTX2V_TORCH_PROFILE)"]
    last = read_status(remote)["last_request"]
    assert (last["id"], last["outcome"], last["reason"]) == (5, "refused", "profiling is off in this process "
                                                                           "(LIGHTX2V_TORCH_PROFILE)")


def test_a_request_to_a_rank_without_a_store_is_refused(remote, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setenv("WORLD_SIZE", "2")
    write_request(remote, json.dumps({"by": "me"}))
    remote._take_request()
    assert messages(caplog)[0].startswith("[Profile] capture request from me: refused: a 2-rank job without a "
                                          "process group")
    remote.request_path = None
    remote._take_request()


def _site_session():
    session = dropin._SESSION
    session.last_site = dropin._Site(TorchTraceProfileConfig())
    return session


def test_a_job_arm_request_is_set_once_in_the_store_and_the_first_one_wins(remote):
    import torch.distributed as dist

    _site_session()
    store = dist.HashStore()
    assert remote._request_job_arm(store, "r1", "me") == (ArmOutcome.ARMED, None)
    first = json.loads(store.get("lightx2v/capture/job_arm/1/request"))
    assert (first["id"], first["by"]) == ("r1", "me") and time.time() - first["at"] < 60
    assert remote._request_job_arm(store, "r2", "other") == (ArmOutcome.ALREADY_ARMED, None)
    assert remote._request_job_arm(store, "r1", "again") == (ArmOutcome.ARMED, None)
    assert remote._request_job_arm(store, None, "anon") == (ArmOutcome.ALREADY_ARMED, None)
    store.set("lightx2v/capture/job_arm/2/request", "not json")
    remote.next_job_arm = 2
    assert remote._request_job_arm(store, "r3", "x") == (ArmOutcome.ALREADY_ARMED, None)


def test_a_job_arm_request_is_refused_without_a_call_site_or_with_profiling_off(remote, monkeypatch):
    import torch.distributed as dist

    store = dist.HashStore()
    assert remote._request_job_arm(store, "r1", "me") == (
        ArmOutcome.REFUSED, "this rank has made no capture with a TorchTraceProfileContext (no call site to arm)")
    session = _site_session()
    session.job = dropin._JobArm(1, {}, session.last_site, "step")
    assert remote._request_job_arm(store, "r1", "me") == (ArmOutcome.ALREADY_ARMED, None)
    monkeypatch.setenv(dropin.ENV_ENABLE, "off")
    assert remote._request_job_arm(store, "r1", "me") == (
        ArmOutcome.REFUSED, "profiling is off in this process (LIGHTX2V_TORCH_PROFILE)")
    assert not store.check(["lightx2v/capture/job_arm/1/request"])


# ------------------------------------------------------------------------------------ cases a mutant showed up
def test_a_snapshot_is_pickled_at_the_highest_protocol(tmp_path):
    path = tmp_path / "s.memory_snapshot.pickle"
    dropin.write_memory_snapshot({}, str(path))
    assert path.read_bytes()[:2] == b"\x80" + bytes([pickle.HIGHEST_PROTOCOL])


def test_a_host_package_that_declares_no_handler_gives_none(clean, monkeypatch):
    import lightx2v

    monkeypatch.delattr(lightx2v, "TORCH_TRACE_SUMMARY_HANDLER")
    assert dropin._summary_handler() is None


def test_a_declared_handler_is_split_at_its_first_colon(clean, monkeypatch):
    import lightx2v

    monkeypatch.setattr(lightx2v, "TORCH_TRACE_SUMMARY_HANDLER", "json:dumps:x")
    assert dropin._capture_summary_lines("t.json") == [
        "(no summary: AttributeError(\"module 'json' has no attribute 'dumps:x'\"))"]


def test_the_start_line_names_the_configured_logdir(clean, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin.log_profile_start(TorchTraceProfileConfig(tb_dir="tb"), "s")
    assert messages(caplog) == [f"[Profile] s: capturing 5 calls (wait 1, warmup 3, active 1), format tensorboard -> "
                                f"{clean}/tb"]


@pytest.fixture
def no_watcher_thread(monkeypatch):
    monkeypatch.setattr(dropin.threading.Thread, "start", lambda self: None)  # the polling thread: not here
    monkeypatch.setattr("atexit.register", lambda f: None)


@pytest.mark.parametrize("host,ident", [("h" * 50, "h" * 40), ("🚀", "host"), ("my host.lan", "my_host.lan")])
def test_the_status_file_is_named_by_the_hosts_slug_and_the_pid(clean, monkeypatch, no_watcher_thread, host, ident):
    monkeypatch.setattr(dropin.socket, "gethostname", lambda: host)
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    assert control.status_path == str(clean / "tb" / ".capture" / f"{ident}_{os.getpid()}.status.json")


def test_a_second_process_in_one_logdir_shares_its_control_folder(clean, no_watcher_thread):
    (clean / "tb" / ".capture").mkdir(parents=True)
    (clean / "tb" / ".capture" / "other_1.status.json").write_text("{}")
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    assert control.status_path is not None and not control.failure_logged
    assert sorted(os.listdir(clean / "tb" / ".capture")) == sorted([f"{HOST}_{os.getpid()}.status.json",
                                                                    "other_1.status.json"])


def test_the_watcher_is_one_daemon_thread_and_marks_the_status_exited_at_exit(clean, monkeypatch):
    started, registered = [], []
    monkeypatch.setattr(dropin.threading.Thread, "start", lambda self: started.append(self))
    monkeypatch.setattr("atexit.register", registered.append)
    control = dropin._RemoteControl()
    control.start_once("tensorboard", "tb")
    control.start_once("tensorboard", "tb")
    [thread] = started
    assert (thread.name, thread.daemon, thread._target) == ("lightx2v-capture-watcher", True, control._watch)
    assert registered == [control._mark_exited]


def test_a_context_keeps_its_name():
    assert TorchTraceProfileContext("step").name == "step"


def test_the_done_line_without_a_capture_finds_the_browser_serving_the_logdir(clean, monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin, "_fixed_tensorboard_command", lambda: None)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    try:
        (clean / "tb" / ".trace_browser").mkdir(parents=True)
        (clean / "tb" / ".trace_browser" / "b.json").write_text(json.dumps({"port": server.getsockname()[1],
                                                                            "url": "http://tb/"}))
        dropin.log_profile_done(TorchTraceProfileConfig(tb_dir="tb"))
    finally:
        server.close()
    assert messages(caplog)[0].splitlines()[-1] == ("  Perfetto page: http://tb/ (lists every trace, opens it in "
                                                    "Perfetto in one click)")


LONG_LABEL = "a" * 70


def test_a_run_directorys_label_is_cut_to_60_characters(tmp_path):
    assert os.path.basename(dropin._shared_run_dir(str(tmp_path), LONG_LABEL, "0", None, 1)).endswith("_" + "a" * 60)
    assert os.path.basename(dropin._shared_run_dir(str(tmp_path), LONG_LABEL, "0", None, 2)).endswith(
        f"_{'a' * 60}_job{os.getppid()}")


def test_ranks_whose_launcher_start_is_unknown_name_the_folder_by_the_day(tmp_path, monkeypatch):
    monkeypatch.setattr(dropin.os, "getppid", lambda: 2 ** 22 + 1)  # no such process
    day = time.strftime("%Y%m%d")
    path = dropin._shared_run_dir(str(tmp_path), "step", "0", None, 2)
    assert os.path.basename(path) in (f"{day}_step_job{2 ** 22 + 1}",
                                      f"{time.strftime('%Y%m%d')}_step_job{2 ** 22 + 1}")


def test_a_rank_on_the_node_of_the_first_adopts_its_existing_folder(tmp_path):
    import torch.distributed as dist

    store = dist.HashStore()
    store.set("lightx2v/torch_trace_profiler/job/5", "20990101-000000_first")
    (tmp_path / "20990101-000000_first").mkdir()
    (tmp_path / "20990101-000000_first" / "rank0_h.pt.trace.json").write_text("{}")
    path = dropin._shared_run_dir(str(tmp_path), "step", "job/5", store, 2)
    assert path == str(tmp_path / "20990101-000000_first")
    assert os.listdir(tmp_path) == ["20990101-000000_first"] and os.listdir(path) == ["rank0_h.pt.trace.json"]


def test_a_process_named_with_parentheses_still_reads_its_start_time(tmp_path):
    odd = tmp_path / "x) 1 2 3 4 5"
    odd.symlink_to("/bin/sleep")
    before, started, after = start_time_read([str(odd), "3"])
    assert started is not None and before - 1.5 <= started <= after + 1.5


def test_a_browser_that_does_not_answer_costs_the_hints_under_a_second(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    waiting = []
    try:
        for _ in range(8):  # fill the backlog: a further connection is left unanswered
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            waiting.append(s)
        time.sleep(0.1)
        (tmp_path / ".trace_browser").mkdir()
        (tmp_path / ".trace_browser" / "h.json").write_text(json.dumps({"port": port, "url": "http://h/"}))
        started = time.monotonic()
        url = dropin.trace_browser_url(str(tmp_path / "t.json"))
        took = time.monotonic() - started
    finally:
        for s in waiting:
            s.close()
        server.close()
    assert url is None and 0.25 <= took < 1.0


@pytest.fixture
def job_store(remote):
    """This rank's watcher connected to a job's store (an in-process c10d HashStore stands in for the job's)."""
    import torch.distributed as dist

    store = dist.HashStore()
    remote._job_store = lambda: store
    session = _site_session()
    session.last_job = dropin._JobArm(4, {}, session.last_site, "step")
    session.captures = 2
    return store


def test_a_request_to_a_jobs_rank_arms_the_job_through_its_store(remote, job_store, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    write_request(remote, json.dumps({"id": "r1", "by": "me"}))
    remote._take_request()
    assert messages(caplog) == ["[Profile] capture request from me: armed (the job's ranks agree on the call to "
                                "capture at)"]
    stored = json.loads(job_store.get("lightx2v/capture/job_arm/1/request"))
    assert (stored["id"], stored["by"]) == ("r1", "me")
    last = read_status(remote)["last_request"]
    assert (last["id"], last["by"], last["outcome"], last["reason"], last["captures_before"], last["job_arm"]) == (
        "r1", "me", "armed", None, 2, 4)
    assert remote.armed_generation == dropin._SESSION.generation and not os.path.exists(remote.request_path)
    write_request(remote, json.dumps({"id": "r1", "by": "another rank's file"}))  # the same request, again
    remote._take_request()
    assert messages(caplog)[-1] == ("[Profile] capture request from another rank's file: armed (the job's ranks "
                                    "agree on the call to capture at)")
    dropin._SESSION.last_job = None
    write_request(remote, json.dumps({"id": "r2", "by": "you"}))
    remote._take_request()
    assert messages(caplog)[-1] == "[Profile] capture request from you: already armed"
    assert read_status(remote)["last_request"]["job_arm"] is None


def test_a_refused_request_never_reaches_the_jobs_store(remote, job_store, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setenv("WORLD_SIZE", "2")
    write_request(remote, json.dumps({"id": "r1", "by": "me"}))
    remote._take_request()
    assert messages(caplog)[0].startswith("[Profile] capture request from me: refused: a 2-rank job without")
    assert not job_store.check(["lightx2v/capture/job_arm/1/request"])


def test_a_request_file_is_read_up_to_4096_characters(remote, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin._SESSION.claim()
    dropin._SESSION.release()
    write_request(remote, json.dumps({"by": "me", "pad": "x" * 4100}))
    remote._take_request()
    assert messages(caplog) == ["[Profile] capture request from a request file (Unterminated string starting at: "
                                "line 1 column 21 (char 20)): armed (the next first run() of any call site captures)"]
    assert time.time() - read_status(remote)["last_request"]["at"] < 60


@pytest.mark.parametrize("host,worker", [("h" * 50, "rank0_" + "h" * 40), ("🚀", "rank0_host")])
def test_on_trace_ready_names_the_trace_by_rank_and_host_slug(clean, monkeypatch, host, worker):
    monkeypatch.setattr(dropin.socket, "gethostname", lambda: host)
    dropin.make_on_trace_ready(TorchTraceProfileConfig(tb_dir="tb"))(_Prof("{}"))
    [run] = os.listdir(clean / "tb")
    assert os.listdir(clean / "tb" / run) == [worker + ".pt.trace.json"]


def test_on_trace_ready_in_a_job_agrees_on_one_run_directory_per_export_through_the_store(clean, monkeypatch):
    import torch.distributed as dist

    store = dist.HashStore()
    # torch.distributed's identity of a rank in a two-rank job (no process group can be made in one process)
    monkeypatch.setattr(dropin, "_distributed_identity", lambda: (1, 2, store))
    monkeypatch.setattr(dropin, "_on_trace_ready_exports", 0)
    store.set("lightx2v/torch_trace_profiler/on_trace_ready/2", "20990101-000000_second")
    handler = dropin.make_on_trace_ready(TorchTraceProfileConfig(tb_dir="tb"))
    handler(_Prof("{}"))
    handler(_Prof("{}"))
    first = store.get("lightx2v/torch_trace_profiler/on_trace_ready/1").decode()
    assert re.fullmatch(r"\d{8}-\d{6}_on_trace_ready", first)
    assert sorted(os.listdir(clean / "tb")) == sorted([first, "20990101-000000_second"])
    assert os.listdir(clean / "tb" / "20990101-000000_second") == [f"rank1_{HOST}.pt.trace.json"]
    assert dropin._on_trace_ready_exports == 2


def test_the_status_file_keeps_the_first_12_arguments_cut_to_200_characters(remote, monkeypatch):
    monkeypatch.setattr(dropin.sys, "argv", ["p" * 300] + [str(n) for n in range(20)])
    remote._write_status()
    status = read_status(remote)
    assert status["argv"] == ["p" * 200] + [str(n) for n in range(11)]
    assert time.time() - status["updated_at"] < 60


def test_before_torch_is_imported_the_status_is_a_single_processs_without_asking_torch(remote, monkeypatch):
    monkeypatch.setattr(dropin, "_distributed_identity", lambda: (5, 6, None))  # what asking torch would say
    monkeypatch.delitem(sys.modules, "torch")
    status = remote.status()
    assert (status["rank"], status["world_size"], status["job"]) == (0, 1, None)


def test_a_process_group_without_a_store_is_refused_even_without_world_size_set(clean, monkeypatch):
    # torch.distributed's identity of a rank whose group's store cannot be had (its private API changed)
    monkeypatch.setattr(dropin, "_distributed_identity", lambda: (0, 2, None))
    assert dropin._multi_rank_refusal().startswith("a 2-rank job without a process group")


def test_an_arm_by_reset_session_shows_no_earlier_requests_time(remote):
    remote.armed_at, remote.armed_by = 5.0, "cli"
    status = remote.status()
    assert (status["armed"], status["armed_at"], status["armed_by"]) == (True, None, "reset_session()")


def test_a_jobs_id_without_launcher_variables_is_job_and_a_long_one_is_cut_to_120(remote, monkeypatch):
    assert remote._job_status(2)["id"] == "job"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r" * 200)
    assert remote._job_status(2)["id"] == "r" * 120


@pytest.fixture
def fast_progress(monkeypatch, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin, "EXPORT_PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(dropin, "EXPORT_PROGRESS_EVERY", 0.05)


def test_a_long_export_says_how_much_of_kinetos_partial_file_is_written(tmp_path, fast_progress, caplog):
    stats = dropin._export_atomically(_Prof("{" + "x" * 2498 + "}", pause=0.4), str(tmp_path / "t.json"), False)
    lines = messages(caplog)
    pattern = (rf"\[Profile\] exporting {re.escape(str(tmp_path))}/t\.json: torch\.profiler writing: 2\.5 KB, 0 s"
               r"(, RSS [\d.]+ [KMG]B)?")
    assert lines and all(re.fullmatch(pattern, m) for m in lines), lines
    assert stats.progress_lines == len(lines)


def test_a_long_gzip_says_what_kineto_wrote_and_how_far_the_gzip_is(tmp_path, fast_progress, caplog, monkeypatch):
    monkeypatch.setattr(dropin, "GZIP_CHUNK", 16)  # a slow gzip pass
    dropin._export_atomically(_Prof("{" + "x" * 999_998 + "}"), str(tmp_path / "t.json.gz"), True)
    gzip_lines = [m for m in messages(caplog) if "; gzip: " in m]
    assert gzip_lines, messages(caplog)
    pattern = (rf"\[Profile\] exporting {re.escape(str(tmp_path))}/t\.json\.gz: torch\.profiler wrote 1\.0 MB in 0 s; "
               r"gzip: [\d.]+ [KM]?B of 1\.0 MB \(\d+ %\), [01] s(, RSS [\d.]+ [KMG]B)?")
    assert all(re.fullmatch(pattern, m) for m in gzip_lines), gzip_lines


def test_a_rank_that_gave_up_waiting_names_the_whole_wait_the_watchers_deadline_plus_the_margin(clean, monkeypatch):
    monkeypatch.setattr(dropin, "JOB_ANSWER_SECONDS", 0.3)
    monkeypatch.setattr(dropin, "JOB_WAIT_MARGIN_SECONDS", 0.4)
    session = dropin._SESSION
    site = dropin._Site(TorchTraceProfileConfig())
    site.calls = 10
    job = dropin._JobArm(1, {"id": "r"}, site, "step")
    assert session.join_job(job) is None
    site.calls = 13
    assert session.job_turn(site) is None
    assert job.reason == ("no plan within 1 s (the job's c10d store did not answer this rank); this rank does not "
                          "capture")


def test_a_jobs_capture_is_a_generation_unlike_every_earlier_one(clean):
    session = dropin._SESSION
    earlier = [session.generation, session.arm(), session.arm()]
    site = dropin._Site(TorchTraceProfileConfig())
    job = dropin._JobArm(1, {"id": "r"}, site, "step")
    assert session.join_job(job) is None
    session.plan_job(job, 3)
    site.calls = 3
    generation = session.job_turn(site)
    assert generation is not None and generation not in earlier
    assert session.rendezvous_of(generation) == "job_arm/1/run_dir"


@pytest.fixture
def process_group():
    """A one-rank gloo process group in this process, over an in-process store; destroyed afterwards."""
    import torch.distributed as dist

    store = dist.HashStore()
    dist.init_process_group("gloo", rank=0, world_size=1, store=store)
    try:
        yield dist
    finally:
        dist.destroy_process_group()


def test_with_a_process_group_the_identity_is_torchs_with_the_groups_store(clean, monkeypatch, process_group):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "9")
    rank, world_size, store = dropin._distributed_identity()
    assert (rank, world_size) == (0, 1) and store is not None
    store.set("k", "v")
    assert process_group.distributed_c10d._get_default_store().get("k") == b"v"


def test_with_a_process_group_whose_store_cannot_be_had_the_identity_has_none(clean, monkeypatch, process_group):
    def unavailable():
        raise RuntimeError("private API changed")

    monkeypatch.setattr(process_group.distributed_c10d, "_get_default_store", unavailable)
    assert dropin._distributed_identity() == (0, 1, None)


@pytest.mark.parametrize("rank,world_size", [("", ""), ("x", "2x"), (" ", "1.0")])
def test_rank_variables_that_are_empty_or_not_numbers_read_as_a_single_process(clean, monkeypatch, rank, world_size):
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world_size)
    assert dropin._distributed_identity() == (0, 1, None)
    status = TorchTraceProfiler.capture_status()  # the public call raised ValueError here
    assert (status["rank"], status["world_size"], status["remote_refused"]) == (0, 1, None)


def test_an_empty_world_size_does_not_cost_an_on_trace_ready_export(clean, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "")
    config = TorchTraceProfileConfig(profile_format="chrome")
    dropin.make_on_trace_ready(config)(_Prof("{}"))
    assert config.exported_chrome_path == str(clean / "save_results" / "trace.json")


def test_a_request_of_4097_characters_is_cut_after_the_4096th(remote, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    dropin._SESSION.claim()
    dropin._SESSION.release()
    text = json.dumps({"by": "me", "pad": "x" * 4074})
    assert len(text) == 4097
    write_request(remote, text)
    remote._take_request()
    assert messages(caplog)[0] == ("[Profile] capture request from a request file (Expecting ',' delimiter: line 1 "
                                   "column 4097 (char 4096)): armed (the next first run() of any call site captures)")


# ------------------------------------------------------------------- a capture's files and report, without torch
def capture(config: TorchTraceProfileConfig | None = None, label: str = "infer") -> dropin._Capture:
    return dropin._Capture(config or TorchTraceProfileConfig(tb_dir="tb"), label, 0, "run_dir/0")


def test_a_capture_knows_its_rank_and_starts_with_nothing_written(clean, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    c = capture()
    assert (c.label, c.generation, c.rendezvous, c.rank, c.world_size, c.store) == ("infer", 0, "run_dir/0", 2, 4,
                                                                                    None)
    assert (c.run_dir, c.log_dir, c.trace_paths, c.export_stats, c.errors, c.target_failed) == (
        None, None, [], {}, [], False)
    assert c._rank_tag() == " [rank 2/4]"
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert capture()._rank_tag() == ""


def test_a_tensorboard_capture_writes_one_trace_per_rank_into_a_new_run_directory(clean, monkeypatch):
    run_dir, log_dir, targets = capture(label="🚀 infer")._plan_outputs()
    assert log_dir == str(clean / "tb") and os.path.dirname(run_dir) == log_dir
    assert re.fullmatch(r"\d{8}-\d{6}_infer", os.path.basename(run_dir)) and os.path.isdir(run_dir)
    assert targets == [os.path.join(run_dir, f"rank0_{HOST}.pt.trace.json")]
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "11")
    monkeypatch.setattr(dropin.socket, "gethostname", lambda: "🚀")
    run_dir, _, targets = capture(TorchTraceProfileConfig(tb_dir="tb", use_gzip=True))._plan_outputs()
    assert targets == [os.path.join(run_dir, "rank03_host.pt.trace.json.gz")]
    monkeypatch.setattr(dropin.socket, "gethostname", lambda: "h" * 50)
    _, _, targets = capture()._plan_outputs()
    assert os.path.basename(targets[0]) == f"rank03_{'h' * 40}.pt.trace.json"


def test_a_chrome_capture_writes_the_configured_file_gz_and_per_rank(clean, monkeypatch):
    c = capture(TorchTraceProfileConfig(profile_format="chrome"))
    assert c._output_root() == str(clean / "save_results" / "trace.json")
    assert c._plan_outputs() == (None, None, [str(clean / "save_results" / "trace.json")])
    assert os.path.isdir(clean / "save_results")
    c = capture(TorchTraceProfileConfig(profile_format="chrome", chrome_path="o/t.json", use_gzip=True))
    assert c._plan_outputs() == (None, None, [str(clean / "o" / "t.json.gz")])
    c = capture(TorchTraceProfileConfig(profile_format="chrome", chrome_path="t.json.gz", use_gzip=True))
    assert c._plan_outputs()[2] == [str(clean / "t.json.gz")]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert capture(TorchTraceProfileConfig(profile_format="chrome"))._plan_outputs()[2] == [
        str(clean / "save_results" / "trace.rank1.json")]
    assert capture()._output_root() == str(clean / "tb")


def test_an_export_writes_each_target_and_an_error_is_kept_not_raised(clean):
    c = capture()
    good, bad = str(clean / "a.json"), str(clean / "missing" / "b.json")
    c._export(_Prof("{}"), [good, bad])
    assert c.trace_paths == [good] and list(c.export_stats) == [good]
    assert len(c.errors) == 1 and c.errors[0].startswith(f"could not write {bad}: FileNotFoundError(")
    assert c.write_fault_in == str(clean / "missing")  # no logdir planned: the folder it could not write into
    failed = capture()
    failed.target_failed = True
    failed._export(_Prof("{}"), [good])
    assert failed.trace_paths == [] and failed.errors == []


def test_an_export_that_cannot_write_names_the_logdir_for_the_watcher_and_another_error_does_not(clean):
    """The watcher says nothing more of a logdir the capture said it cannot write into (after_capture)."""
    c = capture()
    c.run_dir, c.log_dir, targets = c._plan_outputs()
    assert c.write_fault_in is None
    c._export(_Prof(""), targets)  # kineto's empty file on a full disk
    assert c.write_fault_in == str(clean / "tb") and c.trace_paths == []
    other = capture()
    other.run_dir, other.log_dir, targets = other._plan_outputs()
    other._export(_Prof(error=RuntimeError("kineto")), targets)
    assert other.write_fault_in is None and other.errors


class _Stops:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error, self.exits = error, []

    def __exit__(self, *exc) -> None:
        self.exits.append(exc)
        if self.error is not None:
            raise self.error


def test_stopping_the_profiler_exits_it_and_a_failure_is_a_warning(caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    prof = _Stops()
    dropin._Capture._stop(prof)
    assert prof.exits == [(None, None, None)] and messages(caplog) == []
    dropin._Capture._stop(_Stops(RuntimeError("kineto")))
    assert messages(caplog) == ["[Profile] stopping torch.profiler failed: RuntimeError('kineto')"]
    assert caplog.records[-1].levelno == logging.WARNING


def test_a_capture_without_a_trace_is_recorded_with_why_and_leaves_no_empty_run(clean, caplog):
    caplog.set_level(logging.INFO, PROFILE.name)
    c = capture()
    c.run_dir, c.log_dir, _ = c._plan_outputs()
    c._finish(5, time.perf_counter(), None)
    last = dropin._SESSION.last
    assert (last.label, last.profile_format, last.trace_paths, last.run_dir, last.log_dir, last.rank,
            last.world_size, last.calls, last.error) == (
        "infer", "tensorboard", [], c.run_dir, str(clean / "tb"), 0, 1, 5,
        "torch.profiler produced no trace (was the schedule cut short?)")
    assert 0 <= last.seconds < 5 and time.time() - last.finished_at < 60 and dropin._SESSION.captures == 1
    assert os.listdir(clean / "tb") == []
    assert messages(caplog) == ["[Profile] infer: torch.profiler produced no trace (was the schedule cut short?). "
                                "The session is done; call TorchTraceProfiler.reset_session() to capture again."]
    assert caplog.records[-1].levelno == logging.ERROR


def test_a_ranks_empty_run_directory_stays_for_the_other_ranks(clean, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    c = capture()
    c.run_dir, c.log_dir, _ = c._plan_outputs()
    c._record(0, time.perf_counter(), None)
    assert os.path.isdir(c.run_dir)


def test_a_run_directory_that_is_gone_or_not_empty_is_left_as_it_is(clean):
    c = capture()
    c.run_dir = str(clean / "gone")
    c._record(0, time.perf_counter(), None)
    c.run_dir = str(clean / "full")
    os.mkdir(c.run_dir)
    (clean / "full" / "x").write_text("")
    c._record(0, time.perf_counter(), None)
    assert os.listdir(clean / "full") == ["x"]


def test_an_aborted_capture_is_a_warning_with_the_reason_and_the_errors_joined(clean, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    c = capture()
    c._finish(1, time.perf_counter(), "the target raised ValueError('x')")
    assert dropin._SESSION.last.error == "the target raised ValueError('x')"
    assert messages(caplog) == ["[Profile] infer [rank 1/2]: the target raised ValueError('x'). The session is "
                                "done; call TorchTraceProfiler.reset_session() to capture again."]
    assert caplog.records[-1].levelno == logging.WARNING
    c.errors = ["could not write a", "could not write b"]
    c._report_failure("cannot create the trace directory")
    assert dropin._SESSION.last.error == "could not write a; could not write b; cannot create the trace directory"
    assert dropin._SESSION.last.calls == 0 and caplog.records[-1].levelno == logging.ERROR


def test_a_written_trace_is_reported_with_its_size_cost_summary_and_hints(clean, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setattr(dropin, "_fixed_tensorboard_command", lambda: None)
    TorchTraceProfiler.set_summary_handler(lambda path: [f"top op of {os.path.basename(path)}: aten::mm"])
    c = capture()
    c.run_dir, c.log_dir, targets = c._plan_outputs()
    Path(targets[0]).write_text("x" * 1500)
    c.trace_paths = list(targets)
    c.export_stats[targets[0]] = dropin._ExportStats(2.0)
    c._finish(5, time.perf_counter(), None)
    lines = messages(caplog)
    assert lines[:2] == [f"[Profile] infer: wrote {targets[0]} (1.5 KB; exported in 2.0 s)",
                         f"[Profile]   top op of rank0_{HOST}.pt.trace.json: aten::mm"]
    assert lines[2].splitlines()[:2] == ["[Profile] infer: trace ready (5 calls, 0.00 s)",
                                         f"  run directory: {c.run_dir}"]
    assert len(lines) == 3 and os.path.isdir(c.run_dir) and dropin._SESSION.last.error is None


def test_a_trace_written_without_its_cost_and_on_another_rank_gives_no_hints(clean, caplog, monkeypatch):
    caplog.set_level(logging.INFO, PROFILE.name)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    TorchTraceProfiler.set_summary_handler(None)
    c = capture()
    c.trace_paths = [str(clean / "t.json")]
    c._finish(5, time.perf_counter(), None)
    assert messages(caplog) == [f"[Profile] infer [rank 1/2]: wrote {clean}/t.json (size unknown)"]


def test_a_jobs_capture_writes_into_the_run_directory_its_ranks_agreed_on(clean, monkeypatch):
    import torch.distributed as dist

    store = dist.HashStore()
    store.set("lightx2v/torch_trace_profiler/job_arm/4/run_dir", "20990101-000000_agreed")
    # torch.distributed's identity of rank 1 of a two-rank job (no process group can be made in one process)
    monkeypatch.setattr(dropin, "_distributed_identity", lambda: (1, 2, store))
    c = dropin._Capture(TorchTraceProfileConfig(tb_dir="tb"), "infer", 3, "job_arm/4/run_dir")
    run_dir, _, targets = c._plan_outputs()
    assert run_dir == str(clean / "tb" / "20990101-000000_agreed")
    assert targets == [os.path.join(run_dir, f"rank1_{HOST}.pt.trace.json")]


def test_a_gzip_capture_exports_compressed_traces(clean):
    c = capture(TorchTraceProfileConfig(tb_dir="tb", use_gzip=True))
    c._export(_Prof("{}"), [str(clean / "t.json.gz")])
    assert gzip.decompress((clean / "t.json.gz").read_bytes()) == b"{}"


def test_a_watchers_first_status_has_no_request_and_a_refusal_counts_no_captures_before(remote, monkeypatch):
    assert dropin._RemoteControl().status()["last_request"] is None
    monkeypatch.setenv(dropin.ENV_ENABLE, "0")
    write_request(remote, json.dumps({"by": "me"}))
    remote._take_request()
    assert read_status(remote)["last_request"]["captures_before"] == 0


def test_a_new_job_arm_describes_itself_waiting_without_a_call_count_or_target():
    site = dropin._Site(TorchTraceProfileConfig())
    site.calls = 4
    assert dropin._JobArm(2, {"id": "q", "by": "me"}, site, "step").describe() == {
        "number": 2, "request_id": "q", "by": "me", "site": "step", "index": None, "target": None, "calls": 4,
        "state": "waiting", "reason": None, "ahead": 3}
