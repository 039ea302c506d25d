#!/bin/sh
# The mount half of a test "host": run as
#   ip netns exec NS unshare --mount --propagation private -- sh sandbox.sh CMD ARGS...
# In the fresh mount namespace every mount is made read-only (the code and the venv stay
# readable), and private tmpfs instances cover /tmp, /var/tmp and /dev/shm: what the process
# writes there no other process can see, and it can write nowhere else. The process then
# replaces this shell (exec), so its PID and process group are the ones the harness started.
set -eu

# Compiled numba kernels from a folder the harness filled on one host (as an image would ship
# them): each host starts from its own copy instead of compiling for half a minute. The folder
# is opened now, as it lies under /tmp, which is about to be covered.
seeded=""
if [ -n "${DKT_NUMBA_SEED:-}" ] && [ -d "$DKT_NUMBA_SEED" ]; then
    exec 3<"$DKT_NUMBA_SEED"
    seeded=1
fi

# The code and the interpreter's environment must stay readable. When they lie under one of
# the folders about to be covered (a checkout under /tmp, as CI may make), they are opened now
# and bound back, read-only, at the same path once the tmpfs is in place.
repo=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$(cd "$(dirname "$1")/.." 2>/dev/null && pwd || echo "")
kept=""
fd=5
for p in "$repo" "$prefix"; do
    case $p in
        /tmp/* | /var/tmp/* | /dev/shm/*) ;;
        *) continue ;;
    esac
    case $p in "$repo"/*) [ "$p" != "$repo" ] && continue ;; esac
    eval "exec $fd<\"\$p\""
    kept="$kept $fd:$p"
    fd=$((fd + 1))
done

# Mount points with spaces are written \040 in /proc/self/mounts; none are expected here.
awk '{print $2}' /proc/self/mounts | sort -u | while read -r mp; do
    case $mp in
        /proc | /proc/* | /sys | /sys/*) continue ;;
    esac
    mount -o remount,bind,ro "$mp" 2>/dev/null ||
        echo "sandbox: could not make $mp read-only" >&2
done
for d in /tmp /var/tmp /dev/shm; do
    [ -d "$d" ] && mount -t tmpfs -o mode=1777,size=1g tmpfs "$d"
done
for entry in $kept; do
    n=${entry%%:*}
    p=${entry#*:}
    mkdir -p "$p"
    mount --no-canonicalize --bind "/proc/self/fd/$n" "$p"
    mount -o remount,bind,ro "$p"
    eval "exec $n<&-"
done
# The root must now refuse writes; a host that could write to it would share a disk.
if touch /.dkt-sandbox-probe 2>/dev/null; then
    rm -f /.dkt-sandbox-probe
    echo "sandbox: / is still writable" >&2
    exit 97
fi

export HOME=/tmp/home TMPDIR=/tmp XDG_CACHE_HOME=/tmp/cache DASK_CONFIG=/tmp/dask-config
export NUMBA_CACHE_DIR=/tmp/numba-cache
mkdir -p "$HOME" "$XDG_CACHE_HOME" "$DASK_CONFIG" "$NUMBA_CACHE_DIR"
if [ -n "$seeded" ]; then
    cp -R /proc/self/fd/3/. "$NUMBA_CACHE_DIR/"
    exec 3<&-
fi
cd /tmp
exec "$@"
