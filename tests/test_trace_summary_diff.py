"""`--diff`: the H200 fixture against copies with known edits; the comparison must report exactly those edits.

Edits (made on the fixture's JSON in tmp, written as kineto gz, plain or chrome-array files): one kernel family
removed, one kernel slowed by a known factor, one new kernel, the step duplicated (two active steps), a kernel
switch inside SDPA with its lowering ops renamed, a 2-rank pair. Expected numbers come from the fixture's
events directly, not from the summary.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_browser.compare import render_compare
from lightx2v.trace_summary import summarize_paths, to_json
from lightx2v.trace_summary.diff import (
    ADDED,
    CHANGED,
    DIFF_SCHEMA,
    KERNELS_CHANGED,
    MORE_STEPS,
    REMOVED,
    SAME,
    compare_runs,
    diff_to_json,
)
from lightx2v.trace_summary.render import render_runs
from lightx2v.trace_summary.render_diff import render_diff

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
DOC = json.loads(gzip.decompress(FIXTURE.read_bytes()))
EVENTS = DOC["traceEvents"]

SDPA_KERNEL = next(e["name"] for e in EVENTS if e.get("cat") == "kernel" and "sdpa" in e["name"])
GELU_KERNEL = next(e["name"] for e in EVENTS if e.get("cat") == "kernel" and "Gelu" in e["name"])
FLASH_KERNEL = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>(Flash_fwd_params)"
NEW_KERNEL = "void my_fused_add_kernel<float>(float*, int)"
ATTN = "attn / aten::scaled_dot_product_attention"


def kernel_us(name: str) -> float:
    """Summed duration of a kernel in the fixture, in file order (the summary's own order of addition)."""
    total = 0.0
    for e in EVENTS:
        if e.get("cat") == "kernel" and e["name"] == name:
            total += e["dur"]
    return total


def kernel_calls(name: str) -> int:
    return sum(1 for e in EVENTS if e.get("cat") == "kernel" and e["name"] == name)


def write(path: Path, events: list, doc: dict | None = None, chrome: bool = False) -> Path:
    """A trace file: kineto's object with traceEvents (gz when the name says so) or chrome's bare array."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(events if chrome else {**(doc or DOC), "traceEvents": events})
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return path


def edited() -> list:
    """The fixture with GELU's kernels removed, the SDPA kernel 1.5x slower, and one new kernel under aten::add."""
    out = []
    add_id = next(e["args"]["External id"] for e in EVENTS if e.get("cat") == "cpu_op" and e["name"] == "aten::add")
    for e in copy.deepcopy(EVENTS):
        if e.get("cat") == "kernel" and e["name"] == GELU_KERNEL:
            continue
        if e.get("cat") == "kernel" and e["name"] == SDPA_KERNEL:
            e["dur"] = e["dur"] * 1.5
        out.append(e)
    k = next(e for e in EVENTS if e.get("cat") == "kernel")
    out.append({**k, "name": NEW_KERNEL, "ts": k["ts"] + 1.0, "dur": 7.25,
                "args": {**k["args"], "External id": add_id, "correlation": 999999}})
    return out


def diff_of(tmp_path: Path, new_events: list, base_events: list | None = None, name: str = "x.pt.trace.json.gz"):
    base = write(tmp_path / "base" / name, EVENTS if base_events is None else base_events)
    new = write(tmp_path / "new" / name, new_events)
    b, n = summarize_paths([str(base)])[0], summarize_paths([str(new)])[0]
    return compare_runs(b, n)


def by_name(rows, name):
    return next(r for r in rows if r.name == name)


def group(d, label, op):
    return next(o for o in d.ranks[0].ops if (o.label, o.op) == (label, op))


def test_removed_slowed_and_new_kernels_read_exactly(tmp_path):
    d = diff_of(tmp_path, edited())
    r = d.ranks[0]
    gelu = by_name(r.kernels, GELU_KERNEL)
    assert gelu.status == REMOVED
    assert (gelu.calls_per_step.base, gelu.calls_per_step.new) == (kernel_calls(GELU_KERNEL), 0)
    assert gelu.time_per_step_us.delta == pytest.approx(-kernel_us(GELU_KERNEL), rel=1e-12)
    assert gelu.ops == ["aten::gelu"]

    sdpa = by_name(r.kernels, SDPA_KERNEL)
    assert sdpa.status == CHANGED and sdpa.ops == [ATTN]
    assert sdpa.calls_per_step.delta == 0
    assert sdpa.time_per_step_us.delta == pytest.approx(0.5 * kernel_us(SDPA_KERNEL), rel=1e-9)
    assert sdpa.time_per_step_us.delta_pct == pytest.approx(50.0, rel=1e-9)

    new = by_name(r.kernels, NEW_KERNEL)
    assert new.status == ADDED and new.ops == ["aten::add"]
    assert (new.calls_per_step.base, new.calls_per_step.new, new.time_per_step_us.new) == (0, 1, 7.25)
    # nothing else moved, and the table is sorted by |delta time|
    assert {k.name for k in r.kernels if k.status != SAME} == {GELU_KERNEL, SDPA_KERNEL, NEW_KERNEL}
    assert [k.name for k in r.kernels[:3]] == [SDPA_KERNEL, GELU_KERNEL, NEW_KERNEL]
    assert r.kernel_calls_per_step.delta == -kernel_calls(GELU_KERNEL) + 1
    assert r.kernel_time_per_step_us.delta == pytest.approx(
        -kernel_us(GELU_KERNEL) + 0.5 * kernel_us(SDPA_KERNEL) + 7.25, rel=1e-9)
    assert all(o.status == SAME for o in r.cpu_ops)  # no CPU op was edited

    # per op group: gelu's GPU work gone, attention slower with the same kernel, aten::add launches one more
    assert group(d, "", "aten::gelu").status == REMOVED
    attn = group(d, "attn", "aten::scaled_dot_product_attention")
    assert attn.status == CHANGED and attn.kernels_added == attn.kernels_removed == []
    add = group(d, "", "aten::add")
    assert add.status == KERNELS_CHANGED and add.kernels_added == [NEW_KERNEL] and add.kernels_removed == []
    assert add.gpu_time_per_step_us.delta == 7.25
    assert d.verdict.startswith("NEW is about as fast per step")  # CPU step spans were not edited
    assert "attn +2.1" in d.verdict and "aten::gelu -0.786 ms" in d.verdict


def duplicated_steps(events: list, copies: int) -> list:
    """The trace's events repeated ``copies`` times, each copy one step later (a capture with active=copies)."""
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 100.0
    out = [e for e in events if e not in timed]
    for c in range(copies):
        for e in copy.deepcopy(timed):
            e["ts"] += c * span
            if e["name"] == "ProfilerStep#4":
                e["name"] = f"ProfilerStep#{4 + c}"
            args = e.get("args")
            if isinstance(args, dict) and isinstance(args.get("External id"), int):
                args["External id"] += c * 1_000_000
            out.append(e)
    return out


def test_duplicated_steps_compare_per_step_not_in_total(tmp_path):
    d = diff_of(tmp_path, duplicated_steps(EVENTS, 3))
    r = d.ranks[0]
    assert (r.base_steps, r.new_steps) == (1, 3)
    assert all(k.status == SAME for k in r.kernels), [k for k in r.kernels if k.status != SAME]
    assert all(o.status == SAME for o in r.cpu_ops)
    assert all(o.status == SAME for o in r.ops)
    assert r.step_wall_us.delta == pytest.approx(0.0, abs=1e-6)
    assert r.kernel_calls_per_step.delta == 0
    assert d.verdict.startswith("NEW is about as fast per step (+0.000 ms, +0.0%)")
    # the capture's totals did triple: per step is what keeps them comparable
    new_total = by_name(summarize_paths([str(tmp_path / "new")])[0].ranks[0].tables.kernels, SDPA_KERNEL)
    assert new_total.calls == 3 * kernel_calls(SDPA_KERNEL)


def switched(events: list) -> list:
    """SDPA lowered to flash instead of cuDNN: another kernel (half the time) and other inner op names."""
    renames = {"aten::_cudnn_attention_forward": "aten::_flash_attention_forward",
               "aten::_scaled_dot_product_cudnn_attention": "aten::_scaled_dot_product_flash_attention"}
    out = copy.deepcopy(events)
    for e in out:
        if e.get("cat") == "kernel" and e["name"] == SDPA_KERNEL:
            e["name"], e["dur"] = FLASH_KERNEL, e["dur"] / 2
        elif e.get("cat") == "cpu_op":
            e["name"] = renames.get(e["name"], e["name"])
    return out


def test_a_kernel_switch_inside_an_op_reads_as_that_ops_kernels_changed(tmp_path):
    d = diff_of(tmp_path, switched(EVENTS))
    attn = group(d, "attn", "aten::scaled_dot_product_attention")
    assert attn.status == KERNELS_CHANGED
    assert attn.kernels_removed == [SDPA_KERNEL] and attn.kernels_added == [FLASH_KERNEL]
    assert attn.launchers_base == ["aten::_cudnn_attention_forward"]
    assert attn.launchers_new == ["aten::_flash_attention_forward"]
    assert attn.kernel_calls_per_step.delta == 0
    assert attn.gpu_time_per_step_us.delta == pytest.approx(-kernel_us(SDPA_KERNEL) / 2, rel=1e-9)
    # the two kernels are still listed, each naming the group that launched it; all other groups unchanged
    r = d.ranks[0]
    assert by_name(r.kernels, SDPA_KERNEL).status == REMOVED and by_name(r.kernels, SDPA_KERNEL).ops == [ATTN]
    assert by_name(r.kernels, FLASH_KERNEL).status == ADDED and by_name(r.kernels, FLASH_KERNEL).ops == [ATTN]
    assert [o.status for o in r.ops if o is not attn] == [SAME] * (len(r.ops) - 1)
    assert d.verdict.endswith(f"attn -{kernel_us(SDPA_KERNEL) / 2 / 1000:.2f} ms; {MORE_STEPS}")


def test_chrome_format_pair_reads_like_the_kineto_pair(tmp_path):
    kineto = diff_to_json(diff_of(tmp_path / "k", edited()))
    base = write(tmp_path / "c" / "base" / "trace.json", EVENTS, chrome=True)
    new = write(tmp_path / "c" / "new" / "trace.json", edited(), chrome=True)
    chrome = diff_to_json(compare_runs(summarize_paths([str(base)])[0], summarize_paths([str(new)])[0]))
    for doc in (kineto, chrome):
        for side in ("base", "new"):
            doc[side].pop("label"), doc[side].pop("path")
        for r in doc["ranks"]:
            for key in ("base_worker", "new_worker", "base_file", "new_file"):
                r.pop(key)
    assert chrome == kineto
    assert chrome["schema"] == DIFF_SCHEMA
    assert any(k["status"] == ADDED for k in chrome["ranks"][0]["kernels"])


def with_rank(rank: int, step_extra_us: float = 0.0) -> tuple[list, dict]:
    """The fixture as rank ``rank`` of 2, its step (CPU and GPU side) ``step_extra_us`` longer."""
    events = copy.deepcopy(EVENTS)
    for e in events:
        if e["name"] == "ProfilerStep#4" and e.get("ph") == "X":
            e["dur"] += step_extra_us
    return events, {**DOC, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}


def rank_run(root: Path, extras: dict[int, float]) -> str:
    for rank, extra in extras.items():
        events, doc = with_rank(rank, extra)
        write(root / f"rank{rank}_host.1.pt.trace.json.gz", events, doc)
    return str(root)


def test_two_ranks_compare_rank_to_rank_and_name_each_sides_straggler(tmp_path):
    base = summarize_paths([rank_run(tmp_path / "base", {0: 0.0, 1: 1000.0})])[0]
    new = summarize_paths([rank_run(tmp_path / "new", {0: 3000.0, 1: 0.0})])[0]
    d = compare_runs(base, new)
    assert [r.rank for r in d.ranks] == [0, 1]
    assert d.ranks[0].step_wall_us.delta == pytest.approx(3000.0, abs=1e-6)
    assert d.ranks[1].step_wall_us.delta == pytest.approx(-1000.0, abs=1e-6)
    assert d.base.straggler == "rank 1 (rank1_host)" and d.new.straggler == "rank 0 (rank0_host)"
    assert d.step_wall_us.delta == pytest.approx(2000.0, abs=1e-6)  # slowest rank against slowest rank
    assert d.notes == [] and d.unmatched_base == d.unmatched_new == []
    assert d.verdict.startswith("NEW is 8.6% slower per step of the slowest rank (+2.00 ms)")


def test_rank_counts_that_differ_are_said_and_the_common_ranks_compared(tmp_path):
    base = summarize_paths([rank_run(tmp_path / "base", {0: 0.0, 1: 1000.0})])[0]
    new = summarize_paths([rank_run(tmp_path / "new", {0: 500.0})])[0]
    d = compare_runs(base, new)
    assert [r.rank for r in d.ranks] == [0]
    assert d.ranks[0].step_wall_us.delta == pytest.approx(500.0, abs=1e-6)
    assert d.notes == ["rank counts differ: BASE has 2, NEW has 1; compared 1 pair rank to rank"]
    assert d.unmatched_base == ["rank 1 (rank1_host)"] and d.unmatched_new == []
    text = render_diff(d)
    assert f"BASE  base ({tmp_path / 'base'}): 2 ranks, straggler rank 1 (rank1_host)" in text
    assert "note  rank counts differ: BASE has 2, NEW has 1" in text and "only in BASE: rank 1 (rank1_host)" in text
    assert "Rank 0: NEW is 2.2% slower per step (+0.500 ms)" in text


def test_summary_json_keeps_its_schema_without_the_diffs_tables():
    run = summarize_paths([str(FIXTURE)])[0]
    assert run.ranks[0].tables is not None and len(run.ranks[0].tables.launches) == 8
    assert "tables" not in to_json([run])["runs"][0]["ranks"][0]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)


