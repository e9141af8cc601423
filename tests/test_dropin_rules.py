"""The drop-in profiler's pure rules (`lightx2v.utils.torch_trace_profiler`), fast, without a capture: which config
values it refuses and the message that names the field, the per-rank trace names, file-name slugs and sizes, and the
job-arm moves. tests/test_profiler_failures.py checks the same refusals through the public context on real
captures; tests/test_capture_states.py the session's states."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightx2v.utils import torch_trace_profiler as dropin
from lightx2v.utils.torch_trace_profiler import JobArmState, TorchTraceProfileConfig


# ------------------------------------------------------------------------------------- the config's refusals
@pytest.mark.parametrize("kwargs,message", [
    ({"profile_format": "json"}, "profile_format must be one of ('tensorboard', 'chrome'), got 'json'"),
    ({"wait": 1.0}, "wait must be an int, got float 1.0"),
    ({"wait": True}, "wait must be an int, got bool True"),
    ({"wait": -1}, "wait must be >= 0, got -1"),
    ({"warmup": "3"}, "warmup must be an int, got str '3'"),
    ({"warmup": -2}, "warmup must be >= 0, got -2"),
    ({"active": 0}, "active must be >= 1, got 0"),
    ({"active": None}, "active must be an int, got NoneType None"),
    ({"tensorboard_port": 0}, "tensorboard_port must be an int in 1..65535, got 0"),
    ({"tensorboard_port": 65536}, "tensorboard_port must be an int in 1..65535, got 65536"),
    ({"tensorboard_port": "6006"}, "tensorboard_port must be an int in 1..65535, got '6006'"),
    ({"tb_dir": 3}, "tb_dir must be a path (str or os.PathLike) or None, got int"),
    ({"tb_dir": ""}, "tb_dir must not be empty"),
    ({"chrome_path": b"t.json"}, "chrome_path must be a path (str or os.PathLike) or None, got bytes"),
    ({"chrome_path": ""}, "chrome_path must not be empty"),
    ({"with_stack": 1}, "with_stack must be a bool, got int 1"),
    ({"use_gzip": "yes"}, "use_gzip must be a bool, got str 'yes'"),
    ({"record_shapes": None}, "record_shapes must be a bool, got NoneType None"),
    ({"profile_memory": 0}, "profile_memory must be a bool, got int 0"),
    ({"with_flops": 1.0}, "with_flops must be a bool, got float 1.0"),
    ({"memory_snapshot": "on"}, "memory_snapshot must be a bool, got str 'on'"),
])
def test_a_bad_config_value_is_refused_with_a_message_naming_the_field(kwargs, message):
    with pytest.raises(ValueError) as raised:
        TorchTraceProfileConfig(**kwargs)
    assert str(raised.value) == message


@pytest.mark.parametrize("kwargs", [
    {}, {"profile_format": "chrome"}, {"wait": 0, "warmup": 0, "active": 1}, {"tensorboard_port": 1},
    {"tensorboard_port": 65535}, {"tb_dir": "tb"}, {"tb_dir": Path("tb")}, {"chrome_path": "t.json"},
    {"with_stack": True, "use_gzip": True, "record_shapes": True, "profile_memory": True, "with_flops": True,
     "memory_snapshot": True},
])
def test_the_edges_of_each_range_and_every_flag_on_are_accepted(kwargs):
    config = TorchTraceProfileConfig(**kwargs)
    assert all(getattr(config, k) == v for k, v in kwargs.items())


def test_the_first_bad_field_is_the_one_named():
    with pytest.raises(ValueError, match="^profile_format "):
        TorchTraceProfileConfig(profile_format="x", wait=-1, with_stack=1)
    with pytest.raises(ValueError, match="^wait "):
        TorchTraceProfileConfig(wait=-1, active=0)
    with pytest.raises(ValueError, match="^active "):
        TorchTraceProfileConfig(active=0, tensorboard_port=0)
    with pytest.raises(ValueError, match="^tensorboard_port "):
        TorchTraceProfileConfig(tensorboard_port=0, tb_dir="")
    with pytest.raises(ValueError, match="^tb_dir "):
        TorchTraceProfileConfig(tb_dir="", chrome_path="")
    with pytest.raises(ValueError, match="^chrome_path "):
        TorchTraceProfileConfig(chrome_path="", with_stack=1)


def test_a_capture_calls_its_target_wait_plus_warmup_plus_active_times():
    config = TorchTraceProfileConfig(wait=2, warmup=3, active=4)
    assert config.calls == 9 and config.steps == 9


# ------------------------------------------------------------------------------------------- file names
@pytest.mark.parametrize("path,rank,world,named", [
    ("trace.json", 1, 2, "trace.rank1.json"),
    ("out/trace.json.gz", 0, 2, "out/trace.rank0.json.gz"),  # .json.gz kept together
    ("trace.gz", 3, 4, "trace.rank3.gz"),
    ("trace", 1, 2, "trace.rank1"),  # no known ending: the rank goes last
    ("trace.json", 3, 16, "trace.rank03.json"),  # as wide as the highest rank, so the names sort
    ("trace.json", 10, 11, "trace.rank10.json"),
    ("trace.json", 9, 10, "trace.rank9.json"),
])
def test_each_ranks_chrome_trace_gets_the_rank_before_its_ending(path, rank, world, named):
    assert dropin._with_rank_suffix(path, rank, world) == named


@pytest.mark.parametrize("label,limit,slug", [
    ("🚀 infer_main", 40, "infer_main"),
    ("denoise step", 40, "denoise_step"),
    ("a/b\\c:d", 40, "a_b_c_d"),
    ("..hidden-", 40, "hidden"),  # no leading or trailing dot, dash or underscore
    ("_x_", 40, "x"),
    ("v1.2-rc_3", 40, "v1.2-rc_3"),  # letters, digits and ._- stay
    ("Denoise X", 40, "Denoise_X"),  # upper case too, an X at either end included
    ("X-ray", 40, "X-ray"),
    ("abcdefgh", 3, "abc"),
])
def test_a_label_becomes_a_file_name_safe_slug(label, limit, slug):
    assert dropin._slug(label, limit) == slug


@pytest.mark.parametrize("size,said", [(0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (1500, "1.5 KB"),
                                       (999_949, "999.9 KB"), (1_000_000, "1.0 MB"), (2_500_000, "2.5 MB"),
                                       (1_000_000_000, "1.0 GB"), (12_300_000_000, "12.3 GB")])
def test_a_files_size_is_said_in_decimal_units_with_one_decimal(tmp_path, size, said):
    path = tmp_path / "f"
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no disk used
    assert dropin._size(str(path)) == said


def test_the_size_of_a_missing_file_is_unknown(tmp_path):
    assert dropin._size(str(tmp_path / "gone")) == "size unknown"


# -------------------------------------------------------------------------------------------- job-arm moves
def test_a_job_arm_moves_only_along_its_table_and_keeps_the_reason():
    arm = dropin._JobArm(1, {"id": "r"}, dropin._Site(TorchTraceProfileConfig()), "step")
    assert arm.state is JobArmState.WAITING
    assert not arm.move(JobArmState.CAPTURING)  # not before the plan
    assert arm.state is JobArmState.WAITING
    assert arm.move(JobArmState.ARMED)
    assert not arm.move(JobArmState.ABANDONED, "late")  # armed: it captures or misses its call
    assert (arm.state, arm.reason) == (JobArmState.ARMED, None)
    assert arm.move(JobArmState.CAPTURING) and arm.move(JobArmState.CAPTURED)
    assert not arm.move(JobArmState.WAITING)  # an end: no move out
    ended = dropin._JobArm(2, {}, arm.site, "step")
    assert ended.move(JobArmState.ABANDONED, "rank 1 did not answer")
    assert (ended.state, ended.reason) == (JobArmState.ABANDONED, "rank 1 did not answer")
    assert not ended.move(JobArmState.ARMED)


def test_a_job_arm_describes_itself_for_the_status_file():
    site = dropin._Site(TorchTraceProfileConfig())
    arm = dropin._JobArm(3, {"id": "r1", "by": "me", "at": 1.0}, site, "denoise")
    arm.index, arm.target = 40, 43
    arm.move(JobArmState.ARMED)
    assert arm.describe() == {"number": 3, "request_id": "r1", "by": "me", "site": "denoise", "index": 40,
                              "target": 43, "calls": site.calls, "state": "armed", "reason": None,
                              "ahead": dropin.JOB_AHEAD}


def test_a_store_value_reads_as_text_whether_bytes_or_not():
    assert dropin._text(b"call 7") == "call 7"
    assert dropin._text("call 7") == "call 7"
    assert dropin._text(7) == "7"


# ------------------------------------------------------------------------------- the session's transitions
# The table in _Session's docstring, one test a row or edge; each session is new (as in a new process).
@pytest.fixture
def session(monkeypatch):
    monkeypatch.delenv(dropin.ENV_ENABLE, raising=False)  # profiling on, as by default
    return dropin._Session()


def result(label: str) -> dropin.CaptureResult:
    return dropin.CaptureResult(label=label, profile_format="chrome", trace_paths=[], run_dir=None, log_dir=None,
                                rank=0, world_size=1, calls=1, seconds=0.1)


def test_a_new_session_is_armed_idle_and_has_captured_nothing(session):
    # what the status file and session_done() show before the first capture: plain False, none, zero
    assert (session.claimed, session.capturing, session.last, session.captures, session.last_site,
            session.job, session.last_job) == (False, False, None, 0, None, None, None)


def test_the_first_claim_captures_and_every_later_one_runs_plain(session):
    generation = session.claim()
    assert generation is not None and (session.claimed, session.capturing) == (True, True)
    assert session.claim() is None  # while capturing
    session.release()
    assert (session.claimed, session.capturing) == (True, False)
    assert session.claim() is None  # the session's capture is done: later calls run plain


def test_a_capture_under_way_is_never_claimed_twice_even_after_a_new_session_is_armed(session):
    assert session.claim() is not None
    session.arm()  # reset_session() during the capture
    assert session.claim() is None and session.capturing
    session.release()
    assert session.claim() is not None  # the new session's first call captures


def test_with_profiling_off_a_claim_uses_up_the_session_without_capturing(session, monkeypatch):
    monkeypatch.setenv(dropin.ENV_ENABLE, "0")
    assert session.claim() is None and (session.claimed, session.capturing) == (True, False)


def test_each_arm_is_a_new_generation_and_a_new_session(session):
    first = session.claim()
    session.release()
    second = session.arm()
    assert second != first and session.claimed is False
    assert session.claim() == second
    session.release()
    third = session.arm()
    assert third not in (first, second)


def test_recording_keeps_the_last_result_and_counts_every_capture(session):
    session.record(result("a"))
    session.record(result("b"))
    assert (session.last.label, session.captures) == ("b", 2)


def test_a_request_is_noted_with_the_generation_and_captures_it_left(session):
    noted = []
    session.claim()
    session.record(result("a"))
    session.release()
    answer = session.request_arm(None, lambda *args: noted.append(args))
    assert answer == (dropin.ArmOutcome.ARMED, None)
    assert noted == [((dropin.ArmOutcome.ARMED, None), session.generation, 1)]
    assert session.claim() == noted[0][1]


def arm_at(session, calls: int) -> tuple[dropin._JobArm, dropin._Site]:
    site = dropin._Site(TorchTraceProfileConfig())
    site.calls = calls
    job = dropin._JobArm(1, {"id": "r"}, site, "step")
    assert session.join_job(job) is None
    return job, site


def test_joining_a_job_is_refused_while_capturing_or_while_another_arm_is_not_over(session):
    session.claim()
    site = dropin._Site(TorchTraceProfileConfig())
    assert session.join_job(dropin._JobArm(1, {}, site, "step")) == "capturing now"
    session.release()
    first = dropin._JobArm(1, {}, site, "step")
    assert session.join_job(first) is None
    assert session.join_job(dropin._JobArm(2, {}, site, "step")) == "job arm 1 is not over"
    assert session.job is first and session.claimed is False  # every run() asks job_turn() now


def test_every_job_arm_transition_changes_the_count_the_watcher_watches(session):
    seen = [session.job_changes]

    def changed() -> None:
        assert session.job_changes != seen[-1]
        seen.append(session.job_changes)

    job, site = arm_at(session, 10)
    changed()
    session.plan_job(job, 13)
    changed()
    site.calls = 13
    assert session.job_turn(site) is not None
    changed()
    session.release()
    changed()
    job2, site2 = arm_at(session, 20)  # the next arm: abandoned
    changed()
    session.plan_job(job2, None, "no plan")
    changed()
    job3, site3 = arm_at(session, 30)  # and one missed
    changed()
    session.plan_job(job3, 33)
    changed()
    site3.calls = 34
    assert session.job_turn(site3) is None
    changed()
    assert len(set(seen)) == len(seen)


def test_a_jobs_capture_is_a_new_generation_whose_run_directory_is_named_by_the_arm(session):
    before = session.generation
    job, site = arm_at(session, 10)
    session.plan_job(job, 13)
    site.calls = 13
    generation = session.job_turn(site)
    assert generation is not None and generation != before and job.generation == generation
    assert session.rendezvous_of(generation) == "job_arm/1/run_dir"
    assert session.rendezvous_of(before) == f"run_dir/{before}"  # not the arm's capture


def test_a_plain_session_names_its_run_directory_by_its_generation(session):
    generation = session.claim()
    assert session.rendezvous_of(generation) == f"run_dir/{generation}"


def test_a_missed_call_ends_the_arm_and_puts_the_rank_back_on_the_steady_path(session):
    job, site = arm_at(session, 0)
    session.plan_job(job, 3)
    site.calls = 4
    assert session.job_turn(site) is None
    assert (job.state, session.job, session.claimed) == (JobArmState.MISSED, None, True)


def test_another_call_site_never_takes_a_jobs_turn(session):
    job, site = arm_at(session, 0)
    session.plan_job(job, 3)
    other = dropin._Site(TorchTraceProfileConfig())
    other.calls = 3
    assert session.job_turn(other) is None and job.state is JobArmState.ARMED


def test_an_armed_job_without_a_target_captures_nothing(session):
    job, site = arm_at(session, 0)
    job.move(JobArmState.ARMED)  # a plan without a call (never written so, but never trusted)
    site.calls = 3
    assert session.job_turn(site) is None and not session.capturing


@pytest.fixture
def short_wait(monkeypatch):
    """The wait for a plan: 0.1 + 0.1 s."""
    monkeypatch.setattr(dropin, "JOB_ANSWER_SECONDS", 0.1)
    monkeypatch.setattr(dropin, "JOB_WAIT_MARGIN_SECONDS", 0.1)


def test_a_rank_waits_for_the_plan_only_from_its_joining_count_plus_job_ahead(session, short_wait):
    job, site = arm_at(session, 10)
    for calls in (11, 12):  # below 10 + JOB_AHEAD: the agreed call cannot be this one, no wait
        site.calls = calls
        assert session.job_turn(site) is None and job.state is JobArmState.WAITING
    site.calls = 13  # the agreed call may be this one: wait for the plan, none comes, the rank gives up
    assert session.job_turn(site) is None
    assert (job.state, job.reason) == (JobArmState.ABANDONED, "no plan within 0 s (the job's c10d store did not "
                                                              "answer this rank); this rank does not capture")
    assert session.job is None and session.claimed


def test_a_plan_that_comes_during_the_wait_is_followed(session, monkeypatch):
    import threading
    import time

    monkeypatch.setattr(dropin, "JOB_ANSWER_SECONDS", 5.0)  # waits up to 9 s; the plan comes after 1.5 s
    monkeypatch.setattr(dropin, "JOB_WAIT_MARGIN_SECONDS", 4.0)
    job, site = arm_at(session, 10)
    site.calls = 13
    later = threading.Timer(1.5, session.plan_job, (job, 13))
    later.start()
    started = time.monotonic()
    try:
        generation = session.job_turn(site)
    finally:
        later.cancel()
    assert generation is not None and job.state is JobArmState.CAPTURING
    assert 1.0 < time.monotonic() - started < 8.0


def test_an_unknown_switch_word_warns_with_the_words_it_takes_slash_separated(monkeypatch, caplog):
    import logging

    monkeypatch.setattr(dropin, "_FLAGS_WARNED", set())
    monkeypatch.setenv("LIGHTX2V_TEST_SWITCH", "flase")
    caplog.set_level(logging.WARNING, logger=dropin.__name__)
    assert dropin._env_flag("LIGHTX2V_TEST_SWITCH", True) is True
    assert [r.getMessage() for r in caplog.records if r.name == dropin.__name__] == [
        "[Profile] LIGHTX2V_TEST_SWITCH='flase' is not an on/off word (1/true/yes/on or 0/false/no/off, any case); "
        "keeping the default: on"]
