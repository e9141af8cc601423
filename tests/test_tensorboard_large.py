"""The large-trace fixes of `lightx2v.tensorboard.large`, on the plugin's own functions in this process (each test
puts the plugin's attributes back: monkeypatch) and on small hand-made traces; the sizes are the benchmark's
(benchmarks/bench_tensorboard_large.py)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from lightx2v.tensorboard import large

from conftest import H200_TRACE, REPO_ROOT, subprocess_env
from helpers.steps_trace import steps_trace

overall_parser = pytest.importorskip("torch_tb_profiler.profiler.overall_parser")


def sorted_disjoint(rng: random.Random, count: int) -> list[tuple[int, int]]:
    """`count` ranges, sorted and disjoint as merge_ranges leaves them (some touching: end == next start)."""
    ranges, at = [], 0
    for _ in range(count):
        at += rng.choice((0, 1, 5, 20))
        length = rng.choice((1, 3, 10, 40))
        ranges.append((at, at + length))
        at += length
    return ranges


def test_one_steps_intersection_with_the_busy_ranges_is_the_plugins_own(monkeypatch):
    """The bisected intersection of one step with a long sorted, disjoint list gives exactly the ranges the
    plugin's full walk gives, for steps inside, across, before, after and on the edges of the ranges; and the walk
    it calls sees only the ranges that can overlap the step (or start at its end), not the list from its start."""
    plugin_walk = overall_parser.intersection_ranges_lists
    seen: list[list] = []

    def spy(range_list1, range_list2):
        seen.append(list(range_list2))
        return plugin_walk(range_list1, range_list2)

    monkeypatch.setattr(overall_parser, "intersection_ranges_lists", spy)
    large.apply_step_ranges()
    fixed = overall_parser.intersection_ranges_lists
    assert fixed is not spy
    rng = random.Random(7)
    for _ in range(300):
        ranges = sorted_disjoint(rng, rng.choice((17, 40, 200)))
        lo, hi = ranges[0][0] - 30, ranges[-1][1] + 30
        begin = rng.choice([rng.randint(lo, hi), *rng.choice(ranges)])  # often exactly on a range's edge
        step = (begin, begin + rng.choice((0, 1, 7, 60, 500)))
        seen.clear()
        assert fixed([step], list(ranges)) == plugin_walk([step], list(ranges)), (step, ranges)
        overlapping = [r for r in ranges if r[1] > step[0] and r[0] <= step[1]]  # or touching its end
        assert seen == [overlapping], (step, seen, overlapping)


def test_short_lists_and_several_steps_take_the_plugins_walk(monkeypatch):
    """Under BISECT_FROM ranges, or with more than one step on the left, the plugin's walk gets the lists as
    they are."""
    plugin_walk = overall_parser.intersection_ranges_lists
    seen: list[tuple[list, list]] = []
    monkeypatch.setattr(overall_parser, "intersection_ranges_lists",
                        lambda a, b: seen.append((a, b)) or plugin_walk(a, b))
    large.apply_step_ranges()
    fixed = overall_parser.intersection_ranges_lists
    short = sorted_disjoint(random.Random(1), large.BISECT_FROM)
    long = sorted_disjoint(random.Random(2), 50)
    two_steps = [(0, 10), (long[-1][1] - 5, long[-1][1])]
    assert fixed([(3, 4)], short) == plugin_walk([(3, 4)], short)
    assert fixed(two_steps, long) == plugin_walk(two_steps, long)
    assert seen == [([(3, 4)], short), (two_steps, long)]


def test_applying_step_ranges_twice_wraps_once(monkeypatch):
    monkeypatch.setattr(overall_parser, "intersection_ranges_lists", overall_parser.intersection_ranges_lists)
    large.apply_step_ranges()
    once = overall_parser.intersection_ranges_lists
    large.apply_step_ranges()
    assert overall_parser.intersection_ranges_lists is once


def test_json_bytes_is_the_files_size_or_a_gzip_trailers(tmp_path):
    """The Trace view's limit is on JSON bytes: a plain file's size; a gzip file's uncompressed size (its
    trailer), never less than the file itself; 0 for a file that is not there."""
    import gzip

    plain = tmp_path / "a.json"
    plain.write_bytes(b"x" * 1234)
    packed = tmp_path / "a.json.gz"
    packed.write_bytes(gzip.compress(b"{" * 100_000))
    assert large.json_bytes(str(plain)) == 1234
    assert large.json_bytes(str(packed)) == 100_000
    assert large.json_bytes(str(tmp_path / "gone.json")) == 0


def test_the_timeline_link_is_the_trace_under_the_trace_browsers_folder(tmp_path, monkeypatch):
    """The notice links /timeline/<the trace's path under the folder a trace browser serves>: the nearest folder
    above the trace with the trace browser's discovery folder, else $LIGHTX2V_RESULTS_DIR; the trace browser's
    home page when neither holds the trace. Names are URL-quoted."""
    monkeypatch.setenv("LIGHTX2V_TRACE_BROWSER_URL", "http://box:9001/")
    served = tmp_path / "save_results"
    (served / ".trace_browser").mkdir(parents=True)
    trace = served / "torch_profile" / "my run" / "rank0.pt.trace.json"
    trace.parent.mkdir(parents=True)
    trace.write_text("{}")
    logdir = str(served / "torch_profile")
    assert large.timeline_url(str(trace), logdir) == "http://box:9001/timeline/torch_profile/my%20run/rank0.pt.trace.json"

    elsewhere = tmp_path / "elsewhere" / "run" / "t.json"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("{}")
    monkeypatch.setenv("LIGHTX2V_RESULTS_DIR", str(tmp_path / "elsewhere"))
    assert large.timeline_url(str(elsewhere), None) == "http://box:9001/timeline/run/t.json"
    monkeypatch.setenv("LIGHTX2V_RESULTS_DIR", str(served))
    assert large.timeline_url(str(elsewhere), None) == "http://box:9001/"


def test_the_notice_is_a_trace_too_and_names_size_limit_and_link(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGHTX2V_TRACE_BROWSER_URL", "http://box:9001/")
    monkeypatch.setenv("LIGHTX2V_RESULTS_DIR", str(tmp_path))
    doc = large.notice(str(tmp_path / "t.json"), 1_234_000_000, 256 * 10**6, None)
    note = doc[large.NOTICE_KEY]
    assert note["url"] == "http://box:9001/timeline/t.json" and note["bytes"] == 1_234_000_000
    assert "1,234 MB of JSON" in note["text"] and "(256 MB, LIGHTX2V_TB_TRACE_VIEW_MAX_MB)" in note["text"]
    (event,) = doc["traceEvents"]
    assert event["ph"] == "X" and event["dur"] > 0 and note["url"] in event["name"]


def test_the_trace_view_limit_is_the_setting_in_megabytes(monkeypatch):
    monkeypatch.delenv("LIGHTX2V_TB_TRACE_VIEW_MAX_MB", raising=False)
    assert large.trace_view_max_bytes() == 256_000_000
    monkeypatch.setenv("LIGHTX2V_TB_TRACE_VIEW_MAX_MB", "3")
    assert large.trace_view_max_bytes() == 3_000_000


# --- stream_parse: every view the same as the plugin's own parse ------------------------------------------------

VIEWS = REPO_ROOT / "tests" / "programs" / "tb_views.py"
HTA = REPO_ROOT / "tests" / "fixtures" / "hta"
# HTA's traces of two other kinds: AMD MI250, CPU only (the larger ones take 20-40 s a pair here; every trace of
# the corpus was compared the same way by hand when stream_parse landed: all equal)
HTA_TRACES = ["amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
              "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"]

CAPTURE = """
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule
inner = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU())
model = torch.nn.Sequential(inner, torch.nn.Linear(64, 16), torch.nn.Sequential(torch.nn.ReLU()))
x = torch.randn(8, 32)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3), with_stack=True,
             with_modules=True, record_shapes=True, profile_memory=True,
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for _ in range(4):
        model(x).sum()
        prof.step()
