#!/usr/bin/env bash
# Download, here, the wheels a bare 16-core test machine lacks for the scaling protocol
# (DEVELOPERS.md, "On a bare machine lent for a few minutes"): it has Python 3.12 with numpy,
# numba, scikit-learn, scipy, pyyaml, fsspec, cloudpickle, toolz, msgpack, psutil and tqdm,
# but not Dask, distributed or zarr. Versions are those pinned in requirements/constraints.txt
# for Python >= 3.12; the wheels land in .whl/ (git-ignored locally by .git/info/exclude).
#
#   bash benchmarks/device/wheels.sh [PYTHON_VERSION]      # default 3.12
#   bash benchmarks/device/wheels.sh --list                # the pins only, nothing fetched
set -euo pipefail
cd "$(dirname "$0")/../.."
list=""
if [ "${1:-}" = --list ]; then
    list=1
    shift
fi
pyver=${1:-3.12}
lock=requirements/constraints.txt
names=(dask distributed zarr numcodecs donfig msgspec google-crc32c tornado tblib zict locket partd)

pin() {  # the version constraints.txt pins for $1 under Python >= 3.12
    awk -v n="$1" -F'==' '
        $1 == n { split($2, a, " ; "); v = a[1]; if (a[2] == "" || a[2] ~ />= .3\.12/) print v }
    ' "$lock" | tail -n 1
}

specs=()
for n in "${names[@]}"; do
    v=$(pin "$n")
    [ -n "$v" ] || { echo "wheels: $n is not pinned in $lock" >&2; exit 1; }
    specs+=("$n==$v")
done
if [ -n "$list" ]; then
    printf '%s\n' "${specs[@]}"
    exit 0
fi
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
mkdir -p .whl
plats=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux1_x86_64; do
    plats+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
    --implementation cp "${plats[@]}" -d .whl "${specs[@]}"
ls -1 .whl
du -sh .whl
