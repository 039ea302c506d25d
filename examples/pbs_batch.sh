#!/bin/bash
# dkernel on PBS (PBS Pro, OpenPBS, Torque) in ONE batch job: the twin of slurm_batch.sh.
# A Dask scheduler and the workers start inside the job, then the real work on your data:
# ingest, kernel k-means, a budgeted SVM with a held-out evaluation and an SVM coreset.
# Results land beside the store.
#
#   qsub -v TRAIN=$PWD/train.csv,TEST=$PWD/test.csv examples/pbs_batch.sh
#   qsub -F "--interface ib0 $PWD/train.csv" examples/pbs_batch.sh         (Torque)
#   qsub -- /bin/bash examples/pbs_batch.sh --interface ib0 train.csv     (PBS Pro)
#
#   TRAIN   .csv/.tsv, LIBSVM text or .npz (X, y and optionally X_test, y_test)
#   TEST    optional held-out file of the same kind (scored by the trained SVM)
#
# Options (or the environment variables in brackets, for qsub -v):
#   --interface IFACE    network interface for scheduler and workers [DKERNEL_INTERFACE]
#   --timeout SEC        how long to wait for the scheduler and the workers (default 300)
#   --threads T          threads per Dask worker (default 1) [DKERNEL_THREADS]
#   --clusters K         kernel k-means clusters (default 10)
#   --budget B           SVM support-vector budget (default 500)
#   --coreset-size M     coreset draws (default 2000)
#   --svm-args "..."     extra options of `dkernel svm train` (e.g. "--gamma 8")
#   --kmeans-args "..."  extra options of `dkernel kmeans`
#   --coreset-args "..." extra options of `dkernel coreset`
#
# Sized by the allocation: the job's CPUs ($PBS_NP on Torque, $NCPUS on PBS Pro, else the
# lines of $PBS_NODEFILE) become CPUs / T workers of T threads, spread over the job's hosts,
# each with its share of the job's memory (Resource_List.mem from qstat -f; else Dask's
# "auto"). Workers on other hosts start with pbsdsh (or ssh where pbsdsh is missing).
#
# Python: $DKERNEL_PYTHON, else the active virtualenv, else .venv/ of the folder you submitted
# from, else python3; dkernel and dask are called as `python -m ...` (nothing on PATH needed).
#
#PBS -N dkernel
#PBS -l select=1:ncpus=2:mem=4gb
#PBS -l walltime=01:00:00
#PBS -j oe

set -euo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

INTERFACE=${DKERNEL_INTERFACE:-}
TIMEOUT=300
THREADS=${DKERNEL_THREADS:-1}
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
        --threads) THREADS=$2; shift 2 ;;
        --clusters) CLUSTERS=$2; shift 2 ;;
        --budget) BUDGET=$2; shift 2 ;;
        --coreset-size) CORESET_SIZE=$2; shift 2 ;;
        --svm-args) SVM_ARGS=$2; shift 2 ;;
        --kmeans-args) KMEANS_ARGS=$2; shift 2 ;;
        --coreset-args) CORESET_ARGS=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#PBS/ {exit} NR > 1' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) echo "pbs_batch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -eq 0 ] && [ -n "${TRAIN:-}" ]; then set -- "$TRAIN" ${TEST:+"$TEST"}; fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: pbs_batch.sh [options] TRAIN [TEST]  (or qsub -v TRAIN=...,TEST=...)" >&2
    exit 2
fi
TRAIN=$(realpath "$1")
TEST=${2:+$(realpath "$2")}
[ -f "$TRAIN" ] || { echo "pbs_batch.sh: no file $TRAIN" >&2; exit 2; }
[ -z "$TEST" ] || [ -f "$TEST" ] || { echo "pbs_batch.sh: no file $TEST" >&2; exit 2; }

log() { echo "[$(date +%H:%M:%S)] dkernel-job: $*"; }

# ---------------------------------------------------------------- python and dkernel
SUBMIT_DIR=${PBS_O_WORKDIR:-$PWD}
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
if [ -n "${PBS_NODEFILE:-}" ] && [ -s "$PBS_NODEFILE" ]; then
    mapfile -t HOSTS < <(awk '!seen[$0]++' "$PBS_NODEFILE")
    NODEFILE_CPUS=$(wc -l <"$PBS_NODEFILE")
else
    HOSTS=("$(hostname)")
    NODEFILE_CPUS=$(nproc)
