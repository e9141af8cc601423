"""The summary on traces we did not write, held against Holistic Trace Analysis (HTA 0.5) and against the
TensorBoard plugin (torch-tb-profiler 0.4.3) on the same files.

The HTA corpus (tests/fixtures/hta, MIT, see its README) is a selection of HTA's own public test traces: V100, A100,
MI250 and CPU-only captures, kineto from 2023 to 2026, old ``Kernel``/``Runtime`` categories, ``cuda_driver``
launches, fractional-nanosecond timestamps, and GPU events whose ``External id`` is the correlation id. HTA reads
each with its nanoseconds kept (``HTA_DISABLE_NS_ROUNDING=1``) and its last step included. HTA leaves out GPU
events without a launch record; where a trace has such events, the comparison runs on a copy without them
(what HTA sees), and the full trace is checked for what HTA cannot say.

The plugin's corpus (tests/fixtures/tb_plugin, BSD, see its README) is its own ResNet-50 samples, trimmed: kineto
of 2021, two spans of one worker per folder, labels written as ops. The plugin's own parser (``RunProfileData``,
what its views show) reads each file in this process, and the summary's figures are held against its figures:
steps, step times, per-step GPU time, kernels, each op's self host duration, which events are ops, spans.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.render import render_rank

CORPUS = Path(__file__).resolve().parent / "fixtures" / "hta"
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
KERNEL_CATS = {"kernel", "Kernel"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
# (trace, steps it has): HTA reads these; every one has a launch record for most of its GPU events
AGAINST_HTA = {
    "trace_diff/control/control.json.gz": 6,  # External id = correlation id, A100, NCCL
    "trace_diff/test/test.json.gz": 6,  # the same job changed; 614 GPU events without a launch record
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": 5,  # ns floats, GPU-side steps, V100
    "negative_queue_length_values_check/rank0.json.gz": 5,  # 872 GPU events without a launch record
    "timeline_analysis/sampled_rank-0.json.gz": 2,  # no deviceProperties
    "critical_path/cuda_event_sync/event_sync_trace.json.gz": 1,  # cudaStreamSynchronize, events
    "triton_example/triton_example.json.gz": 1,  # a triton kernel launched by cuLaunchKernel (cuda_driver)
}

# the launches that no op or label encloses in these files (read off the traces by hand)
OUTSIDE_ANY_OP = {"critical_path/cuda_event_sync/event_sync_trace.json.gz": 1}  # torch.cuda._sleep's spin kernel


def load(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def as_hta_sees_it(rel: str, tmp: Path) -> Path:
    """The trace without its GPU events that have no launch record (HTA drops them), written for both tools."""
    doc = load(CORPUS / rel)
    calls = {e["args"]["correlation"] for e in doc["traceEvents"]
             if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in GPU_CATS or e.get("args", {}).get("correlation") in calls]
    doc.setdefault("distributedInfo", {"rank": 0})  # HTA needs a rank; the summary reads it the same way
    out = tmp / rel.replace("/", "__").replace(".json.gz", ".json")
    out.write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def hta(tmp_path_factory):
    """rel -> (the file both tools read, HTA's GPU events as (cat, name, ts, dur, iteration) rows)."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    out = {}
    for rel in AGAINST_HTA:
        folder = tmp_path_factory.mktemp("hta")
        path = as_hta_sees_it(rel, folder)
        t = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True).t
        df = t.get_trace(next(iter(t.traces)))
        names = t.symbol_table.get_sym_table()
        gpu = df[df.stream > 0]
        rows = [(names[c], names[n], ts, dur, it) for c, n, ts, dur, it in
                zip(gpu.cat, gpu.name, gpu.ts, gpu.dur, gpu.iteration, strict=True) if names[c] in GPU_CATS]
        out[rel] = (path, rows)
    return out


