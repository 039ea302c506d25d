#!/usr/bin/env bash
# The scaling protocol (benchmarks/scaling.py) on a bare 16-core machine, in one command:
# installs the wheels of benchmarks/device/wheels.sh (.whl/) when Dask or zarr is missing,
# puts this checkout on PYTHONPATH, writes the stores under /tmp and the results under $OUT
# (else benchmarks/results/device/): scaling.json (the committed runs, with this machine's
# run added under "<cores>cores"), scaling.md and the log. The JSON is written after every
# worker count, so a run cut short keeps what it measured. DEVELOPERS.md says how to run it
# and what to commit.
#
#   bash benchmarks/device/scaling.sh                       # --workers 1,14,8,4,2
#   bash benchmarks/device/scaling.sh --workers 1,14 --repeat 3
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
out=${OUT:-$repo/benchmarks/results/device}
py=${PYTHON:-python3}

if ! "$py" -c "import dask, distributed, zarr" 2>/dev/null; then
    ls .whl/*.whl >/dev/null 2>&1 || {
        echo "scaling: Dask or zarr is missing and .whl/ has no wheels (run benchmarks/device/wheels.sh here first)" >&2
        exit 2
    }
    site=/tmp/dkernel-site
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" .whl/*.whl
    export PYTHONPATH="$site"
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DASK_CONFIG=$(mktemp -d)
export DASK_CONFIG

mkdir -p "$out"
# the new run is added to the committed runs, so scaling.md shows them side by side; a
# second call starts from the first one's results when they were copied back into
# benchmarks/results/device/ (that folder is not ignored, so it travels)
seed=benchmarks/results/scaling.json
[ ! -e benchmarks/results/device/scaling.json ] || seed=benchmarks/results/device/scaling.json
[ -e "$out/scaling.json" ] || cp "$seed" "$out/scaling.json"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--workers "1,14,8,4,2")
echo "scaling: $(nproc) cores, $("$py" --version 2>&1), $(date -u +%FT%TZ)" | tee "$out/scaling.log"
"$py" benchmarks/scaling.py --out "$out" --store-dir /tmp/dkernel-bench-data "${args[@]}" 2>&1 \
    | tee -a "$out/scaling.log"
