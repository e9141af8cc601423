#!/bin/bash
# Embedded Qwen-Image-style text-to-image with sequence parallelism (LightX2V's "parallel": {"seq_p_size": N,
# "seq_p_attn_type": "ulysses", "cfg_p_size": 1 or 2}): SEQ_P_SIZE ranks split the image tokens, with an all-to-all
# before and after every attention; CFG_P_SIZE=2 adds --cfg_parallel (the two CFG branches on two groups).
# SEQ_P_SIZE x CFG_P_SIZE processes: GPUs (NCCL), or CPU processes (gloo). Every rank profiles infer_main into one
# TensorBoard run directory; rank 0 writes the image. Extra arguments go to lightx2v.infer, e.g. a late rank:
#   scripts/qwen_image/qwen_image_t2i_seq_parallel.sh --late_rank 1 --late_ms 80 --late_steps 1,3
set -euo pipefail

lightx2v_path=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
save_results=${SAVE_RESULTS:-${lightx2v_path}/save_results}
preset=${PRESET:-tiny}
seq_p_size=${SEQ_P_SIZE:-2}
cfg_p_size=${CFG_P_SIZE:-1}
case "${cfg_p_size}" in
    1) cfg_parallel=() ;;
    2) cfg_parallel=(--cfg_parallel) ;;
    *) echo "error: CFG_P_SIZE must be 1 or 2, got ${cfg_p_size}" >&2; exit 2 ;;
esac

export PYTHONPATH=${lightx2v_path}${PYTHONPATH:+:${PYTHONPATH}}

# `python -m torch.distributed.run` is `torchrun`, without relying on the entry point being on PATH;
# --standalone: one node, a free rendezvous port (two jobs on one machine do not collide on 29500)
"${PYTHON:-python}" -m torch.distributed.run --standalone --nproc_per_node=$((seq_p_size * cfg_p_size)) -m lightx2v.infer \
    --model_cls qwen_image \
    --task t2i \
    --preset "${preset}" \
    --prompt 'A coffee shop entrance with a chalkboard sign reading "Qwen Coffee", neon light, cinematic composition.' \
    --seed 42 \
    --seq_p_size "${seq_p_size}" \
    --seq_p_attn_type ulysses \
    "${cfg_parallel[@]}" \
    --save_result_path "${save_results}/qwen_image_t2i.png" \
    --tb_dir "${save_results}/torch_profile" \
    --chrome_path "${save_results}/trace.json" \
    "$@"