@pytest.mark.parametrize("rel", list(AGAINST_HTA))
@pytest.mark.slow
def test_kernels_busy_steps_and_launchers_agree_with_hta(hta, rel):
    path, rows = hta[rel]
    r = analyze_trace(str(path))
    theirs: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for cat, name, _, dur, _ in rows:
        if cat in KERNEL_CATS:
            theirs[name][0] += 1
            theirs[name][1] += dur
    ours = {k.name: k for k in r.tables.kernels}
    assert set(ours) == set(theirs)
    for name, (calls, total) in theirs.items():
        assert ours[name].calls == calls, name
        assert ours[name].total_us == pytest.approx(total, abs=1e-6), name
    # GPU busy: the union of HTA's GPU events (HTA reads ns in integer ns; so do we, to 1 ns)
    merged, busy = [], 0.0
    for lo, hi in sorted((ts, ts + dur) for _, _, ts, dur, _ in rows):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    busy = sum(hi - lo for lo, hi in merged)
    assert r.gpu.busy_us == pytest.approx(busy, abs=1e-3)
    assert r.gpu.busy_us <= r.gpu.activity_us + 1e-6  # a union is never more than the sum
    # steps by launch: HTA puts each kernel in the iteration of its launch
    per_iteration: dict[int, int] = defaultdict(int)
    for cat, _, _, _, it in rows:
        if cat in KERNEL_CATS:
            per_iteration[int(it)] += 1
    assert len(r.steps) == AGAINST_HTA[rel]
    if AGAINST_HTA[rel] > 1 or r.steps[0].number is not None:
        assert [s.kernel_count for s in r.steps] == [per_iteration[s.number] for s in r.steps]
    assert sum(s.kernel_count for s in r.steps) <= r.gpu.kernel_count
    assert sum(s.wall_us for s in r.steps) <= r.trace_span_us + 1e-6
    # every GPU event with a launch record is charged to an op or label around its launch, but where none is
    links = r.launch_links
    assert links.with_launch_record == links.gpu_events == len(rows)
    outside_any_op = OUTSIDE_ANY_OP.get(rel, 0)
    assert links.unlinked == outside_any_op
    if links.gpu_events >= 100:
        assert links.by_launch_chain + links.label_only >= 0.99 * links.with_launch_record


@pytest.mark.slow
def test_old_kineto_puts_the_correlation_id_in_external_id_and_the_chain_still_finds_the_ops():
    r = analyze_trace(str(CORPUS / "trace_diff/control/control.json.gz"))
    links = r.launch_links
    # HTA's launch chain finds 9,402 launching ops of 9,450 here; the other 48 sit in an optimizer's label
    assert (links.gpu_events, links.by_launch_chain, links.label_only, links.unlinked) == (9450, 9402, 48, 0)
    assert links.external_id.endswith("not used")
    assert all(x.op for x in r.tables.launches if x.calls and not x.label.startswith("Optimizer.step"))


def test_a_kernel_is_charged_to_the_op_that_launched_it_not_to_the_op_its_external_id_names():
    r = analyze_trace(str(CORPUS / "execution_trace/benchmark_simple_add_trace.json.gz"))
    launchers = {x.launcher for x in r.tables.launches if "distribution_elementwise" in x.name}
    assert launchers == {"aten::uniform_"}  # its External id is the correlation id, which an aten::add carries


