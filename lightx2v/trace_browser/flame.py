"""Where in your code, drawn: an icicle graph of the frame tree (``trace_summary.frames``) for the Overview, GPU and
CPU views, and a differential one for the Compare page (NEW's shape, each box coloured by its change from BASE:
slower red, faster blue). Inline SVG and CSS only: the views switch by radio buttons (``:checked``), each box's
numbers are in its ``<title>`` (hover), and the section's table gives the top frames' numbers; no script, no
font, nothing from elsewhere.

``flame_section(rank)`` and ``diff_flame_section(base, new)`` return HTML; the CSS is ``FLAME_STYLE``, kept apart
so it can move with the sections onto any page base.

Layout: the root (all the work in the steps) spans the width; each frame's box spans its inclusive share, under
its caller; a frame's own work is split by top-level op, the boxes of the last level. Boxes narrower than
MIN_BOX_PX are left out (their share stays in their caller's width) and counted in the caption.
"""

from __future__ import annotations

from dataclasses import dataclass

from lightx2v.trace_summary.frames import inclusive, label, shown
from lightx2v.trace_summary.model import FrameTree, RankSummary

from .html_page import escape, ms, name_cell, num_cell, table

WIDTH, ROW = 1000, 17
MIN_BOX_PX = 0.5
CHAR_PX = 6.6  # the width of a character of the boxes' 11px font, for cutting labels to fit
VIEWS = (("gpu", "GPU time", 0), ("cpu", "CPU op time", 2))  # (key, name, column of FrameTree.ops rows)
KIND_FILL = {"user": "#f0a35e", "module": "#8fb4e3", "library": "#c9c9c9"}
OP_FILL, ROOT_FILL = "#9ccf8a", "#e6e6e6"
SLOWER, FASTER, SAME = (214, 39, 40), (31, 119, 180), (236, 236, 236)

FLAME_STYLE = """
section.flame input.flame-view { position: absolute; opacity: 0; }
section.flame label.flame-view { display: inline-block; padding: .2em .8em; border: 1px solid #bbb; cursor: pointer;
  margin-right: .3em; border-radius: 3px; }
section.flame input.flame-view:checked + label { background: #333; color: #fff; border-color: #333; }
section.flame div.flame-graph { display: none; margin: .5em 0; }
section.flame input.v-gpu:checked ~ div.g-gpu, section.flame input.v-cpu:checked ~ div.g-cpu { display: block; }
svg.flame { display: block; width: 100%; max-width: 1000px; height: auto; background: #fafafa; }
svg.flame text { font: 11px system-ui, sans-serif; fill: #222; pointer-events: none; }
svg.flame rect { stroke: #fff; stroke-width: .5; } svg.flame g.box:hover rect { stroke: #000; }
.flame-caption { color: #555; font-size: .9em; }
"""


@dataclass
class Box:
    x: float
    depth: int
    width: float
    name: str
    kind: str  # "user", "module", "library", "op" or "root"
    value: float  # microseconds (or bytes) per step
    path: tuple[str, ...]  # the names from the root down: matches a box across two captures


def layout(tree: FrameTree, column: int, min_px: float = MIN_BOX_PX) -> tuple[list[Box], int]:
    """The boxes of one view (``column``: 0 GPU, 2 CPU of the op rows), and how many were narrower than
    ``min_px`` (left out)."""
    own = [0.0] * len(tree.names)
    for (node, _), row in tree.ops.items():
        own[node] += row[column]
    total = inclusive(tree, own)
    if total[0] <= 0:
        return [], 0
    scale = WIDTH / total[0]
    children: dict[int, list[int]] = {}
    for node in range(1, len(tree.names)):
        children.setdefault(tree.parent[node], []).append(node)
    ops: dict[int, list[tuple[str, float]]] = {}
    for (node, op), row in tree.ops.items():
        if row[column] > 0:
            ops.setdefault(node, []).append((op or "(no op)", row[column]))
    boxes = [Box(0.0, 0, WIDTH, "all", "root", total[0], ())]
    hidden = 0

    def place(node: int, x: float, depth: int, path: tuple[str, ...]) -> None:
        nonlocal hidden
        items: list[tuple[float, str, int | str]] = [(total[c], "frame", c) for c in children.get(node, [])
                                                      if total[c] > 0]
        items += [(v, "op", op) for op, v in ops.get(node, [])]
        for value, what, ref in sorted(items, key=lambda item: -item[0]):
            width = value * scale
            if width < min_px:
                hidden += 1
                x += width
                continue
            if what == "frame":
                assert isinstance(ref, int)
                name = label(tree.names[ref], tree.running)
                boxes.append(Box(x, depth, width, name, tree.kinds[ref], value, (*path, name)))
                place(ref, x, depth + 1, (*path, name))
            else:
                boxes.append(Box(x, depth, width, str(ref), "op", value, (*path, str(ref))))
            x += width

    place(0, 0.0, 1, ())
    return boxes, hidden


def _svg(boxes: list[Box], fills: list[str], tips: list[str], aria: str) -> str:
    depth = max(b.depth for b in boxes) + 1
    height = depth * ROW
    parts = []
    for b, fill, tip in zip(boxes, fills, tips, strict=True):
        y = b.depth * ROW
        fits = int((b.width - 6) / CHAR_PX)
        text = b.name if len(b.name) <= fits else (b.name[:fits - 1] + "…" if fits >= 4 else "")
        parts.append(f'<g class=box data-name="{escape(b.name)}" data-kind={b.kind} data-value="{b.value:.3f}" '
                     f'data-depth={b.depth}><rect x="{b.x:.2f}" y="{y}" width="{b.width:.2f}" height="{ROW - 1}" '
                     f'fill="{fill}"/><title>{escape(tip)}</title>'
                     + (f'<text x="{b.x + 3:.2f}" y="{y + ROW - 5}">{escape(text)}</text>' if text else "") + "</g>")
    return (f'<svg class=flame viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
            f'aria-label="{escape(aria)}">{"".join(parts)}</svg>')


