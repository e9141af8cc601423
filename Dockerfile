# LightX2V trace profiling: embedded inference + TensorBoard (PyTorch Profiler plugin) under supervisord.
#
#   docker compose up --build        # then open http://127.0.0.1:16006/#pytorch_profiler
#
# BASE_IMAGE contract: `python3` with pip, and `torch` importable. Nothing else is assumed (no apt, no
# conda), so any CUDA PyTorch image works, e.g. LightX2V's own images:
#   docker build --build-arg BASE_IMAGE=<a LightX2V image tag> -t lightx2v-profiling .
# See docs/docker.md.
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime
FROM ${BASE_IMAGE}

# Defaults for everything docker/supervisord.conf and its programs read; compose.yaml overrides some.
# TENSORBOARD_PORT / TRACE_BROWSER_PORT are the listen ports inside the container;
# LIGHTX2V_TENSORBOARD_PORT is the port printed in hints (compose passes the host port there).
# supervisord's socket and pid file go to /tmp, writable by whichever user the entrypoint picks.
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LIGHTX2V_SUPERVISOR_RUN_DIR=/tmp \
    TENSORBOARD_PORT=16006 \
    LIGHTX2V_TENSORBOARD_PORT=16006 \
    TRACE_BROWSER_PORT=9001 \
    LIGHTX2V_RESULTS_DIR=/workspace/LightX2V/save_results \
    LIGHTX2V_INFER_CMD=

# `lightx2v` starts as a second name for root (uid 0) so that docker/entrypoint.sh can read the owner of the
# mounted save_results folder; the entrypoint then re-points the name to that uid:gid and drops to it.
# `docker compose exec` resolves the name again, so exec'd commands also write files the host user owns.
RUN echo 'lightx2v:x:0:0:owner of save_results (set at start):/home/lightx2v:/bin/sh' >> /etc/passwd \
 && mkdir -p /home/lightx2v

WORKDIR /workspace/LightX2V

# Dependencies before the source: this layer changes only with pyproject.toml, so a code change rebuilds
# in seconds. The editable install points at /workspace/LightX2V/lightx2v, which the next COPY fills.
# The constraint pins torch to the base's own build: pip fails loudly rather than replace a CUDA torch.
COPY pyproject.toml ./
RUN mkdir lightx2v && touch README.md lightx2v/__init__.py \
 && python3 -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" > /tmp/base-torch.txt \
 && python3 -m pip install --no-cache-dir --constraint /tmp/base-torch.txt --editable ".[serve]" \
 && rm /tmp/base-torch.txt

COPY . .

EXPOSE 16006 9001

HEALTHCHECK --interval=5s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/data/plugin/pytorch_profiler/runs' % os.environ['TENSORBOARD_PORT'], timeout=4)"]

# A name, not a number, on purpose: it must resolve through the container's /etc/passwd (see above).
# hadolint ignore=DL3066
USER lightx2v
ENTRYPOINT ["/bin/sh", "/workspace/LightX2V/docker/entrypoint.sh"]
CMD ["supervisord", "--configuration", "/workspace/LightX2V/docker/supervisord.conf"]
