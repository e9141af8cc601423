#!/usr/bin/env bash
# The GPU check in one command (see benchmarks/gpu_check.py): figures, traces and verdict.txt under $OUT
# (default: a new temp dir). CUDA when available, else the CPU mode. Needs torch; run from any directory.
#
#   bash benchmarks/gpu_check.sh [--device auto|cuda|cpu] [--out DIR] [--budget_s 480]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" "$repo/benchmarks/gpu_check.py" "$@"
