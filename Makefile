# The two commands of the README: `make demo` and `make test`.
# Each creates .venv if missing (Python >= 3.12 when the machine has one: zarr >= 3.2 needs it)
# and installs what it needs from the pins in requirements/constraints.txt (uv when it runs,
# else pip: requirements/install.sh). One stamp per set of extras: `make demo` installs dkernel
# and its runtime dependencies only; `make test` then adds the test extras to the same venv.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements/constraints.txt
INSTALL := bash requirements/install.sh $(PY)
# extras of each stamp
EXTRAS_run := .
EXTRAS_test := .[test,hpc,bench]
EXTRAS_lint := .[lint]
EXTRAS_notebook := .[notebook]

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

.PRECIOUS: $(VENV)/.installed-%
.PHONY: demo test test-hpc test-cluster lint notebook install lock clean

$(PY):
	$(BASE_PYTHON) -m venv $(VENV)

$(VENV)/.installed-%: pyproject.toml $(LOCK) | $(PY)
	$(INSTALL) -e "$(EXTRAS_$*)"
	@touch $@

install: $(VENV)/.installed-run

demo: $(VENV)/.installed-run
	$(VENV)/bin/dkernel demo

test: $(VENV)/.installed-test
	DASK_CONFIG=$$(mktemp -d) $(PY) -m pytest -q

# JupyterLab on examples/ with dask-labextension (the Dask panels in the left side bar)
notebook: $(VENV)/.installed-notebook
	@echo "notebook: each notebook's first cell starts the cluster and prints its dashboard link;"
	@echo "notebook: paste it into the Dask panel on the left (or press its search button)."
	$(VENV)/bin/jupyter lab --notebook-dir=examples $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Refresh the pins (every extra, one file for Python 3.11 and newer), keeping the versions
# already pinned where they still fit; `make lock LOCK_ARGS=--upgrade` moves to the newest.
lock: $(VENV)/.installed-run
	uv=$$($(INSTALL) --uv) && $$uv pip compile -q pyproject.toml --universal --python-version 3.11 \
	  --extra test --extra hpc --extra bench --extra lint --extra notebook $(LOCK_ARGS) -o $(LOCK)

# A one-node SLURM on this machine runs examples/slurm_batch.sh (root on Debian/Ubuntu;
# skipped with a message elsewhere). Under 10 minutes; see hpc/test-hpc.sh.
test-hpc: $(VENV)/.installed-test
	PY=$(abspath $(PY)) bash hpc/test-hpc.sh

# The client, the scheduler, two workers and an S3 server each on a "host" of its own (network
# and mount namespaces sharing no filesystem); the store exists only on the S3 server. Needs
# root and `ip netns`; skipped with the reason elsewhere. See tests/test_multihost.py.
test-cluster: $(VENV)/.installed-test
	DKERNEL_TEST_CLUSTER=1 DASK_CONFIG=$$(mktemp -d) $(PY) -m pytest -q -rs -p no:cacheprovider tests/test_multihost.py

lint: $(VENV)/.installed-run $(VENV)/.installed-lint
	$(VENV)/bin/ruff check dkernel tests benchmarks examples
	$(VENV)/bin/ruff format --check dkernel tests benchmarks examples
	$(VENV)/bin/mypy dkernel

clean:
	rm -rf $(VENV) demo-data bench-data
