#!/bin/bash
# Run dkernel on an HPC cluster inside ONE batch job: the job starts a Dask scheduler and
# workers with srun, and dkernel connects through cluster-configs/scheduler-file.yaml.
#
#   sbatch examples/slurm_batch.sh
#
# Why a scheduler file: the scheduler writes its address to a JSON file on a filesystem
# every node sees ($HOME here); workers and the dkernel client read it, so nothing needs a
# fixed host or port. Edit `scheduler_file:` in cluster-configs/scheduler-file.yaml if you
# change the path below. (cluster-configs/slurm.yaml is the other way: run dkernel on a
# login node and let dask-jobqueue submit one job per group of workers.)
#
#SBATCH --job-name=dkernel
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4          # Dask workers per node
#SBATCH --cpus-per-task=4            # threads per worker
#SBATCH --mem=64G
#SBATCH --time=01:00:00
#SBATCH --output=dkernel-%j.out

set -euo pipefail
# source .venv/bin/activate           # or: module load python; an env with dkernel[hpc]
SCHED_FILE="$HOME/dask-scheduler.json"
rm -f "$SCHED_FILE"
export NUMBA_NUM_THREADS=1            # numba must not oversubscribe the worker's threads
export OMP_NUM_THREADS=1

# 1 scheduler (on the first node), then one worker per task
srun --nodes=1 --ntasks=1 --cpus-per-task=1 dask scheduler --scheduler-file "$SCHED_FILE" &
while [ ! -f "$SCHED_FILE" ]; do sleep 1; done
srun dask worker --scheduler-file "$SCHED_FILE" --nthreads "$SLURM_CPUS_PER_TASK" \
     --memory-limit "$(( 64 / SLURM_NTASKS_PER_NODE ))GB" --local-directory "${TMPDIR:-/tmp}" &
sleep 10                              # let workers register

# the work: every dkernel command takes --cluster
dkernel --cluster cluster-configs/scheduler-file.yaml ingest data.npz data.zarr --overwrite
dkernel --cluster cluster-configs/scheduler-file.yaml info data.zarr
dkernel --cluster cluster-configs/scheduler-file.yaml demo --rows 10000000 --workdir "$PWD/demo-data"

kill %1 %2 || true                    # stop the scheduler and workers with the job
