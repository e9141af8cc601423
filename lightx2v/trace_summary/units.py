"""Byte sizes as every report prints them: decimal units, one rule for the summary, the trace list, the HTML
Overview and the communication tables."""

from __future__ import annotations


def format_signed_bytes(n: int) -> str:
    """A change in bytes: ``+65.5 KB``, ``-5.0 MB``, ``0 B`` (format_bytes scales only sizes, not negatives)."""
    return ("+" if n > 0 else "-" if n < 0 else "") + format_bytes(abs(n))


def format_bytes(n: int | None, missing: str = "-") -> str:
    """`1234567` -> `"1.2 MB"` (decimal units, the stack's one byte unit: the summary, the trace list and the HTML
    Overview all print sizes with it); `missing` for None."""
    if n is None:
        return missing
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
