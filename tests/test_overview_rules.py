"""The offline Overview (`lightx2v.trace_browser.overview`), fast: summaries made here by hand, field by field, and
the HTML a reader gets for them, section by section: the ranks compared and the straggler, a rank's heading and
meta line, the steps table (and its cut for long captures), device memory (its curve's geometry, steps, top ops,
snapshots), the GPU idle gaps with their causes, kernels, memory copies and CPU ops, and the error page. The memory
curve's geometry, by which the coordinates here are worked out: 660 x 120 px; x from the first to the last time
(points and steps); y = 118 - 106 * bytes / top, top being the largest total (1 at least). tests/test_trace_corpus.py,
tests/test_trace_summary_memory.py and tests/test_offline_views.py look at Overviews of real traces."""

from __future__ import annotations

import re

from lightx2v.trace_browser.overview import (
    _cpu_ops,
    _device_memory,
    _idle,
    _kernels,
    _memory,
    _rank_section,
    _ranks_section,
    _steps,
    memory_curve,
    render_error,
    render_overview,
)
from lightx2v.trace_summary.model import (
    CpuOpStat,
    Device,
    DeviceMemory,
    Efficiency,
    GpuTotals,
    IdleCauses,
    IdleStats,
    KernelStat,
    MemOpStat,
    MemoryCurve,
    MemoryOp,
    MemorySummary,
    RankRow,
    RankSummary,
    RunSummary,
    SnapshotSite,
    SnapshotSummary,
    StepMemory,
    StepStats,
    Straggler,
    SyncWait,
)

BUSY, IDLE, CPU, WARN, SHADE = "#3b6fb6", "#d6dde8", "#4f9a6a", "#c0392b", "#e6ebf3"
GPU = GpuTotals(busy_us=8000.0, activity_us=9000.0, kernel_count=1234, kernel_us=7000.0, memcpy_us=500.0,
                memset_us=100.0, streams=2, devices=1)
EMPTY_STEPS = ("<h3>Steps</h3><table "  # a CPU-only trace: no GPU columns, no GPU legend
               "class=steps><thead><tr><th>step</th><th>wall ms</th><th></th><th>CPU ms</th></tr></thead><tbody>"
               "</tbody></table>")
GPU_STEPS_HEAD = ("<h3>Steps</h3><p class=legend><span style='color:#3b6fb6'>■</span> GPU busy "
                  "<span style='color:#d6dde8'>■</span> GPU idle <span style='color:#4f9a6a'>■</span> CPU step (no GPU "
                  "work recorded)</p><table "
                  "class=steps><thead><tr><th>step</th><th>wall ms</th><th></th><th>CPU ms</th><th>GPU busy ms</th>"
                  "<th>busy %</th><th>kernels</th><th>idle %</th></tr></thead><tbody>")
NO_MEMORY = ("<h3>Device memory</h3><p class=meta>no memory events in this trace: record them with "
             "profile_memory=True")


def rank_summary(**changes) -> RankSummary:
    fields = dict(file="run/rank0.json", size_bytes=1_500_000, compressed=False, worker="host_1", rank=None,
                  world_size=None, devices=[], versions={}, event_count=12345, trace_span_us=2500.0, steps=[],
                  gpu=None, idle=None, top_kernels=[], top_cpu_ops=[], cpu_self_total_us=0.0, memory_ops=[],
                  gpu_comm_us=None)
    fields.update(changes)
    return RankSummary(**fields)  # type: ignore[arg-type]


def bar(label: str, rects: str, width: int = 220) -> str:
    return (f'<svg class=bar width="{width}" height="12" viewBox="0 0 {width} 12" role="img" aria-label="{label}">'
            f"{rects}</svg>")


def rect(x: str, w: str, fill: str) -> str:
    return f'<rect x="{x}" width="{w}" height="12" fill="{fill}"/>'


def step(name: str, wall: float, cpu: float, busy: float | None = None, busy_pct: float | None = None,
         kernels: int | None = None, idle: IdleStats | None = None) -> StepStats:
    return StepStats(name, None, 0.0, wall, cpu, busy, busy_pct, kernels, idle)


def idle_stats(**changes) -> IdleStats:
    fields = dict(window_us=10000.0, idle_us=3000.0, ratio=0.3, largest_gap_us=1200.0, largest_gap_at_us=450.0,
                  largest_gap_step="ProfilerStep#2", gaps_over_10us=7, flagged=True, causes=None)
    fields.update(changes)
    return IdleStats(**fields)  # type: ignore[arg-type]


# --- the page -----------------------------------------------------------------------------------------------------


