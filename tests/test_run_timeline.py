"""The run's Timeline drawn, as a person opens it: a real 2-rank torchrun job (gloo, CPU) shaped like LightX2V's
Ulysses step with rank 1 made late in steps 1 and 3 (tests/programs/comm_late_rank.py), the real trace browser on
its results, Debian's headless Chromium with no internet. Asserted on the viewer's model: every rank's processes,
the same collective's ends across the ranks within the clock spread the summary reports, the arrows from the late
rank to the rank that waited, the view zoomed to the step; moving between steps, the Perfetto download, and a
step the ranks do not share refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightx2v.trace_summary import summarize_paths

from conftest import REPO_ROOT
from helpers.browser import chromium_with_offline_views, external_requests
from helpers.procs import http_get, trace_browser, wait_until
from helpers.torchrun import rows, run_torchrun

pytestmark = [pytest.mark.browser, pytest.mark.torchrun, pytest.mark.slow]

PROGRAM = REPO_ROOT / "tests" / "programs" / "comm_late_rank.py"
LATE, LATE_STEPS, DELAY_MS = 1, (1, 3), 150.0


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The job's results folder (the trace browser's root) and its run folder, relative to it."""
    out = tmp_path_factory.mktemp("run_timeline")
    log = run_torchrun(PROGRAM, str(out), str(LATE), ",".join(map(str, LATE_STEPS)), str(DELAY_MS), "a2a", cwd=out)
    found = rows(log, "LATE")
    assert sorted(found) == [0, 1], log
    (run_dir,) = {Path(p).parent for row in found.values() for p in row["paths"].split(",")}
    return {"root": out, "dir": run_dir, "rel": run_dir.relative_to(out).as_posix() + "/"}


@pytest.fixture(scope="module")
def port(job):
    with trace_browser(job["root"]) as (_, port):
        yield port


@pytest.fixture(scope="module")
def driver():
    with chromium_with_offline_views() as browser:
        yield browser


def drawn(driver, step: int, timeout: float = 90) -> dict:
    """Wait until the run's step `step` (0-based) is drawn; what the viewer's model and the step bar hold:
    processes' names, each collectives track's slices (model ms), the arrows between them, the view."""
    state = wait_until(lambda: driver.execute_script(
        "const t = window.lightx2vTimeline; return t && (t.state === 'failed' ? 'failed' :"
        " t.state === 'drawn' && t.step === arguments[0] && 'drawn');", step), timeout, interval=0.2,
        what=f"step {step} to be drawn")
    assert state == "drawn", driver.execute_script("return window.lightx2vTimeline.error")
    return driver.execute_script("""
        const t = window.lightx2vTimeline, model = t.model, collectives = {}, slices = {};
        for (const p of model.getAllProcesses()) {
            slices[p.name] = [];
            for (const thread of Object.values(p.threads))
                for (const s of thread.sliceGroup.slices) {
                    slices[p.name].push(s.title);
                    if (p.name.endsWith(' · collectives'))
                        (collectives[p.name] = collectives[p.name] || []).push(
                            {name: s.title, start: s.start, end: s.start + s.duration, args: s.args});
                }
        }
        const arrows = model.flowEvents.map((f) => ({title: f.title, from: f.startSlice.parentContainer.parent.name,
                                                     to: f.endSlice.parentContainer.parent.name}));
        return {slices: slices, collectives: collectives, arrows: arrows,
                warnings: model.importWarnings.map((w) => w.message),
                name: document.getElementById('step-name').textContent, url: location.search,
                download: document.getElementById('perfetto-download').href, steps: t.steps, visible: t.visible,
                prev: document.getElementById('prev-step').disabled,
                next: document.getElementById('next-step').disabled};""")


