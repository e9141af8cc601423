"""`python -m lightx2v.capture` (`lightx2v.capture.__main__`), fast and in-process: main(argv) on hand-written
status files, a thread in the place of each profiled process answering its arm request by rewriting its status (as
the drop-in does): listing, choosing what to arm (a process, a job, everything running), arming, --wait, the
answers printed and the exit status; each expected line written by hand. tests/test_capture_cli.py runs the
command itself against real processes."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lightx2v.capture.__main__ import main, positive_pid, positive_seconds
from lightx2v.capture.control import WHY_NOT_LISTED

from helpers.cli import in_process

NOW = time.time()
REFUSED = "a job without a store"


@pytest.fixture(autouse=True)
def no_settings(monkeypatch):
    """The command's defaults, whatever this shell has set."""
    monkeypatch.delenv("LIGHTX2V_TORCH_PROFILE_DIR", raising=False)
    monkeypatch.delenv("LIGHTX2V_RESULTS_DIR", raising=False)


run = functools.partial(in_process, main)  # run(capsys, *argv): status, stdout, stderr


def status(pid: int, rank: int = 0, world: int = 1, **extra) -> dict:
    return {"protocol": 1, "pid": pid, "host": "h", "rank": rank, "world_size": world, "heartbeat_seconds": 2.0,
            "argv": ["infer.py", "--steps", "4"], "captures": 1, **extra}


def write(control: Path, st: dict, age: float = 0.0) -> Path:
    """The status file of ``st`` in the ``.capture`` folder ``control``, last written ``age`` seconds ago."""
    control.mkdir(parents=True, exist_ok=True)
    path = control / f"{st['host']}_{st['pid']}.status.json"
    path.write_text(json.dumps(st))
    at = time.time() - age
    os.utime(path, (at, at))
    return path


def answers(control: Path, ident: str, then: Callable[[str], None]) -> threading.Thread:
    """A process answering: once ``<ident>.request`` appears, it takes it (as the drop-in does, removing it) and
    ``then(the request's id)`` rewrites status files."""
    def wait_and_answer() -> None:
        request = control / f"{ident}.request"
        deadline = time.monotonic() + 10
        while not request.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        request_id = json.loads(request.read_text())["id"]
        request.unlink()
        then(request_id)

    thread = threading.Thread(target=wait_and_answer, daemon=True)
    thread.start()
    return thread


def armed(control: Path, pid: int, captures: int = 1, **capture) -> threading.Thread:
    """Process ``pid`` answers 'armed' and, when ``capture`` is given, has then made that capture."""
    def then(request_id: str) -> None:
        st = status(pid, captures=captures, last_request={"id": request_id, "outcome": "armed",
                                                          "captures_before": captures})
        if capture:
            st.update(captures=captures + 1, last_capture=capture)
        write(control, st)
    return answers(control, f"h_{pid}", then)


def rank_status(r: int, job_arm: dict | None = None, **extra) -> dict:
    return status(100 + r, r, 2, job={"id": "j", "launcher_pid": 99, "arm": job_arm}, **extra)


def job_armed(control: Path, *captures: dict | None) -> threading.Thread:
    """Job j's rank 0 answers 'armed' (job arm 7); each rank then made its capture (None: not yet)."""
    def then(request_id: str) -> None:
        for r, capture in enumerate(captures):
            extra = {"last_request": {"id": request_id, "outcome": "armed", "job_arm": 7}} if r == 0 else {}
            arm = {"number": 7, "state": "captured" if capture else "armed", "site": "step", "calls": 40,
                   "target": 44}
            if capture:
                extra.update(captures=2, last_capture=capture)
            write(control, rank_status(r, arm, **extra))
    return answers(control, "h_100", then)


def job(control: Path, ranks: tuple[int, ...] = (0, 1)) -> None:
    for r in ranks:
        write(control, rank_status(r), age=r)


# ------------------------------------------------------------------------------------------------------- values
def test_a_wait_is_a_positive_finite_number_of_seconds():
    assert positive_seconds("0.5") == 0.5 and positive_seconds("600") == 600.0
    for text, said in (("0", "expected a positive, finite number of seconds, got '0'"),
                       ("-5", "expected a positive, finite number of seconds, got '-5'"),
                       ("inf", "expected a positive, finite number of seconds, got 'inf'"),
                       ("nan", "expected a positive, finite number of seconds, got 'nan'"),
                       ("soon", "expected a number of seconds, got 'soon'")):
        with pytest.raises(Exception) as raised:
            positive_seconds(text)
        assert str(raised.value) == said