def test_cli_diff_text_json_and_a_logdirs_two_newest_runs(tmp_path):
    logdir = tmp_path / "logdir"
    old = write(logdir / "old" / "w.1.pt.trace.json.gz", EVENTS)
    base = write(logdir / "sdpa" / "w.2.pt.trace.json.gz", EVENTS)
    new = write(logdir / "flash" / "w.3.pt.trace.json", switched(EVENTS))
    for i, path in enumerate((old, base, new)):
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    text = cli("--diff", str(base), str(new))
    assert text.returncode == 0, text.stderr
    first = text.stdout.splitlines()[0]
    # CPU spans not edited; one step a side, so the verdict says it cannot tell noise from change
    assert first == f"NEW is about as fast per step (+0.000 ms, +0.0%); attn -2.12 ms; {MORE_STEPS}"
    assert "kernels changed" in text.stdout and "flash_fwd_kernel<Flash_fwd_kernel_traits>" in text.stdout
    assert "launched by: aten::_cudnn_attention_forward -> aten::_flash_attention_forward" in text.stdout

    as_json = cli("--diff", "--json", str(logdir))
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["schema"] == DIFF_SCHEMA and doc["verdict"] == first
    assert (doc["base"]["label"], doc["new"]["label"]) == ("sdpa", "flash")
    assert f"BASE {logdir / 'sdpa'}, NEW {logdir / 'flash'}" in as_json.stderr


