#!/usr/bin/env bash
# The GPU check in one command (see benchmarks/gpu_check.py): figures, traces and verdict.txt under $OUT
# (default: a new temp dir). CUDA when available, else the CPU mode. Needs torch; run from any directory.
#
#   bash benchmarks/gpu_check.sh [--device auto|cuda|cpu] [--out DIR] [--work DIR] [--steps 1,2,3,4,5,6]
#
# Wheels for a machine without a registry: *.whl in $GPU_CHECK_WHEELS (default .whl/ of the checkout, made by
# benchmarks/gpu_check_wheels.sh) are installed first into a temp folder put on PYTHONPATH, each only where the
# package is missing or older than the wheel. Nothing else is installed; missing tools make their step SKIP.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
wheels="${GPU_CHECK_WHEELS:-$repo/.whl}"
extra=""
if compgen -G "$wheels/*.whl" >/dev/null; then
    picks=()
    for whl in "$wheels"/*.whl; do
        base="$(basename "$whl")"
        # NAME-VERSION-...whl; installed at that version or newer: keep the machine's own
        if ! "$py" -c '
import sys
from importlib import metadata
name, wanted = sys.argv[1], sys.argv[2]
num = lambda v: tuple(int(p) for p in v.split("+")[0].split(".")[:3] if p.isdigit())
try:
    sys.exit(0 if num(metadata.version(name)) >= num(wanted) else 1)
except metadata.PackageNotFoundError:
    sys.exit(1)' "$(cut -d- -f1 <<<"$base")" "$(cut -d- -f2 <<<"$base")"; then
            picks+=("$whl")
        fi
    done
    if ((${#picks[@]})); then
        extra="$(mktemp -d -t gpu_check_site.XXXXXX)"
        PIP_ROOT_USER_ACTION=ignore "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target "$extra" "${picks[@]}"
        echo "gpu_check.sh: installed into $extra: ${picks[*]##*/}"
    fi
fi
export PYTHONPATH="$repo${extra:+:$extra}${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" "$repo/benchmarks/gpu_check.py" "$@"
