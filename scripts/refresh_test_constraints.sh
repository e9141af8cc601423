#!/usr/bin/env bash
# Re-resolves the versions the tests run with: a new virtual environment takes the newest releases pip finds today
# for `.[serve,test]`, and their exact versions become scripts/test-constraints.txt, which
# scripts/install_test_deps.sh (and so CI) installs with. A new release of a test tool therefore reaches CI only
# through a commit of that file: run this, then the suite (`CI=true python3 -m pytest`), and commit it if green.
# Torch is left out: it is the user's own build (.ci/run installs its CPU wheel first).
set -euo pipefail
cd "$(dirname "$0")/.."
torch_version=$(sed -n 's/^python3 -m pip install -q torch==\([0-9.]*\)$/\1/p' .ci/run)
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "torch==${torch_version:?not found in .ci/run}" -e '.[serve,test]'
{
    echo "# Exact versions of what \`pip install -e '.[serve,test]'\` resolved on $(date -u +%Y-%m-%d) (Python"
    echo "# $("$venv/bin/python" -c 'import platform; print(platform.python_version())')); written by scripts/refresh_test_constraints.sh, read by scripts/install_test_deps.sh."
    "$venv/bin/pip" freeze --exclude-editable | grep -vE '^(torch|triton|nvidia-[a-z0-9-]+)=='
} > scripts/test-constraints.txt
echo "refresh_test_constraints: $(grep -vc '^#' scripts/test-constraints.txt) pins written to scripts/test-constraints.txt"