def test_a_pid_is_a_positive_whole_number():
    assert positive_pid("1") == 1 and positive_pid(" 1234 ") == 1234
    for text in ("0", "-3", "x", "1.5", "", "¹", "²³", "٣", "+5", "9" * 5000):  # isdigit() takes ¹, int() does not
        with pytest.raises(Exception) as raised:
            positive_pid(text)
        assert str(raised.value) == f"expected a process id (a positive integer), got {text!r}"


@pytest.mark.parametrize("flag,value,said", [
    ("--wait", "0", "argument --wait: expected a positive, finite number of seconds, got '0'"),
    ("--pid", "x", "argument --pid: expected a process id (a positive integer), got 'x'")])
def test_bad_flag_values_are_usage_errors(tmp_path, capsys, flag, value, said):
    status_, out, err = run(capsys, "arm", flag, value, str(tmp_path))
    assert status_ == 2 and out == "" and err.splitlines()[-1] == f"python -m lightx2v.capture: error: {said}"


def test_an_unknown_action_is_a_usage_error(tmp_path, capsys):
    status_, _, err = run(capsys, "disarm", str(tmp_path))
    assert status_ == 2 and "argument action: invalid choice: 'disarm' (choose from 'list', 'arm')" in err


def test_help_shows_the_usage_the_docstring_the_options_and_the_settings(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "3000")
    status_, out, _ = run(capsys, "--help")
    assert status_ == 0
    assert out.startswith("usage: python -m lightx2v.capture [-h] [--pid PID] [--id IDENT] [--job JOB_ID] "
                          "[--wait SECONDS] [--json] [{list,arm}] [folder]\n\n`python -m lightx2v.capture`: list the "
                          "processes writing captures under a folder, or arm their next capture.\n\n    python -m "
                          "lightx2v.capture                          # list the processes writing under the default "
                          "folder\n")
    text = " ".join(out.split())
    for line in ("folder a logdir or a folder above it (default $LIGHTX2V_TORCH_PROFILE_DIR, else "
                 "$LIGHTX2V_RESULTS_DIR, else save_results)",
                 "--pid PID arm only this process (a rank's or torchrun's pid: its whole job)",
                 "--id IDENT arm only this process, by the id the list shows (<host>_<pid>)",
                 "--job JOB_ID arm only this multi-rank job, by the id the list shows",
                 "--wait SECONDS wait up to SECONDS for the capture",
                 "--json list: print the status files as JSON",
                 "environment (each flag's default comes from its variable; docs/settings.md): "
                 "LIGHTX2V_TORCH_PROFILE_DIR the TensorBoard logdir"):
        assert line in text, line
    assert "\n  LIGHTX2V_TORCH_PROFILE_DIR  the TensorBoard logdir" in out  # as written: not re-wrapped


# ----------------------------------------------------------------------------------------------- which folder
def test_a_missing_folder_or_a_file_is_a_usage_error(tmp_path, capsys):
    status_, _, err = run(capsys, "list", str(tmp_path / "no" / "such"))
    assert status_ == 2
    assert err.splitlines()[-1] == f"python -m lightx2v.capture: error: {tmp_path / 'no' / 'such'}: no such folder"
    (tmp_path / "a_file").write_text("x")
    status_, _, err = run(capsys, "arm", str(tmp_path / "a_file"))
    assert status_ == 2
    assert err.splitlines()[-1] == f"python -m lightx2v.capture: error: {tmp_path / 'a_file'}: not a folder"


def test_without_a_folder_the_default_is_save_results_and_says_how_to_name_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status_, _, err = run(capsys)
    assert status_ == 2 and err.splitlines()[-1] == (
        f"python -m lightx2v.capture: error: {tmp_path / 'save_results'}: no such folder (the default: name a "
        "folder, or set $LIGHTX2V_TORCH_PROFILE_DIR)")
    (tmp_path / "save_results").write_text("x")
    status_, _, err = run(capsys)
    assert status_ == 2 and err.splitlines()[-1] == (
        f"python -m lightx2v.capture: error: {tmp_path / 'save_results'}: not a folder (the default: name a "
        "folder, or set $LIGHTX2V_TORCH_PROFILE_DIR)")


