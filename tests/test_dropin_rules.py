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
