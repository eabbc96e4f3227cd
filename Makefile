# Each target bootstraps .venv from pyproject.toml, so a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench bench-simcluster venv clean image

# the image `make image` builds and manifests/deployment.yaml runs
IMAGE ?= tandem-scheduler:dev
# tried in this order; the first whose `info` answers (a running engine, not just a CLI) builds
CONTAINER_ENGINES ?= docker podman

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m bench.demo $(RUN_ARGS)

# Two pytest-xdist workers: most of the suite waits on real servers and short real timeouts, not on the cpu,
# so two workers about halve it on a 2-core machine. --dist loadfile keeps each test file on one worker, so a
# module-scoped real kube-apiserver starts once, not once per worker. PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# SchedulingBasic at 5,000 nodes on the simulated cluster, tandem's default profile (see bench/RESULTS.md)
bench: $(STAMP)
	$(PY) -m bench run SchedulingBasic/5000Nodes --start-scheduler default $(BENCH_ARGS)

# the simulated cluster's own capacity: creates/s, binds/s, RSS, watch delivery
bench-simcluster: $(STAMP)
	$(PY) -m bench.simcluster.loadtest

# the Containerfile with docker or podman, whichever has a running engine
image:
	@engine=""; \
	for e in $(CONTAINER_ENGINES); do \
		if command -v "$$e" >/dev/null 2>&1 && "$$e" info >/dev/null 2>&1; then engine="$$e"; break; fi; \
	done; \
	if [ -z "$$engine" ]; then \
		echo "make image: no usable container engine: none of [$(CONTAINER_ENGINES)] is installed with a running engine" >&2; \
		echo "  (a docker CLI without a daemon does not count: 'docker info' must succeed)" >&2; \
		exit 1; \
	fi; \
	echo "make image: building $(IMAGE) with $$engine"; \
	"$$engine" build -f Containerfile -t $(IMAGE) .

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