def test_the_default_folder_comes_from_the_profile_dir_then_the_results_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "profile" / ".capture", status(1))
    write(tmp_path / "results" / "tb" / ".capture", status(2))
    monkeypatch.setenv("LIGHTX2V_RESULTS_DIR", "results")
    assert run(capsys) == (0, "h_2: pid 2 on h; [running]; infer.py --steps 4; not armed\n", "")
    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE_DIR", "profile")
    assert run(capsys) == (0, "h_1: pid 1 on h; [running]; infer.py --steps 4; not armed\n", "")


# ---------------------------------------------------------------------------------------------------- listing
def test_list_prints_one_line_per_process_newest_first(tmp_path, capsys):
    write(tmp_path / "tb" / ".capture", status(1), age=3)
    write(tmp_path / "tb" / ".capture", status(2, exited_at=NOW - 60), age=1)
    out = run(capsys, "list", str(tmp_path))[1]
    assert out.splitlines() == ["h_2: pid 2 on h; [exited]; infer.py --steps 4",
                                "h_1: pid 1 on h; [running]; infer.py --steps 4; not armed"]


def test_list_prints_a_job_as_one_line(tmp_path, capsys):
    job(tmp_path / "tb" / ".capture")
    assert run(capsys, "list", str(tmp_path)) == (
        0, "job j: 2 ranks on h (0: pid 100, 1: pid 101); [running]; infer.py --steps 4; launcher pid 99; not armed\n",
        "")


def test_list_json_prints_each_status_file_with_its_id_and_state(tmp_path, capsys):
    write(tmp_path / "tb" / ".capture", status(1))
    job(tmp_path / "tb" / ".capture", ranks=(0,))
    status_, out, err = run(capsys, "list", "--json", str(tmp_path))
    assert (status_, err) == (0, "") and out.startswith('[\n {\n  "id": "h_')  # indented by one
    listed = sorted(json.loads(out), key=lambda p: p["id"])
    assert listed == [{"id": "h_1", "state": "running", **status(1)},
                      {"id": "h_100", "state": "running", **rank_status(0)}]


def test_list_of_a_folder_without_processes_says_why_none_shows(tmp_path, capsys):
    assert run(capsys, "list", str(tmp_path)) == (
        0, f"no process has written captures under {tmp_path} ({WHY_NOT_LISTED})\n", "")
    assert run(capsys, "list", "--json", str(tmp_path)) == (0, "[]\n", "")


def test_a_search_that_stops_at_its_folder_limit_says_so(tmp_path, capsys):
    for i in range(5001):
        (tmp_path / f"d{i:04}").mkdir()
    status_, out, err = run(capsys, "list", str(tmp_path))
    assert status_ == 0 and out == f"no process has written captures under {tmp_path} ({WHY_NOT_LISTED})\n"
    assert err == (f"capture: stopped searching {tmp_path} after 5000 folders; name a folder closer to the logdir to "
                   "see every process\n")


# ----------------------------------------------------------------------------------------------------- arming
def test_arm_by_pid_prints_the_processs_answer(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1))
    write(control, status(2))
    armed(control, 1)
    assert run(capsys, "arm", "--pid", "1", str(tmp_path)) == (
        0, "h_1: armed: pid 1 captures at its next first run()\n", "")
    assert not (control / "h_2.request").exists()


def test_arm_takes_the_folder_before_or_after_the_flags_and_an_id(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1))
    armed(control, 1)
    assert run(capsys, "arm", str(tmp_path), "--pid", "1")[0] == 0
    write(control, status(1))
    write(control, status(2))
    armed(control, 1)
    assert run(capsys, "arm", "--id", "h_1", str(tmp_path)) == (
        0, "h_1: armed: pid 1 captures at its next first run()\n", "")
    assert not (control / "h_2.request").exists()


def test_arm_and_wait_prints_the_capture(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1))
    armed(control, 1, run_dir="/tb/run_2", calls=3)
    assert run(capsys, "arm", "--pid", "1", "--wait", "5", str(tmp_path)) == (
        0, "h_1: armed: pid 1 captures at its next first run()\nh_1: captured 3 calls -> /tb/run_2\n", "")


def test_a_capture_that_failed_is_printed_with_its_error_and_exits_1(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1))
    armed(control, 1, run_dir="/tb/run_2", calls=3, error="disk full")
    assert run(capsys, "arm", "--pid", "1", "--wait", "5", str(tmp_path)) == (
        1, "h_1: armed: pid 1 captures at its next first run()\nh_1: captured 3 calls -> /tb/run_2 (error: disk "
           "full)\n", "")


