"""Collectives on synthetic runs of both schemas (NCCL kernels with kineto's args; gloo's op and work): one call per
torch.distributed call, matched across ranks, waits and the late rank per step, clocks, bandwidth, and every kind
of bad input said in one line with the rest of the summary kept."""

from __future__ import annotations

import json

import pytest

from lightx2v.trace_summary import to_json
from lightx2v.trace_summary.bandwidth import bus_factor, could_win, link_for, message_bytes
from lightx2v.trace_summary.comm import is_comm_kernel, is_comm_name, kind_of
from lightx2v.trace_summary.render import render_run

from helpers.comm_trace import CPU_PID, STEPS, T0, Coll, Rank, late_in_step_2, summarize, write_run


@pytest.mark.parametrize("name, kind", [
    ("c10d::allreduce_", "all_reduce"), ("c10d::_allgather_base_", "all_gather"),
    ("c10d::allgather_into_tensor_coalesced_", "all_gather"), ("c10d::_reduce_scatter_base_", "reduce_scatter"),
    ("c10d::alltoall_base_", "all_to_all"), ("c10d::barrier", "barrier"), ("c10d::recv_any_source_", "recv"),
    ("nccl:all_to_all", "all_to_all"), ("gloo:all_gather", "all_gather"), ("allreduce", "all_reduce"),
    ("all_to_allv", "all_to_all"), ("_reduce_scatter_base", "reduce_scatter"), ("wait", None),
    ("record_param_comms", None), ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "all_reduce"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "send_recv"), ("ncclDevKernel_Generic", None),
])
def test_one_name_per_collective_from_every_schema(name, kind):
    assert kind_of(name) == kind


@pytest.mark.parametrize("name", [
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclDevKernel_Generic", "sm90_xmma_gemm_bf16",
    "void cub::DeviceMemcpy::BatchMemcpyKernel<...>", "Memset (Device)", "MemsetKernel", "cudaStreamSync_kernel",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
])
def test_kernel_classes_are_htas(name):
    from lightx2v.trace_summary.exposed import COMM, COMPUTE, MEMORY, kernel_class

    utils = pytest.importorskip("hta.utils.utils")
    ours = {COMM: "COMMUNICATION", COMPUTE: "COMPUTATION", MEMORY: "not computation"}[kernel_class(name)]
    theirs = utils.get_kernel_type(name)
    assert ours == (theirs if theirs in ("COMMUNICATION", "COMPUTATION") else "not computation")


def test_communication_kernels_are_htas_and_the_pass_keeps_the_collectives_args():
    assert is_comm_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)")
    assert is_comm_kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert is_comm_kernel("RCCL_AllGather") and not is_comm_kernel("sm90_xmma_gemm_bf16")
    assert all(map(is_comm_name, ["record_param_comms", "c10d::allreduce_", "nccl:all_reduce", "gloo:barrier"]))
    assert not any(map(is_comm_name, ["aten::mm", "ProfilerStep#1", "cudaLaunchKernel"]))


def test_an_nccl_call_is_its_op_its_args_and_its_kernel(tmp_path):
    run = summarize(write_run(tmp_path, late_in_step_2()))
    calls = run.ranks[0].tables.collectives
    assert [c.kind for c in calls] == ["all_reduce"] * 3 and [c.seq for c in calls] == [0, 1, 2]
    first = calls[0]
    assert (first.group, first.ranks, first.dtype, first.in_nelems, first.on_gpu, first.timed, first.device) == (
        "0", [0, 1], "Float", 1 << 20, True, True, 0)
    assert first.step == "ProfilerStep#1" and first.end_us - first.arrival_us == pytest.approx(1_000)
    # rank 0's compute covers 500 us of the first all-reduce: the rest is exposed
    assert first.exposed_us == pytest.approx(500) and first.comm_us == pytest.approx(1_000)
    comm = run.ranks[0].communication
    assert comm.on_gpu and comm.kinds == {"all_reduce": 3}
    assert comm.comm_us == pytest.approx(1_000 + 6_000 + 1_000)
    assert comm.exposed_us == pytest.approx(500 + 5_500 + 500)  # step 2's waits 5 ms on 1.5 ms of compute
    assert comm.overlap_pct == pytest.approx(100 * 1_500 / 8_000)
    assert [s.calls for s in comm.steps] == [1, 1, 1]
    assert [round(s.exposed_us) for s in comm.steps] == [500, 5_500, 500]


