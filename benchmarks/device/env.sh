# shellcheck shell=bash
# Sourced from the checkout's root by benchmarks/device/scaling.sh, or by hand before any
# other benchmark on a bare machine (DEVELOPERS.md):
#
#   . benchmarks/device/env.sh && "$PY" benchmarks/replay.py --store-dir "$STORES" ...
#
# Makes $PY (PYTHON, else python3) import dkernel, Dask and zarr: where Dask or zarr is
# missing, installs the wheels of benchmarks/device/wheels.sh (.whl/) into /tmp/dkernel-site;
# puts the checkout on PYTHONPATH, a fresh DASK_CONFIG, and STORES (where the stores go).
PY=${PYTHON:-python3}
if ! "$PY" -c "import dask, distributed, zarr" 2>/dev/null; then
    if ! ls .whl/*.whl >/dev/null 2>&1; then
        echo "device: Dask or zarr is missing and .whl/ has no wheels (run benchmarks/device/wheels.sh first, where pip works)" >&2
        return 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/dkernel-site .whl/*.whl || return 1
    export PYTHONPATH=/tmp/dkernel-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DASK_CONFIG=$(mktemp -d)
STORES=/tmp/dkernel-bench-data
export PY DASK_CONFIG STORES