def test_a_wait_is_for_a_capture_after_the_arm_not_the_one_before(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    before = {"run_dir": "/tb/run_1", "calls": 3}
    write(control, status(1, captures=1, last_capture=before))

    def then(request_id: str) -> None:  # armed at once, the capture a little later
        answer = {"id": request_id, "outcome": "armed", "captures_before": 1}
        write(control, status(1, captures=1, last_capture=before, last_request=answer))
        time.sleep(0.3)
        write(control, status(1, captures=2, last_capture={"run_dir": "/tb/run_2", "calls": 4}, last_request=answer))

    answers(control, "h_1", then)
    assert run(capsys, "arm", "--pid", "1", "--wait", "5", str(tmp_path)) == (
        0, "h_1: armed: pid 1 captures at its next first run()\nh_1: captured 4 calls -> /tb/run_2\n", "")


def test_a_wait_counts_captures_from_none_when_the_answer_gives_no_count(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1, captures=0))

    def then(request_id: str) -> None:
        write(control, status(1, captures=1, last_request={"id": request_id, "outcome": "armed"},
                              last_capture={"run_dir": "/tb/run_1", "calls": 2}))

    answers(control, "h_1", then)
    assert run(capsys, "arm", "--pid", "1", "--wait", "5", str(tmp_path))[1].splitlines()[-1] == \
        "h_1: captured 2 calls -> /tb/run_1"


def test_arm_without_naming_one_arms_every_running_process(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1), age=2)
    write(control, status(2), age=1)
    write(control, status(3, exited_at=NOW - 60))
    armed(control, 1)
    armed(control, 2)
    assert run(capsys, "arm", str(tmp_path)) == (0, "h_2: armed: pid 2 captures at its next first run()\n"
                                                    "h_1: armed: pid 1 captures at its next first run()\n", "")
    assert not (control / "h_3.request").exists()


def test_one_failure_among_several_fails_the_command_and_the_rest_are_still_armed(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, status(1), age=3)
    write(control, status(2), age=2)
    write(control, status(3, remote_refused=REFUSED), age=1)
    armed(control, 2, run_dir="/tb/run_2", calls=3, error="disk full")  # newer: armed before 1
    armed(control, 1, run_dir="/tb/run_1", calls=3)
    status_, out, err = run(capsys, "arm", "--wait", "5", str(tmp_path))
    assert status_ == 1 and err == f"capture: h_3: refused: {REFUSED}\n"
    assert out.splitlines() == ["h_2: armed: pid 2 captures at its next first run()",
                                "h_2: captured 3 calls -> /tb/run_2 (error: disk full)",
                                "h_1: armed: pid 1 captures at its next first run()",
                                "h_1: captured 3 calls -> /tb/run_1"]


def test_arm_with_no_running_process_says_why_and_exits_1(tmp_path, capsys):
    write(tmp_path / "tb" / ".capture", status(3, exited_at=NOW - 60))
    assert run(capsys, "arm", str(tmp_path)) == (
        1, "", f"capture: no running process writes captures under {tmp_path} ({WHY_NOT_LISTED})\n")


def test_arm_of_a_pid_or_job_not_listed_says_so_and_exits_1(tmp_path, capsys):
    write(tmp_path / "tb" / ".capture", status(1))
    assert run(capsys, "arm", "--pid", "3", str(tmp_path)) == (
        1, "", f"capture: no process with pid 3 writes captures here: {WHY_NOT_LISTED}\n")
    assert run(capsys, "arm", "--job", "x", str(tmp_path)) == (
        1, "", f"capture: no job with id 'x' writes captures here: {WHY_NOT_LISTED}\n")


def test_a_refused_arm_is_said_on_stderr_and_exits_1(tmp_path, capsys):
    write(tmp_path / "tb" / ".capture", status(1, remote_refused=REFUSED))
    assert run(capsys, "arm", "--pid", "1", str(tmp_path)) == (1, "", f"capture: h_1: refused: {REFUSED}\n")


# -------------------------------------------------------------------------------------------------------- jobs
JOB_ARMED = "job j: armed (job arm 7): its 2 ranks agree on a call of their call site and all capture it\n"


@pytest.mark.parametrize("named", [["--job", "j"], ["--pid", "101"], ["--pid", "99"], ["--id", "h_101"], []])
def test_a_job_is_armed_once_however_it_is_named(tmp_path, capsys, named):
    control = tmp_path / "tb" / ".capture"
    job(control)
    job_armed(control, None, None)
    assert run(capsys, "arm", *named, str(tmp_path)) == (0, JOB_ARMED, "")
    assert not (control / "h_101.request").exists()  # one request, with the lowest rank


