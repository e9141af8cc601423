#!/bin/sh
# Run the container's command as the owner of the mounted checkout's results folder, so every trace, image
# and log written to the host's <checkout>/save_results belongs to the host user -- with no UID to export.
#
# Who is "the owner":
#   1. the owner of $LIGHTX2V_RESULTS_DIR (<checkout>/save_results), when it exists and is not root's;
#   2. otherwise the owner of the checkout mounted at /workspace/LightX2V ($LIGHTX2V_CHECKOUT): the folder is
#      made (or, if root-owned, handed over recursively, which also repairs files an older root container
#      left there) for that owner;
#   3. if both are root (rootless Docker or Podman map the host user to root; nothing mounted; a root-owned
#      checkout), stay root: files then appear on the host as that user.
# The image's user `lightx2v` starts as uid 0; it is re-pointed here to the owner, so `docker compose exec`
# (which resolves the name at exec time) runs as the owner too. Dropping privileges uses python3, the one
# thing the base image contract guarantees (no gosu, su-exec or setpriv needed).
set -eu

checkout="${LIGHTX2V_CHECKOUT:-/workspace/LightX2V}"
results="${LIGHTX2V_RESULTS_DIR:-$checkout/save_results}"
name=lightx2v
stack_home="${LIGHTX2V_STACK_HOME:-/opt/lightx2v-profiling}"
# The offline views' asset folder (lightx2v.assets); empty when the build could not fetch the polyfill.
assets="$stack_home/venv/share/lightx2v/assets"

# One line in the log when the build could not fetch the polyfill: what is missing, the command that adds it.
"$stack_home/bin/lightx2v-stack-python" -m lightx2v.assets status --quiet || true

if [ "$(id -u)" != 0 ]; then
    # Started with an explicit --user, or the container was restarted (`compose stop` + `up`,
    # `compose restart`) after the name was re-pointed: already the owner. The runtime (runc) hands the
    # new log pipes to this user itself, so supervisord can reopen /dev/stdout.
    exec "$@"
fi

owner=0:0
if [ -d "$results" ]; then
    owner=$(stat -c %u:%g "$results")
fi
if [ "$owner" = 0:0 ] && [ -d "$checkout" ]; then
    checkout_owner=$(stat -c %u:%g "$checkout")
    if [ "$checkout_owner" != 0:0 ]; then
        mkdir -p "$results"
        chown -R "$checkout_owner" "$results"
        owner=$checkout_owner
    fi
fi
mkdir -p "$results"
uid=${owner%:*}
gid=${owner#*:}

if [ "$uid" = 0 ]; then
    echo "entrypoint: $results is owned by root; running as root" >&2
    exec "$@"
fi

sed -i "s|^$name:[^:]*:[0-9]*:[0-9]*:|$name:x:$uid:$gid:|" /etc/passwd
home="/home/$name"
mkdir -p "$home"
chown "$uid:$gid" "$home"
# ... and the asset folder, so that `lightx2v-assets install` through `docker compose exec` can add a missing one
# (the servers serve only files matching their pinned sha256, whoever wrote them).
if [ -d "$assets" ]; then
    chown "$uid:$gid" "$assets"
fi
# supervisord reopens /dev/stdout and /dev/stderr for program logs, and Docker made these pipes (or the tty)
# for root, 0600: hand them to the owner too, or supervisord fails with EACCES "making dispatchers".
for fd in 1 2; do
    if [ -p "/proc/self/fd/$fd" ] || [ -t "$fd" ]; then
        chown "$uid:$gid" "/proc/self/fd/$fd"
    fi
done
export HOME="$home" USER="$name" LOGNAME="$name"
echo "entrypoint: running as uid $uid gid $gid, the owner of $results" >&2
exec python3 -I -c '
import os, sys
uid, gid, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    print(f"entrypoint: cannot run {argv[0]!r}: {exc.strerror}", file=sys.stderr)
    sys.exit(127)
' "$uid" "$gid" "$@"
