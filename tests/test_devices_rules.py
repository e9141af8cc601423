"""Where a trace ran (`lightx2v.trace_summary.devices`), fast: the devices, versions, rank and world size a
summary reads from a trace's metadata, on hand-written metadata; each expected value written by hand."""

from __future__ import annotations

from lightx2v.trace_summary.devices import devices, rank_and_world, unlisted, versions
from lightx2v.trace_summary.model import Device, GpuTotals


def gpu_totals(devices: int, streams: int) -> GpuTotals:
    return GpuTotals(busy_us=10.0, activity_us=10.0, kernel_count=1, kernel_us=10.0, memcpy_us=0.0, memset_us=0.0,
                     streams=streams, devices=devices)


def test_a_device_reads_its_id_name_memory_and_compute_capability():
    props = [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "computeMajor": 9,
              "computeMinor": 0},
             {"id": 1, "name": "NVIDIA A100", "totalGlobalMem": 80, "computeMajor": 8, "computeMinor": 6}]
    assert devices(props) == [Device(id=0, name="NVIDIA H200", memory_bytes=150_000_000_000,
                                     compute_capability="9.0"),
                              Device(id=1, name="NVIDIA A100", memory_bytes=80, compute_capability="8.6")]


def test_a_device_field_of_the_wrong_type_reads_as_unknown():
    props = [{"id": "0", "name": 7, "totalGlobalMem": 1.5e9, "computeMajor": 9, "computeMinor": "0"},
             {"computeMajor": "9", "computeMinor": 0}]
    assert devices(props) == [Device(id=None, name="7", memory_bytes=None, compute_capability=None),
                              Device(id=None, name="unnamed device", memory_bytes=None, compute_capability=None)]


def test_device_properties_that_are_no_list_or_hold_no_objects_list_no_device():
    assert devices(None) == [] and devices({"id": 0, "name": "x"}) == [] and devices("GPU") == []
    assert devices([1, "x", None, {"name": "kept"}]) == [Device(id=None, name="kept", memory_bytes=None,
                                                                compute_capability=None)]


def test_a_trace_without_devices_reads_cpu_only_only_without_gpu_activity():
    assert unlisted(None) == "none recorded (CPU-only trace)"
    assert unlisted(gpu_totals(devices=1, streams=1)) == \
        "not recorded in the trace (GPU activity seen on 1 device, 1 stream)"
    assert unlisted(gpu_totals(devices=2, streams=5)) == \
        "not recorded in the trace (GPU activity seen on 2 devices, 5 streams)"


def test_rank_and_world_size_come_from_distributed_info():
    meta = {"distributedInfo": {"rank": 3, "world_size": 8}}
    assert rank_and_world(meta, "trace.rank5.json") == (3, 8)


def test_without_a_recorded_rank_the_file_name_gives_it_and_the_world_size_is_unknown():
    assert rank_and_world({}, "/runs/rank5_host.123.pt.trace.json.gz") == (5, None)
    assert rank_and_world({"distributedInfo": {"rank": "3", "world_size": "8"}}, "trace.rank2.json") == (2, None)
    assert rank_and_world({"distributedInfo": [1, 2]}, "trace.json") == (None, None)
    assert rank_and_world({"distributedInfo": {"world_size": 4}}, "w.json") == (None, 4)


def test_cuda_versions_read_major_dot_minor_from_kineto_numbers():
    meta = {"cuda_runtime_version": 12040, "cuda_driver_version": 11080}
    assert versions(meta) == {"cuda_runtime": "12.4", "cuda_driver": "11.8"}
    assert versions({"cuda_runtime_version": 12010})["cuda_runtime"] == "12.1"
    assert versions({"cuda_runtime_version": 9020})["cuda_runtime"] == "9.2"
    assert versions({"cuda_driver_version": 1})["cuda_driver"] == "0.0"  # the least positive number: read as one


def test_a_cuda_version_that_is_no_positive_number_is_shown_as_written():
    assert versions({"cuda_runtime_version": "12.4.1", "cuda_driver_version": 0}) == \
        {"cuda_runtime": "12.4.1", "cuda_driver": "0"}
    assert versions({"cuda_runtime_version": None}) == {}


def test_torch_cupti_and_rocm_versions_are_shown_as_written():
    meta = {"torch_version": "2.5.1", "cupti_version": 24, "hip_runtime_version": "6.2", "rocm_version": 6,
            "roctracer_version": "4.1"}
    assert versions(meta) == {"torch": "2.5.1", "cupti": "24", "hip_runtime": "6.2", "rocm": "6",
                              "roctracer": "4.1"}
    assert versions({"pytorch_version": "2.4"}) == {"torch": "2.4"}


def test_nccl_version_and_backend_come_from_distributed_info_when_set():
    meta = {"distributedInfo": {"backend": "nccl", "nccl_version": "2.21.5", "rank": 0}}
    assert versions(meta) == {"nccl": "2.21.5", "distributed_backend": "nccl"}
    assert versions({"distributedInfo": {"backend": "", "nccl_version": ""}}) == {}
    assert versions({"distributedInfo": "nccl"}) == {}


def test_a_trace_without_versions_lists_none():
    assert versions({}) == {}
