"""The Timeline's windows: the step index (one streaming pass, cached by size and mtime in a folder the stack owns)
and the events of one step or one time range, each held equal to a ``json.load`` filter of the whole file.

The filter below is written from the rule, not from the code: a GPU event (and its flow arrows) belongs to the
step whose CPU span holds its launch call, however late it runs; everything else is in a window when it starts
before the window's end and ends at or after its start; a step's window ends at its CPU end extended over the
GPU work it launched, never past the next step's start; metadata always; Python frames only when asked for.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil

import pytest

from lightx2v.trace_browser.gzip_seek import FileChanged
from lightx2v.trace_browser.step_index import INDEX_SUFFIX, KEEP_INDEXES, PIECE_BYTES, prune, step_index
from lightx2v.trace_browser.window import range_window, step_window
from lightx2v.trace_summary import reader

from conftest import H200_TRACE
from helpers.procs import get_json, http_get, trace_browser, wait_until
from helpers.steps_trace import STEP_US, T0, steps_trace

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
CALL_CATS = {"cuda_runtime", "cuda_driver"}


def load(path) -> dict:
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as f:
        return json.load(f)


def _timed_in(e: dict, lo: float, end: float) -> bool:
    ts = e.get("ts")
    if ts is None:
        return False
    return ts < end and max(ts, ts + e.get("dur", 0)) >= lo


def expected_steps(doc: dict) -> list[dict]:
    """Per step (time order): name, lo, end and the owner of every launched correlation id."""
    events = doc["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in CALL_CATS and "correlation" in e.get("args", {})}
    owner = {}
    for corr, t in launch.items():
        for k, (lo, hi, _) in enumerate(spans):
            if lo <= t <= hi:
                owner[corr] = k
    steps = []
    for k, (lo, hi, name) in enumerate(spans):
        tail = [e["ts"] + e["dur"] for e in events if e.get("cat") in GPU_CATS
                and owner.get(e.get("args", {}).get("correlation")) == k]
        tail += [e["ts"] + e["dur"] for e in events if e.get("cat") == "gpu_user_annotation" and e["name"] == name]
        nxt = spans[k + 1][0] if k + 1 < len(spans) else float("inf")
        steps.append({"name": name, "lo": lo, "end": max(hi, min(max(tail, default=hi), nxt)), "owner": owner})
    return steps


def expected_step_events(doc: dict, k: int, frames: bool) -> list[dict]:
    step = expected_steps(doc)[k]
    owner = step["owner"]
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            out.append(e)
            continue
        if e.get("cat") == "python_function":
            if frames and _timed_in(e, step["lo"], step["end"]):
                out.append(e)
            continue
        corr = e.get("args", {}).get("correlation") if e.get("cat") in GPU_CATS else \
            e.get("id") if e.get("ph") in ("s", "t", "f") else None
        if corr in owner:
            if owner[corr] == k:
                out.append(e)
        elif _timed_in(e, step["lo"], step["end"]):
            out.append(e)
    return out


def expected_range_events(doc: dict, lo: float, end: float, frames: bool) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "M" or (
        (frames or e.get("cat") != "python_function") and _timed_in(e, lo, end))]


def names(events: list[dict]) -> set[str]:
    return {e["name"] for e in events}


SMALL_PIECES = 256  # bytes per read while indexing: the synthetic trace's events in some 20 pieces, not one


@pytest.fixture(params=[0, SMALL_PIECES], ids=["4MB-pieces", "small-pieces"])
def chunk_bytes(request) -> int:
    return request.param or PIECE_BYTES


@pytest.fixture(params=["plain", "gzip"])
def synthetic(request, tmp_path):
    path = steps_trace(tmp_path / "rank0_host.pt.trace.json")
    if request.param == "gzip":
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.unlink(path)
        path += ".gz"
    return path


def test_a_step_holds_the_gpu_work_it_launched_even_when_it_runs_in_the_next(synthetic, tmp_path):
    index = step_index(synthetic, str(tmp_path / "cache"))
    assert [s.name for s in index.steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    windows = [json.loads(step_window(synthetic, index, k))["traceEvents"] for k in range(3)]
    assert {"k_step1", "k_late_from_step1"} <= names(windows[0])
    assert "k_late_from_step1" not in names(windows[1]) and "k_step2" in names(windows[1])
    assert "k_orphan" in names(windows[2]) and "k_step3" in names(windows[2])  # no launch record: by its time
    assert "k_orphan_in_tail" in names(windows[2])  # the window runs on over the step's GPU tail
    assert index.steps[2].end == T0 + 3300
    assert all("k_after_steps" not in names(w) for w in windows)  # launched after the last step
    assert all({"process_name", "thread_name"} <= names(w) for w in windows)
    assert all(e["cat"] != "python_function" for w in windows for e in w if "cat" in e)
    late_flows = [e for e in windows[0] if e["ph"] in "sf" and e["ts"] >= T0 + 900]
    assert sorted(e["ph"] for e in late_flows) == ["f", "s"]
    assert "[memory]" in names(windows[1]) and "[memory]" not in names(windows[0])
    framed = json.loads(step_window(synthetic, index, 1, frames=True))["traceEvents"]
    assert {"main.py(1): <module>", "model.py(2): forward"} <= names(framed)
    assert "model.py(1): forward" not in names(framed)


@pytest.mark.parametrize("frames", [False, True])
def test_step_windows_equal_a_filter_of_the_whole_file(synthetic, tmp_path, frames, chunk_bytes):
    doc = load(synthetic)
    index = step_index(synthetic, str(tmp_path / "cache"), chunk_bytes)
    assert [(s.name, s.lo, s.end) for s in index.steps] == [(s["name"], s["lo"], s["end"])
                                                            for s in expected_steps(doc)]
    for k in range(3):
        window = json.loads(step_window(synthetic, index, k, frames))
        assert window["traceEvents"] == expected_step_events(doc, k, frames)
        assert {key: v for key, v in window.items() if key != "traceEvents"} == \
            {key: v for key, v in doc.items() if key != "traceEvents"}


@pytest.mark.parametrize("frames", [False, True])
def test_range_windows_equal_a_filter_of_the_whole_file(synthetic, tmp_path, frames, chunk_bytes):
    doc = load(synthetic)
    index = step_index(synthetic, str(tmp_path / "cache"), chunk_bytes)
    for lo, end in ((T0 + 950, T0 + 1250), (T0 - 1000, T0 + 10 * STEP_US), (T0 + 2499, T0 + 2500)):
        expected = expected_range_events(doc, lo, end, frames)
        assert json.loads(range_window(synthetic, lo, end, frames))["traceEvents"] == expected
        assert json.loads(range_window(synthetic, lo, end, frames, index))["traceEvents"] == expected


def bytes_read() -> int:
    """What this process has read from files so far (Linux's /proc/self/io)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.parametrize("piece", [SMALL_PIECES, 200, 320])  # pieces cut elsewhere: a frame at either end
def test_a_step_of_a_plain_trace_is_read_where_it_lies_not_the_whole_file(tmp_path, piece):
    trace = steps_trace(tmp_path / "rank0_host.pt.trace.json", steps=120)
    doc = load(trace)
    index = step_index(trace, None, piece)
    size = os.path.getsize(trace)
    for k in (0, 60, 119):
        before = bytes_read()
        window = step_window(trace, index, k)
        read = bytes_read() - before
        assert json.loads(window)["traceEvents"] == expected_step_events(doc, k, frames=False)
        assert read < size / 4, f"read {read} of {size} bytes for one step of 120"
    for k in (0, 1):
        framed = json.loads(step_window(trace, index, k, frames=True))["traceEvents"]
        assert framed == expected_step_events(doc, k, frames=True)
        assert f"late_writer.py({k + 1}): written last" in names(framed)  # at the file's end: found by its flag


@pytest.mark.parametrize("piece", [SMALL_PIECES, 320])
def test_a_steps_python_frames_are_read_where_they_lie_not_the_whole_file(tmp_path, piece):
    """The index notes the times each piece's skipped frames cover (from their bytes), so the frames layer of
    one step reads the pieces of that time, and the one piece with the run-long ``<module>`` frame."""
    trace = steps_trace(tmp_path / "rank0_host.pt.trace.json", steps=120)
    doc = load(trace)
    index = step_index(trace, None, piece)
    size = os.path.getsize(trace)
    for k in (60, 119):
        before = bytes_read()
        framed = json.loads(step_window(trace, index, k, frames=True))["traceEvents"]
        read = bytes_read() - before
        assert framed == expected_step_events(doc, k, frames=True)
        assert {f"model.py({k + 1}): forward", "main.py(1): <module>"} <= names(framed)
        assert read < size / 4, f"read {read} of {size} bytes for one step's frames of 120"


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "generic"])
def test_frames_whose_times_are_written_otherwise_are_read_for_every_frames_window(tmp_path, monkeypatch, typed):
    """A frame whose times cannot be read at indexing (the generic reader's regex over the skipped bytes cannot read
    one with "dur" before "ts"; the typed one reads that, but not a frame without a "dur") leaves its piece's frame
    times unknown: the piece is read for every frames window, never passed by."""
    monkeypatch.setattr(reader, "TYPED", typed)
    path = tmp_path / "rank0_host.pt.trace.json"
    steps_trace(path, steps=40)
    doc = load(str(path))
    odd = {"ph": "X", "cat": "python_function", "name": "odd.py(3): dur first", "pid": 1, "tid": 1, "dur": 5.0,
           "ts": T0 + 30 * STEP_US + 10, "args": {}}
    if typed:
        del odd["dur"]
    at = next(i for i, e in enumerate(doc["traceEvents"]) if e["name"] == "model.py(10): forward")
    doc["traceEvents"].insert(at + 1, odd)  # among step 10's frames, far from step 30's
    path.write_text(json.dumps(doc))
    index = step_index(str(path), None, SMALL_PIECES)
    assert any(c.frames and c.f_lo == -math.inf for c in index.chunks)
    framed = json.loads(step_window(str(path), index, 30, frames=True))["traceEvents"]
    assert framed == expected_step_events(doc, 30, frames=True)
    assert "odd.py(3): dur first" in names(framed)


