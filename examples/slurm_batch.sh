#!/bin/bash
# dkernel on SLURM in ONE batch job: a Dask scheduler and one worker per task started with
# srun, then the real work on your data: ingest, kernel k-means, a budgeted SVM with a held-out
# evaluation and an SVM coreset. Results land beside the store.
#
#   sbatch examples/slurm_batch.sh [options] TRAIN [TEST]
#
#   TRAIN   .csv/.tsv, LIBSVM text or .npz (X, y and optionally X_test, y_test)
#   TEST    optional held-out file of the same kind (scored by the trained SVM)
#
# Options (after the script name):
#   --interface IFACE    network interface for scheduler and workers (ib0, eth0, lo, ...)
#   --timeout SEC        how long to wait for the scheduler and the workers (default 300)
#   --clusters K         kernel k-means clusters (default 10)
#   --budget B           SVM support-vector budget (default 500)
#   --coreset-size M     coreset draws (default 2000)
#   --svm-args "..."     extra options of `dkernel svm train` (e.g. "--gamma 8")
#   --kmeans-args "..."  extra options of `dkernel kmeans`
#   --coreset-args "..." extra options of `dkernel coreset`
#
# Everything is sized by the allocation: one Dask worker per task (SLURM_NTASKS), with
# SLURM_CPUS_PER_TASK threads and its share of SLURM_MEM_PER_NODE (or SLURM_MEM_PER_CPU);
# change the #SBATCH lines or pass sbatch options (sbatch --ntasks=8 --mem=32G ...).
# Both srun steps use --overlap: since Slurm 20.11 a step holds its CPUs exclusively, and the
# workers would otherwise wait behind the scheduler's step forever.
#
# Python: $DKERNEL_PYTHON, else the active virtualenv, else .venv/ of the folder you submitted
# from, else python3. dkernel and dask are called as `python -m ...` so nothing needs to be
# on PATH on the compute nodes. (The other route, cluster-configs/slurm.yaml, runs dkernel on
# a login node and lets dask-jobqueue submit the workers as jobs.)
#
#SBATCH --job-name=dkernel
#SBATCH --nodes=1
#SBATCH --ntasks=2                 # Dask workers
#SBATCH --cpus-per-task=1          # threads per worker
#SBATCH --mem=4G                   # per node; the workers share it
#SBATCH --time=01:00:00
#SBATCH --output=dkernel-%j.out

set -euo pipefail

INTERFACE=""
TIMEOUT=300
CLUSTERS=10
BUDGET=500
CORESET_SIZE=2000
SVM_ARGS=""
KMEANS_ARGS=""
CORESET_ARGS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --interface) INTERFACE=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --clusters) CLUSTERS=$2; shift 2 ;;
        --budget) BUDGET=$2; shift 2 ;;
        --coreset-size) CORESET_SIZE=$2; shift 2 ;;
        --svm-args) SVM_ARGS=$2; shift 2 ;;
        --kmeans-args) KMEANS_ARGS=$2; shift 2 ;;
        --coreset-args) CORESET_ARGS=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#SBATCH/ {exit} NR > 1' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) echo "slurm_batch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: sbatch slurm_batch.sh [options] TRAIN [TEST]  (see --help)" >&2
    exit 2
fi
TRAIN=$(realpath "$1")
TEST=${2:+$(realpath "$2")}
[ -f "$TRAIN" ] || { echo "slurm_batch.sh: no file $TRAIN" >&2; exit 2; }
[ -z "$TEST" ] || [ -f "$TEST" ] || { echo "slurm_batch.sh: no file $TEST" >&2; exit 2; }

log() { echo "[$(date +%H:%M:%S)] dkernel-job: $*"; }

