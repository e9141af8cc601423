"""The ``--json`` document (`lightx2v.trace_summary.model.to_json`), fast: hand-made summaries and the exact
document written for them: its schema, every field of a run and its ranks (a field that does not apply is null,
never left out), the ranks' tables left out, and floats rounded to three decimals however deep they sit."""

from __future__ import annotations

import json

from lightx2v.trace_summary.model import (
    SCHEMA,
    Device,
    KernelStat,
    RankRow,
    RankSummary,
    RankTables,
    RunSummary,
    SkippedFile,
    StepStats,
    Straggler,
    to_json,
)


def rank(**changes) -> RankSummary:
    fields = dict(file="/runs/a/w0.pt.trace.json", size_bytes=2048, compressed=False, worker="w0", rank=0,
                  world_size=2, devices=[Device(id=0, name="NVIDIA H200", memory_bytes=150_109_880_320,
                                                compute_capability="9.0")],
                  versions={"cuda_runtime": "12.8"}, event_count=1234, trace_span_us=1500.123456, steps=[],
                  gpu=None, idle=None, top_kernels=[], top_cpu_ops=[], cpu_self_total_us=0.0, memory_ops=[],
                  gpu_comm_us=None)
    fields.update(changes)
    return RankSummary(**fields)


RANK_JSON = {
    "file": "/runs/a/w0.pt.trace.json", "size_bytes": 2048, "compressed": False, "worker": "w0", "rank": 0,
    "world_size": 2,
    "devices": [{"id": 0, "name": "NVIDIA H200", "memory_bytes": 150_109_880_320, "compute_capability": "9.0"}],
    "versions": {"cuda_runtime": "12.8"}, "event_count": 1234, "trace_span_us": 1500.123, "steps": [], "gpu": None,
    "idle": None, "top_kernels": [], "top_cpu_ops": [], "cpu_self_total_us": 0.0, "memory_ops": [],
    "gpu_comm_us": None, "trace_start_us": None, "notes": [], "skipped_events": [], "memory": None,
    "launch_links": None, "efficiency": None, "frames": None, "communication": None, "gpu_clock": None,
}


def run(ranks: list[RankSummary], **changes) -> RunSummary:
    fields = dict(label="run-1", path="/runs/a", ranks=ranks, comparison=None, straggler=None)
    fields.update(changes)
    return RunSummary(**fields)


def test_the_document_names_its_schema_and_holds_every_field_of_each_run_and_rank():
    assert SCHEMA == "lightx2v.trace_summary/7"
    assert to_json([run([rank()])]) == {
        "schema": "lightx2v.trace_summary/7",
        "runs": [{"label": "run-1", "path": "/runs/a", "ranks": [RANK_JSON], "comparison": None, "straggler": None,
                  "skipped_files": [], "damaged_files": [], "spans": False, "communication": None}],
    }


def test_no_runs_make_a_document_without_runs():
    assert to_json([]) == {"schema": "lightx2v.trace_summary/7", "runs": []}


def test_the_ranks_tables_are_left_out_of_the_document_and_kept_on_the_summary():
    tables = RankTables(kernels=[KernelStat(name="k", short_name="k", calls=1, total_us=1.0, mean_us=1.0,
                                            pct_of_gpu_time=100.0)], cpu_ops=[], launches=[])
    r0, r1 = rank(tables=tables), rank(rank=1, worker="w1", tables=tables)
    doc = to_json([run([r0, r1])])
    assert [sorted(r) for r in doc["runs"][0]["ranks"]] == [sorted(RANK_JSON)] * 2
    assert doc["runs"][0]["ranks"][1]["worker"] == "w1"
    assert r0.tables is tables and r1.tables is tables


def test_floats_are_rounded_to_three_decimals_in_lists_and_objects_and_other_values_kept():
    step = StepStats(name="ProfilerStep#1", number=1, start_us=5_130_951_173_000.12345, wall_us=22_241.98765,
                     cpu_us=100.0004, gpu_busy_us=None, gpu_busy_pct=99.99951, kernel_count=120, idle=None)
    rows = [RankRow(rank=0, worker="w0", steps=1, step_wall_us=1.23456, gpu_busy_us=None, gpu_busy_pct=None,
                    gpu_comm_us=0.0004)]
    s = Straggler(rank=0, worker="w0", criterion="step_wall", step_wall_us=2.71828, slower_than_fastest_pct=-1.00049,
                  spread_pct=3.0)
    doc = to_json([run([rank(steps=[step], versions={"x": "1.23456"})], comparison=rows, straggler=s,
                       skipped_files=[SkippedFile(file="notes.txt", reason="not a trace")])])
    (out,) = doc["runs"]
    assert out["ranks"][0]["steps"] == [{
        "name": "ProfilerStep#1", "number": 1, "start_us": 5_130_951_173_000.123, "wall_us": 22_241.988,
        "cpu_us": 100.0, "gpu_busy_us": None, "gpu_busy_pct": 100.0, "kernel_count": 120, "idle": None,
        "gpu_launched_us": None, "gpu_lag_us": None}]
    assert out["ranks"][0]["versions"] == {"x": "1.23456"}
    assert out["comparison"] == [{"rank": 0, "worker": "w0", "steps": 1, "step_wall_us": 1.235, "gpu_busy_us": None,
                                  "gpu_busy_pct": None, "gpu_comm_us": 0.0}]
    assert out["straggler"] == {"rank": 0, "worker": "w0", "criterion": "step_wall", "step_wall_us": 2.718,
                                "slower_than_fastest_pct": -1.0, "spread_pct": 3.0, "waits_caused_us": None}
    assert out["skipped_files"] == [{"file": "notes.txt", "reason": "not a trace"}]


def test_the_document_is_plain_json():
    doc = to_json([run([rank(compressed=True)])])
    assert json.loads(json.dumps(doc)) == doc
    assert doc["runs"][0]["ranks"][0]["compressed"] is True