def test_one_traces_page_is_titled_by_its_worker_and_links_back_and_to_its_timeline():
    html = render_overview(RunSummary("lbl", "/r", [rank_summary()], None, None),
                           timeline_url=lambda f: "/timeline/" + f, back_url="/?a=1&b=2")
    assert "<title>host_1 · Overview · LightX2V</title>" in html
    body = html.split("<body>\n", 1)[1].split("\n")
    assert body[:3] == ['<p class=nav><a href="/?a=1&amp;b=2">← all traces</a></p>',
                        '<section class=rank id="rank-host_1">', "<h1>host_1</h1>"]
    assert body[3] == ('<p class=meta>run/rank0.json · 1.5 MB · 12,345 events · span 2.500 ms · '
                       '<a href="/timeline/run/rank0.json">Timeline</a><br>devices: none recorded (CPU-only trace)'
                       "</p>")
    assert "<h1>Run" not in html and "id=ranks" not in html
    assert "tr.straggler td { background: #fdecea; }" in html.split("</style>", 1)[0]  # the Overview's own style


def test_without_a_timeline_link_the_meta_line_has_none_and_the_back_link_goes_to_the_list():
    html = render_overview(RunSummary("lbl", "/r", [rank_summary()], None, None))
    assert '<p class=nav><a href="/">← all traces</a></p>' in html
    assert "<p class=meta>run/rank0.json · 1.5 MB · 12,345 events · span 2.500 ms<br>" in html


def test_a_run_of_several_ranks_is_titled_by_its_label_and_compares_the_ranks_first():
    ranks = [rank_summary(rank=0, world_size=2, worker="w0", file="a.json"),
             rank_summary(rank=1, world_size=2, worker="w1", file="b.json")]
    html = render_overview(RunSummary("my<run>", "/res/my", ranks, [], None), timeline_url=lambda f: "/t/" + f)
    assert "<title>my&lt;run&gt; · Overview · LightX2V</title>" in html
    body = html.split("<body>\n", 1)[1].split("\n")
    assert body[:3] == ['<p class=nav><a href="/">← all traces</a></p>',
                        "<h1>Run my&lt;run&gt;: 2 ranks</h1><p class=path>/res/my</p>",
                        "<section id=ranks><h2>Ranks compared (mean per step)</h2>"]
    assert re.findall(r"<h[12]>[^<]*</h[12]>", html) == [
        "<h1>Run my&lt;run&gt;: 2 ranks</h1>", "<h2>Ranks compared (mean per step)</h2>", "<h2>w0 (rank 0 of 2)</h2>",
        "<h2>w1 (rank 1 of 2)</h2>"]
    assert [m for m in re.findall(r'href="([^"]*)">Timeline', html)] == ["/t/a.json", "/t/b.json"]


def test_the_error_page_names_what_failed_and_links_back():
    html = render_error("Cannot <read>", "line 1: bad & worse", back_url="/x?y=1&z")
    assert "<title>Cannot &lt;read&gt; · Overview · LightX2V</title>" in html
    assert html.split("<body>\n", 1)[1] == ('<p class=nav><a href="/x?y=1&amp;z">← all traces</a></p><h1>Cannot '
                                           "&lt;read&gt;</h1><p class=error>line 1: bad &amp; worse</p>\n"
                                           "</body></html>\n")
    assert '<a href="/">← all traces</a>' in render_error("t", "m")
    assert "tr.straggler td { background: #fdecea; }" in html.split("</style>", 1)[0]


# --- the ranks compared -------------------------------------------------------------------------------------------

ROWS = [RankRow(0, "w0", 4, 2000.0, 1500.0, 75.0, 100.0), RankRow(1, "w1", 4, 1000.0, None, None, None),
        RankRow(None, "w0", 3, 500.0, 600.0, 120.0, 0.0)]
HEAD = ("<table class=ranks><thead><tr><th>rank</th><th>worker</th><th>steps</th><th>step ms</th><th></th>"
        "<th>GPU busy ms</th><th>busy %</th><th>comm ms</th></tr></thead><tbody>")


def test_each_rank_is_a_row_with_its_step_bar_and_the_straggler_is_marked():
    straggler = Straggler(0, "w0", "step_wall", 2000.0, 100.0, 100.0)
    html = _ranks_section(RunSummary("l", "/p", [], ROWS, straggler)).split("\n")
    assert html == [
        "<section id=ranks><h2>Ranks compared (mean per step)</h2>",
        HEAD + "<tr class=straggler><td>0</td><td>w0</td><td class=num>4</td><td class=num>2.000</td><td>"
        + bar("step 2.000 ms", rect("0.0", "165.0", BUSY) + rect("165.0", "55.0", IDLE))
        + "</td><td class=num>1.500</td><td class=num>75.0</td><td class=num>0.100</td></tr>"
        "<tr><td>1</td><td>w1</td><td class=num>4</td><td class=num>1.000</td><td>"
        + bar("step 1.000 ms", rect("0.0", "110.0", CPU))
        + "</td><td class=num>–</td><td class=num>–</td><td class=num>–</td></tr>"
        "<tr><td>–</td><td>w0</td><td class=num>3</td><td class=num>0.500</td><td>"
        + bar("step 0.500 ms", rect("0.0", "66.0", BUSY))
        + "</td><td class=num>0.600</td><td class=num>120.0</td><td class=num>0.000</td></tr></tbody></table>",
        "<p class=straggler-line><strong>Straggler: rank 0 (w0)</strong>: step 2.000 ms, +100.0% vs the fastest "
        "rank (spread 100.0%)</p>",
        "</section>",
    ]