# ---------------------------------------------------------------- python and dkernel
SUBMIT_DIR=${SLURM_SUBMIT_DIR:-$PWD}
if [ -n "${DKERNEL_PYTHON:-}" ]; then PY=$DKERNEL_PYTHON
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then PY=$VIRTUAL_ENV/bin/python
elif [ -x "$SUBMIT_DIR/.venv/bin/python" ]; then PY=$SUBMIT_DIR/.venv/bin/python
else PY=$(command -v python3)
fi
if command -v dkernel >/dev/null 2>&1 && [ -z "${DKERNEL_PYTHON:-}" ]; then
    DKERNEL=(dkernel)
else
    DKERNEL=("$PY" -m dkernel)
fi
"$PY" -c "import dkernel, distributed" || {
    echo "slurm_batch.sh: $PY cannot import dkernel and distributed" >&2; exit 2; }

# ---------------------------------------------------------------- sizing from the allocation
NTASKS=${SLURM_NTASKS:-1}
NNODES=${SLURM_JOB_NUM_NODES:-1}
THREADS=${SLURM_CPUS_PER_TASK:-1}
PER_NODE=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-$(( (NTASKS + NNODES - 1) / NNODES ))}}
PER_NODE=${PER_NODE%%[(,]*}                      # "2(x3)" or "2,1" -> 2
if [ -n "${SLURM_MEM_PER_NODE:-}" ]; then        # MB for the node, shared by its workers
    MEM_MB=$(( SLURM_MEM_PER_NODE * 9 / 10 / PER_NODE ))
elif [ -n "${SLURM_MEM_PER_CPU:-}" ]; then       # MB per CPU
    MEM_MB=$(( SLURM_MEM_PER_CPU * THREADS * 9 / 10 ))
else
    MEM_MB=""
fi
MEMORY_LIMIT=${MEM_MB:+${MEM_MB}MB}
MEMORY_LIMIT=${MEMORY_LIMIT:-auto}
# numba and BLAS must not start their own threads on top of Dask's (the embedded default)
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# ---------------------------------------------------------------- where things go
DATA_DIR=$(dirname "$TRAIN")
NAME=$(basename "${TRAIN%.*}")
STORE=$DATA_DIR/$NAME.zarr
RESULTS=$DATA_DIR/$NAME-results
JOB_DIR=$RESULTS/job-${SLURM_JOB_ID:-$$}        # on the shared filesystem: workers read it
mkdir -p "$JOB_DIR"
SCHED_FILE=$JOB_DIR/scheduler.json
CLUSTER_CFG=$JOB_DIR/cluster.yaml
printf 'cluster:\n  kind: scheduler-file\n  scheduler_file: %s\n' "$SCHED_FILE" >"$CLUSTER_CFG"
IFACE_OPT=()
if [ -n "$INTERFACE" ]; then IFACE_OPT=(--interface "$INTERFACE"); fi

log "python $PY; $NTASKS worker(s) x $THREADS thread(s), memory limit $MEMORY_LIMIT each"
log "data $TRAIN${TEST:+, held out $TEST}; results in $RESULTS"

# ---------------------------------------------------------------- the Dask cluster
PIDS=()
shutdown() {
    local rc=$?
    if [ -s "$SCHED_FILE" ]; then   # a clean stop: the scheduler tells the workers to close
        timeout 60 "$PY" - "$SCHED_FILE" <<'EOF' || true
import sys
from distributed import Client

with Client(scheduler_file=sys.argv[1], timeout="20s") as client:
    client.shutdown()  # the scheduler closes the workers (their nannies exit, no restart)
EOF
    fi
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    log "cluster stopped (exit $rc)"
}
trap shutdown EXIT

srun --overlap --nodes=1 --ntasks=1 --cpus-per-task=1 \
    "$PY" -m dask scheduler --scheduler-file "$SCHED_FILE" "${IFACE_OPT[@]}" \
    --port 0 --dashboard-address :0 \
    >"$JOB_DIR/scheduler.log" 2>&1 &
PIDS+=($!)
for _ in $(seq "$TIMEOUT"); do
    [ -s "$SCHED_FILE" ] && break
    kill -0 "${PIDS[0]}" 2>/dev/null || { echo "scheduler died:" >&2; cat "$JOB_DIR/scheduler.log" >&2; exit 1; }
    sleep 1
done
[ -s "$SCHED_FILE" ] || { echo "no scheduler file after ${TIMEOUT}s" >&2; exit 1; }
log "scheduler up ($SCHED_FILE)"

srun --overlap --ntasks="$NTASKS" --cpus-per-task="$THREADS" \
    "$PY" -m dask worker --scheduler-file "$SCHED_FILE" "${IFACE_OPT[@]}" \
    --nthreads "$THREADS" --memory-limit "$MEMORY_LIMIT" --preload dkernel.runtime._plugins \
    --local-directory "${TMPDIR:-/tmp}" >"$JOB_DIR/workers.log" 2>&1 &
PIDS+=($!)

"$PY" - "$SCHED_FILE" "$NTASKS" "$TIMEOUT" <<'EOF'
import sys
from distributed import Client

sched_file, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with Client(scheduler_file=sched_file, timeout="60s") as client:
    client.wait_for_workers(n, timeout=timeout)  # raises TimeoutError after `timeout` s
    print(f"{len(client.scheduler_info()['workers'])} workers up; dashboard {client.dashboard_link}")
EOF
log "workers up"

# ---------------------------------------------------------------- the job on your data
dk() { "${DKERNEL[@]}" --no-progress "$@"; }
dkc() { "${DKERNEL[@]}" --no-progress --cluster "$CLUSTER_CFG" "$@"; }

log "1/6 ingest"
dk ingest "$TRAIN" "$STORE" --overwrite >"$RESULTS/ingest.json"
if [ -n "$TEST" ]; then
    TEST_STORE=$DATA_DIR/$(basename "${TEST%.*}").zarr
    dk ingest "$TEST" "$TEST_STORE" --overwrite >"$RESULTS/ingest-test.json"
fi

log "2/6 kernel k-means"
# shellcheck disable=SC2086  # the *_ARGS are word lists
dkc kmeans "$STORE" --n-clusters "$CLUSTERS" --summary "$RESULTS/kmeans.json" $KMEANS_ARGS >/dev/null

log "3/6 budgeted SVM"
# shellcheck disable=SC2086
dkc svm train "$STORE" "$RESULTS/svm-model.npz" --budget "$BUDGET" \
    --summary "$RESULTS/svm-train.json" $SVM_ARGS >/dev/null

log "4/6 held-out evaluation"
if [ -n "$TEST" ]; then
    dkc svm predict "$RESULTS/svm-model.npz" "$TEST_STORE" \
        --summary "$RESULTS/svm-test.json" >/dev/null
else
    echo "  (no TEST file: the held-out score is the train summary's test_accuracy, when the" \
        "data had X_test/y_test)"
fi

log "5/6 coreset"
# shellcheck disable=SC2086
dkc coreset "$STORE" "$DATA_DIR/$NAME-coreset.zarr" --size "$CORESET_SIZE" --overwrite \
    --summary "$RESULTS/coreset.json" $CORESET_ARGS >/dev/null

log "6/6 summary"
dk info "$STORE" >"$RESULTS/info.json"
"$PY" - "$RESULTS" <<'EOF'
import json
import os
import sys

results = sys.argv[1]
out = {}
for name in ("ingest", "ingest-test", "info", "kmeans", "svm-train", "svm-test", "coreset"):
    path = os.path.join(results, name + ".json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        out[name] = json.loads(text[text.index("{"):])
with open(os.path.join(results, "results.json"), "w", encoding="utf-8") as fh:
    json.dump(out, fh, indent=2)
test = out.get("svm-test", {}).get("accuracy", out["svm-train"].get("test_accuracy"))
print("kmeans ARI:", out["kmeans"].get("ari"), "| svm held-out accuracy:", test,
      "| coreset rows:", out["coreset"].get("rows"))
EOF
log "done: $RESULTS/results.json"
