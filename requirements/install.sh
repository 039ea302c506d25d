#!/usr/bin/env bash
# Install into a virtual environment from the committed pins (what the Makefile runs):
#
#   requirements/install.sh .venv/bin/python -e ".[test]"    # any pip arguments
#   requirements/install.sh .venv/bin/python --uv            # print the uv it would use
#
# Every install is constrained by requirements/constraints.txt (every version pinned, so no
# resolver search and two machines test the same thing; `make lock` refreshes it). uv does the
# install when it runs: on PATH, else installed into the venv from PyPI (one wheel); pip when
# neither works or DKERNEL_PIP=1.
set -euo pipefail
py=$1
shift
lock=$(cd "$(dirname "$0")" && pwd)/constraints.txt
venv_uv=$(dirname "$py")/uv

find_uv() {
    [ -z "${DKERNEL_PIP:-}" ] || return 1
    # a pyenv shim exists on PATH even where it fails: run it, do not just look it up
    if uv --version >/dev/null 2>&1; then
        echo uv
        return 0
    fi
    [ -x "$venv_uv" ] || "$py" -m pip install -q --disable-pip-version-check uv >/dev/null 2>&1 || true
    if "$venv_uv" --version >/dev/null 2>&1; then
        echo "$venv_uv"
        return 0
    fi
    return 1
}

if [ "${1:-}" = --uv ]; then
    find_uv
    exit
fi
if uv=$(find_uv); then
    "$uv" pip install -q --python "$py" -c "$lock" "$@"
else
    echo "install: uv is not available, installing with pip (slower)" >&2
    "$py" -m pip install -q --disable-pip-version-check -c "$lock" "$@"
fi
