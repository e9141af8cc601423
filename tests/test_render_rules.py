"""The terminal summary (`lightx2v.trace_summary.render`), fast: hand-made summaries and the exact lines a user
reads for them (the header, the step table, the idle and memory sections, the kernel and CPU op tables, a run of
several ranks), each written out here by hand: columns, decimals, units, order and what is left out."""

from __future__ import annotations

from lightx2v.trace_summary.model import Device, RankSummary
from lightx2v.trace_summary.render import render_rank


def rank(**changes) -> RankSummary:
    """A CPU-only trace with no steps, no devices and no ops; ``changes`` sets the fields a test is about."""
    fields = dict(file="/runs/a/w0.pt.trace.json", size_bytes=2048, compressed=False, worker="w0", rank=None,
                  world_size=None, devices=[], versions={}, event_count=1234, trace_span_us=1500.0, steps=[],
                  gpu=None, idle=None, top_kernels=[], top_cpu_ops=[], cpu_self_total_us=0.0, memory_ops=[],
                  gpu_comm_us=None)
    fields.update(changes)
    return RankSummary(**fields)


def lines_of(r: RankSummary) -> list[str]:
    return render_rank(r).split("\n")


def device_line(*devices: Device) -> str:
    (line,) = [x for x in lines_of(rank(devices=list(devices))) if x.startswith("  devices ")]
    return line


# --- the header -----------------------------------------------------------------------------------------------------

def test_a_device_reads_its_id_name_compute_capability_and_memory_in_gib():
    assert device_line(Device(id=0, name="NVIDIA H200", memory_bytes=150_109_880_320, compute_capability="9.0")) \
        == "  devices   0: NVIDIA H200 (sm 9.0, 139.8 GiB)"


def test_a_device_with_memory_but_no_compute_capability_reads_only_its_memory():
    assert device_line(Device(id=1, name="B", memory_bytes=2 * 2**30, compute_capability=None)) \
        == "  devices   1: B (2.0 GiB)"
    assert device_line(Device(id=1, name="B", memory_bytes=2 * 2**30, compute_capability="")) \
        == "  devices   1: B (2.0 GiB)"


def test_a_device_with_a_compute_capability_but_no_memory_reads_only_its_sm():
    assert device_line(Device(id=2, name="C", memory_bytes=None, compute_capability="8.6")) \
        == "  devices   2: C (sm 8.6)"
    assert device_line(Device(id=2, name="C", memory_bytes=0, compute_capability="8.6")) == "  devices   2: C (sm 8.6)"


def test_a_device_with_neither_reads_its_id_and_name_alone_and_an_unknown_id_reads_a_question_mark():
    assert device_line(Device(id=3, name="D", memory_bytes=None, compute_capability=None)) == "  devices   3: D"
    assert device_line(Device(id=None, name="?", memory_bytes=None, compute_capability=None)) == "  devices   ?: ?"


def test_several_devices_are_one_line_apart_by_semicolons():
    assert device_line(Device(id=0, name="A", memory_bytes=None, compute_capability="9.0"),
                       Device(id=1, name="B", memory_bytes=2**30, compute_capability=None)) \
        == "  devices   0: A (sm 9.0); 1: B (1.0 GiB)"
