"""The front page's screenshot (docs/img/timeline_h200.png), made from the project's own page: the trace browser's
offline Timeline of the H200 fixture's step, in Debian's headless Chromium with no internet.

`scripts/make_screenshot.py` writes it into docs/img; tests/test_readme_screenshot.py makes it again in a temporary
folder, so a page change that breaks it shows. Kept small (a 256-colour PNG: the page is flat colours) so the
repository does not grow by a photo at every refresh."""

from __future__ import annotations

import io
import shutil
import tempfile
from pathlib import Path

from conftest import H200_TRACE
from helpers.browser import chromium
from helpers.procs import trace_browser, wait_until

WIDTH, HEIGHT = 1280, 900
MAX_BYTES = 150_000
# As a capture lands: <results>/torch_profile/<time>_<label>/rank<R>_<host>.pt.trace.json.gz
TRACE = Path("torch_profile", "20261201-120000_infer_main", "rank0_h200.pt.trace.json.gz")


def _small_png(png: bytes, height: int) -> bytes:
    """The screenshot's top `height` CSS pixels with a 256-colour palette (the page's flat colours survive)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    image = image.crop((0, 0, image.width, min(image.height, height)))
    image = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def take(out: Path, timeout: float = 120) -> Path:
    """Serve a results folder holding the H200 fixture, open its Timeline at step 0, wait until the step is drawn,
    and write the page down to the viewer's selection panel as a PNG to `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "save_results"
        (root / TRACE).parent.mkdir(parents=True)
        shutil.copyfile(H200_TRACE, root / TRACE)
        with trace_browser(root) as (_, port), chromium(offline=True, width=WIDTH, height=HEIGHT) as driver:
            driver.get(f"http://127.0.0.1:{port}/timeline/{TRACE.as_posix()}?step=0")
            state = wait_until(lambda: driver.execute_script(
                "const t = window.lightx2vTimeline; return t && (t.state === 'failed' ? 'failed' :"
                " t.state === 'drawn' && 'drawn');"), timeout, interval=0.2, what="the Timeline's step drawn")
            assert state == "drawn", driver.execute_script("return window.lightx2vTimeline.error")
            # the tracks, without the empty selection panel below them (the viewer's analysis view)
            tracks_end = driver.execute_script(
                "const panel = document.querySelector('tr-ui-a-analysis-view');"
                " return panel ? Math.floor(panel.getBoundingClientRect().top) : window.innerHeight;")
            png = _small_png(driver.get_screenshot_as_png(), tracks_end)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return out