def test_the_late_rank_is_named_in_its_step_only_with_the_others_wait(tmp_path):
    run = summarize(write_run(tmp_path, late_in_step_2()))
    c = run.communication
    assert (c.ranks, c.collectives, c.complete, c.notes) == (2, 3, 3, [])
    assert [(s.step, s.late_rank) for s in c.steps] == [("ProfilerStep#1", None), ("ProfilerStep#2", 1),
                                                        ("ProfilerStep#3", None)]
    late = c.steps[1]
    assert late.late_wait_us == pytest.approx(5_000) and late.collective == "all_reduce"
    waited = {r.rank: r.waited_us for r in late.ranks}
    assert waited[0] == pytest.approx(5_000) and waited[1] == 0
    assert [(p.waiter, p.late, round(p.wait_us)) for p in c.pairs] == [(0, 1, round(5_000 / 3))]
    assert run.straggler.rank == 1 and run.straggler.criterion == "waits_caused"
    text = render_run(run)
    assert "straggler: rank 1 (rank1_host): the others waited" in text
    assert "rank 1 5.000 ms: all_reduce" in text
    doc = to_json([run])["runs"][0]
    assert doc["communication"]["steps"][1]["late_rank"] == 1 and json.loads(json.dumps(doc)) == doc


def test_bandwidth_is_nccl_tests_over_the_transfer_against_the_link(tmp_path):
    run = summarize(write_run(tmp_path, late_in_step_2()))
    (top,) = run.communication.top
    assert top.bytes == (1 << 20) * 4  # S = count x sizeof(float)
    assert top.transfer_us == pytest.approx(1_000)  # per step and rank: one 1 ms transfer, the wait left out
    assert top.algbw_gbps == pytest.approx(4 * (1 << 20) / 1_000 / 1_000)  # bytes / us / 1000 = GB/s
    assert top.busbw_gbps == pytest.approx(top.algbw_gbps * 2 * (2 - 1) / 2)
    assert (top.link, top.link_gbps) == ("NVLink 4", 450)
    assert top.could_win_us == pytest.approx(1_000 * (1 - top.busbw_gbps / (450 * 0.8)))


@pytest.mark.parametrize("kind, n, factor", [
    ("all_reduce", 8, 2 * 7 / 8), ("reduce_scatter", 8, 7 / 8), ("all_gather", 4, 3 / 4), ("all_to_all", 2, 1 / 2),
    ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("send_recv", 2, 1.0), ("barrier", 8, None),
])
def test_bus_factors_are_the_ones_nccl_tests_documents(kind, n, factor):
    assert bus_factor(kind, n) == factor


def test_message_sizes_and_links():
    assert message_bytes("all_gather", 1024, None, "Float", 4) == 4 * 1024 * 4  # S: the total array
    assert message_bytes("all_gather", 1024, 4096, "BFloat16", 4) == 4096 * 2
    assert message_bytes("all_reduce", 1024, 1024, "c10::BFloat16", 8) == 2048
    assert message_bytes("all_reduce", 1024, None, "", 8) is None
    assert link_for("NVIDIA H100 80GB HBM3").gbps == 450 and link_for("NVIDIA H100 PCIe").gbps == 64
    assert link_for("NVIDIA A100-PG509-200").name == "NVLink 3" and link_for("NVIDIA A100 80GB PCIe").gbps == 32
    assert link_for("NVIDIA H200 NVL").gbps == 450 and link_for("Intel Xeon") is None
    assert could_win(1_000, 400, 450, 80) == 0.0 and could_win(1_000, 180, 450, 80) == pytest.approx(500)


