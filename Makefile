# Widehouse developer commands. `make help` lists them.
# Everything is project-local: the virtualenv in .venv, JVM parts in .vendor, state in .state.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
VENDOR := $(or $(WIDEHOUSE_VENDOR_DIR),$(CURDIR)/.vendor)
MVN := scripts/mvn.sh
PYTEST_ARGS ?=
BENCH ?=
FAULTS ?=
DEMO_ARGS ?=

PY_STAMP := $(VENV)/.widehouse-installed
PULSAR_STAMP := $(VENDOR)/pulsar/.resolved
HBASE_STAMP := $(VENDOR)/hbase/.resolved
DELTA_STAMP := $(VENDOR)/delta/.resolved

.PHONY: help setup up down status airflow airflow-down demo smoke test test-unit test-integration lint format bench faults clean clean-state

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: $(PY_STAMP) $(PULSAR_STAMP) $(HBASE_STAMP) $(DELTA_STAMP) ## create .venv, install pinned deps, resolve Pulsar/HBase/Delta jars (idempotent)
	@scripts/ensure-chromium
	@# bytecode of the editable package, also where PYTHONDONTWRITEBYTECODE is set: each Python process
	@# Spark starts imports widehouse instead of compiling it (its edited modules compile as before)
	@$(PY) -m compileall -q spark/widehouse
	@$(VENV)/bin/widehouse spark archive || echo "setup: Spark's start-up caches were not all built (Spark jobs start slower); see above" >&2
	@echo "setup: done (venv $(VENV), JVM parts in $(VENDOR))"

$(PY_STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "setup: $(PYTHON) not found; install Python 3.11 or run make PYTHON=/path/to/python3.11" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"
	$(PY) -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

$(PULSAR_STAMP): docker/maven/pulsar/pom.xml scripts/mvn.sh
	rm -rf $(VENDOR)/pulsar
	$(MVN) -f docker/maven/pulsar/pom.xml -Dout.dir=$(VENDOR)/pulsar package
	@touch $@

$(HBASE_STAMP): docker/maven/hbase/pom.xml scripts/mvn.sh
	rm -rf $(VENDOR)/hbase
	$(MVN) -f docker/maven/hbase/pom.xml -Dout.dir=$(VENDOR)/hbase package
	@touch $@

$(DELTA_STAMP): docker/maven/delta/pom.xml scripts/mvn.sh
	rm -rf $(VENDOR)/delta
	$(MVN) -f docker/maven/delta/pom.xml -Dout.dir=$(VENDOR)/delta package
	@touch $@

up: setup ## start Pulsar, HBase, HBase Thrift and ClickHouse on loopback (no-op when running)
	$(VENV)/bin/widehouse services up

down: ## stop every local service (and the local Airflow)
	@if [ -x $(VENV)/bin/widehouse ]; then $(VENV)/bin/widehouse airflow down; $(VENV)/bin/widehouse services down; fi

status: ## show the local services
	$(VENV)/bin/widehouse services status

airflow: setup ## start Airflow 3 on loopback with dags/ (UI URL and login printed; `make down` stops it)
	$(VENV)/bin/widehouse airflow up

airflow-down: ## stop the local Airflow only
	@if [ -x $(VENV)/bin/widehouse ]; then $(VENV)/bin/widehouse airflow down; fi

demo: setup ## the main job on the embedded defaults: services, plan, generator, streams, analyst queries
	$(VENV)/bin/widehouse demo $(DEMO_ARGS)

smoke: ## round-trip real data through every part (services must be up)
	$(VENV)/bin/widehouse smoke

test: setup ## the whole test suite against real services (starts and stops them as needed)
	scripts/run-tests $(PYTEST_ARGS)

test-unit: setup ## unit tests only (no services, no Spark)
	scripts/run-tests -m "not integration and not spark" $(PYTEST_ARGS)

test-integration: setup ## integration tests only (real services)
	scripts/run-tests -m integration $(PYTEST_ARGS)

lint: setup ## ruff lint + format check, mypy on the library
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: setup ## apply ruff's formatting and safe fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup ## run a benchmark: make bench BENCH="<name> [options]" (no BENCH: list them)
	$(PY) -m bench $(BENCH)

faults: setup ## the fault suite: SIGKILLs, ClickHouse/Pulsar restarts, full disk; prints a table (FAULTS="--kills 20 ...")
	$(PY) -m bench faults $(FAULTS)

clean-state: down ## delete local state (service data, tables, checkpoints)
	rm -rf .state

clean: clean-state ## delete state, venv and resolved JVM parts
	rm -rf $(VENV) $(VENDOR)
