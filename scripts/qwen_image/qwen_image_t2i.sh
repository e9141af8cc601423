#!/bin/bash
# Embedded Qwen-Image-style text-to-image, one process, profiled at infer_main (synthetic weights).
# Extra arguments go to lightx2v.infer, e.g.:  PRESET=small scripts/qwen_image/qwen_image_t2i.sh --with_stack
# (--attention math for the before/after pair: docs/compare.md;
#  --profile_memory [--memory_snapshot] for where the memory goes: docs/memory.md)
set -euo pipefail

# paths relative to this script; outputs under the checkout's save_results/ unless SAVE_RESULTS is set
lightx2v_path=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
save_results=${SAVE_RESULTS:-${lightx2v_path}/save_results}
preset=${PRESET:-tiny}

export PYTHONPATH=${lightx2v_path}${PYTHONPATH:+:${PYTHONPATH}}

"${PYTHON:-python}" -m lightx2v.infer \
    --model_cls qwen_image \
    --task t2i \
    --preset "${preset}" \
    --prompt 'A coffee shop entrance with a chalkboard sign reading "Qwen Coffee", neon light, cinematic composition.' \
    --seed 42 \
    --save_result_path "${save_results}/qwen_image_t2i.png" \
    --tb_dir "${save_results}/torch_profile" \
    --chrome_path "${save_results}/trace.json" \
    "$@"
