"""A real CPU capture through the drop-in with profile_memory=True (and memory_snapshot=True: "CUDA only" here).

Usage: python tests/programs/memory_capture.py LOGDIR
Each call allocates 4 MB, then 8 MB, frees the 4 MB, then 2 MB (known sizes in a known order), in two ops under
`record_function`. Prints the trace's path.
"""

from __future__ import annotations

import sys

import torch

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

MB = 1_000_000


def step() -> torch.Tensor:
    with torch.profiler.record_function("load_weights"):
        a = torch.empty(4 * MB, dtype=torch.uint8)
        b = torch.empty(8 * MB, dtype=torch.uint8)
    del a
    with torch.profiler.record_function("decode"):
        c = torch.empty(2 * MB, dtype=torch.uint8)
    return b[:1] + c[:1]


def main() -> int:
    with TorchTraceProfileContext("memory_demo", tb_dir=sys.argv[1], wait=0, warmup=1, active=2, profile_memory=True,
                                  memory_snapshot=True) as profile:
        profile.run(step)
    capture = TorchTraceProfiler.last_capture()
    assert capture is not None and capture.trace_paths, capture
    print(capture.trace_paths[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
