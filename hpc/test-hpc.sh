#!/bin/bash
# make test-hpc: prove examples/slurm_batch.sh on a real, one-node SLURM on this machine, then
# the dask-jobqueue route (workers submitted as SLURM jobs by dkernel --cluster <slurm yaml>).
#
# Needs root on Debian/Ubuntu (installs slurm-wlm and munge with apt when missing); skipped
# with a message elsewhere. Everything it starts (munged, slurmctld, slurmd) runs from a
# private folder with its own key, socket, ports, state and PID files, and is stopped by PID
# file when the script ends, also on failure or Ctrl-C. Nothing is written to /etc.
#
#   hpc/test-hpc.sh            # or: make test-hpc
#   KEEP=1 hpc/test-hpc.sh     # keep the work folder (logs, data, results) for a look
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
START=$(date +%s)
say() { echo "[test-hpc $(( $(date +%s) - START ))s] $*"; }

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test-hpc: skipped (needs root on Debian/Ubuntu to install and run slurm-wlm and munge)"
    exit 0
fi
[ -x "$PY" ] || { echo "test-hpc: no python at $PY (run make install first)" >&2; exit 1; }

need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]} with apt"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

W=$(mktemp -d /tmp/dkernel-hpc.XXXXXX)
chmod 755 "$W"
mkdir -p "$W/state" "$W/spool" "$W/munge" "$W/run" "$W/dask-config"
chmod 700 "$W/munge"

stop_daemons() {
    local rc=$?
    for name in slurmd slurmctld munged; do
        local pidfile=$W/$name.pid
        [ -s "$pidfile" ] || continue
        local pid
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -9 "$pid" 2>/dev/null || true
            say "stopped $name (pid $pid)"
        fi
    done
    if [ "$rc" != 0 ]; then
        for f in slurmctld.log slurmd.log; do
            [ -f "$W/$f" ] && { echo "--- tail of $f"; tail -n 15 "$W/$f"; }
        done
    fi
    if [ -z "${KEEP:-}" ] && [ "$rc" = 0 ]; then rm -rf "$W"; else say "work folder kept: $W"; fi
    say "exit $rc"
}
trap stop_daemons EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- munge: own key and socket
dd if=/dev/urandom of="$W/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$W/munge/munge.key"
munged --force --key-file="$W/munge/munge.key" --socket="$W/munge/munge.sock" \
    --pid-file="$W/munged.pid" --log-file="$W/munge/munged.log" --seed-file="$W/munge/seed"
for _ in $(seq 20); do [ -S "$W/munge/munge.sock" ] && break; sleep 0.5; done
munge -S "$W/munge/munge.sock" -n | unmunge -S "$W/munge/munge.sock" >/dev/null
say "munged up (pid $(cat "$W/munged.pid"))"