@pytest.mark.parametrize("form", ["gzip", "plain"])
def test_the_h200_fixture_windows_equal_a_filter_of_the_whole_file(tmp_path, form, chunk_bytes):
    doc = load(H200_TRACE)
    trace = str(H200_TRACE)
    if form == "plain":
        trace = str(tmp_path / "rank0_h200.pt.trace.json")
        with gzip.open(H200_TRACE, "rb") as src, open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst)
    index = step_index(trace, str(tmp_path / "cache"), chunk_bytes)
    assert [s.name for s in index.steps] == ["ProfilerStep#4"]
    for frames in (False, True):
        window = json.loads(step_window(trace, index, 0, frames))
        assert window["traceEvents"] == expected_step_events(doc, 0, frames)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    lo, end = kernels[10]["ts"], kernels[40]["ts"]
    for frames in (False, True):
        window = json.loads(range_window(trace, lo, end, frames, index))
        assert window["traceEvents"] == expected_range_events(doc, lo, end, frames)
        assert 0 < len(window["traceEvents"]) < len(doc["traceEvents"])


def test_the_index_is_cached_apart_from_the_trace_and_rebuilt_when_size_or_mtime_change(tmp_path):
    trace = tmp_path / "traces" / "rank0_host.pt.trace.json"
    steps_trace(trace)
    cache = tmp_path / "cache"
    step_index(str(trace), str(cache))
    assert os.listdir(trace.parent) == [trace.name]  # nothing written beside the user's trace
    (cached,) = cache.iterdir()
    data = json.loads(cached.read_text())
    assert data["size"] == trace.stat().st_size and data["mtime_ns"] == trace.stat().st_mtime_ns
    data["steps"][0]["name"] = "from the cache"
    cached.write_text(json.dumps(data))
    assert step_index(str(trace), str(cache)).steps[0].name == "from the cache"  # same size and mtime: read back

    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # same bytes, a new mtime
    assert step_index(str(trace), str(cache)).steps[0].name == "ProfilerStep#1"

    cached.write_text(cached.read_text().replace('"ProfilerStep#1"', '"from the cache"'))
    text = trace.read_text().replace("ProfilerStep#1", "ProfilerStep#19")  # a step renamed: longer
    st = trace.stat()
    trace.write_text(text)
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old mtime: only the size tells
    assert trace.stat().st_size != st.st_size and trace.stat().st_mtime_ns == st.st_mtime_ns
    assert step_index(str(trace), str(cache)).steps[0].name == "ProfilerStep#19"