def test_a_job_with_a_rank_running_is_armed_when_nothing_is_named(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    write(control, rank_status(0, exited_at=NOW - 60), age=0)
    write(control, rank_status(1), age=1)
    status_, _, err = run(capsys, "arm", str(tmp_path))
    assert status_ == 1 and err.startswith("capture: job j: rank 0: process 100 on h exited at ")  # tried, not left out
    write(control, rank_status(1, exited_at=NOW - 60), age=1)
    assert run(capsys, "arm", str(tmp_path)) == (
        1, "", f"capture: no running process writes captures under {tmp_path} ({WHY_NOT_LISTED})\n")


def test_a_job_arm_and_wait_prints_the_call_its_ranks_captured(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    job(control)
    job_armed(control, {"run_dir": "/tb/run_2"}, {"run_dir": "/tb/run_2"})
    assert run(capsys, "arm", "--job", "j", "--wait", "5", str(tmp_path)) == (
        0, JOB_ARMED + "job j: captured call 44 on 2 ranks -> /tb/run_2\n", "")


def test_a_job_capture_with_a_ranks_error_or_in_two_runs_exits_1(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    job(control)
    job_armed(control, {"run_dir": "/tb/run_2"}, {"run_dir": "/tb/run_2", "error": "disk full"})
    assert run(capsys, "arm", "--job", "j", "--wait", "5", str(tmp_path)) == (
        1, JOB_ARMED + "job j: captured call 44 on 2 ranks -> /tb/run_2 (errors: rank 1: disk full)\n", "")
    job(control)
    job_armed(control, {"run_dir": "/tb/run_2", "error": "no space"}, {"run_dir": "/tb/run_2", "error": "disk full"})
    assert run(capsys, "arm", "--job", "j", "--wait", "5", str(tmp_path))[1].splitlines()[-1] == \
        "job j: captured call 44 on 2 ranks -> /tb/run_2 (errors: rank 0: no space; rank 1: disk full)"
    job(control)
    job_armed(control, {"run_dir": "/tb/run_a"}, {"run_dir": "/tb/run_b"})
    assert run(capsys, "arm", "--job", "j", "--wait", "5", str(tmp_path)) == (
        1, JOB_ARMED + "job j: captured call 44 on 2 ranks -> /tb/run_a | /tb/run_b\n", "")


def test_a_job_with_one_rank_listed_here_captures_on_one_rank(tmp_path, capsys):
    control = tmp_path / "tb" / ".capture"
    job(control, ranks=(0,))
    job_armed(control, {"run_dir": "/tb/run_2"})
    status_, out, _ = run(capsys, "arm", "--job", "j", "--wait", "5", str(tmp_path))
    assert status_ == 0 and out.splitlines()[-1] == "job j: captured call 44 on 1 rank -> /tb/run_2"


@pytest.mark.parametrize("unreadable", ["not json {", json.dumps({"protocol": 99, "pid": 101}), None])
def test_a_job_with_a_rank_whose_status_cannot_be_read_is_not_captured_and_the_wait_names_it(tmp_path, capsys,
                                                                                            unreadable):
    """Rank 0 captured; rank 1's status file went unreadable (not JSON, another protocol, removed): the job is not
    reported captured, and the wait's end says which rank could not be read, where."""
    control = tmp_path / "tb" / ".capture"
    job(control)
    rank1 = control / "h_101.status.json"

    def then(request_id: str) -> None:
        arm = {"number": 7, "state": "captured", "site": "step", "calls": 40, "target": 44}
        write(control, rank_status(0, arm, captures=2, last_capture={"run_dir": "/tb/run_2"},
                                   last_request={"id": request_id, "outcome": "armed", "job_arm": 7}))
        if unreadable is None:
            rank1.unlink()
        else:
            rank1.write_text(unreadable)

    answers(control, "h_100", then)
    status_, out, err = run(capsys, "arm", "--job", "j", "--wait", "1", str(tmp_path))
    assert (status_, out) == (1, JOB_ARMED)
    assert err == (f"capture: job j is armed but not every rank captured within 1 s (rank 0: captured -> /tb/run_2; "
                   f"rank 1: its status file cannot be read: {rank1})\n")
