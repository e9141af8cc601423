"""How far from the limit: the efficiency answers on the real H200 fixture (with and without the shapes its model
records), on a real CPU capture, and in the text, the JSON, the capture log and --diff.

The worked example (docs/trace_summary.md, "How far from the limit"): per block of the fixture's model the four
GEMMs do 2 * 4096 * 3072 * (9216 + 3072 + 12288 + 12288) = 927.7 GFLOP and the attention 4 * 24 * 4096^2 * 128
= 206.2 GFLOP; 12 blocks in the one 22.241 ms step. The GEMM ops' GPU work is 15.383 ms (their kernels 15.337 ms
and the 45.6 us of 4-byte memsets cuBLAS launches from the same ops), the attention's 4.253 ms (4.243 + 0.010),
GELU's 0.786 ms for 12 * 2 * 4096 * 12288 * 2 bytes. The H200 SXM row: 989.4 dense bf16 TFLOP/s, 4.8 TB/s.
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.flop_counter import FlopCounterMode

from lightx2v.trace_summary import SCHEMA, compare_runs, diff_to_json, render_diff, to_json
from lightx2v.trace_summary.__main__ import main
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.hook import log_lines
from lightx2v.trace_summary.peaks import PEAKS, parse_peak, peak_for
from lightx2v.trace_summary.render import render_rank
from lightx2v.trace_summary.summarize import summarize_paths

from helpers.shaped_h200 import FIXTURE, fp8_variant, shaped_h200

GEMM_FLOPS = 12 * 2 * 4096 * 3072 * (9216 + 3072 + 12288 + 12288)
ATTENTION_FLOPS = 12 * 4 * 24 * 4096 * 4096 * 128
GELU_BYTES = 12 * 2 * 4096 * 12288 * 2


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    return shaped_h200(tmp_path_factory.mktemp("shaped"))


@pytest.fixture(scope="module")
def summary(shaped):
    return analyze_trace(str(shaped))


def _class(e, name):
    return next(c for c in e.classes if c.op_class == name)


def test_worked_example_gemm_attention_gelu_and_the_step(summary):
    e = summary.efficiency
    assert e.shapes_recorded and e.peak.gpu == "H200 SXM" and e.peak.tflops["bf16"] == 989.4
    gemm, attention = _class(e, "GEMM"), _class(e, "attention")
    assert gemm.flops == GEMM_FLOPS and attention.flops == ATTENTION_FLOPS
    # the issue's "about 726 TFLOP/s (73%)": 723.7 with the ops' memsets in their time, 725.9 without
    assert gemm.tflops_per_s == pytest.approx(GEMM_FLOPS / 15382.722e-6 / 1e12, rel=1e-6)
    assert round(gemm.tflops_per_s, 1) == 723.7 and round(gemm.roofline_pct) == 73 and gemm.bound == "compute"
    # "about 583 TFLOP/s (59%)": 581.8 with cuDNN's memsets, 583.1 without
    assert round(attention.tflops_per_s, 1) == 581.8 and round(attention.roofline_pct) == 59
    gelu = next(o for o in e.ops if o.op == "aten::gelu")
    assert gelu.bytes == GELU_BYTES and gelu.bound == "memory"
    assert round(gelu.tb_per_s, 2) == 3.07 and round(gelu.roofline_pct) == 64
    assert e.matrix_flops == GEMM_FLOPS + ATTENTION_FLOPS
    assert round(e.step_tflops_per_s) == 612 and round(e.mfu_pct) == 62
    assert e.mfu_pct == pytest.approx(100 * (GEMM_FLOPS + ATTENTION_FLOPS) / 989.4e12 / e.step_wall_us * 1e6)
    assert e.unmodeled_us == 0 and e.modeled_us == pytest.approx(summary.gpu.activity_us)


def test_headroom_ranks_the_gemms_then_attention_and_leads_with_one_line(summary):
    e = summary.efficiency
    assert [c.op_class for c in e.classes][:2] == ["GEMM", "attention"]
    attention = _class(e, "attention")
    # 4.253 ms at 58.8%: at 80% it would take 4.253 * 58.8 / 80 ms
    assert attention.headroom_us == pytest.approx(4252.5 * (1 - attention.roofline_pct / 80), rel=1e-6)
    assert round(attention.headroom_us / 1000, 2) == 1.13
    assert _class(e, "elementwise").headroom_us == 0  # residual adds at 90%: nothing to win at 80%
    assert e.headline == "GEMM: 15.383 ms per step at 73% of its roofline; at 80%, -1.318 ms per step"
    assert e.ops[0].op == "aten::_cudnn_attention_forward" and e.ops[0].kernels[0].startswith("cudnn_generated")
    shapes = {o.shapes for o in e.ops if o.op == "aten::addmm"}
    assert "[9216] x [4096, 3072] x [3072, 9216] bf16" in shapes and len(shapes) == 4


def test_text_json_and_capture_log_carry_the_answers(summary, tmp_path):
    text = render_rank(summary)
    assert "How far from the limit: GEMM: 15.383 ms per step at 73%" in text
    assert "MFU 61.8%" in text and "source: NVIDIA H100/H200" in text
    log = log_lines(summary, "x.summary.txt")
    assert "efficiency: MFU 61.8% (611.8 TFLOP/s); GEMM at 73% of roofline, -1.318 ms/step at 80%" in log
    doc = json.loads(json.dumps(to_json(summarize_paths([summary.file]))))
    assert doc["schema"] == SCHEMA == "lightx2v.trace_summary/7"
    eff = doc["runs"][0]["ranks"][0]["efficiency"]
    assert eff["mfu_pct"] == 61.834 and eff["peak"]["gpu"] == "H200 SXM" and eff["classes"][0]["op_class"] == "GEMM"


def test_without_shapes_it_says_how_to_record_them_and_gives_time_by_class():
    r = analyze_trace(str(FIXTURE))
    e = r.efficiency
    assert not e.shapes_recorded and e.mfu_pct is None and e.step_tflops_per_s is None
    assert "record_shapes=True" in e.hint and "--record_shapes" in e.hint
    assert round(_class(e, "GEMM").time_us) == 15383 and _class(e, "GEMM").flops is None
    assert any("--record_shapes" in line for line in log_lines(r, "x"))
    assert "How far from the limit: no op shapes" in render_rank(r)


def test_peak_override_and_unknown_device(shaped, tmp_path, capsys):
    assert main(["--peak", "1979,4.8", "--json", str(shaped)]) == 0
    eff = json.loads(capsys.readouterr().out)["runs"][0]["ranks"][0]["efficiency"]
    assert eff["peak"]["gpu"] == "--peak" and round(eff["mfu_pct"], 1) == 30.9  # 611.8 / 1979
    with gzip.open(shaped, "rt") as f:
        doc = json.load(f)
    doc["deviceProperties"][0]["name"] = "NVIDIA Z999"
    unknown = tmp_path / "unknown.pt.trace.json.gz"
    with gzip.open(unknown, "wt") as f:
        json.dump(doc, f)
    e = analyze_trace(str(unknown)).efficiency
    assert e.peak is None and e.mfu_pct is None and "--peak" in e.hint and "NVIDIA Z999" in e.hint
    assert round(_class(e, "GEMM").tflops_per_s, 1) == 723.7  # rates need no peak
    with pytest.raises(SystemExit):
        main(["--peak", "989", str(shaped)])
    assert "--peak wants TFLOPS,TBps" in capsys.readouterr().err


def test_torch_flops_argument_is_used_and_cross_checked(tmp_path):
    e = analyze_trace(str(shaped_h200(tmp_path, with_torch_flops=True))).efficiency
    assert e.torch_flops_checked == 48 and e.torch_flops_disagree == 0


def test_diff_says_fp8_made_the_gemms_faster_and_where_they_sit_now(shaped, tmp_path):
    new = fp8_variant(tmp_path, speedup=1.6)
    base_run, new_run = summarize_paths([str(shaped)])[0], summarize_paths([str(new)])[0]
    diff = compare_runs(base_run, new_run)
    change = diff.ranks[0].efficiency
    gemm = change.classes[0]
    assert gemm.op_class == "GEMM" and gemm.base_dtype == "bf16" and gemm.new_dtype == "fp8"
    # 15.337 ms of kernels / 1.6 + the same 45.6 us of memsets; 11.13 TFLOP at fp8's 1979 TFLOP/s
    assert gemm.new_ms_per_step == pytest.approx((15337.1 / 1.6 + 45.622) / 1000, rel=1e-4)
    assert round(gemm.new_roofline_pct) == 58
    assert change.line.startswith("efficiency: MFU 61.8% -> ")
    assert "GEMM 1.60x faster (15.383 -> 9.631 ms per step), now at 58% of its roofline (was 73%; fp8 peak, was " \
           "bf16)" in change.line
    assert change.line in render_diff(diff)
    assert diff_to_json(diff)["ranks"][0]["efficiency"]["classes"][0]["new_dtype"] == "fp8"


def test_peak_table_rows_have_sources_and_match_real_device_names():
    assert all(row.source and row.bf16 > 0 and row.tbps > 0 for row in PEAKS)
    names = {"NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H100 PCIe": "H100 PCIe", "NVIDIA H200": "H200 SXM",
             "NVIDIA H20": "H20", "NVIDIA A100-SXM4-40GB": "A100 40GB", "NVIDIA A100-SXM4-80GB": "A100 80GB SXM",
             "NVIDIA A100 80GB PCIe": "A100 80GB PCIe", "NVIDIA L40S": "L40S", "NVIDIA L20": "L20",
             "NVIDIA GeForce RTX 4090": "RTX 4090", "NVIDIA GeForce RTX 5090": "RTX 5090", "NVIDIA B200": "B200"}
    for device, gpu in names.items():
        assert peak_for(device).gpu == gpu, device
    assert peak_for("NVIDIA A100", 85 * 2**30).gpu == "A100 80GB SXM"
    assert "fp8" not in peak_for("NVIDIA A100-SXM4-40GB").tflops
    assert peak_for("AMD EPYC 9654") is None
    assert parse_peak("989,4.8").tbps == 4.8
    for bad in ("989", "a,b", "-1,2", "1,2,3"):
        with pytest.raises(ValueError):
            parse_peak(bad)


class _Block(torch.nn.Module):
    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.qkv, self.proj, self.fc = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), torch.nn.Linear(d, 4 * d)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).view(1, -1, 3, 4, 16).permute(2, 0, 3, 1, 4).unbind(0)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(x.shape)
        x = x + self.proj(a)
        return x + torch.nn.functional.gelu(self.fc(x), approximate="tanh").sum(-1, keepdim=True)


def test_real_cpu_capture_counts_what_flop_counter_mode_counts(tmp_path):
    """A real CPU capture with record_shapes=True: per step, the GEMM FLOPs the summary finds are the ones
    FlopCounterMode counts for the same forward (it skips the CPU attention kernel: that one is 4*b*h*s*s*d);
    a CPU trace times each op by its own duration."""
    block, x = _Block(), torch.randn(1, 128, 64)
    path = tmp_path / "cpu.pt.trace.json"
    with torch.no_grad():
        with FlopCounterMode(display=False) as counter:
            block(x)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=2),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
            for _ in range(3):
                block(x)
                prof.step()
    e = analyze_trace(str(path), peak=parse_peak("2,0.1")).efficiency
    assert not e.gpu and e.steps == 2 and e.peak.gpu == "--peak"
    assert _class(e, "GEMM").flops == 2 * counter.get_total_flops() and _class(e, "GEMM").calls == 2 * 3
    assert _class(e, "attention").flops == 2 * 4 * 4 * 128 * 128 * 16
    assert {c.op_class for c in e.classes} >= {"GEMM", "attention", "normalization", "activation"}
    assert 0 < e.mfu_pct < 100 and e.modeled_us > 0
    shutil.rmtree(tmp_path)
