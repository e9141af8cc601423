#!/usr/bin/env bash
# GPU smoke test of the Docker stack, on a real NVIDIA host with the real CUDA base image.
#
#   bash docker/smoke-gpu.sh            # from the repository root; needs docker + NVIDIA Container Toolkit
#
# The same checks CI runs with a stand-in base (tests/docker_tests/test_docker_e2e.py), plus the GPU ones:
# build -> `compose up --wait` healthy -> nvidia-smi inside the container -> the default inference's trace
# lands in ./save_results/torch_profile, owned by the checkout's owner, with CUDA kernels in it, and is
# listed by TensorBoard on the published loopback port -> a capture through `compose exec` appears without
# a restart -> `compose down` stops cleanly. Prints the timings. Exit 0 only if every check passed.
#
# Environment: TB_PORT / TRACE_BROWSER_PORT (default 16016 / 9011, so a running stack on 16006 is not
# disturbed), BASE_IMAGE (build on another PyTorch image), SMOKE_PROJECT (compose project name,
# default lightx2v-smoke), SMOKE_KEEP=1 (leave the stack running for a look).
set -euo pipefail

cd "$(dirname "$0")/.."
export TB_PORT="${TB_PORT:-16016}" TRACE_BROWSER_PORT="${TRACE_BROWSER_PORT:-9011}"
project="${SMOKE_PROJECT:-lightx2v-smoke}"
service=lightx2v
exec_capture=(lightx2v-demo --preset tiny --infer_steps 2 --prompt "smoke exec capture")

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose=(docker-compose)
else
    fail "neither 'docker compose' nor 'docker-compose' found"
fi
dc() { "${compose[@]}" --project-name "$project" "$@"; }
in_container() { dc exec -T "$service" "$@"; }

# Run names from TensorBoard's plugin API, asked inside the container (python3 is there; the host may lack it).
runs() {
    in_container python3 -c "import json, urllib.request; print('\n'.join(json.load(urllib.request.urlopen(
        'http://127.0.0.1:16006/data/plugin/pytorch_profiler/runs', timeout=5))['runs']))" 2>/dev/null || true
}
host_port_answers() {
    if command -v curl >/dev/null; then
        curl -fsS -o /dev/null "http://127.0.0.1:$TB_PORT/data/plugin/pytorch_profiler/runs"
    else
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$TB_PORT/', timeout=5)"
    fi
}
newest_trace() { # trace files only: not the .summary.txt beside them, not the profiler's hidden temp names
    find save_results/torch_profile \( -name '*.pt.trace.json' -o -name '*.pt.trace.json.gz' \) ! -name '.*' \
        -newer "$1" 2>/dev/null | sort | tail -1
}
wait_trace() { # $1 marker file, $2 timeout s
    local deadline=$((SECONDS + $2)) trace=""
    while [ -z "$trace" ]; do
        [ $SECONDS -lt $deadline ] || fail "no new trace in save_results/torch_profile after $2 s"
        sleep 0.5
        trace=$(newest_trace "$1")
    done
    echo "$trace"
}
wait_listed() { # $1 run name
    local deadline=$((SECONDS + 60))
    until runs | grep -qxF "$1"; do
        [ $SECONDS -lt $deadline ] || fail "run $1 not listed by TensorBoard after 60 s"
        sleep 0.2
    done
}
has_kernels() { # the profiler writes JSON with ": " separators; gz traces are decompressed first
    case "$1" in
        *.gz) gzip -dc "$1" | grep -q '"cat": "kernel"' ;;
        *) grep -q '"cat": "kernel"' "$1" ;;
    esac
}

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "note: no nvidia-smi on the host (checked in the container below)"
owner=$(stat -c %u .)
mkdir -p save_results
marker=$(mktemp)
cleanup() {
    rm -f "$marker"
    if [ "${SMOKE_KEEP:-0}" != 1 ]; then dc down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

t=$(now)
dc build
build_s=$(since "$t")
ok "image built in $build_s s"

t=$(now)
dc up --detach --wait --wait-timeout 300 || { dc logs --no-color | tail -50; fail "compose up did not become healthy"; }
healthy_s=$(since "$t")
ok "compose up -> healthy in $healthy_s s"
host_port_answers || fail "TensorBoard does not answer on 127.0.0.1:$TB_PORT"
ok "TensorBoard answers on http://127.0.0.1:$TB_PORT/#pytorch_profiler"

in_container nvidia-smi -L || fail "nvidia-smi failed inside the container (NVIDIA Container Toolkit?)"
ok "nvidia-smi works inside the container"

trace=$(wait_trace "$marker" 600)
landed=$(now)
run=$(basename "$(dirname "$trace")")
wait_listed "$run"
ok "default inference trace $trace listed as run $run, $(since "$landed") s after it landed"
[ "$(stat -c %u "$trace")" = "$owner" ] || fail "$trace is owned by uid $(stat -c %u "$trace"), not $owner"
ok "trace owned by uid $owner, the checkout's owner"
has_kernels "$trace" || fail "no CUDA kernel events (\"cat\": \"kernel\") in $trace"
ok "CUDA kernels in the trace"

tb_pid=$(in_container lightx2v-supervisorctl pid tensorboard)
touch "$marker"
t=$(now)
in_container "${exec_capture[@]}" || fail "compose exec capture failed"
trace2=$(wait_trace "$marker" 120)
run2=$(basename "$(dirname "$trace2")")
wait_listed "$run2"
ok "compose exec capture listed as run $run2, $(since "$t") s after the command started"
[ "$(in_container lightx2v-supervisorctl pid tensorboard)" = "$tb_pid" ] \
    || fail "TensorBoard restarted during the exec capture"
[ "$(stat -c %u "$trace2")" = "$owner" ] || fail "$trace2 is not owned by uid $owner"
has_kernels "$trace2" || fail "no CUDA kernel events in $trace2"
ok "exec capture: same TensorBoard, owned by uid $owner, CUDA kernels present"

if [ "${SMOKE_KEEP:-0}" = 1 ]; then
    echo "SMOKE_KEEP=1: stack left running; stop it with: ${compose[*]} --project-name $project down"
    exit 0
fi
t=$(now)
dc down
down_s=$(since "$t")
[ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$project")" ] || fail "a container was left behind"
ok "compose down in $down_s s, no container left"

echo
echo "timings: build $build_s s | up -> healthy $healthy_s s | down $down_s s"
echo "PASS"
