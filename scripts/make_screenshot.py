#!/usr/bin/env python3
"""Make the front page's screenshot again: docs/img/timeline_h200.png, the trace browser's offline Timeline of
the H200 fixture in headless Chromium (tests/helpers/screenshot.py; needs chromium, chromium-driver, selenium and
the offline views' polyfill: scripts/install_test_deps.sh, python -m lightx2v.assets install).

    python3 scripts/make_screenshot.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "docs" / "img" / "timeline_h200.png"


def main(argv: list[str]) -> int:
    sys.path[:0] = [str(REPO_ROOT / "tests"), str(REPO_ROOT)]  # the tests' helpers, this checkout's lightx2v
    from helpers.screenshot import MAX_BYTES, take

    out = take(Path(argv[0]) if argv else DEFAULT_OUT)
    size = out.stat().st_size
    print(f"{out}: {size} bytes")
    return 0 if size <= MAX_BYTES else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
