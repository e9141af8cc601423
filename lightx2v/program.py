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
