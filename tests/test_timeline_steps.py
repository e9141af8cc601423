"""The Timeline moving step by step, as a person uses it: Debian's headless Chromium with no internet, the real
trace browser, the hand-made three-step trace (tests/helpers/steps_trace.py) and a two-rank run. Each window drawn is
asserted on the viewer's model: which kernels it holds, which it does not; the view opened, on the viewer's own display
transform."""

from __future__ import annotations

import time

import pytest

from helpers.browser import chromium_with_offline_views, external_requests
from helpers.comm_trace import late_in_step_2, write_run
from helpers.procs import http_get, trace_browser, wait_until
from helpers.steps_trace import steps_trace

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRACE = "run/rank0_host.pt.trace.json"
SPANS_TRACE = "spans/rank0_host.pt.trace.json"  # the same steps under kineto's "Process Spans" (20 steps long)
NO_STEPS_TRACE = "plain/trace.json"
RUN = "ranks/"  # two ranks (tests/helpers/comm_trace.py): the run's Timeline, every rank's step merged


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    root = tmp_path_factory.mktemp("timeline_steps") / "save_results"
    steps_trace(root / TRACE)
    steps_trace(root / SPANS_TRACE, spans=True)
    write_run(root, late_in_step_2(), name=RUN.rstrip("/"))
    (root / NO_STEPS_TRACE).parent.mkdir()
    (root / NO_STEPS_TRACE).write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, '
                                       '"tid": 1, "ts": 10, "dur": 5}]}')
    with trace_browser(root) as (_, port):
        yield port


@pytest.fixture(scope="module")
def driver():
    with chromium_with_offline_views() as browser:
        yield browser


def drawn(driver, step: int | None, timeout: float = 60) -> dict:
    """Wait until the window of `step` is drawn; the slice titles of every thread of the viewer's model."""
    state = wait_until(lambda: driver.execute_script(
        "const t = window.lightx2vTimeline; return t && (t.state === 'failed' ? 'failed' :"
        " t.state === 'drawn' && t.step === arguments[0] && 'drawn');", step), timeout, interval=0.2,
        what=f"step {step} to be drawn")
    assert state == "drawn", driver.execute_script("return window.lightx2vTimeline.error")
    return driver.execute_script("""
        const model = window.lightx2vTimeline.model, slices = [];
        for (const p of model.getAllProcesses())
            for (const t of Object.values(p.threads))
                for (const s of t.sliceGroup.slices) slices.push(s.title);
        return {slices: slices, name: document.getElementById('step-name').textContent,
                prev: document.getElementById('prev-step').disabled,
                download: document.getElementById('perfetto-download').href,
                downloadShown: !document.getElementById('perfetto-download').hidden,
                next: document.getElementById('next-step').disabled, url: location.search};""")


def click(driver, element_id: str) -> None:
    """Click a control of the step bar, by script: WebDriver's references to the bar's controls go stale once
    the viewer is in the page (seen with Chromium 156 and the V0 polyfill)."""
    driver.execute_script("document.getElementById(arguments[0]).click();", element_id)


def test_previous_and_next_move_between_the_steps_windows(driver, port):
    driver.get(f"http://127.0.0.1:{port}/timeline/{TRACE}")
    first = drawn(driver, 0)
    assert first["name"] == "ProfilerStep#1 (1 of 3)" and first["prev"] and not first["next"]
    assert {"k_step1", "k_late_from_step1", "ProfilerStep#1"} <= set(first["slices"])
    assert "k_step2" not in first["slices"]

    click(driver, "next-step")
    second = drawn(driver, 1)
    assert second["name"] == "ProfilerStep#2 (2 of 3)" and not second["prev"] and not second["next"]
    assert "k_step2" in second["slices"]
    assert "k_late_from_step1" not in second["slices"]  # it runs in step 2's time, but step 1 launched it
    assert second["url"] == "?step=1"
    # beside the buttons: the window drawn, as a .json file for Perfetto, on this server (no other host)
    assert first["downloadShown"] and first["download"] == (
        f"http://127.0.0.1:{port}/api/timeline/window/{TRACE}?step=0&download=1")
    assert second["download"].endswith("?step=1&download=1")
    status, headers, _ = http_get(second["download"])
    assert status == 200 and 'filename="rank0_host.step1.json"' in headers["Content-Disposition"]

    click(driver, "next-step")
    third = drawn(driver, 2)
    assert third["next"] and {"k_step3", "k_orphan"} <= set(third["slices"])
    click(driver, "prev-step")
    assert "k_step2" in drawn(driver, 1)["slices"]
    assert external_requests(driver) == []