def test_a_straggler_by_gpu_compute_says_the_steps_are_in_lock_step():
    straggler = Straggler(None, "w<1>", "gpu_compute", 1000.0, 12.34, 1.5)
    html = _ranks_section(RunSummary("l", "/p", [], ROWS[1:2], straggler)).split("\n")
    assert "class=straggler" not in html[1]
    assert html[2] == ("<p class=straggler-line><strong>Straggler: w&lt;1&gt;</strong>: step times are in lock-step "
                       "(spread 1.5%: ranks wait for each other in collectives); it has the most GPU compute per "
                       "step, +12.3% vs the least</p>")


def test_a_row_of_the_stragglers_rank_on_another_worker_is_not_marked():
    straggler = Straggler(1, "w0", "step_wall", 1000.0, 0.0, 0.0)
    html = _ranks_section(RunSummary("l", "/p", [], ROWS, straggler))
    assert "class=straggler>" not in html


def test_without_a_comparison_or_straggler_the_table_is_empty_and_no_one_is_named():
    assert _ranks_section(RunSummary("l", "/p", [], None, None)).split("\n") == [
        "<section id=ranks><h2>Ranks compared (mean per step)</h2>", HEAD + "</tbody></table>", "</section>"]


# --- a rank -------------------------------------------------------------------------------------------------------


def test_a_bare_ranks_section_says_what_it_lacks_section_by_section():
    html = _rank_section(rank_summary(), None, False).split("\n")
    assert html[:4] == ['<section class=rank id="rank-host_1">', "<h1>host_1</h1>",
                        "<p class=meta>run/rank0.json · 1.5 MB · 12,345 events · span 2.500 ms<br>devices: none "
                        "recorded (CPU-only trace)</p>", EMPTY_STEPS]
    assert html[4].startswith(NO_MEMORY) and html[4].endswith(".</p>")
    assert html[5:] == ["", "", "<h3>GPU kernels</h3><p>No kernels, copies or sets in this trace.</p>", "",
                        "<h3>CPU ops</h3><p>None recorded.</p>", "</section>"]


def test_a_ranks_heading_and_meta_line_name_its_rank_devices_versions_and_notes():
    r = rank_summary(rank=0, world_size=2, compressed=True, file="r<0>.json.gz",
                     devices=[Device(0, "NVIDIA H200", 150_109_880_320, "9.0"), Device(None, "X&Y", None, None)],
                     versions={"cuda_runtime": "12.8", "torch": "2.13"}, notes=["a <note>", "another"], gpu=GPU,
                     idle=idle_stats(flagged=False, ratio=0.1))
    html = _rank_section(r, "/t?f=<1>", True).split("\n")
    assert html[:5] == ['<section class=rank id="rank-0">', "<h2>host_1 (rank 0 of 2)</h2>",
                        "<p class=meta>r&lt;0&gt;.json.gz · 1.5 MB gzip · 12,345 events · span 2.500 ms · "
                        '<a href="/t?f=&lt;1&gt;">Timeline</a><br>devices: 0: NVIDIA H200, sm 9.0, 139.8 GiB; '
                        "?: X&amp;Y<br>versions: cuda runtime 12.8, torch 2.13</p>",
                        "<p class=note>a &lt;note&gt;</p>", "<p class=note>another</p>"]
    assert html[7].startswith("<h3>GPU idle gaps</h3>")  # after the steps and device memory
    assert html[8:10] == ["", ""] and html[10].startswith("<h3>Top 0 GPU kernels</h3>")
    assert html[11:] == ["<h3>Memory copies and sets</h3><p>None.</p>", "<h3>CPU ops</h3><p>None recorded.</p>",
                         "</section>"]


def test_a_ranks_memory_and_efficiency_figures_get_their_sections():
    eff = Efficiency(shapes_recorded=True, hint="", peak=None, target_pct=80.0, steps=1, step_wall_us=1000.0,
                     gpu=True, modeled_us=0.0, unmodeled_us=0.0, matrix_flops=0.0, step_tflops_per_s=None,
                     mfu_pct=None, headline="nothing to gain", classes=[], ops=[])
    html = _rank_section(rank_summary(memory=MemorySummary([device()]), efficiency=eff), None, False).split("\n")
    assert html[4].startswith("<h3>Device memory: cuda:0</h3><p class=meta>peak 2.0 MB allocated")
    assert html[6:8] == ["<h3>How far from the limit</h3>", "<p class=headline>nothing to gain</p>"]


def test_a_rank_without_a_world_size_says_only_its_rank():
    html = _rank_section(rank_summary(rank=3), None, False).split("\n")
    assert html[:2] == ['<section class=rank id="rank-3">', "<h1>host_1 (rank 3)</h1>"]


