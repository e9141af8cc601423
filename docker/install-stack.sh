#!/bin/sh
# Build steps of the image's viewer stack, kept out of the base interpreter (see docs/docker.md, "Where the
# stack lives"). Two phases, so that a code change rebuilds in seconds:
#   install-stack.sh dependencies PYPROJECT   the venv and every dependency (changes with pyproject.toml only)
#   install-stack.sh package                  this project from $home/src, non-editable, into that venv
# Layout: $home/venv   the stack's interpreter (tensorboard, torch-tb-profiler, supervisor, this project; no torch)
#         $home/demo-deps  what the embedded demo needs beside the base image's torch, if the base lacks it
#         $home/src    this project's source (also the demo's import root)
#         $home/bin    the commands (docker/stack-command under several names)
# The base image's python3 is only read, never installed into.
set -eu
home=${LIGHTX2V_STACK_HOME:-/opt/lightx2v-profiling}
venv=$home/venv
pip="$venv/bin/python -m pip"

make_venv() {
    if python3 -m venv "$venv" >/dev/null 2>&1; then
        return
    fi
    # Debian/Ubuntu pythons without python3-venv have no ensurepip: make the venv bare and let the base's
    # pip (>= 22.3 has --python) put a pip into it.
    rm -rf "$venv"
    python3 -m venv --without-pip "$venv"
    python3 -m pip --python "$venv/bin/python" install pip
}

case "${1:-}" in
    dependencies)
        pyproject=$2
        make_venv
        $pip install "setuptools>=68" packaging
        # The project's own metadata, from a stub package: the requirement lists come from pyproject.toml.
        stub=$(mktemp -d)
        cp "$pyproject" "$stub/pyproject.toml"
        mkdir "$stub/lightx2v"
        touch "$stub/lightx2v/__init__.py" "$stub/README.md"
        $pip install --no-deps --no-build-isolation "$stub"
        "$venv/bin/python" "$(dirname "$0")/stack_requirements.py" "$stub/stack.txt" "$stub/demo.txt"
        $pip uninstall --yes lightx2v-trace-profiling
        $pip install --requirement "$stub/stack.txt"
        if [ -s "$stub/demo.txt" ]; then
            # Same python version as the base's (the venv is made from it), so these wheels load there.
            $pip install --no-deps --target "$home/demo-deps" --requirement "$stub/demo.txt"
        fi
        mkdir -p "$home/demo-deps"
        rm -rf "$stub"
        ;;
    package)
        $pip install --no-deps --no-build-isolation "$home/src"
        rm -rf "$home/src/build" "$home/src"/*.egg-info
        mkdir -p "$home/bin"
        for name in lightx2v-stack-python lightx2v-tensorboard lightx2v-trace-browser lightx2v-trace-summary \
            lightx2v-install-profiler lightx2v-capture lightx2v-supervisorctl lightx2v-demo lightx2v-assets; do
            ln -sf ../src/docker/stack-command "$home/bin/$name"
        done
        # Fail the build here rather than at start: the stack imports, and the demo finds what it needs.
        "$home/bin/lightx2v-stack-python" -c "import lightx2v.tensorboard, lightx2v.trace_browser, lightx2v.trace_summary, lightx2v.capture, supervisor, torch_tb_profiler"
        # Where the offline views' polyfill is (or, when the assets stage could not fetch it, would be).
        "$home/bin/lightx2v-stack-python" -m lightx2v.assets status || true
        (cd / && PYTHONPATH="$home/src:$home/demo-deps" python3 -c "import PIL, tqdm, torch")
        ;;
    *)
        echo "usage: install-stack.sh dependencies PYPROJECT | package" >&2
        exit 2 ;;
esac
