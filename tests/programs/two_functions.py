"""A user's own small inference script with two functions, profiled through the drop-in, on the CPU.

Usage: python two_functions.py OUT_DIR [--active N] [--double-matmul] [--with-stack] [--profile-memory]
Captures ``denoise_step`` (wait 1, warmup 1, active N; 8 blocks of ``attention`` then ``mlp``) into
OUT_DIR/<run>/ and prints the trace's path. ``--double-matmul`` is the one change between two captures: ``mlp``
computes its matmul twice (sized so the MLP's matmul is most of a step, and a step's own noise small).
``--with-stack`` / ``--profile-memory``: the profiler's switches of the same names (Python frames, allocations).
"""

import argparse
import sys

import torch

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext

torch.manual_seed(0)
torch.set_num_threads(1)
BLOCKS = 8
W_Q = torch.randn(256, 64) / 16
W_UP = torch.randn(256, 512) / 16


def attention(x: torch.Tensor) -> torch.Tensor:
    q = x @ W_Q
    return torch.softmax(q @ q.T / 8.0, dim=-1) @ x


def mlp(x: torch.Tensor, double: bool) -> torch.Tensor:
    h = torch.mm(x, W_UP)
    if double:
        h = torch.mm(x, W_UP)  # the change under test: the same GEMM computed twice
    return torch.relu(h)[:, :256]


def denoise_step(x: torch.Tensor, double: bool) -> torch.Tensor:
    for _ in range(BLOCKS):
        x = x + mlp(attention(x), double)
    return x


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--active", type=int, default=5)
    parser.add_argument("--double-matmul", action="store_true")
    parser.add_argument("--with-stack", action="store_true")
    parser.add_argument("--profile-memory", action="store_true")
    args = parser.parse_args()
    x = torch.randn(512, 256)
    profile = TorchTraceProfileContext("denoise_step", tb_dir=args.out, wait=1, warmup=1, active=args.active,
                                       with_stack=args.with_stack, profile_memory=args.profile_memory)
    profile.run(denoise_step, x, args.double_matmul)
    return 0


if __name__ == "__main__":
    sys.exit(main())
