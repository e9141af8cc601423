"""A long-running process, like a server handling request after request: a new profiler context per call.

Usage: long_running.py CONTROL_DIR [FIRST_CALLS]
Runs FIRST_CALLS calls (the first is captured), prints "READY", waits for CONTROL_DIR/go, then calls on (at least
300 more) until CONTROL_DIR/stop exists, and prints "DONE runs=<run() calls> targets=<target calls>".
The logdir comes from $LIGHTX2V_TORCH_PROFILE_DIR.
"""

import os
import sys
import time

import torch

import lightx2v.utils.torch_trace_profiler as profiler_module
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

control = sys.argv[1]
first_calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
targets = 0
x = torch.randn(32, 32)


def handle_request(x: torch.Tensor) -> torch.Tensor:
    global targets
    targets += 1
    return torch.relu(x @ x)


def serve_one() -> None:
    with TorchTraceProfileContext("handle_request") as profile:
        profile.run(handle_request, x)


def wait_for(name: str) -> None:
    while not os.path.exists(os.path.join(control, name)):
        time.sleep(0.05)  # a request queue that is empty for a while


runs = 0
for _ in range(first_calls):
    serve_one()
    runs += 1
print(f"READY runs={runs} captures={TorchTraceProfiler.capture_status()['captures']} "
      f"module={profiler_module.__file__}", flush=True)
wait_for("go")
while runs < first_calls + 300 or not os.path.exists(os.path.join(control, "stop")):
    serve_one()
    runs += 1
print(f"DONE runs={runs} targets={targets} captures={TorchTraceProfiler.capture_status()['captures']}", flush=True)