@pytest.mark.parametrize("args, status, message", [  # the summary's convention: data error 1, usage error 2
    (["{missing}", "{good}"], 1, "no such file or directory"),
    (["{good}"], 1, "needs a logdir holding two runs"),
    (["{one_run_logdir}"], 1, "holds 1 run"),
    (["{good}", "{truncated}"], 1, "truncated"),
    (["{good}", "{not_a_trace}"], 1, "not a trace"),
    (["{good}", "{good}", "{good}"], 2, "--diff takes BASE NEW or one logdir, got 3 paths"),
    (["{good}", "{good}", "--top", "0"], 2, "must be at least 1"),
])
def test_cli_diff_bad_input_exits_with_the_reason(tmp_path, args, status, message):
    good = write(tmp_path / "a" / "w.pt.trace.json.gz", EVENTS)
    truncated = tmp_path / "b" / "w.pt.trace.json"
    truncated.parent.mkdir()
    truncated.write_text(json.dumps(DOC)[:5000])
    write(tmp_path / "logdir" / "only" / "w.pt.trace.json.gz", EVENTS)
    not_a_trace = tmp_path / "config.json"
    not_a_trace.write_text('{"lr": 0.1}')
    names = {"missing": tmp_path / "nope.json", "good": good, "truncated": truncated,
             "one_run_logdir": tmp_path / "logdir", "not_a_trace": not_a_trace}
    out = cli("--diff", *(a.format(**names) for a in args))
    assert out.returncode == status, out.stderr
    assert message in out.stderr and out.stdout == "" and "Traceback" not in out.stderr
    if status == 1:
        assert out.stderr.startswith("trace_summary: error: ")


