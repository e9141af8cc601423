"""The run's Timeline over HTTP, on a real trace browser on loopback (`lightx2v.trace_browser.offline`): the page
of a run folder in run mode, its index (`/api/timeline/run/<run>/`: the steps every rank has, on the first rank's
clock after the offsets the summary applied) and its windows (the merged steps, `/api/merged/<run>/?step=NAME`);
the trace list and the run's Overview link it; what a file, an unknown step or ranks that lack a step get; a
folder whose name is not UTF-8. Synthetic NCCL ranks (tests/helpers/comm_trace.py); the drawn Timeline of a real
torchrun job is tests/test_run_timeline.py."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from lightx2v.trace_browser import timeline

from conftest import missing_tool
from helpers.comm_trace import late_in_step_2, write_run
from helpers.procs import get_json, http_get, trace_browser
from helpers.summary import T0

CLOCK_AHEAD_US = 700.0  # rank 1's clock: the summary applies the offset (beyond the ends' spread)
EARLY_US = 300.0  # rank 1 starts each step this much before rank 0 (on one clock)
ODD = b"\xffrun"  # a run folder whose name is not UTF-8


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """results/run (rank 1's clock ahead, its steps starting earlier), results/short (rank 1 lacks step 3),
    results/nostep (rank 1 has no step), results/<\\xff>run (a copy of run), results/solo.json (one trace)."""
    root = tmp_path_factory.mktemp("run_timeline") / "results"
    root.mkdir()
    ranks = late_in_step_2()
    ranks[1].clock = CLOCK_AHEAD_US
    ranks[1].steps = [(lo - EARLY_US, hi) for lo, hi in ranks[1].steps]
    write_run(root, ranks)
    short = late_in_step_2()
    short[1].steps, short[1].colls = short[1].steps[:2], short[1].colls[:2]
    write_run(root, short, name="short")
    nostep = late_in_step_2()
    nostep[1].steps = []
    write_run(root, nostep, name="nostep")
    shutil.copytree(root / "run", os.fsdecode(os.path.join(os.fsencode(root), ODD)))
    shutil.copy(root / "run" / "rank0_host.pt.trace.json", root / "solo.json")
    with trace_browser(root) as (_, port):
        yield f"http://127.0.0.1:{port}"


def get(server, path: str):
    return http_get(server + path, timeout=60)


def test_the_index_lists_every_ranks_steps_on_the_first_ranks_clock(server):
    index = get_json(server + "/api/timeline/run/run/")
    assert (index["run"], index["ranks"], index["left_out"]) == ("run", ["rank 0", "rank 1"], [])
    assert index["offsets_us"] == {"rank 1": pytest.approx(CLOCK_AHEAD_US)}
    assert [s["name"] for s in index["steps"]] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    # rank 1's file says T0 + 700 - 300; on rank 0's clock it began 300 µs before rank 0: the step starts there
    first = index["steps"][0]
    assert first["lo"] == pytest.approx(T0 - EARLY_US) and first["end"] == pytest.approx(T0 + 10_000)
    assert index["span"] == [pytest.approx(T0 - EARLY_US), pytest.approx(T0 + 30_000)]
    # the window of a step is its merged file, on the same clock as the index
    status, headers, body = get(server, "/api/merged/run/?step=ProfilerStep%231")
    assert status == 200 and headers["Content-Type"] == "application/json"
    steps = [e for e in json.loads(body)["traceEvents"] if e.get("name") == "ProfilerStep#1"]
    assert sorted(e["ts"] for e in steps) == [pytest.approx(T0 - EARLY_US), pytest.approx(T0)]


def test_the_page_is_the_timeline_in_run_mode_and_its_download_carries_the_frames_choice(server):
    if timeline.missing():
        missing_tool("the offline Timeline is not installed here: python -m lightx2v.assets install")
    status, _, body = get(server, "/timeline/run/")
    assert status == 200
    assert (b'const CONFIG = {"name": "run/", "index": "/api/timeline/run/run/", "window": "/api/merged/run/", '
            b'"viewer": "/vendor/trace_viewer_full.html", "run": true}') in body
    status, _, body = get(server, "/timeline/run/rank0_host.pt.trace.json")  # a file: its own Timeline
    assert status == 200 and b'"run": false}' in body
    status, headers, body = get(server, "/api/merged/run/?step=ProfilerStep%232&frames=1&download=1")
    assert status == 200 and 'filename="run.ProfilerStep2.frames.merged.json"' in headers["Content-Disposition"]


def test_an_unknown_step_is_404_and_a_file_is_no_run(server):
    status, _, body = get(server, "/api/merged/run/?step=ProfilerStep%239")
    assert (status, body) == (404, b"no rank of the run has a step named 'ProfilerStep#9'")
    status, _, body = get(server, "/api/timeline/run/run/rank0_host.pt.trace.json")
    assert status == 404 and body.startswith(b"a run's Timeline is of a run folder: its path ends with /")
    status, _, body = get(server, "/api/merged/solo.json?step=ProfilerStep%231")
    assert (status, body) == (404, b"a merged step is of a run folder: its path ends with /\n")
    for path in ("/timeline/nothing/", "/api/timeline/run/nothing/", "/api/timeline/run/../"):
        assert get(server, path)[0] in (403, 404), path


def test_a_step_some_rank_lacks_is_left_out_of_the_index_and_merged_without_it(server):
    index = get_json(server + "/api/timeline/run/short/")
    assert [s["name"] for s in index["steps"]] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert index["left_out"] == [{"name": "ProfilerStep#3", "missing": ["rank 1"]}]
    status, _, body = get(server, "/api/merged/short/?step=ProfilerStep%233")
    assert status == 200 and json.loads(body)["lightx2v_merged"]["missing"] == ["rank 1"]
    status, _, body = get(server, "/api/timeline/run/nostep/")
    assert status == 422 and body.decode() == (
        "no step is on every rank of nostep/: ProfilerStep#1 not on rank 1; ProfilerStep#2 not on rank 1; "
        "ProfilerStep#3 not on rank 1; open each rank's own Timeline\n")


def test_the_list_and_the_runs_overview_link_it_and_every_link_answers(server):
    page = get(server, "/")[2].decode()
    assert '<a class=run-timeline href="/timeline/run/" target=_blank>Timeline</a>' in page
    overview = get(server, "/overview/run/")[2].decode()
    links = re.findall(r'class=run-timeline href="([^"]+)"', overview)
    assert links == [f"/timeline/run/?step=ProfilerStep%23{k}" for k in (1, 2, 3)]
    status, _, body = get(server, links[1])
    if status != 503:  # 503: the Timeline is not installed here
        assert status == 200 and b'"run": true' in body


def test_a_run_folder_whose_name_is_not_utf8_is_reached_by_every_link(server):
    page = get(server, "/")[2].decode()
    assert '<a class=run-timeline href="/timeline/%FFrun/" target=_blank>Timeline</a>' in page
    assert "<td class=path>\\xffrun/</td>" in page
    index = get_json(server + "/api/timeline/run/%FFrun/")
    assert len(index["steps"]) == 3 and index["run"] == os.fsdecode(ODD)
    overview = get(server, "/overview/%FFrun/")[2].decode()
    links = re.findall(r'class=(?:merged|run-timeline) href="([^"]+)"', overview)
    assert len(links) == 6 and all(link.startswith(("/api/merged/%FFrun/?step=ProfilerStep%23",
                                                    "/timeline/%FFrun/?step=ProfilerStep%23")) for link in links), links
    for link in links:
        status, headers, body = get(server, link.replace("&amp;", "&"))
        assert status in (200, 503), (link, status, body[:200])
        if link.startswith("/api/merged/"):
            assert "%FFrun.ProfilerStep" in headers["Content-Disposition"]
            assert json.loads(body)["lightx2v_merged"]["ranks"] == ["rank 0", "rank 1"]


def test_a_rank_rewritten_is_read_again(tmp_path):
    """The index and the merged steps are kept by the files' versions (size, mtime, inode): a rank's file rewritten
    with a step less is indexed and merged again, in this process as in the server."""
    from lightx2v.trace_browser import offline

    from helpers.comm_trace import rank_trace
    from helpers.summary import write_json

    folder = write_run(tmp_path, late_in_step_2())
    index = json.loads(offline.run_timeline_index(str(tmp_path), "run/").body)
    assert len(index["steps"]) == 3
    merged = json.loads(offline.merged_page(str(tmp_path), "run/", "step=ProfilerStep%233").body)
    assert merged["lightx2v_merged"]["missing"] == []
    rank1 = late_in_step_2()[1]
    rank1.steps, rank1.colls = rank1.steps[:2], rank1.colls[:2]
    write_json(folder / "rank1_host.pt.trace.json", rank_trace(rank1, "nccl"))
    index = json.loads(offline.run_timeline_index(str(tmp_path), "run/").body)
    assert [s["name"] for s in index["left_out"]] == ["ProfilerStep#3"]
    merged = json.loads(offline.merged_page(str(tmp_path), "run/", "step=ProfilerStep%233").body)
    assert merged["lightx2v_merged"]["missing"] == ["rank 1"]
