#!/usr/bin/env bash
# Installs what the test suite drives for real: the project with its serving stack and test tools (pip), the
# offline views' browser files (npm, by package name), and headless Chromium plus a Docker engine with
# debootstrap, rsync (the multi-node gather command) and ssh (the README's port-forward line, read by `ssh -G`)
# (Debian/Ubuntu packages, needs root).
# The Python packages' versions are pinned in scripts/test-constraints.txt. Idempotent; safe to re-run. Torch
# itself is not installed here: bring your own build (CPU or CUDA). The Docker tests make their stand-in base with
# a wheel of that same torch version, which they fetch themselves with `pip download` through this machine's pip
# configuration (tests/docker_tests/engine.py).
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(chromium chromium-driver docker.io debootstrap iptables rsync openssh-client)
missing=()
for pkg in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "install_test_deps: need root to apt-get install ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# exact versions from scripts/test-constraints.txt: a new release of a test tool cannot change what CI runs until
# scripts/refresh_test_constraints.sh writes it there and the suite passes with it
python3 -m pip install -q -c scripts/test-constraints.txt -e '.[serve,test]'
# the offline views' browser files (npm package, pinned, verified; never committed): see lightx2v/assets
python3 -m lightx2v.assets install
