"""Communication, exposed communication and overlap on real NCCL ranks equal Holistic Trace Analysis' own
analyzers (``get_comm_comp_overlap``, ``get_gpu_kernel_breakdown``), run here on the same files.

HTA keeps the GPU kernels launched before its last ``ProfilerStep`` begins (``include_last_profiler_step=True``:
before it ends) whose launch is in the trace; ours covers every kernel. The traces here are those where the two
sets are the same: HTA's trace_diff control rank (A100, rank 3 of 8), its timeline_analysis rank and its two
sampled ranks of a 128-rank job. (On ``trace_diff/test`` HTA leaves out the kernels without a launch record; on
``nccl_parser_config`` it truncates the fractional microseconds of each event: there the figures differ by that.)
"""

from __future__ import annotations

import logging
import shutil

import pytest

from lightx2v.trace_summary.analyze import analyze_trace

from conftest import FIXTURES

HTA = FIXTURES / "hta"
RANKS = ["trace_diff/control/control.json.gz", "timeline_analysis/sampled_rank-0.json.gz",
         "trace_filter/sampled_rank-0.json.gz", "trace_filter/sampled_rank-1.json.gz"]


def hta_figures(path, tmp_path) -> tuple[int, int, float]:
    """(communication, exposed communication, overlap %) by HTA's analyzers on a folder holding only ``path``."""
    trace_analysis = pytest.importorskip("hta.trace_analysis")
    folder = tmp_path / "hta"
    folder.mkdir()
    shutil.copy(path, folder)
    logging.disable(logging.WARNING)
    try:
        analysis = trace_analysis.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
        overlap = analysis.get_comm_comp_overlap(visualize=False)
        kinds, _ = analysis.get_gpu_kernel_breakdown(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    rows = dict(zip(kinds["kernel_type"], kinds["sum"], strict=True))
    comm = sum(us for kind, us in rows.items() if "COMMUNICATION" in kind)
    exposed = sum(us for kind, us in rows.items() if "COMMUNICATION" in kind and "COMPUTATION" not in kind)
    return comm, exposed, float(overlap["comp_comm_overlap_pctg"].iloc[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", RANKS)
def test_communication_exposed_and_overlap_are_htas(name, tmp_path):
    comm, exposed, overlap_pct = hta_figures(HTA / name, tmp_path)
    ours = analyze_trace(str(HTA / name)).communication
    assert ours is not None and ours.on_gpu
    assert ours.comm_us == pytest.approx(comm, abs=0.5)
    assert ours.exposed_us == pytest.approx(exposed, abs=0.5)
    assert round(ours.overlap_pct, 2) == overlap_pct


def test_the_control_ranks_figures_as_htas_on_the_day_they_were_compared():
    """The same figures without HTA (fast): trace_diff control, 2026-12-06."""
    c = analyze_trace(str(HTA / RANKS[0])).communication
    assert (round(c.comm_us), round(c.exposed_us), round(c.overlap_pct, 2)) == (163_535, 87_921, 46.24)
    assert c.kinds == {"all_to_all": 42, "all_reduce": 18}


def test_kinetos_collective_args_on_the_op_and_the_kernel_are_read():
    """nccl_parser_config: newer kineto writes the collective's metadata on record_param_comms and its kernel."""
    calls = analyze_trace(str(HTA / "nccl_parser_config" / "nccl_data.json.gz")).tables.collectives
    kernels = [c for c in calls if c.on_gpu]
    assert {c.kind for c in calls} == {"all_reduce", "broadcast"} and len(kernels) == 21
    first = next(c for c in kernels if c.kind == "all_reduce")
    assert (first.group, first.group_desc, first.ranks, first.dtype) == ("0", "default_pg", [0, 1], "Float")
    assert first.in_nelems == first.out_nelems and first.in_nelems > 0 and first.device == 0