def ranked(path: Path, rank: int, world: int = 4) -> Path:
    """The fixture as the trace of ``rank`` (distributedInfo), in a file whose name carries no rank."""
    return write(path, EVENTS, {**DOC, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}})


def test_two_single_rank_runs_of_different_ranks_say_how_they_were_paired(tmp_path):
    base = summarize_paths([str(ranked(tmp_path / "r3" / "w.pt.trace.json.gz", 3))])[0]
    new = summarize_paths([str(ranked(tmp_path / "r1" / "w.pt.trace.json.gz", 1))])[0]
    d = compare_runs(base, new)
    (pair,) = d.ranks
    assert (pair.base_rank, pair.new_rank, pair.rank) == (3, 1, 1) and d.pairing == "by file order"
    assert d.notes == ["paired by file order (the traces do not record the same ranks): rank 3 (BASE) vs rank 1 (NEW)"]
    text = render_diff(d).splitlines()
    assert "  note  paired by file order (the traces do not record the same ranks): rank 3 (BASE) vs rank 1 (NEW)" \
        in text
    assert "Rank 3 (BASE) vs rank 1 (NEW), paired by file order" in text
    doc = diff_to_json(d)
    assert doc["pairing"] == "by file order" and doc["notes"] == d.notes
    assert (doc["ranks"][0]["rank"], doc["ranks"][0]["base_rank"], doc["ranks"][0]["new_rank"]) == (1, 3, 1)

    same = compare_runs(new, new)  # the same rank on both sides: paired by rank, nothing to say
    assert same.pairing == "by rank" and same.notes == []
    assert (same.ranks[0].base_rank, same.ranks[0].new_rank) == (1, 1)
    assert not any("(BASE) vs" in line for line in render_diff(same).splitlines())