def _share(value: float, total: float) -> str:
    return f"{100 * value / total:.1f}%" if total else "–"


def flame_section(r: RankSummary) -> str:
    """The Overview's icicle graph of one trace, GPU time and CPU op time; "" without Python frames."""
    tree = r.tables.frames if r.tables is not None else None
    if tree is None or r.frames is None:
        return ""
    uid = escape(r.rank if r.rank is not None else r.worker).replace(" ", "_")
    views = [(key, name, column) for key, name, column in VIEWS if key == "cpu" or r.gpu is not None]
    out = ["<section class=flame>", "<h3>Where in your code</h3>",
           f"<p class=flame-caption>Python frames of the capture (with_stack), per step over {tree.steps} step(s); "
           + ("torch, the standard library and site-packages folded into the calling frame" if r.frames.folded
              else "every frame kept") + ". Width: share of the view's time; hover a box for its numbers. "
           "Colours: <span style='background:#f0a35e'>your code</span> <span style='background:#8fb4e3'>nn.Module"
           "</span> <span style='background:#9ccf8a'>top-level op</span>.</p>"]
    graphs = []
    for i, (key, name, column) in enumerate(views):
        boxes, hidden = layout(tree, column)
        out.append(f"<input type=radio class='flame-view v-{key}' name=flame-{uid} id=flame-{uid}-{key}"
                   f"{' checked' if i == 0 else ''}><label class=flame-view for=flame-{uid}-{key}>{name}</label>")
        if not boxes:
            graphs.append(f"<div class='flame-graph g-{key}'><p class=none>No {name.lower()} in the steps.</p></div>")
            continue
        total = boxes[0].value
        fills = [ROOT_FILL if b.kind == "root" else OP_FILL if b.kind == "op" else KIND_FILL.get(b.kind, "#ccc")
                 for b in boxes]
        tips = [f"{' > '.join(b.path) or 'all'}: {b.value / 1000:.3f} ms per step ({_share(b.value, total)})"
                for b in boxes]
        more = f"; {hidden} boxes under {MIN_BOX_PX} px left out" if hidden else ""
        graphs.append(f"<div class='flame-graph g-{key}'>{_svg(boxes, fills, tips, f'{name} by Python frame')}"
                      f"<p class=flame-caption>{name}: {total / 1000:.3f} ms per step{more}</p></div>")
    out += graphs
    out.append(_top_table(r))
    out.append("</section>")
    return "\n".join(out)


def _top_table(r: RankSummary) -> str:
    f = r.frames
    assert f is not None
    rows = (f"<tr>{num_cell(ms(x.gpu_us))}{num_cell(ms(x.gpu_self_us))}{num_cell(ms(x.cpu_us))}"
            f"{num_cell(ms(x.cpu_self_us))}{num_cell(x.calls)}"
            f"{name_cell(shown(x.location, x.function, x.frame, x.line))}{name_cell(x.top_op)}</tr>"
            for x in f.frames)
    return table(("GPU ms", "GPU self", "CPU ms", "CPU self", "calls", "frame", "top op"), rows, "frames")


def _mix(delta: float, scale: float) -> str:
    """Red for slower, blue for faster, the stronger the larger |delta| against the largest change."""
    t = min(1.0, abs(delta) / scale) if scale else 0.0
    far = SLOWER if delta > 0 else FASTER
    return "#" + "".join(f"{round(s + (f - s) * t):02x}" for s, f in zip(SAME, far, strict=True))


def diff_flame_section(base: RankSummary | None, new: RankSummary | None) -> str:
    """The Compare page's differential icicle graph: NEW's boxes, coloured by their change from BASE's box of
    the same path (a box only NEW has counts as all new); "" unless both sides have Python frames."""
    tb = base.tables.frames if base is not None and base.tables is not None else None
    tn = new.tables.frames if new is not None and new.tables is not None else None
    if tb is None or tn is None or base is None or new is None:
        return ""
    column = 0 if base.gpu is not None and new.gpu is not None else 2
    name = "GPU time" if column == 0 else "CPU op time"
    boxes, hidden = layout(tn, column)
    if not boxes:
        return ""
    before = {b.path: b.value for b in layout(tb, column, 0.0)[0]}  # every box of BASE, however narrow
    deltas = [b.value - before.get(b.path, 0.0) for b in boxes]
    scale = max((abs(d) for d in deltas[1:]), default=0.0)
    fills = [_mix(d, scale) for d in deltas]
    tips = [f"{' > '.join(b.path) or 'all'}: NEW {b.value / 1000:.3f} ms, BASE {before.get(b.path, 0.0) / 1000:.3f}"
            f" ms per step ({d / 1000:+.3f} ms)" for b, d in zip(boxes, deltas, strict=True)]
    svg = _svg(boxes, fills, tips, f"{name} by Python frame, NEW against BASE")
    more = f"; {hidden} boxes under {MIN_BOX_PX} px left out" if hidden else ""
    return ("<section class='flame flame-diff'><h3>Where in your code: NEW against BASE</h3>"
            f"<p class=flame-caption>{name} per step by Python frame, NEW's shape; <span style='color:#d62728'>"
            "red: slower</span>, <span style='color:#1f77b4'>blue: faster</span> than the same stack in BASE "
            f"(the strongest colour: the largest change, {scale / 1000:.3f} ms){more}.</p>"
            f"<div class='flame-graph' style='display:block'>{svg}</div></section>")