def test_every_rank_on_one_clock_with_the_same_collectives_ends_within_the_reported_spread(job, port, driver):
    driver.get(f"http://127.0.0.1:{port}/timeline/{job['rel']}?step=ProfilerStep%231")
    view = drawn(driver, 0)
    assert view["name"] == "ProfilerStep#1 (1 of 4, 2 ranks)" and view["steps"]["ranks"] == ["rank 0", "rank 1"]
    assert view["warnings"] == []  # every event imported, the arrows between the ranks too
    for rank in (0, 1):  # each rank's own events (its ProfilerStep on its thread) and its collectives track
        own = [name for name in view["slices"] if name.startswith(f"rank {rank} · ")]
        assert f"rank {rank} · collectives" in own
        assert any("ProfilerStep#1" in view["slices"][name] for name in own if not name.endswith("collectives"))

    (run,) = summarize_paths([str(job["dir"])])
    clock = next(x for x in run.communication.clocks if x.rank == 1)
    allowed_ms = (clock.spread_us + (0 if clock.applied else abs(clock.offset_us)) + 1) / 1000
    tracks = [sorted(view["collectives"][f"rank {r} · collectives"], key=lambda s: s["start"]) for r in (0, 1)]
    assert [s["name"] for s in tracks[0]] == [s["name"] for s in tracks[1]] == [
        "all_to_all", "all_to_all", "all_gather"]
    for first, second in zip(*tracks, strict=True):
        assert abs(first["end"] - second["end"]) <= allowed_ms, (first, second, clock)
    # rank 1 was late at the first all-to-all: rank 0's wait there is the step's largest, its waits in the step are
    # the summary's, and an arrow links the two ranks
    waits = [s["args"]["wait_ms"] for s in tracks[0]]
    assert tracks[0][0]["args"]["last_to_arrive"] == "rank 1" and waits[0] == max(waits) > 0, tracks[0]
    summary_step = next(s for s in run.communication.steps if s.step == "ProfilerStep#1")
    assert sum(waits) == pytest.approx(next(r.waited_us for r in summary_step.ranks if r.rank == 0) / 1000, abs=0.01)
    assert {"title": "all_to_all: waited for", "from": "rank 1 · collectives",
            "to": "rank 0 · collectives"} in view["arrows"]
    # opened zoomed to the step (on the first rank's clock), not to the capture around it
    step = view["steps"]["steps"][0]
    width = step["end"] - step["lo"]
    assert step["lo"] - 0.05 * width <= view["visible"][0] <= step["lo"]
    assert step["end"] <= view["visible"][1] <= step["end"] + 0.05 * width
    assert external_requests(driver) == []


def test_next_and_previous_move_between_the_merged_steps_and_each_downloads_for_perfetto(job, port, driver):
    driver.get(f"http://127.0.0.1:{port}/timeline/{job['rel']}")
    first = drawn(driver, 0)
    assert first["prev"] and not first["next"]
    driver.execute_script("document.getElementById('next-step').click();")
    second = drawn(driver, 1)
    assert second["name"] == "ProfilerStep#2 (2 of 4, 2 ranks)" and second["url"] == "?step=ProfilerStep%232"
    assert {len(track) for track in second["collectives"].values()} == {3}  # step 2's collectives only
    assert second["download"] == (f"http://127.0.0.1:{port}/api/merged/{job['rel']}?step=ProfilerStep%232"
                                  "&download=1")
    status, headers, _ = http_get(second["download"], timeout=60)
    assert status == 200 and ".ProfilerStep2.merged.json" in headers["Content-Disposition"]
    driver.execute_script("document.getElementById('prev-step').click();")
    plain = drawn(driver, 0)
    assert plain["url"] == "?step=ProfilerStep%231"
    assert not any("comm_late_rank.py(" in title for titles in plain["slices"].values() for title in titles)
    driver.execute_script("document.getElementById('frames').click();")  # every rank's Python frames, as a layer
    wait_until(lambda: driver.execute_script("return window.lightx2vTimeline.frames"), 10, what="frames on")
    framed = drawn(driver, 0)
    assert framed["url"] == "?step=ProfilerStep%231&frames=1"
    for rank in (0, 1):
        assert any("comm_late_rank.py(" in title for name, titles in framed["slices"].items()
                   if name.startswith(f"rank {rank} · ") for title in titles), rank


def test_a_step_the_ranks_do_not_share_is_refused_with_the_ones_they_do(job, port, driver):
    driver.get(f"http://127.0.0.1:{port}/timeline/{job['rel']}?step=ProfilerStep%239")
    error = wait_until(lambda: driver.execute_script(
        "const t = window.lightx2vTimeline; return t && t.state === 'failed' && t.error;"), 90, interval=0.2,
        what="the refusal")
    assert error == (f"?step=ProfilerStep#9 is not a step of every rank of {job['dir'].name}/: they share 4 steps, "
                     "?step=ProfilerStep#1 to ?step=ProfilerStep#4")
    assert driver.execute_script("return window.lightx2vTimeline.loaded") is None
