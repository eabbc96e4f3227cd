# Each target bootstraps .venv from pyproject.toml, so a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench bench-simcluster venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m bench.demo $(RUN_ARGS)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# SchedulingBasic at 5,000 nodes on the simulated cluster, tandem's default profile (see bench/RESULTS.md)
bench: $(STAMP)
	$(PY) -m bench run SchedulingBasic/5000Nodes --start-scheduler default $(BENCH_ARGS)

# the simulated cluster's own capacity: creates/s, binds/s, RSS, watch delivery
bench-simcluster: $(STAMP)
	$(PY) -m bench.simcluster.loadtest

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