def test_devices_with_a_trace_of_gpu_work_but_no_device_list_say_what_was_seen():
    assert ("devices: not recorded in the trace (GPU activity seen on 1 device, 2 streams)</p>"
            in _rank_section(rank_summary(gpu=GPU), None, False))


# --- steps --------------------------------------------------------------------------------------------------------


def test_each_step_is_a_row_with_its_figures_and_a_bar_scaled_to_the_longest():
    steps = [step("ProfilerStep#1", 2000.0, 1800.0, 1500.0, 75.0, 12, idle_stats(ratio=0.25)),
             step("<b>", 1000.0, 900.0, kernels=0)]
    html = _steps(rank_summary(steps=steps))
    assert html == GPU_STEPS_HEAD + (
        "<tr><td>ProfilerStep#1</td><td class=num>2.000</td><td>"
        + bar("ProfilerStep#1: 2.000 ms, GPU busy / idle", rect("0.0", "165.0", BUSY) + rect("165.0", "55.0", IDLE))
        + "</td><td class=num>1.800</td><td class=num>1.500</td><td class=num>75.0</td><td class=num>12</td>"
        "<td class=num>25.0</td></tr>"
        "<tr><td>&lt;b&gt;</td><td class=num>1.000</td><td>"
        + bar("&lt;b&gt;: 1.000 ms, CPU step", rect("0.0", "110.0", CPU))
        + "</td><td class=num>0.900</td><td class=num>–</td><td class=num>–</td><td class=num>0</td>"
        "<td class=num>–</td></tr>") + "</tbody></table>"


def test_a_steps_idle_part_is_its_wall_time_less_its_busy_time_and_an_unknown_kernel_count_reads_a_dash():
    html = _steps(rank_summary(steps=[step("S1", 1000.0, 900.0, 500.0, 50.0), step("S2", 2000.0, 2000.0)]))
    assert ("<tr><td>S1</td><td class=num>1.000</td><td>"
            + bar("S1: 1.000 ms, GPU busy / idle", rect("0.0", "55.0", BUSY) + rect("55.0", "55.0", IDLE))
            + "</td><td class=num>0.900</td><td class=num>0.500</td><td class=num>50.0</td><td class=num>–</td>"
            "<td class=num>–</td></tr>") in html


def names_shown(html: str) -> list[str]:
    return re.findall(r"<tr><td>([^<]*)</td>", html)


def test_up_to_64_steps_are_all_shown():
    html = _steps(rank_summary(steps=[step(f"S{i}", 100.0, 100.0) for i in range(64)]))
    assert names_shown(html) == [f"S{i}" for i in range(64)]
    assert "more steps" not in html


def test_more_than_64_steps_show_the_first_60_and_the_last_4_with_how_many_are_left_out():
    steps = [step(f"S{i}", 100.0, 100.0) for i in range(65)]
    steps[61] = step("S61", 400.0, 100.0)  # the longest, left out: the bars keep its scale
    html = _steps(rank_summary(steps=steps))
    assert names_shown(html) == [f"S{i}" for i in range(60)] + [f"S{i}" for i in range(61, 65)]
    assert html.count("<tr><td colspan=4>… 1 more steps …</td></tr><tr><td>S61</td>") == 1
    first = "<tr><td>S0</td><td class=num>0.100</td><td>" + bar("S0: 0.100 ms, CPU step", rect("0.0", "55.0", CPU))
    assert first in html
    html = _steps(rank_summary(steps=[step(f"S{i}", 100.0, 100.0) for i in range(70)]))
    assert "<tr><td>S59</td>" in html and "<tr><td colspan=4>… 6 more steps …</td></tr><tr><td>S66</td>" in html
    gpu = _steps(rank_summary(steps=[step(f"S{i}", 100.0, 100.0, busy=50.0) for i in range(65)]))
    assert gpu.startswith(GPU_STEPS_HEAD) and gpu.count("<tr><td colspan=8>… 1 more steps …</td></tr>") == 1


# --- device memory ------------------------------------------------------------------------------------------------

NO_CURVE = MemoryCurve([], [], [], 0)


def device(**changes) -> DeviceMemory:
    fields = dict(device="cuda:0", device_type=1, device_id=0, events=10, allocations=1234, allocated_bytes=5_000_000,
                  peak_allocated_bytes=2_000_000, peak_allocated_at_us=0.0, peak_step="ProfilerStep#2",
                  peak_reserved_bytes=3_000_000, leak_threshold_bytes=1, leak=False, steps=[], top_ops=[],
                  unattributed_bytes=0, out_of_memory_events=0, curve=NO_CURVE)
    fields.update(changes)
    return DeviceMemory(**fields)  # type: ignore[arg-type]


def step_memory(name: str, start: int, end: int, growth: int, grew: bool, reserved: int | None = 4000,
                at: tuple[float, float] = (0.0, 0.0), peak: int = 2000) -> StepMemory:
    return StepMemory(name, None, at[0], at[1], start, end, growth, peak, reserved, grew)


def test_without_memory_events_the_section_says_how_to_record_them():
    html = _device_memory(None)
    assert html.startswith(NO_MEMORY) and html.endswith(".</p>")
    assert html.count("<p") == 1


