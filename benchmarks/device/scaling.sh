#!/usr/bin/env bash
# The scaling protocol (benchmarks/scaling.py) on a bare 16-core machine, in one command:
# the environment of benchmarks/device/env.sh (the wheels of wheels.sh where Dask or zarr is
# missing, this checkout on PYTHONPATH), the stores under /tmp, the results under $OUT
# (else benchmarks/results/device/): scaling.json (the committed runs, with this machine's
# run added under "<cores>cores"), scaling.md and the log. The JSON is written after every
# worker count, so a run cut short keeps what it measured. DEVELOPERS.md says how to run it
# and what to commit.
#
#   bash benchmarks/device/scaling.sh                       # --workers 1,14,8,4,2
#   bash benchmarks/device/scaling.sh --workers 1,14 --repeat 3
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/benchmarks/results/device}
# shellcheck source=benchmarks/device/env.sh
. benchmarks/device/env.sh

mkdir -p "$out"
# the new run is added to the committed runs, so scaling.md shows them side by side; a
# second call starts from the first one's results when they were copied back into
# benchmarks/results/device/ (that folder is not ignored, so it travels)
seed=benchmarks/results/scaling.json
[ ! -e benchmarks/results/device/scaling.json ] || seed=benchmarks/results/device/scaling.json
[ -e "$out/scaling.json" ] || cp "$seed" "$out/scaling.json"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--workers "1,14,8,4,2")
echo "scaling: $(nproc) cores, $("$PY" --version 2>&1), $(date -u +%FT%TZ)" | tee "$out/scaling.log"
"$PY" benchmarks/scaling.py --out "$out" --store-dir "$STORES" "${args[@]}" 2>&1 \
    | tee -a "$out/scaling.log"