def test_the_cache_keeps_the_most_recently_used_indexes_and_drops_the_rest(tmp_path):
    traces = [steps_trace(tmp_path / f"run{i}" / "rank0_host.pt.trace.json") for i in range(4)]
    cache = tmp_path / "cache"
    index_of = []
    for i, trace in enumerate(traces[:3]):
        before = set(os.listdir(cache)) if cache.exists() else set()
        step_index(trace, str(cache))
        (name,) = set(os.listdir(cache)) - before
        os.utime(cache / name, ns=(10**9 * (100 + i),) * 2)  # last used one second apart: trace 0, then 1, then 2
        index_of.append(name)
    step_index(traces[0], str(cache))  # read back: now trace 0's is the most recently used
    (cache / "notes.txt").write_text("not an index")
    prune(str(cache), keep=2)
    assert set(os.listdir(cache)) == {index_of[0], index_of[2], "notes.txt"}  # trace 1's, the oldest, removed
    step_index(traces[3], str(cache))  # a new index written: the folder is pruned to the default bound again
    assert len([f for f in os.listdir(cache) if f.endswith(INDEX_SUFFIX)]) == 3 <= KEEP_INDEXES


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    root = tmp_path_factory.mktemp("windows") / "save_results"
    steps_trace(root / "run" / "rank0_host.pt.trace.json")
    with trace_browser(root) as (_, port):
        yield root, f"http://127.0.0.1:{port}"