"""


def views(path, *left_out: str) -> dict:
    result = subprocess.run([sys.executable, str(VIEWS), str(path), ",".join(left_out)], capture_output=True,
                            text=True, timeout=300, env=subprocess_env())
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def assert_same_views(path) -> dict:
    """The views with stream_parse (streamed: asserted) and with the plugin's own parse, equal but for the flag
    and the file path 0.4.3 keeps (its own parse may point at a rewritten copy)."""
    streamed, plugin = views(path), views(path, "stream_parse")
    assert streamed.pop("streamed") is True and plugin.pop("streamed") is False
    streamed.pop("trace_file_path"), plugin.pop("trace_file_path")
    assert sorted(streamed) == sorted(plugin)
    assert [name for name in streamed if streamed[name] != plugin[name]] == []
    return streamed


@pytest.fixture(scope="module")
def module_capture(tmp_path_factory):
    """A real torch capture with Python frames, nn.Module events (nested), shapes and memory events."""
    path = tmp_path_factory.mktemp("modules") / "rank0_modules.pt.trace.json"
    result = subprocess.run([sys.executable, "-c", CAPTURE, str(path)], capture_output=True, text=True, timeout=300,
                            env=subprocess_env())
    assert result.returncode == 0, result.stderr
    return path


def test_a_streamed_capture_with_modules_frames_and_memory_has_the_plugins_own_views(module_capture):
    events = json.loads(module_capture.read_text())["traceEvents"]
    assert any((e.get("args") or {}).get("Python module id") is not None for e in events)
    got = assert_same_views(module_capture)
    # the views that lean on the dropped frames are not empty (else they would agree trivially)
    assert got["module_view"], "no Module view"
    nested = [m for m in got["module_view"]["data"] if m.get("children")]
    assert nested, got["module_view"]
    assert any(row["has_call_stack"] for row in got["operation_table_by_name"]["data"])
    assert got["memory_stats"]


@pytest.mark.parametrize("name", ["h200", "metadata_last"])
def test_a_streamed_gpu_trace_has_the_plugins_own_views(tmp_path, name):
    """The H200 fixture (gzip, with_stack); the Timeline tests' three-step trace (GPU step copies, orphan kernels,
    frames written last) with its deviceProperties after its events (a second pass)."""
    if name == "h200":
        path = H200_TRACE
    else:
        path = tmp_path / "t.pt.trace.json"
        steps_trace(path)
        if name == "metadata_last":
            doc = json.loads(path.read_text())
            props = [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "totalGlobalMem": 1}]
            path.write_text('{"schemaVersion": 1, "traceEvents": ' + json.dumps(doc["traceEvents"])
                            + ', "deviceProperties": ' + json.dumps(props) + "}")
    got = assert_same_views(path)
    assert got["has_kernel"] and got["kernel_table"]
    if name == "metadata_last":
        assert "NVIDIA H200" in json.dumps(got["gpu_summary"])  # read in the second pass


@pytest.mark.slow
@pytest.mark.parametrize("rel", HTA_TRACES)
def test_a_streamed_hta_trace_has_the_plugins_own_views(rel):
    assert_same_views(HTA / rel)
