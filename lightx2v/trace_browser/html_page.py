"""The base every trace browser page is built on: one stylesheet, one way to fill a page, one set of cell helpers.

Each page (the trace list, Overview, Compare, Timeline) calls `page` with its body and only the CSS that is its own;
`STYLE` (type, margins, tables, figures, bars) comes first on every page, so the pages look alike and a change to the
common look is made once. Values are escaped with `escape`; no page fills a template with `str.format` or token
replacement, so a page's script or style needs no brace doubling and cannot pick up a stray placeholder.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from lightx2v.trace_browser.files import shown
from lightx2v.trace_summary.render import format_ms, format_pct

# The colours every page's bars and figures share: GPU busy, GPU idle, CPU-only time, a warning (also the error
# text), and the Compare page's faster / slower.
BUSY, IDLE, CPU, WARN = "#3b6fb6", "#d6dde8", "#4f9a6a", "#c0392b"
FASTER, SLOWER = "#2e8b57", WARN
NONE = "–"  # a figure that was not recorded
BAR_WIDTH = 220

STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1.05em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; margin: .6em 0; }
td, th { padding: .2em .7em; border-bottom: 1px solid #e3e3e3; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { font-family: monospace; overflow-wrap: anywhere; } .path { font-family: monospace; }
.meta, .legend { color: #555; } .error { color: """ + WARN + """; }
svg.bar { vertical-align: middle; background: #f4f4f4; }
"""


def escape(value: object) -> str:
    """`value` as HTML text or a quoted attribute value (a file name's undecodable bytes as ``\\xNN``: `shown`)."""
    return html.escape(shown(str(value)))


def page(title: str, body: str, *, css: str = "", head: str = "", body_attrs: str = "") -> str:
    """A whole page: `title` (plain text, escaped here), `body` (HTML), the page's own `css` after `STYLE` in the one
    `<style>` element, `head` (HTML: scripts, links) after it, `body_attrs` on `<body>`."""
    attrs = f" {body_attrs}" if body_attrs else ""
    return (f"<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>{escape(title)} · LightX2V</title>\n"
            f"<style>{STYLE}{css}</style>\n{head}</head>\n<body{attrs}>\n{body}\n</body></html>\n")


def ms(us: float | None) -> str:
    """Microseconds as the pages' milliseconds, `–` when not recorded."""
    return format_ms(us, NONE)


def pct(value: float | None) -> str:
    return format_pct(value, NONE)


def count(value: float | None) -> str:
    """A count, or a mean count per step (two decimals when not whole), `–` when not recorded."""
    if value is None:
        return NONE
    return f"{value:,.0f}" if abs(value - round(value)) < 1e-9 else f"{value:,.2f}"


def num_cell(text: object, classes: str = "") -> str:
    """A right-aligned figure cell; `classes` adds to ``num`` (one attribute: a browser reads only the first of two)."""
    return f'<td class="num {classes}">{text}</td>' if classes else f"<td class=num>{text}</td>"


def name_cell(text: str, title: str | None = None) -> str:
    """A monospace cell for an op or kernel name; `title` (the full name) shows on hover."""
    hover = f' title="{escape(title)}"' if title is not None else ""
    return f"<td class=name{hover}>{escape(text)}</td>"


def table(head: Iterable[str], rows: Iterable[str], cls: str, empty: str | None = None) -> str:
    """A table of `rows` (``<tr>`` HTML) under the header `head`; `empty` (a sentence) replaces a table with no
    rows when given."""
    rows = list(rows)
    if not rows and empty is not None:
        return f"<p class=none>{escape(empty)}</p>"
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    attr = f"class={cls}" if " " not in cls else f"class='{cls}'"
    return f"<table {attr}><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def bar(parts: Iterable[tuple[float, str]], scale: float, label: str, width: int = BAR_WIDTH) -> str:
    """An inline SVG bar of stacked (value, colour) parts, `scale` being the value of the full width."""
    x, rects = 0.0, []
    for value, colour in parts:
        w = 0.0 if scale <= 0 else max(0.0, min(width - x, width * value / scale))
        if w > 0:
            rects.append(f'<rect x="{x:.1f}" width="{w:.1f}" height="12" fill="{colour}"/>')
        x += w
    return (f'<svg class=bar width="{width}" height="12" viewBox="0 0 {width} 12" role="img" '
            f'aria-label="{escape(label)}">{"".join(rects)}</svg>')
