# Suanpan: every target sets up what it needs (virtualenv, packages, services).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test unit e2e lint bench chaos chaos-long clean venv browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# headless Chromium for the console's browser tests and the demo's screenshots (Debian's
# packages; a small CJK font so that the screenshots show 算盘)
browser:
	@command -v chromium >/dev/null && test -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc || \
	  { apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-microhei; }

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint browser
	$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

e2e: $(STAMP)
	$(BIN)/pytest -q -m e2e tests/e2e

demo: $(STAMP) browser
	$(BIN)/python -m deploy.demo

bench: $(STAMP)
	$(BIN)/python -m bench.run

# real hub replicas, PostgreSQL and agents under seeded faults (docs/failover.md)
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos --seed $${SEED:-1} --faults $${FAULTS:-20}

# the long run of issue 11 alone (about 40 minutes): make bench's chaos study, 200 faults with
# at least 100 leader kills, 20 database restarts and 50 partitions (bench/chaos.py, LONG_RUN)
chaos-long: $(STAMP)
	$(BIN)/python -m bench.chaos --long

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