def test_a_devices_line_names_its_peak_its_step_reserved_and_allocations():
    html = _device_memory(MemorySummary([device()]))
    assert html == ("<h3>Device memory: cuda:0</h3><p class=meta>peak 2.0 MB allocated in ProfilerStep#2, 3.0 MB "
                    "reserved; 1,234 allocations, 5.0 MB in all.</p>\n")


def test_a_device_without_reserved_totals_or_a_peak_step_leaves_them_out():
    html = _device_memory(MemorySummary([device(device="cpu", peak_step=None, peak_reserved_bytes=None)]))
    assert html == ("<h3>Device memory: cpu</h3><p class=meta>peak 2.0 MB allocated; 1,234 allocations, 5.0 MB in "
                    "all.</p>\n")


def test_a_leaking_device_flags_its_steps_that_grew_and_lists_each_step_and_top_op():
    steps = [step_memory("S1", 1000, 3000, 2000, True), step_memory("S<2>", 3000, 2500, -500, False, reserved=None),
             step_memory("S3", 2500, 2500, 0, False)]
    ops = [MemoryOp("aten::empty<>", 3, 4000, 6000, 1000), MemoryOp("aten::mm", 1, 10, 10, 0)]
    html = _device_memory(MemorySummary([device(leak=True, steps=steps, top_ops=ops)])).split("\n")
    assert html[0].endswith("5.0 MB in all. <strong class=flagged>Leak: allocated grows in 1 of 3 steps.</strong>"
                            "</p>")
    assert html[1] == ""  # no curve without points
    assert html[2] == (
        "<table class=memory-steps><thead><tr><th>step</th><th>allocated at start</th><th>at end</th><th>growth</th>"
        "<th>peak allocated</th><th>peak reserved</th></tr></thead><tbody>"
        "<tr class=grew><td>S1</td><td class=num>1.0 KB</td><td class=num>3.0 KB</td><td class=num>+2.0 KB</td>"
        "<td class=num>2.0 KB</td><td class=num>4.0 KB</td></tr>"
        "<tr><td>S&lt;2&gt;</td><td class=num>3.0 KB</td><td class=num>2.5 KB</td><td class=num>-500 B</td>"
        "<td class=num>2.0 KB</td><td class=num>–</td></tr>"
        "<tr><td>S3</td><td class=num>2.5 KB</td><td class=num>2.5 KB</td><td class=num>0 B</td>"
        "<td class=num>2.0 KB</td><td class=num>4.0 KB</td></tr></tbody></table>")
    assert html[3] == (
        "<table class=memory-ops><thead><tr><th>op</th><th>allocated (self)</th><th>with children</th>"
        "<th>live at the peak</th><th>allocations</th></tr></thead><tbody>"
        "<tr><td class=name>aten::empty&lt;&gt;</td><td class=num>4.0 KB</td><td class=num>6.0 KB</td>"
        "<td class=num>1.0 KB</td><td class=num>3</td></tr>"
        "<tr><td class=name>aten::mm</td><td class=num>10 B</td><td class=num>10 B</td><td class=num>0 B</td>"
        "<td class=num>1</td></tr></tbody></table>")
    assert len(html) == 4


def test_two_devices_follow_each_other():
    html = _device_memory(MemorySummary([device(), device(device="cuda:1")]))
    assert re.findall(r"<h3>[^<]*</h3>", html) == ["<h3>Device memory: cuda:0</h3>", "<h3>Device memory: cuda:1</h3>"]


def test_a_snapshot_lists_what_held_its_peak_and_what_had_no_frame_in_your_code():
    sites = [SnapshotSite("model.py:120", "forward<>", "/src/model.py", 120, 3_000_000, 2),
             SnapshotSite("m.py:7", "f", "/src/a&b/m.py", 7, 500, 1)]
    snap = SnapshotSummary("snap<0>.pickle", 0, "device_traces", 4_000_000, None, 8_000_000, sites, 1_000_000)
    html = _device_memory(MemorySummary([], [snap]))
    assert html == (
        "<h3>What holds the peak: cuda:0 snapshot</h3><p class=meta>peak 4.0 MB live, 8.0 MB reserved "
        "(snap&lt;0&gt;.pickle)</p><table class=snapshot-sites><thead><tr><th>where</th><th>function</th>"
        "<th>live at the peak</th><th>blocks</th></tr></thead><tbody>"
        '<tr><td class=name title="/src/model.py">model.py:120</td><td>forward&lt;&gt;</td>'
        "<td class=num>3.0 MB</td><td class=num>2</td></tr>"
        '<tr><td class=name title="/src/a&amp;b/m.py">m.py:7</td><td>f</td><td class=num>500 B</td>'
        "<td class=num>1</td></tr>"
        "<tr><td colspan=2>no frame in your code</td><td class=num>1.0 MB</td><td></td></tr></tbody></table>")


# --- the memory curve ---------------------------------------------------------------------------------------------


