#!/bin/sh
# The `inference` program of docker/supervisord.conf: what runs once when the stack starts, in the working
# directory (in the image: /workspace/LightX2V, where the checkout is mounted).
#   LIGHTX2V_INFERENCE=0       nothing
#   LIGHTX2V_INFER_CMD=...     that command, run by sh, e.g. "bash scripts/qwen_image/qwen_image_t2i_2512.sh"
#   a LightX2V checkout here   nothing: run its scripts yourself (`docker compose exec lightx2v bash`)
#   otherwise                  the embedded demo (this project's tiny Qwen-Image-style run, profiled); in the
#                              image on the base python3 (it has torch) with $LIGHTX2V_DEMO_PYTHONPATH, for
#                              this command only
set -eu

case "${LIGHTX2V_INFERENCE:-1}" in
    0 | false | off | no)
        echo "inference: disabled (LIGHTX2V_INFERENCE=$LIGHTX2V_INFERENCE)"
        exit 0 ;;
esac

if [ -n "${LIGHTX2V_INFER_CMD:-}" ]; then
    echo "inference: $LIGHTX2V_INFER_CMD (in $(pwd))"
    exec sh -c "$LIGHTX2V_INFER_CMD"
fi

# This project is a LightX2V-style checkout too (compose.yaml mounts it when LIGHTX2V_PATH is unset); only
# someone else's `lightx2v` package means "the user's checkout".
if [ -d lightx2v ] && ! grep -qs '^name = "lightx2v-trace-profiling"' pyproject.toml; then
    echo "inference: nothing at start: $(pwd) holds your LightX2V checkout. Run a script yourself" \
        "(docker compose exec lightx2v bash, then e.g. bash scripts/qwen_image/<script>.sh) or set" \
        "LIGHTX2V_INFER_CMD; each capture appears in TensorBoard within seconds."
    exit 0
fi

if [ -n "${LIGHTX2V_DEMO_PYTHONPATH:-}" ]; then
    PYTHONPATH="$LIGHTX2V_DEMO_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
    export PYTHONPATH
fi
results=${LIGHTX2V_RESULTS_DIR:-save_results}
exec "${LIGHTX2V_PYTHON:-python3}" -m lightx2v.infer --model_cls qwen_image --task t2i --preset tiny --profile \
    --save_result_path "$results/qwen_image_t2i.png"