@pytest.mark.slow
def test_the_window_routes_serve_the_index_and_the_filtered_events(browser):
    root, url = browser
    doc = load(root / "run" / "rank0_host.pt.trace.json")
    index = get_json(url + "/api/timeline/index/run/rank0_host.pt.trace.json")
    assert [s["name"] for s in index["steps"]] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert os.listdir(root / ".trace_browser" / "index")  # kept in the folder the trace browser owns
    assert [t["path"] for t in get_json(url + "/api/traces")] == ["run/rank0_host.pt.trace.json"]
    window = get_json(url + "/api/timeline/window/run/rank0_host.pt.trace.json?step=1&frames=1")
    assert window["traceEvents"] == expected_step_events(doc, 1, frames=True)
    lo, end = T0 + 950, T0 + 1250
    window = get_json(url + f"/api/timeline/window/run/rank0_host.pt.trace.json?lo={lo}&end={end}")
    assert window["traceEvents"] == expected_range_events(doc, lo, end, frames=False)
    for query, status in (("step=3", 404), ("step=-1", 404), ("lo=x&end=1", 400), ("", 400)):
        assert http_get(url + "/api/timeline/window/run/rank0_host.pt.trace.json?" + query)[0] == status, query
    assert http_get(url + "/api/timeline/window/run/missing.pt.trace.json?step=0")[0] == 404
    assert http_get(url + "/api/timeline/index/../secret.json")[0] in (403, 404)