def test_the_curve_draws_allocated_and_reserved_as_steps_shades_the_steps_and_marks_the_peak():
    curve = MemoryCurve([0.0, 100.0, 200.0, 300.0], [0, 1000, 2000, 600], [None, 4000, 4000, None], 2)
    steps = [step_memory("S1", 0, 0, 0, False, at=(50.0, 250.0), peak=2000),
             step_memory("S<2>", 0, 0, 0, False, at=(250.0, 400.0), peak=600)]
    got = memory_curve(device(curve=curve, steps=steps, peak_allocated_bytes=2000))
    assert got == (
        '<svg class=memory-curve width="660" height="120" viewBox="0 0 660 120" role="img" aria-label="cuda:0: '
        'allocated and reserved over time, peak 2.0 KB">'
        f'<rect class=step x="82.5" width="330.0" height="120" fill="{SHADE}"><title>S1: peak 2.0 KB</title></rect>'
        f'<rect class=step x="412.5" width="247.5" height="120" fill="{IDLE}"><title>S&lt;2&gt;: peak 600 B</title>'
        "</rect>"
        '<polyline class=reserved points="165.0,12.0 330.0,12.0 330.0,12.0 660.0,12.0" fill="none" stroke="#4f9a6a" '
        'stroke-width="1.5" stroke-dasharray="4 2"/>'
        '<polyline class=allocated points="0.0,118.0 165.0,118.0 165.0,91.5 330.0,91.5 330.0,65.0 495.0,65.0 '
        '495.0,102.1 660.0,102.1" fill="none" stroke="#3b6fb6" stroke-width="1.5"/>'
        '<circle class=peak cx="330.0" cy="65.0" r="3.5" fill="#c0392b"/>'
        '<text x="336.0" y="62.0" text-anchor="start" font-size="11" fill="#c0392b">peak 2.0 KB</text></svg>'
        "<p class=legend><span style='color:#3b6fb6'>■</span> allocated <span style='color:#4f9a6a'>■</span> "
        "reserved (dashed) <span style='color:#c0392b'>●</span> peak; shaded: steps; 0.400 ms, top 4.0 KB</p>")


def test_a_curve_without_reserved_totals_draws_allocated_alone_and_labels_a_late_peak_to_its_left():
    curve = MemoryCurve([10.0, 20.0], [100, 400], [None, None], 1)
    got = memory_curve(device(device="cpu", curve=curve, peak_allocated_bytes=400))
    assert got == (
        '<svg class=memory-curve width="660" height="120" viewBox="0 0 660 120" role="img" aria-label="cpu: '
        'allocated over time, peak 400 B">'
        '<polyline class=allocated points="0.0,91.5 660.0,91.5 660.0,12.0 660.0,12.0" fill="none" stroke="#3b6fb6" '
        'stroke-width="1.5"/><circle class=peak cx="660.0" cy="12.0" r="3.5" fill="#c0392b"/>'
        '<text x="654.0" y="11.0" text-anchor="end" font-size="11" fill="#c0392b">peak 400 B</text></svg>'
        "<p class=legend><span style='color:#3b6fb6'>■</span> allocated <span style='color:#c0392b'>●</span> peak; "
        "shaded: steps; 0.010 ms, top 400 B</p>")


def test_a_curve_of_one_point_of_nothing_stays_on_the_axis_and_a_zero_length_step_is_a_pixel_wide():
    curve = MemoryCurve([5.0], [0], [None], 0)
    steps = [step_memory("S", 0, 0, 0, False, at=(5.0, 5.0), peak=0)]
    got = memory_curve(device(curve=curve, steps=steps, peak_allocated_bytes=0))
    assert f'<rect class=step x="0.0" width="1.0" height="120" fill="{SHADE}">' in got
    assert 'points="0.0,118.0 660.0,118.0"' in got
    assert '<text x="6.0" y="115.0" text-anchor="start"' in got
    assert got.endswith("shaded: steps; 0.000 ms, top 1 B</p>")


def test_the_curve_spans_the_steps_beyond_its_points():
    curve = MemoryCurve([100.0, 200.0], [1000, 1000], [None, None], 0)
    steps = [step_memory("S", 0, 0, 0, False, at=(0.0, 400.0))]
    got = memory_curve(device(curve=curve, steps=steps))
    assert 'points="165.0,12.0 330.0,12.0 330.0,12.0 660.0,12.0"' in got
    assert f'<rect class=step x="0.0" width="660.0" height="120" fill="{SHADE}">' in got
    assert got.endswith("0.400 ms, top 1.0 KB</p>")


def test_no_curve_without_points():
    assert memory_curve(device()) == ""


# --- GPU idle gaps ------------------------------------------------------------------------------------------------

SYNCS = [SyncWait("aten::item", "cudaStreamSynchronize", 1500.0, 1, "m.py:4 main"),
         SyncWait("", "cudaDeviceSynchronize", 400.0, 2), SyncWait("aten::cpu", "cudaMemcpy", 100.0, 0),
         SyncWait("aten::x", "fourth", 50.0, 1)]


