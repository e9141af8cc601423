#!/usr/bin/env bash
# Fetch the pure-Python wheels that gpu_check's TensorBoard step needs on the H200 machine (which has no
# registry, Python 3.12, tensorboard's own dependencies, but no torch-tb-profiler) into .whl/ of the checkout
# (ignored by git); name .whl in the device run's `carry`. benchmarks/gpu_check.sh installs each one only where
# the machine lacks that package or has an older version.
#
#   bash benchmarks/gpu_check_wheels.sh [NAME==VERSION ...]   # default: torch-tb-profiler==0.4.3 tensorboard==2.21.0
set -euo pipefail
cd "$(dirname "$0")/.."
pins=("$@")
((${#pins[@]})) || pins=(torch-tb-profiler==0.4.3 tensorboard==2.21.0)
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 -d .whl "${pins[@]}"
ls -l .whl
