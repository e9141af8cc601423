"""scripts/qwen_image/*.sh run from any cwd and put every output under SAVE_RESULTS."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, subprocess_env

SCRIPTS = REPO_ROOT / "scripts" / "qwen_image"


@pytest.mark.parametrize(
    "script, workers, parallel",  # parallel: (seq_p_size, cfg_p_size), LightX2V's parallel block the run reports
    [("qwen_image_t2i.sh", 1, (1, 1)), ("qwen_image_t2i_cfg_parallel.sh", 2, (1, 2)),
     ("qwen_image_t2i_seq_parallel.sh", 2, (2, 1))],
)
@pytest.mark.slow
def test_script_runs_and_writes_under_save_results(tmp_path, script, workers, parallel):
    results = tmp_path / "results"
    proc = subprocess.run(
        ["bash", str(SCRIPTS / script), "--height", "64", "--width", "64", "--infer_steps", "2"],
        cwd=tmp_path,  # not the checkout: paths must come from the script's own location
        env=subprocess_env(SAVE_RESULTS=str(results), PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gloo threads alive" not in proc.stderr  # the torchrun teardown freed its process group
    assert sorted(p.name for p in results.glob("qwen_image_t2i.*")) == [
        "qwen_image_t2i.json",
        "qwen_image_t2i.png",
        "qwen_image_t2i.pt",
    ]
    meta = json.loads((results / "qwen_image_t2i.json").read_text())
    assert (meta["parallel"]["seq_p_size"], meta["parallel"]["cfg_p_size"]) == parallel
    traces = list((results / "torch_profile").rglob("*.pt.trace.json"))
    assert len(traces) == workers and len({t.parent for t in traces}) == 1
    assert not (tmp_path / "save_results").exists()
