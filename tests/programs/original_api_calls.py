"""The same calls, written against LightX2V's original profiler API, for whichever module file argv[1] names.

Usage: python original_api_calls.py MODULE_FILE OUT_DIR. Prints the log, then one JSON line of what the calls
returned and which files they left (relative to OUT_DIR). tests/test_profiler_compat.py runs it against the
original's stand-in and against the drop-in, and compares.
"""

import importlib.util
import json
import logging
import os
import sys

import torch
import torch.profiler as tp

spec = importlib.util.spec_from_file_location("profiler_under_test", sys.argv[1])
mod = sys.modules["profiler_under_test"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = os.path.abspath(sys.argv[2])
os.chdir(out)
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
seen = {}

cfg = mod.TorchTraceProfileConfig(tb_dir=os.path.join(out, "tb"), wait=1, warmup=1, active=1)
seen["steps"] = cfg.steps
profiler = mod.TorchTraceProfiler(cfg)
seen["ran_before"] = profiler.ran
seen["claims"] = [profiler.try_claim("site"), profiler.try_claim("site"), profiler.try_claim("other")]
calls = []
seen["result"] = profiler.run(lambda: calls.append(torch.ones(8).sum().item()) or len(calls))
seen["calls"] = len(calls)
seen["ran_after"] = profiler.ran
seen["second_profiler_claims"] = mod.TorchTraceProfiler(cfg).try_claim("site")

own = mod.TorchTraceProfileConfig(tb_dir=os.path.join(out, "own"), wait=0, warmup=0, active=1)
with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1),
                on_trace_ready=mod.make_on_trace_ready(own)) as prof:
    for _ in range(2):
        torch.ones(8).sum()
        prof.step()

chrome = mod.TorchTraceProfileConfig(profile_format="chrome", chrome_path=os.path.join(out, "c", "trace.json"))
with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1),
                on_trace_ready=mod.make_on_trace_ready(chrome)) as prof:
    for _ in range(2):
        torch.ones(8).sum()
        prof.step()
seen["exported_chrome_path"] = os.path.relpath(chrome.exported_chrome_path, out)

mod.log_profile_start(cfg, "site")
mod.log_profile_done(cfg)
seen["files"] = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs
                       if ".capture" not in d.split(os.sep))
print(json.dumps(seen))
