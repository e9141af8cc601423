"""Efficiency before and after (``--diff``): the step's MFU and each op class's time and roofline share, and one
line for the class whose time changed most:

    efficiency: MFU 61.8% -> 45.2%; GEMM 1.60x faster (15.383 -> 9.614 ms per step), now at 41% of its
    roofline (was 73%; fp8 peak, was bf16)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .model import ClassEfficiency, Efficiency


@dataclass
class ClassChange:
    op_class: str
    base_ms_per_step: Optional[float]
    new_ms_per_step: Optional[float]
    base_roofline_pct: Optional[float]
    new_roofline_pct: Optional[float]
    base_dtype: str
    new_dtype: str


@dataclass
class EfficiencyChange:
    base_mfu_pct: Optional[float]
    new_mfu_pct: Optional[float]
    base_step_tflops_per_s: Optional[float]
    new_step_tflops_per_s: Optional[float]
    classes: list[ClassChange] = field(default_factory=list)  # largest |time change| first
    line: str = ""


def efficiency_change(base: Efficiency | None, new: Efficiency | None) -> EfficiencyChange | None:
    """None when neither side has efficiency answers."""
    if base is None and new is None:
        return None
    b = {c.op_class: c for c in base.classes} if base else {}
    n = {c.op_class: c for c in new.classes} if new else {}
    classes = [_class(name, b.get(name), n.get(name), base, new) for name in dict.fromkeys([*b, *n])]
    classes.sort(key=lambda c: -abs((c.new_ms_per_step or 0.0) - (c.base_ms_per_step or 0.0)))
    change = EfficiencyChange(
        base_mfu_pct=base.mfu_pct if base else None, new_mfu_pct=new.mfu_pct if new else None,
        base_step_tflops_per_s=base.step_tflops_per_s if base else None,
        new_step_tflops_per_s=new.step_tflops_per_s if new else None, classes=classes)
    change.line = _line(change, base, new)
    return change


def _class(name: str, b: ClassEfficiency | None, n: ClassEfficiency | None, base: Efficiency | None,
           new: Efficiency | None) -> ClassChange:
    return ClassChange(
        op_class=name,
        base_ms_per_step=b.time_us / base.steps / 1000 if b and base else None,
        new_ms_per_step=n.time_us / new.steps / 1000 if n and new else None,
        base_roofline_pct=b.roofline_pct if b else None, new_roofline_pct=n.roofline_pct if n else None,
        base_dtype=b.dtype if b else "", new_dtype=n.dtype if n else "")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _line(ch: EfficiencyChange, base: Efficiency | None, new: Efficiency | None) -> str:
    parts = []
    if ch.base_mfu_pct is not None or ch.new_mfu_pct is not None:
        parts.append(f"MFU {_pct(ch.base_mfu_pct)} -> {_pct(ch.new_mfu_pct)}")
    elif not ((base and base.shapes_recorded) or (new and new.shapes_recorded)):
        parts.append("no op shapes on either side (record_shapes=True) for rates and MFU")
    top = ch.classes[0] if ch.classes else None
    if top is not None and top.base_ms_per_step and top.new_ms_per_step:
        ratio = top.base_ms_per_step / top.new_ms_per_step
        speed = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
        text = f"{top.op_class} {speed} ({top.base_ms_per_step:.3f} -> {top.new_ms_per_step:.3f} ms per step)"
        if top.new_roofline_pct is not None:
            text += f", now at {top.new_roofline_pct:.0f}% of its roofline"
            extras = [f"was {top.base_roofline_pct:.0f}%"] if top.base_roofline_pct is not None else []
            if top.base_dtype != top.new_dtype and top.new_dtype:
                extras.append(f"{top.new_dtype} peak, was {top.base_dtype or '?'}")
            text += f" ({'; '.join(extras)})" if extras else ""
        parts.append(text)
    elif top is not None:
        side = "NEW" if top.new_ms_per_step else "BASE"
        parts.append(f"{top.op_class} only in {side}")
    return "efficiency: " + "; ".join(parts) if parts else ""