fi
CPUS=${PBS_NP:-${NCPUS:-$NODEFILE_CPUS}}
if [ -z "${PBS_NP:-}" ] && [ -n "${NCPUS:-}" ]; then CPUS=$(( NCPUS * ${#HOSTS[@]} )); fi
NTASKS=$(( CPUS / THREADS > 0 ? CPUS / THREADS : 1 ))
PER_HOST=$(( (NTASKS + ${#HOSTS[@]} - 1) / ${#HOSTS[@]} ))
NTASKS=$(( PER_HOST * ${#HOSTS[@]} ))
MEM_MB=""
if [ -n "${PBS_JOBID:-}" ] && command -v qstat >/dev/null 2>&1; then
    mem=$(qstat -f "$PBS_JOBID" 2>/dev/null | sed -n 's/^ *Resource_List.mem = //p' | head -n 1)
    case "$mem" in   # PBS sizes: 4gb, 4096mb, 4194304kb
        *tb) MEM_MB=$(( ${mem%tb} * 1024 * 1024 )) ;;
        *gb) MEM_MB=$(( ${mem%gb} * 1024 )) ;;
        *mb) MEM_MB=${mem%mb} ;;
        *kb) MEM_MB=$(( ${mem%kb} / 1024 )) ;;
    esac
fi
if [ -n "$MEM_MB" ]; then MEM_MB=$(( MEM_MB * 9 / 10 / NTASKS )); fi
MEMORY_LIMIT=${MEM_MB:+${MEM_MB}MB}
MEMORY_LIMIT=${MEMORY_LIMIT:-auto}
# numba and BLAS must not start their own threads on top of Dask's (the embedded default)
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# ---------------------------------------------------------------- where things go
DATA_DIR=$(dirname "$TRAIN")
NAME=$(basename "${TRAIN%.*}")
STORE=$DATA_DIR/$NAME.zarr
RESULTS=$DATA_DIR/$NAME-results
JOB_DIR=$RESULTS/job-${PBS_JOBID:-$$}        # on the shared filesystem: workers read it
mkdir -p "$JOB_DIR"
SCHED_FILE=$JOB_DIR/scheduler.json
CLUSTER_CFG=$JOB_DIR/cluster.yaml
printf 'cluster:\n  kind: scheduler-file\n  scheduler_file: %s\n' "$SCHED_FILE" >"$CLUSTER_CFG"
IFACE_OPT=()
if [ -n "$INTERFACE" ]; then IFACE_OPT=(--interface "$INTERFACE"); fi

log "python $PY; $NTASKS worker(s) x $THREADS thread(s) on ${#HOSTS[@]} host(s), memory limit $MEMORY_LIMIT each"
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

"$PY" -m dask scheduler --scheduler-file "$SCHED_FILE" "${IFACE_OPT[@]}" \
    --port 0 --dashboard-address :0 >"$JOB_DIR/scheduler.log" 2>&1 &
PIDS+=($!)
for _ in $(seq "$TIMEOUT"); do
    [ -s "$SCHED_FILE" ] && break
    kill -0 "${PIDS[0]}" 2>/dev/null || { echo "scheduler died:" >&2; cat "$JOB_DIR/scheduler.log" >&2; exit 1; }
    sleep 1
done
[ -s "$SCHED_FILE" ] || { echo "no scheduler file after ${TIMEOUT}s" >&2; exit 1; }
log "scheduler up ($SCHED_FILE)"

WORKER=("$PY" -m dask worker --scheduler-file "$SCHED_FILE" "${IFACE_OPT[@]}"
    --nworkers "$PER_HOST" --nthreads "$THREADS" --memory-limit "$MEMORY_LIMIT"
    --preload dkernel.runtime._plugins --local-directory "${TMPDIR:-/tmp}")
for i in "${!HOSTS[@]}"; do
    if [ "$i" = 0 ]; then   # this host: the job's first
        "${WORKER[@]}" >"$JOB_DIR/workers-0.log" 2>&1 &
    else
        env_cmd="cd $(printf %q "$PWD") && export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 && exec"
        remote="$env_cmd $(printf '%q ' "${WORKER[@]}")"
        if command -v pbsdsh >/dev/null 2>&1; then
            idx=$(grep -n -m 1 -x -F "${HOSTS[$i]}" "$PBS_NODEFILE" | cut -d: -f1)
            pbsdsh -n "$(( idx - 1 ))" -- /bin/bash -c "$remote" >"$JOB_DIR/workers-$i.log" 2>&1 &
        else
            # shellcheck disable=SC2029  # expanded here on purpose: the command to run there
            ssh "${HOSTS[$i]}" "$remote" >"$JOB_DIR/workers-$i.log" 2>&1 &
        fi
    fi
    PIDS+=($!)
done

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