def test_python_frames_are_a_layer_the_user_turns_on(driver, port):
    driver.get(f"http://127.0.0.1:{port}/timeline/{TRACE}?step=1")
    plain = drawn(driver, 1)
    assert not any(s.endswith("forward") for s in plain["slices"])
    click(driver, "frames")
    wait_until(lambda: driver.execute_script("return window.lightx2vTimeline.frames"), 10, what="frames on")
    framed = drawn(driver, 1)
    assert "model.py(2): forward" in framed["slices"] and "model.py(1): forward" not in framed["slices"]
    assert framed["url"] == "?step=1&frames=1"


def test_a_step_opens_zoomed_to_that_step_not_to_the_capture_around_it(driver, port):
    """kineto's "Process Spans" runs across every step; the viewer would fit it, the step a sliver of the view."""
    driver.get(f"http://127.0.0.1:{port}/timeline/{SPANS_TRACE}?step=1")
    drawn(driver, 1)
    step, visible = driver.execute_script(
        "const t = window.lightx2vTimeline; return [t.steps.steps[1], t.visible];")
    width = step["end"] - step["lo"]
    assert "PyTorch Profiler (0)" in drawn(driver, 1)["slices"]  # the spans event is in the window ...
    assert visible[0] <= step["lo"] and visible[1] >= step["end"]  # ... yet the view is the step, with a margin
    assert visible[0] >= step["lo"] - 0.05 * width and visible[1] <= step["end"] + 0.05 * width, (step, visible)


VIEWPORT = """
    const view = document.getElementById('trace-viewer').trackView, model = window.lightx2vTimeline.model;
    const shown = view.viewport.currentDisplayTransform, width = view.modelTrackContainer_.canvas.width;
    const spans = [];
    for (const p of model.getAllProcesses())
        for (const t of Object.values(p.threads))
            for (const s of t.sliceGroup.slices) if (s.title === arguments[0]) spans.push([s.start, s.end]);
    return {shown: [shown.xViewToWorld(0), shown.xViewToWorld(width)],
            step: [Math.min(...spans.map((s) => s[0])), Math.max(...spans.map((s) => s[1]))]};"""


@pytest.mark.parametrize("page, step, k", [(SPANS_TRACE, "1", 1), (RUN, "ProfilerStep%232", 1)])
def test_the_viewers_own_view_stays_on_the_step_after_it_settled(driver, port, page, step, k):
    """What the ruler spans, read from the viewer's display transform once its own first fit is past (it polls
    every 250 ms for a sized viewport, then fits the whole window), against the step's slices in its model (model
    ms; every rank's in the run's): the step with a small margin, not the window around it."""
    driver.get(f"http://127.0.0.1:{port}/timeline/{page}?step={step}")
    drawn(driver, k)
    time.sleep(1.5)
    view = driver.execute_script(VIEWPORT, f"ProfilerStep#{k + 1}")
    (lo, end), (left, right) = view["step"], view["shown"]
    width = end - lo
    assert lo - 0.05 * width <= left <= lo and end <= right <= end + 0.05 * width, view


@pytest.mark.parametrize("asked,expected", [
    ("99", "?step=99 is not a step of rank0_host.pt.trace.json: it has 3 steps, ?step=0 (ProfilerStep#1) to "
           "?step=2 (ProfilerStep#3)"),
    ("-1", "?step=-1 is not a step of rank0_host.pt.trace.json: it has 3 steps"),
    ("1.5", "?step=1.5 is not a step"),
    ("two", "?step=two is not a step"),
])
def test_a_step_the_trace_does_not_have_is_refused_with_the_range(driver, port, asked, expected):
    driver.get(f"http://127.0.0.1:{port}/timeline/{TRACE}?step={asked}")
    error = wait_until(lambda: driver.execute_script(
        "const t = window.lightx2vTimeline; return t && t.state === 'failed' && t.error;"), 60, interval=0.2,
        what="the refusal")
    assert error.startswith(expected), error
    assert driver.execute_script("return window.lightx2vTimeline.loaded") is None  # no other step was drawn


def test_a_trace_without_steps_is_one_window_and_refuses_other_steps(driver, port):
    driver.get(f"http://127.0.0.1:{port}/timeline/{NO_STEPS_TRACE}?step=1")
    error = wait_until(lambda: driver.execute_script(
        "const t = window.lightx2vTimeline; return t && t.state === 'failed' && t.error;"), 60, interval=0.2,
        what="the refusal")
    assert error == ("?step=1 is not a step of trace.json: it has no ProfilerStep, so the whole trace is one window: "
                     "?step=0, or no ?step")
    driver.get(f"http://127.0.0.1:{port}/timeline/{NO_STEPS_TRACE}")
    assert "aten::mm" in drawn(driver, 0)["slices"]
