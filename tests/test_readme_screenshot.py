"""The front page's screenshot can be made again from the project's own page (scripts/make_screenshot.py): the
trace browser's offline Timeline of the H200 fixture, drawn in headless Chromium, cropped to its tracks and small
enough to commit."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from lightx2v.assets import INSTALL_COMMAND, WEBCOMPONENTS, find

from conftest import REPO_ROOT, subprocess_env
from helpers.screenshot import MAX_BYTES, WIDTH

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_script_makes_the_timeline_screenshot_again(tmp_path):
    assert find(WEBCOMPONENTS), f"the offline views' polyfill is not installed: run `{INSTALL_COMMAND}`"
    out = tmp_path / "timeline.png"
    made = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_screenshot.py"), str(out)],
                          capture_output=True, text=True, timeout=300, env=subprocess_env())
    assert made.returncode == 0, made.stdout + made.stderr
    from PIL import Image

    png = out.read_bytes()
    assert len(png) <= MAX_BYTES
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.width == WIDTH and image.height >= 300, (image.size, image.format)
    # drawn: the tracks' many colours (kernels, ops), not a blank page or an error message
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or []) >= 40