@pytest.mark.slow
@pytest.mark.parametrize("frames", [False, True])
def test_a_steps_window_downloads_as_a_chrome_trace_file_for_perfetto(browser, frames):
    """The Perfetto download is the window the Timeline draws, as a file: valid Chrome-trace JSON, same events."""
    root, url = browser
    doc = load(root / "run" / "rank0_host.pt.trace.json")
    query = "step=1" + ("&frames=1" if frames else "")
    route = url + "/api/timeline/window/run/rank0_host.pt.trace.json?" + query
    status, headers, body = http_get(route + "&download=1")
    assert status == 200 and headers["Content-Type"] == "application/json"
    name = "rank0_host.step1" + (".frames" if frames else "") + ".json"
    assert headers["Content-Disposition"] == f"attachment; filename=\"{name}\"; filename*=UTF-8''{name}"
    trace = json.loads(body)
    assert isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    assert trace["traceEvents"] == expected_step_events(doc, 1, frames=frames)
    assert body == http_get(route)[2]  # the same bytes as the window the page draws
    assert "Content-Disposition" not in http_get(route)[1]
    status, headers, _ = http_get(url + f"/api/timeline/window/run/rank0_host.pt.trace.json?lo={T0}&end={T0 + 10}"
                                  "&download=1")
    assert status == 200 and f'filename="rank0_host.{T0}-{T0 + 10}us.json"' in headers["Content-Disposition"]


@pytest.mark.slow
def test_the_server_serves_a_rewritten_trace_anew(tmp_path):
    root = tmp_path / "save_results"
    trace = root / "run" / "rank0_host.pt.trace.json"
    steps_trace(trace)
    with trace_browser(root) as (_, port):
        url = f"http://127.0.0.1:{port}/api/timeline/window/run/rank0_host.pt.trace.json?step=0"
        wait_until(lambda: http_get(url)[0] == 200, 30, what="the browser")
        assert "k_step1" in names(get_json(url)["traceEvents"])
        trace.write_text(trace.read_text().replace('"k_step1"', '"k_step1_recaptured"'))
        assert "k_step1_recaptured" in names(get_json(url)["traceEvents"])


@pytest.mark.slow
def test_a_trace_rewritten_under_the_same_size_and_mtime_is_refused_not_misread(tmp_path):
    root = tmp_path / "save_results"
    trace = root / "run" / "rank0_host.pt.trace.json"
    steps_trace(trace, steps=40)
    with trace_browser(root) as (_, port):
        url = f"http://127.0.0.1:{port}/api/timeline/window/run/rank0_host.pt.trace.json?step=20"
        wait_until(lambda: http_get(url)[0] == 200, 30, what="the browser")
        st = trace.stat()
        text = trace.read_text()
        assert text.startswith('{"schemaVersion": 1, ')
        trace.write_text(text.replace('{"schemaVersion": 1, ', '{"schemaVersion":1, ', 1) + " ")  # events move
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert trace.stat().st_size == st.st_size
        status, _, body = http_get(url.replace("step=20", "step=10"))  # a window not yet kept in memory
        assert status == 409, body
        assert server_alive(port)


def server_alive(port: int) -> bool:
    return http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200