@pytest.mark.slow
def test_gpu_work_late_behind_the_host_stays_in_the_step_that_launched_it():
    r = analyze_trace(str(CORPUS / "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    assert [s.kernel_count for s in r.steps] == [870] * 5  # by GPU time: 285, 624, 870, 870, 870
    assert sum(s.wall_us for s in r.steps) == pytest.approx(r.trace_span_us)  # GPU-side spans counted once
    assert all(s.gpu_lag_us > 0 for s in r.steps)


@pytest.mark.parametrize("rel, advice", [
    ("negative_queue_length_values_check/rank0.json.gz", "long gaps with work already queued"),
    ("timeline_analysis/sampled_rank-0.json.gz", "the GPU waits for the host to launch work"),
    ("critical_path/cuda_event_sync/event_sync_trace.json.gz", "the GPU waits for the host"),
])
@pytest.mark.slow
def test_the_idle_advice_names_the_cause_that_holds_the_idle_time(rel, advice):
    text = render_rank(analyze_trace(str(CORPUS / rel)))
    assert advice in text and "launch-bound" not in text


def test_every_schema_of_the_corpus_reads():
    """ROCm (hip* calls), old Kernel/Runtime categories, cuda_driver launches, CPU only."""
    amd = analyze_trace(str(CORPUS / "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert (amd.gpu.kernel_count, amd.launch_links.by_launch_chain, amd.launch_links.unlinked) == (14, 16, 0)
    old = analyze_trace(str(CORPUS / "trace_file_list/inference_rank_1.json.gz"))
    assert old.gpu.kernel_count == 4 and old.launch_links.with_launch_record == 4  # no cpu_op in it to link to
    triton = analyze_trace(str(CORPUS / "triton_example/triton_example.json.gz"))
    assert [x.launcher for x in triton.tables.launches] == ["triton_poi_fused_add_cos_sin_0"]
    cpu = analyze_trace(str(CORPUS / "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert cpu.gpu is None and cpu.launch_links is None and cpu.top_cpu_ops


def test_files_that_are_not_kineto_traces_get_one_clear_line(tmp_path):
    with pytest.raises(TraceError, match="not a trace"):
        analyze_trace(str(CORPUS / "execution_trace/benchmark_simple_add_et.json.gz"))


def test_the_corpus_is_small_and_licensed():
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert size <= 8 << 20
    assert "MIT License" in (CORPUS / "LICENSE").read_text()
    assert shutil.which  # the corpus README names its source commit
    assert "f4d0062c382f42bd8a74838bcdad1916c7d5d2da" in (CORPUS / "README.md").read_text()


@pytest.mark.slow
def test_the_overview_page_shows_idle_by_cause_and_the_sync_that_held_the_gpu():
    from lightx2v.trace_browser.overview import render_overview
    from lightx2v.trace_summary import summarize_paths

    (run,) = summarize_paths([str(CORPUS / "trace_diff/control/control.json.gz")])
    page = render_overview(run)
    table = page[page.index("<table class=idle-causes>"):]
    table = table[:table.index("</table>")]
    # the same split the text summary gives: host wait first, then the syncs named by op and call
    assert ">host wait</td>" in table and ">short gaps</td>" in table
    assert "sync: aten::to → cudaStreamSynchronize" in table and "sync: aten::item → cudaStreamSynchronize" in table


# --- against the TensorBoard plugin ---------------------------------------------------------------------------

TB_CORPUS = Path(__file__).resolve().parent / "fixtures" / "tb_plugin"
TB_SAMPLES = sorted(str(p.relative_to(TB_CORPUS)) for p in TB_CORPUS.glob("*/*.pt.trace.json.gz"))
# TensorBoard (like torch's own profiler table) counts an op whose only child op has its own name once: aten::div
# calling aten::div is 1 call there, 2 here. Self time is the same either way; calls and total time differ.
NESTED_IN_ITSELF = {"aten::div"}


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    """rel -> the plugin's RunProfileData of that sample, processed and analyzed as its views use it."""
    from torch_tb_profiler.profiler.data import RunProfileData

    out = {}
    for rel in TB_SAMPLES:
        data = RunProfileData.parse("worker0", 1, str(TB_CORPUS / rel), str(tmp_path_factory.mktemp("tb_cache")))
        data.process()
        data.analyze()
        out[rel] = data
    return out


def test_the_plugins_corpus_is_four_spans_small_and_licensed():
    assert TB_SAMPLES == ["resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
                          "resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz",
                          "resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
                          "resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz"]
    assert sum(p.stat().st_size for p in TB_CORPUS.rglob("*") if p.is_file()) <= 3 << 19  # 1.5 MiB
    assert "BSD License" in (TB_CORPUS / "LICENSE").read_text()
    assert "041e7ce99f1562dd81232ee58b7c454ef16bfae2" in (TB_CORPUS / "README.md").read_text()


@pytest.mark.parametrize("rel", TB_SAMPLES)
@pytest.mark.slow
def test_steps_step_times_gpu_time_and_kernels_agree_with_tensorboard(tensorboard, rel):
    from torch_tb_profiler.profiler.event_parser import ProfileRole

    data, r = tensorboard[rel], analyze_trace(str(TB_CORPUS / rel))
    assert [s.name for s in r.steps] == [f"ProfilerStep#{n}" for n in data.steps_names] and len(r.steps) == 3
    # the mean step time is the same; a step's own time is not (TensorBoard gives a step the GPU tail its work ran
    # past the next step's start, the summary gives it to that step and reports it as the first step's lag)
    mean = sum(s.wall_us for s in r.steps) / len(r.steps)
    assert mean == pytest.approx(data.avg_costs.costs[ProfileRole.Total], abs=1e-6)
    gpu = [sum(s.costs[role] for role in (ProfileRole.Kernel, ProfileRole.Memcpy, ProfileRole.Memset))
           for s in data.steps_costs]
    assert [s.gpu_launched_us for s in r.steps] == gpu
    theirs = {name: (calls, total) for name, calls, total in
              zip(data.kernel_stat.index, data.kernel_stat["count"], data.kernel_stat["sum"], strict=True)}
    assert {k.name: (k.calls, k.total_us) for k in r.tables.kernels} == theirs


@pytest.mark.parametrize("rel", TB_SAMPLES)
@pytest.mark.slow
def test_every_ops_self_host_duration_agrees_with_tensorboard_and_labels_are_no_ops(tensorboard, rel):
    theirs = {op.name: op for op in tensorboard[rel].op_list_groupby_name}
    ours = {op.name: op for op in analyze_trace(str(TB_CORPUS / rel)).tables.cpu_ops}
    # the same ops: enumerate(DataLoader)#..., Optimizer.step#SGD.step and Optimizer.zero_grad#... are labels there
    assert set(ours) == set(theirs)
    assert {name: round(op.self_us) for name, op in ours.items()} == \
        {name: op.self_host_duration for name, op in theirs.items()}
    assert {name: (op.calls, op.total_us) for name, op in ours.items() if name not in NESTED_IN_ITSELF} == \
        {name: (op.calls, op.host_duration) for name, op in theirs.items() if name not in NESTED_IN_ITSELF}


@pytest.mark.slow
def test_the_runtime_calls_an_op_makes_are_not_its_self_time_but_are_reported_beside_it():
    r = analyze_trace(str(TB_CORPUS / "resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz"))
    (copy,) = [op for op in r.tables.cpu_ops if op.name == "aten::copy_"]
    # the batch's host-to-device copy: 6 calls, 63.956 ms, nearly all of it in cudaMemcpyAsync and the sync after
    assert (copy.calls, copy.total_us, copy.self_us, copy.self_with_runtime_us) == (6, 63956.0, 105.0, 63956.0)
    assert r.cpu_self_total_us == pytest.approx(sum(op.self_us for op in r.tables.cpu_ops))
    text = render_rank(r)
    table = text[text.index("CPU ops by self time"):].splitlines()
    assert table[0].endswith("self; as TensorBoard's, without the CUDA API calls the op made itself)")
    assert table[1] == "  % self    self ms CUDA API ms   total ms   calls  op"
    assert not any(line.endswith("  aten::copy_") for line in table)  # 0.105 ms self: not among the top 10


@pytest.mark.parametrize("folder", ["resnet50_num_workers_0", "resnet50_num_workers_4"])
@pytest.mark.slow
def test_two_captures_of_one_worker_are_its_spans_as_tensorboard_lists_them_without_a_straggler(folder):
    from torch_tb_profiler import consts

    from lightx2v.trace_summary import render_runs, summarize_paths, to_json

    # the plugin's RunLoader: a file is worker.<span>.pt.trace.json; a worker's spans are numbered in their order
    found = sorted((m.group(1), m.group(2), name) for name in os.listdir(TB_CORPUS / folder)
                   if (m := consts.WORKER_PATTERN.match(name)))
    tensorboard_spans = [(worker, name) for worker, _, name in found]
    (run,) = summarize_paths([str(TB_CORPUS / folder)])
    assert run.spans and run.straggler is None
    assert [(r.worker, os.path.basename(r.file)) for r in run.ranks] == tensorboard_spans  # span 1, span 2
    text = render_runs([run])
    assert text.startswith(f"Run {folder}: 2 spans of worker0 (")
    assert "straggler:" not in text and "workers or spans" not in text  # no straggler line
    assert "Trace summary: worker0, span 1 of 2" in text and "Trace summary: worker0, span 2 of 2" in text
    doc = to_json([run])["runs"][0]
    assert doc["spans"] is True and doc["straggler"] is None
    assert doc["ranks"][1]["trace_start_us"] > doc["ranks"][0]["trace_start_us"] + doc["ranks"][0]["trace_span_us"]