# ---------------------------------------------------------------- slurm.conf for localhost
read -r P1 P2 < <("$PY" - <<'EOF'
import socket

socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
# the machine's real CPUs and memory, as slurmd itself sees them
HW=$(slurmd -C | head -n 1 | sed 's/^NodeName=[^ ]* //')
cat >"$W/slurm.conf" <<EOF
ClusterName=dkernel-test
SlurmctldHost=localhost
SlurmctldPort=$P1
SlurmdPort=$P2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$W/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=60
SlurmdTimeout=60
NodeName=localhost NodeAddr=127.0.0.1 $HW State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$W/slurm.conf
say "slurm.conf: NodeName=localhost $HW, ports $P1/$P2"

slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N localhost
state=""
for _ in $(seq 60); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 1
done
[ "$state" = idle ] || { echo "test-hpc: node not idle (state '$state')" >&2; sinfo -R >&2 || true; exit 1; }
say "slurmctld (pid $(cat "$W/slurmctld.pid")) and slurmd (pid $(cat "$W/slurmd.pid")) up; node idle"

# ---------------------------------------------------------------- the user's data
"$PY" - "$W/run" <<'EOF'
import os
import sys

import numpy as np

from dkernel.data import make_checkerboard

out = sys.argv[1]
for name, n, seed in (("train", 20_000, 0), ("test", 5_000, 1)):
    X, y = make_checkerboard(n, random_state=seed)
    np.savetxt(os.path.join(out, f"{name}.csv"), np.column_stack([X, y]), delimiter=",",
               fmt=["%.6f", "%.6f", "%d"], header="x0,x1,label", comments="")
# three classes (blobs), in their own folder: the batch script's results go beside the data
os.makedirs(os.path.join(out, "three"), exist_ok=True)
centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
for name, n, seed in (("train", 6_000, 2), ("test", 2_000, 3)):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = centers[y] + rng.standard_normal((n, 2))
    np.savetxt(os.path.join(out, "three", f"{name}.csv"), np.column_stack([X, y]),
               delimiter=",", fmt=["%.6f", "%.6f", "%d"], header="x0,x1,label", comments="")
EOF
say "data: $W/run/train.csv (20000 rows), test.csv (5000 rows); three/ (3 classes)"

# ---------------------------------------------------------------- the batch job, as a user runs it
CPUS=$(echo "$HW" | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
NT=$(( CPUS < 2 ? 1 : 2 ))
cd "$ROOT"   # the submit folder: the job finds .venv/bin/python there (no dkernel on PATH)

# submit_batch DIR ARGS...: examples/slurm_batch.sh ARGS... as a user submits it, run in DIR;
# prints the job's output, whose path is left in OUT; stops the test unless the job succeeded
submit_batch() {
    local dir=$1
    shift
    set +e
    env -u VIRTUAL_ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DASK_CONFIG="$W/dask-config" \
        sbatch --wait --chdir="$dir" --output="$dir/job-%j.out" \
        --ntasks="$NT" --cpus-per-task=1 --mem=6G --time=15 \
        examples/slurm_batch.sh --interface lo --timeout 120 "$@"
    local rc=$?
    set -e
    OUT=$(find "$dir" -maxdepth 1 -name "job-*.out" | head -n 1)
    [ -n "$OUT" ] || { echo "test-hpc: sbatch exited $rc without a job output" >&2; exit 1; }
    echo "--- job output ($OUT)"
    cat "$OUT"
    echo "---"
    [ "$rc" = 0 ] || { echo "test-hpc: sbatch --wait exited $rc" >&2; exit 1; }
}

submit_batch "$W/run" --svm-args "--gamma 8" --kmeans-args "--max-iter 30 --batch-size 512" \
    "$W/run/train.csv" "$W/run/test.csv"

# ---------------------------------------------------------------- every step ran, with sane numbers
for step in "1/6 ingest" "2/6 kernel k-means" "3/6 budgeted SVM" "4/6 held-out evaluation" \
    "5/6 coreset" "6/6 summary" "workers up" "cluster stopped (exit 0)"; do
    grep -q "$step" "$OUT" || { echo "test-hpc: step '$step' missing from the job output" >&2; exit 1; }
done
"$PY" - "$W/run/train-results/results.json" "$NT" <<'EOF'
import json
import sys

r = json.load(open(sys.argv[1], encoding="utf-8"))
n_workers = int(sys.argv[2])
checks = {
    "ingest: 20000 x 2, labels -1/1": r["ingest"]["n_samples"] == 20000
    and r["ingest"]["n_features"] == 2 and r["ingest"]["classes"] == [-1, 1],
    "held-out store: 5000 rows": r["ingest-test"]["n_samples"] == 5000,
    "kmeans: 10 clusters, labels written": r["kmeans"]["n_clusters"] == 10
    and "labels" in r["info"]["arrays"] and r["info"]["arrays"]["labels"]["shape"] == [20000],
    "svm: support vectors within the budget": 0 < r["svm-train"]["n_support_vectors"] <= 500,
    "svm: held-out accuracy > 0.9 (chance 0.5)": r["svm-test"]["accuracy"] > 0.9,
    "svm: held-out set is the 5000 test rows": r["svm-test"]["n_samples"] == 5000,
    "coreset: 0 < rows <= 2000, weights ~ n": 0 < r["coreset"]["rows"] <= 2000
    and abs(r["coreset"]["total_weight"] / 20000 - 1) < 0.2,
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
print(json.dumps({"kmeans_ari": r["kmeans"].get("ari"), "svm_test_accuracy":
                  r["svm-test"]["accuracy"], "coreset_rows": r["coreset"]["rows"],
                  "t_over_n": r["coreset"]["t_over_n"]}))
sys.exit(0 if all(checks.values()) else 1)
EOF
grep -q "$NT workers up" "$OUT" || { echo "test-hpc: expected $NT workers" >&2; exit 1; }
say "batch job passed"

# ---------------------------------------------------------------- the batch job on 3 classes
submit_batch "$W/run/three" --clusters 3 --coreset-size 500 \
    --kmeans-args "--max-iter 30 --batch-size 512" "$W/run/three/train.csv" "$W/run/three/test.csv"
"$PY" - "$W/run/three/train-results/results.json" <<'EOF'
import json
import sys

r = json.load(open(sys.argv[1], encoding="utf-8"))
checks = {
    "3 classes: ingest labels 0/1/2": r["ingest"]["classes"] == [0, 1, 2],
    "3 classes: kmeans labels written": r["info"]["arrays"]["labels"]["shape"] == [6000],
    "3 classes: svm held-out accuracy > 0.8 (chance 0.33)": r["svm-test"]["accuracy"] > 0.8,
    "3 classes: one-vs-rest coreset of every class": r["coreset"]["multiclass"] == "ovr"
    and sorted(r["coreset"]["per_class"]) == ["0", "1", "2"]
    and all(0 < c["rows"] <= 500 for c in r["coreset"]["per_class"].values()),
}
for name, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
EOF
say "3-class batch job passed"

# ---------------------------------------------------------------- the dask-jobqueue route
# dkernel on the "login node" submits its workers as SLURM jobs (cluster-configs/slurm.yaml,
# sized to this node), and scores the held-out store with the batch job's model.
cat >"$W/jobqueue.yaml" <<EOF
cluster:
  kind: slurm
  options:
    queue: test
    cores: 1
    processes: 1
    memory: 2GB
    walltime: "00:10:00"
    interface: lo
    local_directory: $W/run
    log_directory: $W/run/dask-logs
  scale:
    jobs: $NT
  wait_for_workers: $NT
EOF
DASK_CONFIG="$W/dask-config" timeout 300 "$PY" -m dkernel --no-progress --cluster "$W/jobqueue.yaml" \
    svm predict "$W/run/train-results/svm-model.npz" "$W/run/test.zarr" --name jobqueue \
    --summary "$W/run/jobqueue.json" >/dev/null
DASK_CONFIG="$W/dask-config" timeout 300 "$PY" - "$W/jobqueue.yaml" <<'EOF'
import os
import sys

from dkernel.runtime import get_client


def settings():
    import numba

    return os.environ.get("NUMBA_NUM_THREADS"), numba.config.NUMBA_NUM_THREADS


client = get_client(sys.argv[1])
try:
    got = client.run(settings)
finally:
    cluster = client.cluster
    client.close()
    cluster.close()
ok = len(got) > 0 and all(v == ("1", 1) for v in got.values())
print(("ok   " if ok else "FAIL ") + f"jobqueue workers' NUMBA_NUM_THREADS: {sorted(got.values())}")
sys.exit(0 if ok else 1)
EOF
"$PY" - "$W/run/jobqueue.json" "$W/run/train-results/svm-test.json" <<'EOF'
import json
import sys

jq, batch = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
ok = jq["n_samples"] == 5000 and jq["accuracy"] == batch["accuracy"]
print(("ok   " if ok else "FAIL ") + f"jobqueue workers: held-out accuracy {jq['accuracy']} "
      f"(batch job: {batch['accuracy']})")
sys.exit(0 if ok else 1)
EOF
left=""
for _ in $(seq 30); do   # the client closed its cluster: the worker jobs are cancelled
    left=$(squeue -h -o %i)
    [ -z "$left" ] && break
    sleep 1
done
[ -z "$left" ] || { echo "test-hpc: worker jobs still queued: $left" >&2; exit 1; }
say "jobqueue route passed (worker jobs gone)"
say "PASS: slurm_batch.sh ran every step (binary and 3 classes) and jobqueue workers scored, on SLURM $(sinfo -V | cut -d' ' -f2)"