def test_flagged_idle_time_reads_high_with_advice_and_its_causes_and_syncs():
    causes = IdleCauses(0.0, 2000.0, 1000.0, 0.0, 0.0, "sync", SYNCS)
    assert _idle(idle_stats(causes=causes)) == (
        '<h3>GPU idle gaps</h3><p class="idle flagged">'
        + bar("GPU busy vs idle inside steps", rect("0.0", "154.0", BUSY) + rect("154.0", "66.0", WARN))
        + " idle 3.000 of 10.000 ms (30.0%), high: ≥ 20% of step time; largest gap 1.200 ms at +0.450 ms into "
        "ProfilerStep#2; 7 gaps ≥ 10 µs. host syncs hold the GPU (67% of idle: aten::item -&gt; cudaStreamSynchronize "
        "1.500 ms); move .item()/.cpu()/printing of GPU tensors out of the step.</p>"
        "<table class=idle-causes><thead><tr><th>idle by cause</th><th></th><th>ms</th><th>% of idle</th></tr>"
        "</thead><tbody>"
        "<tr><td>sync</td><td>" + bar("sync", rect("0.0", "146.7", WARN)) + "</td><td class=num>2.000</td>"
        "<td class=num>66.7</td></tr>"
        "<tr><td>short gaps</td><td>" + bar("short gaps", rect("0.0", "73.3", WARN)) + "</td><td class=num>1.000</td>"
        "<td class=num>33.3</td></tr>"
        "<tr><td class=name>sync: aten::item → cudaStreamSynchronize at m.py:4 main</td><td></td>"
        "<td class=num>1.500</td><td class=num>1 gap</td></tr>"
        "<tr><td class=name>sync: cudaDeviceSynchronize</td><td></td><td class=num>0.400</td>"
        "<td class=num>2 gaps</td></tr>"
        "<tr><td class=name>sync: aten::cpu → cudaMemcpy</td><td></td><td class=num>0.100</td>"
        "<td class=num>0 gaps</td></tr></tbody></table>")


def test_idle_time_under_the_flag_reads_ok_in_the_idle_colour_without_advice():
    causes = IdleCauses(1000.0, 0.0, 0.0, 0.0, 0.0, "host wait")
    html = _idle(idle_stats(flagged=False, ratio=0.3, causes=causes))
    assert html.startswith('<h3>GPU idle gaps</h3><p class="idle">' + bar(
        "GPU busy vs idle inside steps", rect("0.0", "154.0", BUSY) + rect("154.0", "66.0", IDLE)))
    assert "(30.0%), ok (flagged at ≥ 20%); largest gap" in html
    assert "7 gaps ≥ 10 µs.</p><table class=idle-causes>" in html
    assert "<tr><td>host wait</td><td>" + bar("host wait", rect("0.0", "73.3", IDLE)) + "</td>" in html


def test_flagged_idle_time_without_causes_or_a_dominant_one_has_no_advice():
    html = _idle(idle_stats())
    assert html.endswith("7 gaps ≥ 10 µs.</p>")
    html = _idle(idle_stats(causes=IdleCauses(0.0, 0.0, 0.0, 0.0, 0.0, "")))
    assert html.endswith("7 gaps ≥ 10 µs.</p><table class=idle-causes><thead><tr><th>idle by cause</th><th></th>"
                         "<th>ms</th><th>% of idle</th></tr></thead><tbody></tbody></table>")


def test_no_causes_table_without_idle_time():
    html = _idle(idle_stats(idle_us=0.0, ratio=0.0, flagged=False, causes=IdleCauses(0.0, 0.0, 0.0, 0.0, 0.0, "")))
    assert html.endswith("7 gaps ≥ 10 µs.</p>")
    assert " idle 0.000 of 10.000 ms (0.0%), ok (flagged at ≥ 20%);" in html


def test_idle_time_and_causes_under_a_microsecond_still_get_their_rows():
    causes = IdleCauses(1.5, 0.5, 0.0, 0.0, 0.0, "host wait")
    html = _idle(idle_stats(idle_us=2.0, ratio=0.0002, flagged=False, causes=causes))
    assert re.findall(r"<tr><td>([a-z ]+)</td>", html) == ["host wait", "sync"]
    html = _idle(idle_stats(idle_us=0.5, ratio=0.0, flagged=False, causes=IdleCauses(0.5, 0.0, 0.0, 0.0, 0.0, "")))
    assert re.findall(r"<tr><td>([a-z ]+)</td>", html) == ["host wait"]


def test_each_cause_with_time_is_a_row_in_the_causes_order():
    causes = IdleCauses(100.0, 200.0, 300.0, 400.0, 2000.0, "unknown")
    html = _idle(idle_stats(causes=causes))
    assert re.findall(r"<tr><td>([a-z ]+)</td>", html) == ["host wait", "sync", "short gaps", "other", "unknown"]
    assert "the trace records no launch for the work after most gaps (67% of idle)" in html


