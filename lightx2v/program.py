"""How a command names itself in its usage line: as the user typed it, so the line can be copied.

    argparse.ArgumentParser(prog=program("lightx2v.trace_summary"))

Each command runs as a console script (``lightx2v-trace-summary``, pyproject's ``[project.scripts]``, the image's
names) or as ``python -m lightx2v.trace_summary``; ``sys.argv[0]`` tells which.
"""

from __future__ import annotations

import os
import sys


def program(module: str) -> str:
    """The console script's name when this process is one (``lightx2v-...``), else ``python -m <module>``."""
    typed = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return typed if typed.startswith("lightx2v-") else f"python -m {module}"


def whole_lines() -> None:
    """Write each line of stdout and stderr in one write, still at once (line buffering).

    Under ``python -u`` / ``PYTHONUNBUFFERED`` (the stack sets it, so that logs are not held back) ``print(x)``
    writes ``x`` and its newline separately, and supervisord, which passes its programs' output on as it reads it,
    can put another program's line between the two. Call it first thing in a program the stack runs."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True, write_through=False)  # type: ignore[union-attr]
        except (AttributeError, ValueError):  # not a TextIOWrapper (replaced by the caller), or closed
            pass