def gzip_in_two_members(plain: str, path) -> int:
    """`plain` written to `path` as two gzip members split at its middle; returns where the second one starts."""
    with open(plain, "rb") as f:
        data = f.read()
    first = gzip.compress(data[: len(data) // 2])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(first + gzip.compress(data[len(data) // 2:]))
    return len(first)


def test_a_gzip_trace_rewritten_in_place_is_served_anew(tmp_path):
    root = tmp_path / "save_results"
    trace = root / "run" / "rank0_host.pt.trace.json.gz"
    plain = steps_trace(tmp_path / "plain" / "rank0_host.pt.trace.json", steps=40)
    gzip_in_two_members(plain, trace)
    with trace_browser(root) as (_, port):
        url = f"http://127.0.0.1:{port}/api/timeline/window/run/rank0_host.pt.trace.json.gz?step=30"
        assert "k_step31" in names(get_json(url)["traceEvents"])
        inode = trace.stat().st_ino
        with open(plain) as f:
            text = f.read().replace('"k_step31"', '"k_step31_recaptured"')
        with open(trace, "r+b") as f:  # in place: the same file, other bytes, another length
            f.write(gzip.compress(text.encode()))
            f.truncate()
        assert trace.stat().st_ino == inode
        assert "k_step31_recaptured" in names(get_json(url)["traceEvents"])


def test_a_gzip_trace_damaged_or_cut_while_served_is_a_clear_error_not_a_dropped_connection(tmp_path):
    root = tmp_path / "save_results"
    trace = root / "run" / "rank0_host.pt.trace.json.gz"
    second = gzip_in_two_members(steps_trace(tmp_path / "plain" / "rank0_host.pt.trace.json", steps=40), trace)
    whole = trace.read_bytes()
    with trace_browser(root) as (_, port):
        url = f"http://127.0.0.1:{port}/api/timeline/window/run/rank0_host.pt.trace.json.gz"
        assert "k_step1" in names(get_json(url + "?step=0")["traceEvents"])  # the index and the points exist
        st = trace.stat()
        with open(trace, "r+b") as f:  # the second member's header damaged; size and mtime as they were
            f.seek(second)
            f.write(b"\0\0\0\0")
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))
        status, _, body = http_get(url + "?step=30")  # a window not kept in memory: read at the points
        assert status == 422 and b"corrupt gzip data" in body, (status, body)
        trace.write_bytes(whole[: second + 100])  # now cut off in its second member: another size, indexed again
        status, _, body = http_get(url + "?step=30")
        assert status == 422 and b"truncated gzip stream" in body, (status, body)
        assert server_alive(port)


def test_a_step_that_is_no_ascii_number_is_not_found(browser):
    """"²" and "٣" are digits to str.isdigit; the route asks for 0-9 (before: int("²") raised, answered 409)."""
    _, url = browser
    for step in ("%C2%B2", "%D9%A3", "1%C2%B2"):
        status, _, body = http_get(url + f"/api/timeline/window/run/rank0_host.pt.trace.json?step={step}")
        assert status == 404 and body.startswith(b"no step "), (step, status, body)


@pytest.mark.parametrize("form", ["plain", "gzip"])
def test_a_window_is_never_read_from_another_version_of_the_file_than_its_index(tmp_path, form):
    path = steps_trace(tmp_path / "rank0_host.pt.trace.json", steps=10)
    if form == "gzip":
        with open(path, "rb") as src:
            data = src.read()
        os.unlink(path)
        path += ".gz"
        with open(path, "wb") as dst:
            dst.write(gzip.compress(data))
    index = step_index(path, None)
    assert "k_step2" in names(json.loads(step_window(path, index, 1))["traceEvents"])
    text = load(path)
    text["traceEvents"].insert(3, {"ph": "i", "name": "moved", "ts": T0, "pid": 1, "tid": 1, "s": "t"})
    data = json.dumps(text).encode()
    with open(path, "r+b") as f:  # rewritten in place: every event after the third moved
        f.write(gzip.compress(data) if form == "gzip" else data)
        f.truncate()
    with pytest.raises(FileChanged):
        step_window(path, index, 5)


def test_an_index_of_a_trace_rewritten_while_it_was_read_is_refused(tmp_path, monkeypatch):
    """A writer that rewrites the trace during the index's pass (planted here in the pass itself)."""
    from lightx2v.trace_browser import step_index as indexing

    path = steps_trace(tmp_path / "rank0_host.pt.trace.json", steps=10)
    real_build = indexing.build_index

    def build_while_rewritten(trace_path, chunk_bytes):
        index = real_build(trace_path, chunk_bytes)
        with open(trace_path, "a") as f:
            f.write(" ")
        return index

    monkeypatch.setattr(indexing, "build_index", build_while_rewritten)
    with pytest.raises(FileChanged):
        step_index(path, str(tmp_path / "cache"))
    assert not (tmp_path / "cache").exists()  # nothing kept that names neither version
