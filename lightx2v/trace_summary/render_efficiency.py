"""The text of the efficiency answers (``efficiency``): the summary's section, the capture log's line, and the
``--diff`` line comparing two captures' efficiency."""

from __future__ import annotations

from .model import ClassEfficiency, Efficiency, OpEfficiency, PeakSpec


def _num(value: float | None, digits: int = 1) -> str:
    """Fixed decimals, or 3 significant digits below 1 (a CPU's rates)."""
    if value is None:
        return "-"
    return f"{value:.3g}" if 0 < abs(value) < 1 and digits < 3 else f"{value:.{digits}f}"


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def peak_line(peak: PeakSpec | None) -> str:
    """``H200 SXM (NVIDIA H200): bf16 989.4, fp8 1979, tf32 494.7, fp32 66.9 TFLOP/s, 4.8 TB/s; source: ...``."""
    if peak is None:
        return "none (the device is not in the peak table: --peak TFLOPS,TBps)"
    if peak.gpu == "--peak":
        return f"{_num(peak.tflops.get('bf16'))} TFLOP/s, {peak.tbps:g} TB/s, {peak.source}"
    rates = ", ".join(f"{k} {peak.tflops[k]:g}" for k in ("bf16", "fp8", "tf32", "fp32") if k in peak.tflops)
    return f"{peak.gpu} ({peak.device}): {rates} TFLOP/s, {peak.tbps:g} TB/s; source: {peak.source}"


def step_line(e: Efficiency) -> str:
    """``step: 611.8 TFLOP/s (13.61 TFLOP of GEMM/conv/attention per step in 22.241 ms), MFU 61.8%``."""
    if e.step_tflops_per_s is None:
        return ""
    mfu = f", MFU {e.mfu_pct:.1f}%" if e.mfu_pct is not None else ""
    return (f"step: {_num(e.step_tflops_per_s)} TFLOP/s ({e.matrix_flops / e.steps / 1e9:.1f} GFLOP of GEMM, "
            f"convolution and attention per step in {_ms(e.step_wall_us / e.steps)} ms){mfu}")


def without_roof(e: Efficiency) -> bool:
    """A CPU-only trace with no --peak: nothing to hold the ops against, so the section is its one line (what is
    missing and how to get it), not tables of dashes."""
    return not e.gpu and e.peak is None


def efficiency_lines(e: Efficiency | None) -> list[str]:
    """The summary's "How far from the limit" section."""
    if e is None:
        return []
    if without_roof(e):
        return ["", f"How far from the limit: {e.headline}"]
    per = "GPU time" if e.gpu else "CPU op time"
    lines = ["", f"How far from the limit: {e.headline}", f"  peak  {peak_line(e.peak)}"]
    if e.hint and e.hint != e.headline:
        lines.append(f"  note: {e.hint}")
    if step_line(e):
        lines.append(f"  {step_line(e)}")
    if e.torch_flops_checked:
        lines.append(f"  torch's own flops (with_flops) used for {e.torch_flops_checked} calls; the model differs "
                     f"by more than 1% on {e.torch_flops_disagree}")
    if not e.classes:
        return lines
    head = f"at {e.target_pct:.0f}%"
    lines += [f"  {'class':<14} {'ms/step':>9} {'TFLOP/s':>8} {'TB/s':>7} {'FLOP/B':>8} {'bound':<8} "
              f"{'roof %':>6} {head + ' ms':>10}"]
    for c in e.classes:
        lines.append(_class_row(c, e.steps))
    covered = e.modeled_us + e.unmodeled_us
    lines.append(f"  ({per} of modeled ops: {_ms(e.modeled_us / e.steps)} ms per step; without a model or shapes: "
                 f"{_ms(e.unmodeled_us / e.steps)} ms" + (f", {100 * e.modeled_us / covered:.0f}% covered)"
                                                          if covered else ")"))
    if e.ops:
        lines += ["", f"  Top {len(e.ops)} ops by headroom ({head} of the roofline; per step)",
                  f"  {'ms':>8} {'TFLOP/s':>8} {'TB/s':>7} {'roof %':>6} {'win ms':>7} {'calls':>6}  op  shapes  "
                  "<- kernels"]
        for r in e.ops:
            lines.append(_op_row(r, e.steps))
    return lines


def _win(us: float | None) -> str:
    return "-" if us is None else "0" if us < 0.5 else f"-{us / 1000:.3f}"


def _class_row(c: ClassEfficiency, steps: int) -> str:
    win = _win(c.headroom_us)
    return (f"  {c.op_class:<14} {_ms(c.time_us / steps):>9} {_num(c.tflops_per_s):>8} {_num(c.tb_per_s, 3):>7} "
            f"{_num(c.intensity):>8} {c.bound or '-':<8} {_num(c.roofline_pct):>6} {win:>10}")


def _op_row(r: OpEfficiency, steps: int) -> str:
    win = _win(r.headroom_us)
    kernels = f"  <- {', '.join(r.kernels)}" if r.kernels else ""
    return (f"  {_ms(r.time_us / steps):>8} {_num(r.tflops_per_s):>8} {_num(r.tb_per_s, 3):>7} "
            f"{_num(r.roofline_pct):>6} {win:>7} {r.calls / steps:>6.0f}  {r.op}  {r.shapes or '(no shapes)'}"
            f"{kernels}")


def log_line(e: Efficiency | None) -> str:
    """The capture log's one line (<= 100 characters): MFU and the top headroom, or how to record shapes."""
    if e is None or without_roof(e):
        return ""
    if not e.shapes_recorded:
        return "efficiency: no op shapes: record_shapes=True (inference: --record_shapes) for MFU, headroom"
    if e.mfu_pct is None:
        return "efficiency: no peak for this device: --peak TFLOPS,TBps in the summary for MFU, headroom"
    line = f"efficiency: MFU {e.mfu_pct:.1f}% ({_num(e.step_tflops_per_s)} TFLOP/s)"
    top = next((c for c in e.classes if c.roofline_pct is not None), None)
    if top is not None:
        line += (f"; {top.op_class} at {top.roofline_pct:.0f}% of roofline, -{(top.headroom_us or 0) / 1000:.3f} "
                 f"ms/step at {e.target_pct:.0f}%")
    return line