def test_a_rank_whose_clock_runs_ahead_is_put_on_the_others_clock(tmp_path):
    ranks = late_in_step_2()
    ranks[1].clock = 700.0  # rank 1's timestamps are 0.7 ms ahead for the same moment
    run = summarize(write_run(tmp_path, ranks))
    c = run.communication
    (ref, other) = c.clocks
    assert (ref.offset_us, ref.applied) == (0.0, False)
    assert other.offset_us == pytest.approx(700) and other.spread_us == pytest.approx(0) and other.applied
    assert any("rank 1's clock is 0.700 ms ahead of rank 0's" in note for note in c.notes)
    assert c.steps[1].late_wait_us == pytest.approx(5_000)  # without the correction: 5.7 ms
    assert [s.late_rank for s in c.steps] == [None, 1, None]


def test_clocks_that_agree_within_the_spread_are_left_alone(tmp_path):
    ranks = late_in_step_2()
    for k, c in enumerate(ranks[1].colls):  # ends off by -50, +50, +10 us: noise, no offset
        c.end += (-50, 50, 10)[k]
    run = summarize(write_run(tmp_path, ranks))
    other = run.communication.clocks[1]
    assert other.offset_us == pytest.approx(10) and other.spread_us == pytest.approx(60) and not other.applied
    assert not any(n.startswith("clocks") for n in run.communication.notes)
    assert "clocks    agree within the collectives' end spread" in render_run(run)


def test_without_sequence_numbers_calls_are_matched_by_order_within_their_step(tmp_path):
    ranks = late_in_step_2(seq=False)
    ranks[0].colls.insert(0, Coll("all_reduce", call=-900, arrival=-800, end=-700))  # before any step: no peer
    run = summarize(write_run(tmp_path, ranks))
    c = run.communication
    assert [s.late_rank for s in c.steps] == [None, 1, None]  # the extra call shifts nothing in the steps
    assert c.notes == ["rank 0: 1 collective without a peer (a rank hung, or its capture ended or began "
                       "elsewhere): no waits for them"]


def test_sequence_numbers_that_restart_are_said_and_matched_by_order(tmp_path):
    ranks = late_in_step_2()
    for c, seq in zip(ranks[1].colls, (5, 6, 0), strict=True):
        c.seq = seq
    run = summarize(write_run(tmp_path, ranks))
    assert "rank 1: group 0's sequence numbers restart (6 then 0: a new group of the same name?): matched by " \
           "order instead" in run.communication.notes
    assert [s.late_rank for s in run.communication.steps] == [None, 1, None]


def test_a_missing_rank_is_said_and_its_collectives_have_no_waits(tmp_path):
    ranks = late_in_step_2()
    for r in ranks:
        r.world = 3
    run = summarize(write_run(tmp_path, ranks))
    c = run.communication
    assert c.notes[0] == ("rank 2 of 3: no trace in this run; collectives they (may) take part in are incomplete: "
                          "no waits for them")
    assert (c.collectives, c.complete) == (3, 0) and all(s.late_rank is None for s in c.steps)
    assert [r.rank for r in run.ranks] == [0, 1] and all(r.communication.calls == 3 for r in run.ranks)
    assert run.straggler.criterion != "waits_caused"  # nothing to say who waited: the step-time rule


def test_a_damaged_rank_file_is_named_in_the_note(tmp_path):
    from lightx2v.trace_summary.discover import resolve
    from lightx2v.trace_summary.summarize import summarize_run

    folder = write_run(tmp_path, late_in_step_2())
    cut = folder / "rank1_host.pt.trace.json"
    cut.write_bytes(cut.read_bytes()[:5_000])
    (run,) = [summarize_run(r, keep_going=True) for r in resolve([str(folder)])]
    assert [d.file for d in run.damaged_files] == [str(cut)] and [r.rank for r in run.ranks] == [0]
    assert run.communication is None  # one rank left: nothing to match; the damaged file is said above