def test_runs_without_a_common_rank_pair_in_file_order_and_name_each_pair(tmp_path):
    for rank in (2, 3):
        ranked(tmp_path / "base" / f"w{rank}.pt.trace.json.gz", rank)
    for rank in (0, 1):
        ranked(tmp_path / "new" / f"w{rank}.pt.trace.json.gz", rank)
    ranked(tmp_path / "one" / "w0.pt.trace.json.gz", 0)
    base, new, one = (summarize_paths([str(tmp_path / side)])[0] for side in ("base", "new", "one"))
    d = compare_runs(base, new)
    assert d.pairing == "by file order"
    assert [(r.base_rank, r.new_rank) for r in d.ranks] == [(2, 0), (3, 1)]
    assert d.notes == ["paired by file order (the traces do not record the same ranks): rank 2 (BASE) vs rank 0 "
                       "(NEW), rank 3 (BASE) vs rank 1 (NEW)"]
    text = render_diff(d).splitlines()
    assert "Ranks, paired by file order (rank B>N: BASE's and NEW's rank differ)" in text
    assert "  rank  BASE step ms  NEW step ms   delta ms       %  workers" in text
    assert "   2>0        22.241       22.241     +0.000    +0.0  w2 > w0" in text
    assert "   3>1        22.241       22.241     +0.000    +0.0  w3 > w1" in text
    assert f"Rank 2 (BASE) vs rank 0 (NEW): NEW is about as fast per step (+0.000 ms, +0.0%); {MORE_STEPS}" in text

    page = render_compare(d, base, new, base_path="base", new_path="new", overview_url=lambda path: path)
    assert "<h2>Ranks, paired by file order (mean step wall)</h2>" in page and "<tr><td>2 → 0</td>" in page
    assert "<h2>Rank 3 (BASE) vs rank 1 (NEW): w3 → w1</h2>" in page
    assert "<p class=note>paired by file order (the traces do not record the same ranks): rank 2 (BASE)" in page

    fewer = compare_runs(base, one)  # counts differ too: the note says the pair was not rank to rank
    assert fewer.notes[0] == "rank counts differ: BASE has 2, NEW has 1; compared 1 pair in file order"
    assert fewer.unmatched_base == ["rank 3 (w3)"]


def test_the_diff_names_kernels_as_the_summary_does_and_cuts_no_last_column(tmp_path):
    d = diff_of(tmp_path, switched(edited()))
    text = render_diff(d).splitlines()
    # the row the summary prints as "vectorized_elementwise_kernel<GeluCUDAKernelImpl>" (was "...<GeluCUDAKer...")
    assert "  removed           12>0     0.786     0.000    -0.786  -100.0      ?  " \
           "vectorized_elementwise_kernel<GeluCUDAKernelImpl>" in text
    sdpa = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
    assert any(line.startswith("  removed           12>0") and line.endswith(f"  {sdpa}") for line in text)
    assert f"      - {sdpa}" in text  # the op group's kernels, whole too
    assert "      + flash_fwd_kernel<Flash_fwd_kernel_traits>" in text
    summary = render_runs(summarize_paths([str(tmp_path / "base" / "x.pt.trace.json.gz")]))
    assert "     3.7      0.786      12      65.5  vectorized_elementwise_kernel<GeluCUDAKernelImpl>" in summary
    assert not any(line.endswith("...") for line in text + summary.splitlines())
