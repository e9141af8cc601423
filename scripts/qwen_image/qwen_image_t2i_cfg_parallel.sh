#!/bin/bash
# Embedded Qwen-Image-style text-to-image on 2 processes (2 GPUs, or 2 CPU processes with gloo): the
# conditional and unconditional CFG branches run on separate ranks. Every rank profiles infer_main into one
# TensorBoard run directory; rank 0 writes the image. Extra arguments go to lightx2v.infer.
set -euo pipefail

lightx2v_path=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
save_results=${SAVE_RESULTS:-${lightx2v_path}/save_results}
preset=${PRESET:-tiny}

export PYTHONPATH=${lightx2v_path}${PYTHONPATH:+:${PYTHONPATH}}

# `python -m torch.distributed.run` is `torchrun`, without relying on the entry point being on PATH;
# --standalone: one node, a free rendezvous port (two jobs on one machine do not collide on 29500)
"${PYTHON:-python}" -m torch.distributed.run --standalone --nproc_per_node=2 -m lightx2v.infer \
    --model_cls qwen_image \
    --task t2i \
    --preset "${preset}" \
    --prompt 'A coffee shop entrance with a chalkboard sign reading "Qwen Coffee", neon light, cinematic composition.' \
    --seed 42 \
    --cfg_parallel \
    --save_result_path "${save_results}/qwen_image_t2i.png" \
    --tb_dir "${save_results}/torch_profile" \
    --chrome_path "${save_results}/trace.json" \
    "$@"
