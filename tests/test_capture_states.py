"""States and outcomes, named: the drop-in moves one rank's job arm only along its table, answers a request with one
of its outcomes, and writes the bare word with the reason apart; the stack reads those (and what older drop-ins
wrote) by equality. Fast: no torchrun here (tests/test_capture_jobs.py drives the real jobs)."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time

import pytest

from lightx2v.capture import jobs
from lightx2v.capture.control import NotArmed, Process, arm, explain, job_arm_state, read_process, request_outcome
from lightx2v.utils import torch_trace_profiler as dropin
from lightx2v.utils.torch_trace_profiler import ArmOutcome, JobArmState, TorchTraceProfileConfig

# The lifecycle as docs/capture.md tells it, written out by hand: (from, to) for every move an arm may make.
ALLOWED = {("waiting", "armed"), ("waiting", "abandoned"), ("armed", "capturing"), ("armed", "missed"),
           ("capturing", "captured")}
WORDS = ["waiting", "armed", "capturing", "captured", "abandoned", "missed"]


def new_arm(site=None) -> "dropin._JobArm":
    site = site or dropin._Site(TorchTraceProfileConfig())
    return dropin._JobArm(1, {"id": "r1", "by": "a test"}, site, "step")


# ------------------------------------------------------------------------------------------------ the drop-in
def test_the_states_are_the_bare_words():
    assert [s.value for s in JobArmState] == WORDS


@pytest.mark.parametrize(("start", "to"), list(itertools.product(WORDS, WORDS)))
def test_an_arm_moves_only_along_the_table(start, to):
    arm = new_arm()
    arm.state = JobArmState(start)
    moved = arm.move(JobArmState(to), "why" if to in ("abandoned", "missed") else None)
    assert moved is ((start, to) in ALLOWED)
    assert arm.state.value == (to if moved else start)


def test_a_rank_s_arm_from_join_to_capture_as_the_status_file_shows_it():
    session, site = dropin._Session(), dropin._Site(TorchTraceProfileConfig())
    site.calls = 10
    arm = new_arm(site)
    assert session.join_job(arm) is None and arm.index == 10
    assert (arm.describe()["state"], arm.describe()["reason"]) == ("waiting", None)
    session.plan_job(arm, 13)
    session.plan_job(arm, None, "too late")  # a second plan changes nothing: the first one is every rank's
    assert (arm.describe()["state"], arm.describe()["target"], arm.describe()["reason"]) == ("armed", 13, None)
    for calls in (11, 12):
        site.calls = calls
        assert session.job_turn(site) is None  # not yet the agreed call
    site.calls = 13
    assert session.job_turn(site) is not None and session.capturing
    assert arm.describe()["state"] == "capturing"
    session.release()
    assert arm.describe()["state"] == "captured" and session.claimed and session.job is None
    session.release()  # a later capture's release leaves the arm as it is
    assert json.loads(json.dumps(arm.describe()))["state"] == "captured"


def test_an_abandoned_arm_writes_the_word_and_the_reason_apart():
    session = dropin._Session()
    arm = new_arm()
    session.join_job(arm)
    target, reason = dropin._read_plan("abandoned: rank 1 did not answer within 10 s (or gone)")
    session.plan_job(arm, target, reason)
    described = arm.describe()
    assert (described["state"], described["reason"]) == ("abandoned", "rank 1 did not answer within 10 s (or gone)")
    assert session.job is None and session.claimed  # back on the steady path
    assert dropin._read_plan("call 17") == (17, None)


def test_a_call_past_the_plan_is_missed_never_captured():
    session, site = dropin._Session(), dropin._Site(TorchTraceProfileConfig())
    arm = new_arm(site)
    session.join_job(arm)
    session.plan_job(arm, 3)
    site.calls = 4
    assert session.job_turn(site) is None and not session.capturing
    assert arm.describe()["state"] == "missed"
    assert arm.describe()["reason"] == "call 4 ran before the plan for call 3 arrived"


# ------------------------------------------------------------------------------------------------ the stack
@pytest.mark.parametrize(("written", "state", "reason"), [
    ({"state": "waiting"}, JobArmState.WAITING, None),
    ({"state": "armed", "target": 7}, JobArmState.ARMED, None),
    ({"state": "capturing"}, JobArmState.CAPTURING, None),
    ({"state": "captured"}, JobArmState.CAPTURED, None),
    ({"state": "abandoned", "reason": "rank 1 did not answer"}, JobArmState.ABANDONED, "rank 1 did not answer"),
    ({"state": "missed", "reason": "call 9 ran first"}, JobArmState.MISSED, "call 9 ran first"),
    # what older drop-ins wrote: the word, then more words or the reason after a colon
    ({"state": "waiting for every rank"}, JobArmState.WAITING, None),
    ({"state": "armed for call 7", "target": 7}, JobArmState.ARMED, None),
    ({"state": "abandoned: rank 1 did not answer within 10 s (x; y)"}, JobArmState.ABANDONED,
     "rank 1 did not answer within 10 s (x; y)"),
    ({"state": "missed: call 9 ran before the plan for call 8 arrived"}, JobArmState.MISSED,
     "call 9 ran before the plan for call 8 arrived"),
    # a word of no state stays as written
    ({"state": "frobnicated"}, "frobnicated", None),
    ({}, "", None),
])
def test_the_stack_reads_each_state_new_and_old(written, state, reason):
    assert job_arm_state(written) == (state, reason)


def rank(r: int, arm: dict, captures: int = 1) -> Process:
    status = {"protocol": 1, "pid": 100 + r, "host": "h", "rank": r, "world_size": 2, "heartbeat_seconds": 2.0,
              "captures": captures, "job": {"id": "j", "arm": {"number": 1, "site": "step", "calls": 40, **arm}}}
    now = time.time()
    return Process(f"h_{100 + r}", f"/nowhere/h_{100 + r}.status.json", status, now, now)


OLD_AND_NEW = pytest.mark.parametrize("old", [False, True], ids=["new", "old"])


@OLD_AND_NEW
def test_the_job_line_from_each_rank_s_state(old):
    def arm(state: str, reason=None, target=44) -> dict:
        if old:
            text = {"waiting": "waiting for every rank", "armed": f"armed for call {target}"}.get(state, state)
            return {"state": f"{text}: {reason}" if reason else text, "target": target}
        return {"state": state, "reason": reason, "target": target}

    def line(*arms: dict) -> str:
        return jobs.arm_state(jobs.Job("j", [rank(r, a) for r, a in enumerate(arms)]))

    assert line(arm("waiting", target=None), arm("armed")) == "ARMED: arm 1 waiting for every rank to join"
    assert line(arm("armed"), arm("capturing")) == \
        "ARMED: every rank captures call 44 of 'step' (rank 0 at 40, rank 1 at 40)"
    assert line(arm("captured"), arm("captured")) == "not armed"
    assert line(arm("armed"), arm("abandoned", "rank 1 did not answer within 10 s")) == \
        "arm 1 ended: rank 1: abandoned: rank 1 did not answer within 10 s"
    assert line(arm("missed", "call 45 ran before the plan for call 44 arrived"), arm("captured")) == \
        "arm 1 ended: rank 0: missed: call 45 ran before the plan for call 44 arrived"


@OLD_AND_NEW
def test_the_wait_ends_with_the_reason_of_an_abandoned_arm(tmp_path, old):
    why = "rank 1 did not answer within 10 s (never made a capture, so no watcher; or gone)"
    arm = {"state": f"abandoned: {why}"} if old else {"state": "abandoned", "reason": why}
    path = tmp_path / "h_100.status.json"
    path.write_text(json.dumps(rank(0, arm).status))
    job = jobs.Job("j", [read_process(str(path))])
    with pytest.raises(NotArmed) as raised:
        jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {0: 1}}, timeout=5)
    assert str(raised.value) == f"job j: arm 1: rank 0: abandoned: {why}"


def test_a_rank_s_place_in_a_timed_out_wait_reads_as_before(tmp_path):
    path = tmp_path / "h_100.status.json"
    path.write_text(json.dumps(rank(0, {"state": "armed", "target": 44}).status))
    job = jobs.Job("j", [read_process(str(path))])
    with pytest.raises(NotArmed, match=r"\(rank 0: arm 1: armed for call 44 of 'step', at call 40\)"):
        jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {0: 1}}, timeout=0.1)


# ------------------------------------------------------------------------------------------- request outcomes
OFF = "profiling is off in this process (LIGHTX2V_TORCH_PROFILE)"


def test_the_outcomes_are_the_bare_words():
    assert [o.value for o in ArmOutcome] == ["armed", "already armed", "capturing now", "refused"]


def test_the_session_answers_a_request_with_an_outcome_and_a_reason_apart(monkeypatch):
    monkeypatch.delenv("LIGHTX2V_TORCH_PROFILE", raising=False)
    session, noted = dropin._Session(), []

    def note(answer, generation, captures):
        noted.append(answer)

    assert session.request_arm(None, note) == ("already armed", None)  # a new session is armed
    session.claim()
    assert session.request_arm(None, note) == ("capturing now", None)
    session.release()
    assert session.request_arm("a 2-rank job without a process group", note) == \
        ("refused", "a 2-rank job without a process group")
    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE", "0")
    assert session.request_arm(None, note) == ("refused", OFF)
    monkeypatch.delenv("LIGHTX2V_TORCH_PROFILE")
    assert session.request_arm(None, note) == ("armed", None) and not session.claimed
    assert noted == [("already armed", None), ("capturing now", None),
                     ("refused", "a 2-rank job without a process group"), ("refused", OFF), ("armed", None)]


def test_the_status_file_holds_the_word_and_the_reason(tmp_path, monkeypatch, fresh_profiler_session):
    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE", "0")
    remote = dropin._RemoteControl()
    remote.status_path, remote.request_path = str(tmp_path / "h_1.status.json"), str(tmp_path / "h_1.request")
    (tmp_path / "h_1.request").write_text(json.dumps({"id": "r1", "by": "a test"}))
    remote._take_request()
    last = json.loads((tmp_path / "h_1.status.json").read_text())["last_request"]
    assert (last["id"], last["outcome"], last["reason"]) == ("r1", "refused", OFF)


@pytest.mark.parametrize(("written", "outcome", "reason"), [
    ({"outcome": "armed"}, ArmOutcome.ARMED, None),
    ({"outcome": "already armed", "reason": None}, ArmOutcome.ALREADY_ARMED, None),
    ({"outcome": "capturing now"}, ArmOutcome.CAPTURING_NOW, None),
    ({"outcome": "refused", "reason": OFF}, ArmOutcome.REFUSED, OFF),
    ({"outcome": f"refused: {OFF}"}, ArmOutcome.REFUSED, OFF),  # what older drop-ins wrote
    ({"outcome": "frobnicated"}, "frobnicated", None),
    ({}, "?", None),
])
def test_the_stack_reads_each_outcome_new_and_old(written, outcome, reason):
    assert request_outcome(written) == (outcome, reason)


@OLD_AND_NEW
def test_a_refusal_reads_the_same_from_either_file(tmp_path, old):
    """A process answering the request as the drop-in does, from its status file: the command's error and line."""
    status_path = tmp_path / "h_100.status.json"
    status = {"protocol": 1, "pid": 100, "host": "h", "heartbeat_seconds": 2.0, "exited_at": None}
    status_path.write_text(json.dumps(status))
    process = read_process(str(status_path))

    def answer() -> None:
        request = tmp_path / "h_100.request"
        deadline = time.monotonic() + 10
        while not request.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        request_id = json.loads(request.read_text())["id"]
        last = {"id": request_id, "outcome": f"refused: {OFF}"} if old else \
            {"id": request_id, "outcome": "refused", "reason": OFF}
        status_path.write_text(json.dumps({**status, "last_request": last}))
        os.utime(status_path)

    responder = threading.Thread(target=answer)
    responder.start()
    try:
        with pytest.raises(NotArmed) as raised:
            arm(process, by="a test", ack_seconds=10)
    finally:
        responder.join()
    assert str(raised.value) == f"h_100: refused: {OFF}"
    refused = {"outcome": f"refused: {OFF}"} if old else {"outcome": "refused", "reason": OFF}
    assert explain(process, refused) == f"h_100: refused: {OFF}"
    assert explain(process, {"outcome": "already armed"}) == \
        "h_100: already armed: pid 100 captures at its next first run()"
    job = jobs.Job("j", [rank(0, {"state": "waiting"}), rank(1, {"state": "waiting"})])
    assert jobs.explain_job(job, {**refused, "job_arm": 2}) == f"job j: refused: {OFF} (job arm 2)"
    assert jobs.explain_job(job, {"outcome": "armed", "job_arm": 2}).startswith("job j: armed (job arm 2): its 2 ranks")
