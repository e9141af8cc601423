"""The trace list's "Capture next call" panel (`lightx2v.trace_browser.capture_panel`), fast: status files written
here by hand under a results folder, the rows GET /api/capture answers for them (single processes and a job as one
row, paths relative to the root), which POSTs are refused as not coming from the page, and what arming answers,
with a hand-written process answering the request. tests/test_browser_ui.py clicks the real button."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from lightx2v.trace_browser.capture_panel import _relative, listing, post, refusal, with_panel

JSON_HEADERS = {"Host": "127.0.0.1:9001", "Origin": "http://127.0.0.1:9001", "Content-Type": "application/json"}


def status(pid: int, rank: int = 0, world: int = 1, **extra) -> dict:
    return {"protocol": 1, "pid": pid, "host": "h", "rank": rank, "world_size": world, "heartbeat_seconds": 2.0,
            "argv": ["infer.py", "--steps", "4"], "captures": 1, **extra}


def put(root: Path, st: dict, ago: float = 0.0, sub: str = "tb") -> Path:
    """The status file of `st` under `<root>/<sub>/.capture`, last written `ago` seconds ago (now: the test's
    time, not the module's import, which a long mutation run may have left minutes behind)."""
    beat_at = time.time() - ago
    folder = root / sub / ".capture"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{st['host']}_{st['pid']}.status.json"
    path.write_text(json.dumps(st))
    os.utime(path, (beat_at, beat_at))
    return path


def row(ident: str, pid: int, **changes) -> dict:
    """A single process's row as the panel answers it: a running one, not armed, with no last capture."""
    fields = {"id": ident, "pid": pid, "host": "h", "command": "infer.py --steps 4", "state": "running",
              "armed": False, "capturing": False, "armed_at": None, "armed_by": None, "captures": 1,
              "last_capture": None, "refused": None, "rank": 0, "world_size": 1}
    fields.update(changes)
    return fields


# --- what the panel lists -----------------------------------------------------------------------------------------


def test_no_status_file_lists_nothing(tmp_path):
    assert listing(str(tmp_path)) == []


def test_a_running_process_is_a_row_with_its_command_state_and_last_capture_relative_to_the_root(tmp_path):
    last = {"finished_at": 1000.0, "calls": 5, "error": None, "label": "infer", "run_dir": str(tmp_path / "tb/r1"),
            "trace_paths": [str(tmp_path / "tb/r1/a.json"), "/elsewhere/b.json"]}
    put(tmp_path, status(7, armed=True, armed_at=900.0, armed_by="me", captures=3, capturing=True,
                         last_capture=last))
    assert listing(str(tmp_path)) == [row("h_7", 7, armed=True, capturing=True, armed_at=900.0, armed_by="me",
                                          captures=3, last_capture={
                                              "finished_at": 1000.0, "calls": 5, "error": None, "label": "infer",
                                              "run_dir": "tb/r1", "traces": ["tb/r1/a.json", "/elsewhere/b.json"]})]


def test_a_process_whose_status_says_little_reads_the_defaults(tmp_path):
    bare = {"protocol": 1, "pid": 8, "host": "h"}
    put(tmp_path, bare)
    assert listing(str(tmp_path)) == [row("h_8", 8, command="", captures=0)]


def test_a_last_capture_without_traces_lists_none(tmp_path):
    put(tmp_path, status(7, last_capture={"finished_at": 5.0, "run_dir": "tb/r1", "error": "boom", "calls": 2}))
    (got,) = listing(str(tmp_path))
    assert got["last_capture"] == {"finished_at": 5.0, "calls": 2, "error": "boom", "label": None,
                                   "run_dir": "tb/r1", "traces": []}


def test_a_rank_of_a_larger_job_alone_here_is_a_process_row_with_its_rank(tmp_path):
    put(tmp_path, status(7, rank=1, world=2))
    assert listing(str(tmp_path)) == [row("h_7", 7, rank=1, world_size=2)]


def test_running_processes_come_first_then_the_five_newest_that_stopped(tmp_path):
    put(tmp_path, status(1), ago=5)
    put(tmp_path, status(2), ago=3600)  # no heartbeat for an hour: gone
    for pid in range(10, 16):
        put(tmp_path, status(pid, exited_at=time.time() - 100 + pid), ago=-pid)
    got = listing(str(tmp_path))
    assert [(r["id"], r["state"]) for r in got] == [("h_1", "running"), ("h_15", "exited"), ("h_14", "exited"),
                                                    ("h_13", "exited"), ("h_12", "exited"), ("h_11", "exited")]


def test_a_gone_process_is_listed_after_one_that_exited_and_says_why_it_cannot_be_armed(tmp_path):
    put(tmp_path, status(2), ago=3600)
    put(tmp_path, status(3, exited_at=time.time()))
    put(tmp_path, status(1), ago=5)
    got = listing(str(tmp_path))
    assert [(r["id"], r["state"]) for r in got] == [("h_1", "running"), ("h_3", "exited"), ("h_2", "gone")]
    assert got[2]["refused"].startswith("process 2 on h has not written its status for 36")
    assert got[2]["refused"].endswith(" s: it was killed or is hung; nothing armed")
    assert got[1]["armed"] is False


def test_an_armed_process_that_stopped_is_not_shown_armed(tmp_path):
    put(tmp_path, status(3, armed=True, exited_at=time.time()))
    (got,) = listing(str(tmp_path))
    assert (got["state"], got["armed"]) == ("exited", False)


def test_a_process_that_refuses_remote_arming_says_why(tmp_path):
    put(tmp_path, status(3, remote_refused="no c10d store"))
    assert listing(str(tmp_path))[0]["refused"] == "no c10d store"


def job_status(pid: int, rank: int, arm: dict | None = None, **extra) -> dict:
    return status(pid, rank, 2, job={"id": "j", "launcher_pid": 99, "arm": arm}, **extra)


def test_a_jobs_ranks_are_one_row_with_the_newest_last_capture_and_the_fewest_captures(tmp_path):
    put(tmp_path, job_status(100, 0, captures=4, last_capture={"finished_at": 50.0, "run_dir": "tb/old"}))
    put(tmp_path, job_status(101, 1, captures=3, capturing=True, last_capture={"finished_at": 60.0,
                                                                             "run_dir": "tb/new"}), ago=1)
    (got,) = listing(str(tmp_path))
    assert got == {"id": "job:j", "pid": 99, "host": "h", "command": "infer.py --steps 4", "state": "running",
                   "armed": False, "capturing": True, "armed_at": None, "armed_by": None, "captures": 3,
                   "last_capture": {"finished_at": 60.0, "calls": None, "error": None, "label": None,
                                    "run_dir": "tb/new", "traces": []},
                   "refused": None, "rank": None, "world_size": 2, "arm": "not armed",
                   "ranks": [row("h_100", 100, captures=4, rank=0, world_size=2, last_capture={
                       "finished_at": 50.0, "calls": None, "error": None, "label": None, "run_dir": "tb/old",
                       "traces": []}),
                       row("h_101", 101, captures=3, capturing=True, rank=1, world_size=2, last_capture={
                           "finished_at": 60.0, "calls": None, "error": None, "label": None, "run_dir": "tb/new",
                           "traces": []})]}


def test_a_jobs_command_is_its_first_ranks_and_its_paths_are_relative_to_the_root(tmp_path):
    put(tmp_path, job_status(100, 0, last_capture={"finished_at": 5.0, "run_dir": str(tmp_path / "tb" / "r")}))
    put(tmp_path, {**job_status(101, 1), "argv": ["infer.py", "--rank", "1"]})
    (got,) = listing(str(tmp_path))
    assert (got["command"], got["last_capture"]["run_dir"]) == ("infer.py --steps 4", "tb/r")
    assert [r["last_capture"] and r["last_capture"]["run_dir"] for r in got["ranks"]] == ["tb/r", None]


def test_a_jobs_last_capture_without_a_time_counts_as_older_than_any(tmp_path):
    put(tmp_path, job_status(100, 0, last_capture={"finished_at": None, "run_dir": "tb/a"}))
    put(tmp_path, job_status(101, 1, last_capture={"finished_at": 0.5, "run_dir": "tb/b"}))
    assert listing(str(tmp_path))[0]["last_capture"]["run_dir"] == "tb/b"
    put(tmp_path, job_status(101, 1))
    assert listing(str(tmp_path))[0]["last_capture"]["run_dir"] == "tb/a"


def test_a_job_that_never_captured_has_no_last_capture(tmp_path):
    put(tmp_path, job_status(100, 0))
    put(tmp_path, job_status(101, 1))
    assert listing(str(tmp_path))[0]["last_capture"] is None


def test_an_armed_job_reads_armed_with_its_arms_state(tmp_path):
    arm = {"number": 3, "state": "armed", "site": "step", "calls": 40, "target": 44}
    put(tmp_path, job_status(100, 0, arm))
    put(tmp_path, job_status(101, 1, arm))
    (got,) = listing(str(tmp_path))
    assert (got["armed"], got["arm"]) == (True, "ARMED: every rank captures call 44 of 'step' (rank 0 at 40, "
                                                "rank 1 at 40)")


def test_a_job_with_a_rank_that_exited_shows_its_state_and_why_it_cannot_be_armed(tmp_path):
    put(tmp_path, job_status(100, 0))
    put(tmp_path, job_status(101, 1, exited_at=time.time()))
    (got,) = listing(str(tmp_path))
    assert (got["state"], got["arm"], got["armed"]) == ("partly running", "partly running", False)
    assert got["refused"].startswith("job j: rank 1: process 101 on h exited at ")


def test_a_job_whose_rank_refuses_remote_arming_says_why(tmp_path):
    put(tmp_path, job_status(100, 0))
    put(tmp_path, job_status(101, 1, remote_refused="no store"))
    assert listing(str(tmp_path))[0]["refused"] == "no store"


def test_a_jobs_ranks_on_several_hosts_name_them_all(tmp_path):
    put(tmp_path, job_status(100, 0))
    put(tmp_path, {**job_status(101, 1), "host": "g"})
    (got,) = listing(str(tmp_path))
    assert got["host"] == "g, h"


def test_a_relative_path_is_kept_as_written_whatever_the_working_folder(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert _relative(str(tmp_path), "tb/r2") == "tb/r2"


def test_paths_are_relative_to_the_root_only_when_inside_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    root = str(tmp_path / "link")
    assert _relative(root, str(real / "tb" / "r1")) == "tb/r1"
    assert _relative(root, str(real)) == "."
    assert _relative(root, str(tmp_path / "other" / "r1")) == str(tmp_path / "other" / "r1")
    assert _relative(root, "tb/r2") == "tb/r2"
    assert _relative(root, None) is None
    assert _relative(root, 5) == 5


# --- which POSTs are refused --------------------------------------------------------------------------------------


def test_a_post_from_this_page_is_accepted():
    assert refusal(JSON_HEADERS, None) is None
    assert refusal({**JSON_HEADERS, "Origin": "http://127.0.0.1:9001/"}, None) is None
    assert refusal({**JSON_HEADERS, "Content-Type": " application/json ; charset=utf-8"}, None) is None


def test_a_post_without_origin_is_refused_with_how_to_arm_instead():
    for origin in (None, ""):
        assert refusal({**JSON_HEADERS, "Origin": origin}, None) == (
            "missing Origin header: arm from the page, or with `python -m lightx2v.capture arm`")


def test_a_post_from_another_origin_is_refused():
    assert refusal({**JSON_HEADERS, "Origin": "http://evil.example"}, None) == (
        "cross-origin request from http://evil.example refused")
    assert refusal({**JSON_HEADERS, "Origin": "https://127.0.0.1:9001"}, None) == (
        "cross-origin request from https://127.0.0.1:9001 refused")


def test_the_public_urls_origin_is_this_servers_too():
    public = {**JSON_HEADERS, "Origin": "https://tb.example:8443"}
    assert refusal(public, "https://tb.example:8443/browse/") is None
    assert refusal(public, None) == "cross-origin request from https://tb.example:8443 refused"
    assert refusal(JSON_HEADERS, "https://tb.example:8443/browse/") is None  # the Host's origin still counts
    assert refusal({**JSON_HEADERS, "Origin": "https://tb.example:8443/browse"}, "https://tb.example:8443/") == (
        "cross-origin request from https://tb.example:8443/browse refused")


def test_a_body_that_is_not_json_is_refused():
    for ctype in (None, "", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"):
        assert refusal({**JSON_HEADERS, "Content-Type": ctype}, None) == "the body must be application/json"


# --- arming -------------------------------------------------------------------------------------------------------


def test_a_refused_post_answers_403_with_the_reason(tmp_path):
    assert post(str(tmp_path), {**JSON_HEADERS, "Origin": "http://x"}, b'{"id": "h_1"}', None) == (
        403, {"ok": False, "message": "cross-origin request from http://x refused"})


@pytest.mark.parametrize("body, message", [
    (b"", "bad request: id must be a string"),
    (b"{}", "bad request: id must be a string"),
    (b'{"id": 7}', "bad request: id must be a string"),
    (b"[1]", "bad request: 'list' object has no attribute 'get'"),
    (b"{", "bad request: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
])
def test_a_body_without_an_id_string_answers_400(tmp_path, body, message):
    assert post(str(tmp_path), JSON_HEADERS, body, None) == (400, {"ok": False, "message": message})


def test_a_post_from_the_public_urls_origin_is_taken(tmp_path):
    headers = {**JSON_HEADERS, "Origin": "https://tb.example"}
    assert post(str(tmp_path), headers, b'{"id": "h_2"}', "https://tb.example/") == (
        409, {"ok": False, "message": "no process with id 'h_2' writes captures here"})


def test_arming_what_is_not_there_answers_409(tmp_path):
    put(tmp_path, status(1))
    assert post(str(tmp_path), JSON_HEADERS, b'{"id": "h_2"}', None) == (
        409, {"ok": False, "message": "no process with id 'h_2' writes captures here"})
    assert post(str(tmp_path), JSON_HEADERS, b'{"id": "job:zz"}', None) == (
        409, {"ok": False, "message": "no job with id 'zz' writes captures here"})


def test_arming_a_process_that_exited_answers_409_with_why(tmp_path):
    put(tmp_path, status(1, exited_at=time.time()))
    code, answer = post(str(tmp_path), JSON_HEADERS, b'{"id": "h_1"}', None)
    assert (code, answer["ok"]) == (409, False)
    assert answer["message"].startswith("process 1 on h exited at ") and answer["message"].endswith("nothing armed")


def answer_when_asked(status_path: Path, requests: list, **answer) -> threading.Thread:
    """A process that answers the first request next to its status file, as the drop-in does."""
    request_path = Path(str(status_path).removesuffix(".status.json") + ".request")

    def run():
        deadline = time.monotonic() + 10
        while not request_path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        request = json.loads(request_path.read_text())
        requests.append(request)
        st = json.loads(status_path.read_text())
        status_path.write_text(json.dumps({**st, "last_request": {"id": request["id"], **answer}}))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_arming_a_process_answers_200_with_what_it_said_and_names_the_browser_as_who_asked(tmp_path):
    path = put(tmp_path, status(1))
    requests: list = []
    thread = answer_when_asked(path, requests, outcome="armed")
    got = post(str(tmp_path), JSON_HEADERS, b'{"id": "h_1"}', None)
    thread.join()
    assert got == (200, {"ok": True, "message": "h_1: armed: pid 1 captures at its next first run()",
                         "outcome": "armed"})
    assert requests[0]["by"] == f"the trace browser (pid {os.getpid()})"


def test_arming_a_job_answers_200_with_what_its_first_rank_said(tmp_path):
    path = put(tmp_path, job_status(100, 0))
    put(tmp_path, job_status(101, 1))
    requests: list = []
    thread = answer_when_asked(path, requests, outcome="armed", job_arm=4)
    got = post(str(tmp_path), JSON_HEADERS, b'{"id": "job:j"}', None)
    thread.join()
    assert got == (200, {"ok": True, "message": "job j: armed (job arm 4): its 2 ranks agree on a call of their "
                                                "call site and all capture it", "outcome": "armed"})
    assert requests[0]["by"] == f"the trace browser (pid {os.getpid()})"


# --- the page -----------------------------------------------------------------------------------------------------


def test_the_panel_goes_at_the_end_of_the_pages_body_once():
    got = with_panel("<body><p>x</p></body> and </body>")
    assert got.startswith("<body><p>x</p><section id=capture>\n<h2>Capture next call</h2>\n")
    assert got.endswith("</script>\n</body> and </body>")
