"""A stand-in for a user's LightX2V checkout, written by the tests: what the stack must serve untouched.

Like LightX2V it has its own package named `lightx2v` (no `docker/` folder, nothing of this project but,
optionally, the fixed profiler module), a runner that makes a new `TorchTraceProfileContext` at every step
(as LightX2V's runners do at `infer_main`), and `scripts/` that follow LightX2V's conventions: they set
`lightx2v_path`, source `scripts/base/base.sh` (which exports `PYTHONPATH=${lightx2v_path}:$PYTHONPATH`) and
run `python -m lightx2v.infer`, from whatever directory the user is in.

`profiler="original"` writes a module that behaves like LightX2V's own (ModelTC/LightX2V,
lightx2v/utils/torch_trace_profiler.py): `tb_dir` defaults to `{cwd}/save_results/torch_profile`, is handed
straight to `tensorboard_trace_handler`, and the once-per-process flag is kept per object, so every new
context captures again and adds one more `{host}_{pid}.{ns}.pt.trace.json` to the logdir itself.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from .stack import REPO_ROOT

STEPS = 3  # denoising steps of the stand-in runner: one context each

PACKAGE_INIT = '"""Stand-in for LightX2V\'s own package (same name as this project\'s)."""\nCHECKOUT_MARKER = "user"\n'

INFER = '''\
"""Stand-in for LightX2V's `python -m lightx2v.infer`: parses its usual flags, runs the runner."""
import argparse
import os

import lightx2v
from lightx2v.models.runners.default_runner import DefaultRunner

p = argparse.ArgumentParser()
p.add_argument("--model_cls", required=True)
p.add_argument("--task", required=True)
p.add_argument("--config_json", default=None)
p.add_argument("--infer_steps", type=int, default={steps})
p.add_argument("--save_result_path", required=True)
args = p.parse_args()
assert lightx2v.CHECKOUT_MARKER == "user", "imported the wrong lightx2v"
print(f"stand-in LightX2V: {{lightx2v.__file__}} from cwd {{os.getcwd()}}", flush=True)
DefaultRunner(args.infer_steps).run_pipeline()
os.makedirs(os.path.dirname(args.save_result_path), exist_ok=True)
with open(args.save_result_path, "w") as f:
    f.write("done\\n")
'''

RUNNER = '''\
"""Stand-in runner: a new profiling context at every denoising step, as LightX2V's runner at infer_main."""
import torch

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext


class DefaultRunner:
    def __init__(self, steps):
        self.steps = steps
        self.weight = torch.randn(64, 64)

    def infer(self, latents):
        return torch.tanh(latents @ self.weight)

    def run_pipeline(self):
        latents = torch.randn(64, 64)
        for _ in range(self.steps):
            with TorchTraceProfileContext("infer_main") as profile:
                latents = profile.run(self.infer, latents)
        return latents
'''

ORIGINAL_PROFILER = '''\
"""Behaves like LightX2V's original torch_trace_profiler.py (written for the tests, not copied)."""
import os


class TorchTraceProfileContext:
    def __init__(self, name=None, *, profile_format="tensorboard", tb_dir=None, chrome_path=None, wait=1,
                 warmup=3, active=1, with_stack=False, tensorboard_port=16006):
        self.name = name
        self.tb_dir = os.path.abspath(tb_dir or os.path.join(os.getcwd(), "save_results", "torch_profile"))
        self.schedule = (wait, warmup, active)
        self._session_done = False  # on the object: every new context profiles again

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, func, *args, **kwargs):
        if self._session_done:
            return func(*args, **kwargs)
        import torch.profiler as tp

        os.makedirs(self.tb_dir, exist_ok=True)
        wait, warmup, active = self.schedule
        with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(
                wait=wait, warmup=warmup, active=active, repeat=1),
                on_trace_ready=tp.tensorboard_trace_handler(self.tb_dir)) as prof:
            for _ in range(wait + warmup + active):
                result = func(*args, **kwargs)
                prof.step()
        self._session_done = True
        print(f"[Profile] torch trace export finished. TensorBoard logdir: {self.tb_dir}", flush=True)
        return result
'''

BASE_SH = '''\
#!/bin/bash
if [ -z "${lightx2v_path}" ]; then
    echo "Error: lightx2v_path is not set. Please set this variable first."
    exit 1
fi
export PYTHONPATH=${lightx2v_path}:$PYTHONPATH
'''

SCRIPT = '''\
#!/bin/bash
# set path firstly
export lightx2v_path={lightx2v_path}

# set environment variables
source ${{lightx2v_path}}/scripts/base/base.sh

python -m lightx2v.infer \\
    --model_cls qwen_image \\
    --task t2i \\
    --save_result_path ${{lightx2v_path}}/save_results/standin_t2i.txt
'''


def write_checkout(root: Path, lightx2v_path: str, profiler: str, uid: int, gid: int, git: bool = False) -> Path:
    """A stand-in LightX2V checkout at `root` whose script says `lightx2v_path=<lightx2v_path>` (where it is
    mounted in the container); `profiler` is "fixed" (this project's module) or "original"."""
    files = {
        "lightx2v/__init__.py": PACKAGE_INIT,
        "lightx2v/infer.py": INFER.format(steps=STEPS),
        "lightx2v/models/__init__.py": "",
        "lightx2v/models/runners/__init__.py": "",
        "lightx2v/models/runners/default_runner.py": RUNNER,
        "lightx2v/utils/__init__.py": "",
        "lightx2v/utils/torch_trace_profiler.py": (
            ORIGINAL_PROFILER if profiler == "original"
            else (REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py").read_text()),
        "scripts/base/base.sh": BASE_SH,
        "scripts/qwen_image/qwen_image_t2i_standin.sh": SCRIPT.format(lightx2v_path=lightx2v_path),
        "pyproject.toml": '[project]\nname = "lightx2v"\nversion = "0.0.0"\n',
        ".gitignore": "__pycache__/\nsave_results/\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if rel.endswith(".py") else text)
    if git:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t"}
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "stand-in LightX2V"]):
            subprocess.run(["git", "-C", str(root), *cmd], check=True, env=env, capture_output=True)
    for path in [root, *root.rglob("*")]:
        os.lchown(path, uid, gid)
    return root