def test_ranks_of_another_run_are_said_and_not_matched(tmp_path):
    ranks = late_in_step_2()
    ranks[1].clock = 3_600e6  # captured an hour later: another run
    run = summarize(write_run(tmp_path, ranks))
    assert run.communication.notes == ["rank 1: its capture does not overlap rank 0's in time: another run's file? "
                                       "its collectives are not matched"]
    assert run.communication.collectives == 0 and "no collectives matched" in render_run(run)
    assert all(r.communication is not None for r in run.ranks)  # each rank's own answers stay


def test_a_world_size_of_another_run_is_said(tmp_path):
    ranks = late_in_step_2() + [Rank(rank=2, world=4, steps=STEPS, colls=late_in_step_2()[0].colls)]
    run = summarize(write_run(tmp_path, ranks))
    assert run.communication.notes[0] == ("rank 2: world size 4, the others' 2: another run's file? its "
                                          "collectives are not matched")
    assert [s.late_rank for s in run.communication.steps] == [None, 1, None]


def test_gloo_calls_are_the_callers_op_and_the_backends_work(tmp_path):
    run = summarize(write_run(tmp_path, late_in_step_2(seq=False), schema="gloo"))
    first = run.ranks[0].tables.collectives[0]
    assert (first.kind, first.on_gpu, first.timed, first.group, first.in_nelems, first.dtype) == (
        "all_reduce", False, True, "", 1 << 20, "float")
    assert first.arrival_us == first.call_us  # it arrives when it calls (its work began 0.1 ms later)
    assert first.end_us - first.arrival_us == pytest.approx(100 + 1_000)
    assert not run.ranks[0].communication.on_gpu
    assert [s.late_rank for s in run.communication.steps] == [None, 1, None]
    assert run.communication.steps[1].late_wait_us == pytest.approx(5_000)
    assert run.communication.top[0].link == ""  # no link peak on a CPU


def five_steps(delay: float) -> list[Rank]:
    """Two ranks, five steps, one all-reduce each; rank 1 ``delay`` late in every step."""
    steps = [(k * 10_000, (k + 1) * 10_000) for k in range(5)]
    ranks = []
    for r in (0, 1):
        colls = [Coll("all_reduce", call=lo + 3_900 + (delay if r == 1 else 0), arrival=lo + 4_000 + (
            delay if r == 1 else 0), end=lo + 5_000 + delay, seq=k) for k, (lo, _) in enumerate(steps)]
        ranks.append(Rank(rank=r, world=2, steps=steps, colls=colls))
    return ranks


def test_diff_says_exposed_communication_and_waits_before_and_after_with_the_noise_verdict(tmp_path):
    from lightx2v.trace_summary import compare_runs, diff_to_json, render_diff

    base = summarize(write_run(tmp_path, five_steps(3_000), name="base"))
    new = summarize(write_run(tmp_path, five_steps(0), name="new"))
    d = compare_runs(base, new)
    c = d.communication
    assert c.base_exposed_us == pytest.approx((4_000 + 1_000) / 2)  # rank 0: 3 ms waiting + 1 ms; rank 1: 1 ms
    assert c.new_exposed_us == pytest.approx(1_000)
    assert (c.base_waited_us, c.new_waited_us) == (pytest.approx(1_500), 0.0)
    assert c.exposed_noise.verdict == c.waited_noise.verdict == "beyond noise"
    assert (c.base_late, c.new_late) == ("rank 1 in 5 of 5 steps", "none")
    assert c.line == ("communication: exposed 2.500 -> 1.000 ms per step (-60.0%, beyond noise); waits 1.500 -> "
                      "0.000 ms per step (-100.0%, beyond noise); late rank: rank 1 in 5 of 5 steps -> none")
    assert c.line in render_diff(d)
    assert diff_to_json(d)["communication"]["base_late"] == "rank 1 in 5 of 5 steps"
    same = compare_runs(base, base).communication
    assert same.exposed_noise.verdict == same.waited_noise.verdict == "within noise"