# --- kernels, copies and CPU ops ----------------------------------------------------------------------------------


def test_without_gpu_work_the_kernels_say_so_and_the_copies_are_left_out():
    r = rank_summary(memory_ops=[MemOpStat("memcpy", "x", 1, 1.0, 1)])
    assert _kernels(r) == "<h3>GPU kernels</h3><p>No kernels, copies or sets in this trace.</p>"
    assert _memory(r) == ""


def test_the_top_kernels_are_rows_with_bars_scaled_to_the_first():
    kernels = [KernelStat("void gemm<float>(int)", "gemm", 10, 4000.0, 400.0, 40.0),
               KernelStat("relu_kernel", "relu", 3, 1000.0, 333.333, 10.0)]
    html = _kernels(rank_summary(gpu=GPU, top_kernels=kernels))
    assert html == (
        "<h3>Top 2 GPU kernels</h3><p class=meta>GPU activity 9.000 ms, busy 8.000 ms, 1,234 kernels on 2 stream(s)"
        "</p><table class=kernels><thead><tr><th>kernel</th><th></th><th>% GPU</th><th>total ms</th><th>calls</th>"
        "<th>mean µs</th></tr></thead><tbody>"
        '<tr><td class=name title="void gemm&lt;float&gt;(int)">gemm</td><td>'
        + bar("40.0% of GPU time", rect("0.0", "220.0", BUSY))
        + "</td><td class=num>40.0</td><td class=num>4.000</td><td class=num>10</td><td class=num>400.0</td></tr>"
        '<tr><td class=name title="relu_kernel">relu</td><td>' + bar("10.0% of GPU time", rect("0.0", "55.0", BUSY))
        + "</td><td class=num>10.0</td><td class=num>1.000</td><td class=num>3</td><td class=num>333.3</td></tr>"
        "</tbody></table>")


def test_no_top_kernels_is_an_empty_table():
    assert _kernels(rank_summary(gpu=GPU)).endswith("<th>mean µs</th></tr></thead><tbody></tbody></table>")


def test_memory_copies_and_sets_are_rows_and_none_says_so():
    ops = [MemOpStat("memcpy", "Memcpy HtoD <Pageable>", 4, 1500.0, 2_000_000), MemOpStat("memset", "Memset", 1, 2.0,
                                                                                       None)]
    assert _memory(rank_summary(gpu=GPU, memory_ops=ops)) == (
        "<h3>Memory copies and sets</h3><table class=memory><thead><tr><th>kind</th><th>what</th><th>calls</th>"
        "<th>total ms</th><th>bytes</th></tr></thead><tbody>"
        "<tr><td>memcpy</td><td>Memcpy HtoD &lt;Pageable&gt;</td><td class=num>4</td><td class=num>1.500</td>"
        "<td class=num>2.0 MB</td></tr>"
        "<tr><td>memset</td><td>Memset</td><td class=num>1</td><td class=num>0.002</td><td class=num>–</td></tr>"
        "</tbody></table>")
    assert _memory(rank_summary(gpu=GPU)) == "<h3>Memory copies and sets</h3><p>None.</p>"


def test_the_top_cpu_ops_are_rows_with_bars_scaled_to_the_first():
    ops = [CpuOpStat("aten::mm", 5, 3000.0, 4000.0, 600.0, 60.0), CpuOpStat("aten::<add>", 2, 500.0, 500.0, 250.0,
                                                                           15.0)]
    assert _cpu_ops(rank_summary(top_cpu_ops=ops, cpu_self_total_us=5000.0)) == (
        "<h3>Top 2 CPU ops by self time</h3><p class=meta>all CPU ops: 5.000 ms self</p><table class=cpu-ops><thead>"
        "<tr><th>op</th><th></th><th>% self</th><th>self ms</th><th>total ms</th><th>calls</th></tr></thead><tbody>"
        "<tr><td class=name>aten::mm</td><td>" + bar("60.0% of CPU self time", rect("0.0", "220.0", CPU))
        + "</td><td class=num>60.0</td><td class=num>3.000</td><td class=num>4.000</td><td class=num>5</td></tr>"
        "<tr><td class=name>aten::&lt;add&gt;</td><td>" + bar("15.0% of CPU self time", rect("0.0", "55.0", CPU))
        + "</td><td class=num>15.0</td><td class=num>0.500</td><td class=num>0.500</td><td class=num>2</td></tr>"
        "</tbody></table>")


def test_the_steps_are_shaded_in_turn():
    curve = MemoryCurve([0.0, 300.0], [1, 1], [None, None], 0)
    steps = [step_memory(f"S{i}", 0, 0, 0, False, at=(100.0 * i, 100.0 * (i + 1))) for i in range(3)]
    got = memory_curve(device(curve=curve, steps=steps))
    assert re.findall(r'<rect class=step x="([^"]*)" width="([^"]*)" height="120" fill="([^"]*)">', got) == [
        ("0.0", "220.0", SHADE), ("220.0", "220.0", IDLE), ("440.0", "220.0", SHADE)]
