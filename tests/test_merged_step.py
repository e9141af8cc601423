"""One step of a run's ranks merged for Perfetto UI (`lightx2v.trace_browser.merged`), through the trace browser's
route (`offline.merged_page`), on synthetic NCCL ranks (tests/helpers/comm_trace.py): each rank's events under its
own named processes, moved onto the first rank's clock by the applied offset, the step's collectives as slices
with their waits, an arrow from the last rank to arrive to each rank that waited; the Overview links each step."""

from __future__ import annotations

import json
import re

import pytest

from lightx2v.trace_browser import offline
from lightx2v.trace_browser.files import Refused

from helpers.comm_trace import late_in_step_2, write_run


@pytest.fixture
def root(tmp_path):
    ranks = late_in_step_2()
    ranks[1].clock = 700.0  # rank 1's clock runs 0.7 ms ahead: the summary applies the offset
    write_run(tmp_path, ranks)
    return tmp_path


def merged(root, step: str = "ProfilerStep%232") -> dict:
    page = offline.merged_page(str(root), "run/", f"step={step}")
    assert page.status == 200 and page.download == "run.ProfilerStep2.merged.json", page.body[:200]
    return json.loads(page.body)


def test_each_rank_under_its_own_processes_on_the_first_ranks_clock(root):
    doc = merged(root)
    assert doc["lightx2v_merged"] == {"step": "ProfilerStep#2", "ranks": ["rank 0", "rank 1"], "missing": [],
                                      "offsets_us": {"rank 1": pytest.approx(700)}}
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert sorted(names.values()) == ["rank 0 · 0", "rank 0 · 4242", "rank 0 · collectives", "rank 1 · 0",
                                      "rank 1 · 4242", "rank 1 · collectives"]
    kernels = {names[e["pid"]]: e["ts"] for e in doc["traceEvents"]
               if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")}
    # rank 1 arrived 5 ms after rank 0 (its file says 5.7 ms: its clock is 0.7 ms ahead)
    assert kernels["rank 1 · 0"] - kernels["rank 0 · 0"] == pytest.approx(5_000)


def test_the_steps_collectives_are_slices_linked_from_the_last_rank_to_the_waiters(root):
    events = merged(root)["traceEvents"]
    slices = [e for e in events if e.get("cat") == "collective" and e["ph"] == "X"]
    assert len(slices) == 2 and {e["name"] for e in slices} == {"all_reduce"}
    by_rank = {e["pid"] // 10_000 - 1: e for e in slices}
    assert by_rank[0]["args"]["wait_ms"] == pytest.approx(5.0) and by_rank[1]["args"]["wait_ms"] == 0
    assert by_rank[0]["args"]["last_to_arrive"] == "rank 1"
    ends = [e["ts"] + e["dur"] for e in slices]
    assert ends[0] == pytest.approx(ends[1])  # an all-reduce ends on both ranks together, on one clock
    start, finish = ([e for e in events if e.get("ph") == ph and e.get("cat") == "collective"] for ph in "sf")
    assert len(start) == len(finish) == 1 and start[0]["id"] == finish[0]["id"]
    assert (start[0]["pid"], finish[0]["pid"]) == (by_rank[1]["pid"], by_rank[0]["pid"])
    # at the moment rank 1 arrived, into rank 0's slice, which still waits then: an arrow forward in time
    assert start[0]["ts"] == finish[0]["ts"] == by_rank[1]["ts"]
    assert by_rank[0]["ts"] < finish[0]["ts"] <= by_rank[0]["ts"] + by_rank[0]["dur"]


def test_bad_requests_are_refused_with_the_reason(root):
    assert offline.merged_page(str(root), "run/", "step=ProfilerStep%239").status == 404
    with pytest.raises(Refused, match="name the step"):
        offline.merged_page(str(root), "run/", "")
    with pytest.raises(Refused, match="run folder"):
        offline.merged_page(str(root), "run/rank0_host.pt.trace.json", "step=ProfilerStep%231")


def test_the_overview_links_each_step_to_its_merged_file(root):
    html = offline.overview_page(str(root), "run/").body.decode()
    assert html.count('class=merged href="/api/merged/run/?step=ProfilerStep%23') == 3


def test_the_overviews_links_of_a_folder_whose_name_is_encoded_reach_it(tmp_path):
    """The Overview's URL path is percent-encoded: its links encode the folder once ("my%20run", not "my%2520run")."""
    write_run(tmp_path, late_in_step_2(), name="my run")
    html = offline.overview_page(str(tmp_path), "my%20run/").body.decode()
    merged_links = re.findall(r'class=merged href="/api/merged/([^"?]*)\?step=([^"]+)"', html)
    assert merged_links == [("my%20run/", f"ProfilerStep%23{k}") for k in (1, 2, 3)]
    for rel, step in merged_links:
        assert offline.merged_page(str(tmp_path), rel, f"step={step}").status == 200
    assert 'class=run-timeline href="/timeline/my%20run/?step=ProfilerStep%231"' in html