MESH_STEPS = [(0, 20_000), (20_000, 40_000), (40_000, 60_000)]


def mesh_2x2(late_before: str) -> list[Rank]:
    """Four gloo ranks on LightX2V's 2 x 2 mesh (seq groups [0, 1], [2, 3]; CFG pairs [0, 2], [1, 3]), simulated:
    per step an all-to-all in the seq group, an all-gather in the CFG pair, an all-reduce over the world, and an
    all-gather in the seq group again (the ranks in lock-step there: only its backend thread, the seq group's, says
    its group); each ends 0.5 ms after its own group's last arrival, then 1.5 ms of compute. Steps of 20 ms; in step
    2 rank 2 is 8 ms late before its ``late_before`` collective ("a2a", "gather" or "world")."""
    groups = {r: {"default_pg": [0, 1, 2, 3], "mesh_seq_p": [r // 2 * 2, r // 2 * 2 + 1],
                  "mesh_cfg_p": [r % 2, r % 2 + 2]} for r in range(4)}
    colls: dict[int, list[Coll]] = {r: [] for r in range(4)}
    for k, (lo, _) in enumerate(MESH_STEPS):
        ready = {r: lo + 1_000.0 for r in range(4)}
        for thread, (kind, where, desc) in enumerate((("all_to_all", "a2a", "mesh_seq_p"),
                                                      ("all_gather", "gather", "mesh_cfg_p"),
                                                      ("all_reduce", "world", "default_pg"),
                                                      ("all_gather", "", "mesh_seq_p"))):
            thread = 0 if desc == "mesh_seq_p" else thread  # a group's work on its own backend thread
            if k == 1 and late_before == where:
                ready[2] += 8_000
            end = {r: max(ready[m] for m in groups[r][desc]) + 500 for r in range(4)}
            for r in range(4):
                colls[r].append(Coll(kind, call=ready[r] - 50, arrival=ready[r], end=end[r], thread=100 + thread))
            ready = {r: end[r] + 1_500 for r in range(4)}
    return [Rank(rank=r, world=4, steps=MESH_STEPS, colls=colls[r], groups=groups[r]) for r in range(4)]


def test_gloo_subgroups_are_told_apart_by_the_groups_each_rank_is_in(tmp_path):
    run = summarize(write_run(tmp_path, mesh_2x2("a2a"), schema="gloo"))
    c = run.communication
    assert c.notes == [] and c.complete == c.collectives
    calls = run.ranks[0].tables.collectives
    # the all-reduce finds its ranks in lock-step at every step: no time tells its group (the finer split's taken);
    # the last all-gather too, but it ran on the seq group's thread
    assert [k.group for k in calls[:2]] == ["mesh_seq_p [0, 1]", "mesh_cfg_p [0, 2]"]
    assert calls[3].group == "mesh_seq_p [0, 1]"
    assert [s.late_rank for s in c.steps] == [None, 2, None]
    step = c.steps[1]
    assert (step.collective, step.collective_wait_us) == ("all_to_all", pytest.approx(8_000))
    waited = {r.rank: r.waited_us for r in step.ranks}
    # rank 3 waited for rank 2 in their all-to-all, rank 0 for rank 2 in their all-gather, rank 1 for rank 3 (late
    # since it waited) in theirs; nobody at the all-reduce: all arrived equally late
    assert waited == {0: pytest.approx(8_000), 1: pytest.approx(8_000), 2: 0.0, 3: pytest.approx(8_000)}
    pairs = {(p.waiter, p.late): round(p.wait_us * 3) for p in c.pairs}
    assert pairs == {(3, 2): 8_000, (0, 2): 8_000, (1, 3): 8_000}


def test_a_world_collective_of_gloo_stays_one_group(tmp_path):
    run = summarize(write_run(tmp_path, mesh_2x2("world"), schema="gloo"))
    step = run.communication.steps[1]
    assert run.ranks[0].tables.collectives[2].group == "default_pg"
    assert (step.late_rank, step.collective) == (2, "all_reduce")
    assert {r.rank: round(r.waited_us) for r in step.ranks} == {0: 8_000, 1: 8_000, 2: 0, 3: 8_000}


def test_without_the_groups_gloo_calls_are_one_group(tmp_path):
    ranks = mesh_2x2("a2a")
    for r in ranks:
        r.groups = {}
    run = summarize(write_run(tmp_path, ranks, schema="gloo"))
    assert {k.group for k in run.ranks[0].tables.collectives} == {""}
    step = run.communication.steps[1]  # matched as one group of four: rank 0 seems to wait for rank 2 at once
    assert step.late_rank == 2 and step.ranks[0].waited_us > 8_000


def test_a_late_rank_that_slept_in_a_label_is_said_by_its_label(tmp_path):
    ranks = mesh_2x2("a2a")  # rank 2 slept 8 ms in step 2 before its all-to-all: no op, a label around the sleep
    ranks[2].labels = [("late_rank_delay", 21_000, 29_000)]
    step = summarize(write_run(tmp_path, ranks, schema="gloo")).communication.steps[1]
    assert (step.late_rank, step.doing, step.doing_us) == (2, "late_rank_delay", pytest.approx(7_950))  # to the call


def test_a_gloo_rank_whose_backend_thread_starts_late_is_not_the_late_rank(tmp_path):
    ranks = late_in_step_2(seq=False, delay=0.0)
    ranks[0].colls[0].arrival += 3_000  # rank 0 called on time; its backend thread took the work up 3 ms late
    run = summarize(write_run(tmp_path, ranks, schema="gloo"))
    assert [s.late_rank for s in run.communication.steps] == [None, None, None]
    assert run.ranks[0].tables.collectives[0].arrival_us == run.ranks[0].tables.collectives[0].call_us


def test_nccl_calls_whose_kernels_the_capture_lacks_are_not_timed():
    """HTA's ns_resolution_trace: NCCL all-reduces and broadcasts of a 1-rank job, no kernel: the host only enqueued
    them, so they give no communication time."""
    from lightx2v.trace_summary.analyze import analyze_trace

    from conftest import FIXTURES

    r = analyze_trace(str(FIXTURES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    calls = r.tables.collectives
    assert {c.kind for c in calls} == {"all_reduce", "broadcast"} and not any(c.timed for c in calls)
    assert r.communication is None



def test_what_the_late_rank_did_is_named_by_the_line_holding_most_of_that_ops_time(tmp_path):
    """Rank 1 ran 60 short aten::mm in ``straggle`` (4.8 ms) and one long one in ``project`` (1.5 ms) before its
    late all-reduce: aten::mm it was, at straggle's line. The longest single call named project's (seen failing
    on a real 2-rank job under load, where project's matmuls are the longest and straggle's the most)."""
    ranks = late_in_step_2()
    ranks[1].compute = [(10_500 + 100 * k, 10_580 + 100 * k) for k in range(60)] + [(17_000, 18_500)]
    folder = write_run(tmp_path, ranks, schema="gloo")
    path = folder / "rank1_host.pt.trace.json"
    doc = json.loads(path.read_text())
    for name, lo, hi in (("/job/late.py(90): <module>", 0, 30_000), ("/job/late.py(40): straggle", 10_400, 16_600),
                         ("/job/late.py(55): project", 16_900, 18_600)):
        doc["traceEvents"].append({"ph": "X", "cat": "python_function", "name": name, "pid": CPU_PID,
                                   "tid": CPU_PID, "ts": T0 + lo, "dur": hi - lo, "args": {}})
    path.write_text(json.dumps(doc))
    step = summarize(folder).communication.steps[1]
    assert (step.late_rank, step.doing, step.doing_us) == (1, "aten::mm", pytest.approx(60 * 80 + 1_500))
    assert step.doing_line == "job/late.py:40 straggle"
