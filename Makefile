# The two commands of the README: `make demo` and `make test`.
# Each creates .venv if missing (Python >= 3.12 when the machine has one: zarr >= 3.2 needs it).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# First working interpreter of: python3.13, python3.12, pyenv-installed 3.12/3.13, python3.
# Each candidate is run, not just looked up: pyenv shims exist but fail when not selected.
BASE_PYTHON ?= $(shell \
  for c in python3.12 python3.13; do \
    $$c -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1 && { echo $$c; exit 0; }; \
  done; \
  if command -v pyenv >/dev/null 2>&1; then \
    root=$$(pyenv root); \
    for v in $$(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[23]\.[0-9]+$$' | sort -V); do \
      p=$$root/versions/$$v/bin/python3; \
      $$p -c 'import sys' >/dev/null 2>&1 && { echo $$p; exit 0; }; \
    done; \
  fi; \
  echo python3)

.PHONY: demo test test-hpc test-cluster lint install clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,hpc,bench,lint]"
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dkernel demo

test: $(STAMP)
	DASK_CONFIG=$$(mktemp -d) $(PY) -m pytest -q

# A one-node SLURM on this machine runs examples/slurm_batch.sh (root on Debian/Ubuntu;
# skipped with a message elsewhere). Under 10 minutes; see hpc/test-hpc.sh.
test-hpc: $(STAMP)
	PY=$(abspath $(PY)) bash hpc/test-hpc.sh

# The client, the scheduler, two workers and an S3 server each on a "host" of its own (network
# and mount namespaces sharing no filesystem); the store exists only on the S3 server. Needs
# root and `ip netns`; skipped with the reason elsewhere. See tests/test_multihost.py.
test-cluster: $(STAMP)
	DKERNEL_TEST_CLUSTER=1 DASK_CONFIG=$$(mktemp -d) $(PY) -m pytest -q -rs -p no:cacheprovider tests/test_multihost.py

lint: $(STAMP)
	$(VENV)/bin/ruff check dkernel tests benchmarks examples
	$(VENV)/bin/ruff format --check dkernel tests benchmarks examples
	$(VENV)/bin/mypy dkernel

clean:
	rm -rf $(VENV) demo-data bench-data
