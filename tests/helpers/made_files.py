"""Files made by hand in a temporary folder, for the fast tests of what reads a results folder (the summary's
discovery, the trace browser's file rules)."""

from __future__ import annotations

import os
from pathlib import Path

CHROME = '{"schemaVersion": 1, "traceEvents": []}'  # the smallest chrome trace torch.profiler writes


def put(path: Path, text: str = CHROME, mtime: float | None = None) -> Path:
    """Write ``text`` at ``path`` (its folders made), its modification time set to ``mtime`` when given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path
