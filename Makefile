# Every target that runs code bootstraps .venv first: on a fresh machine
# `make plan` and `make test` are all the set-up there is.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CATALOGUE ?= seats/catalogue/fv-ml1.yaml
SNAPSHOT  ?= seats/catalogue/fv-ml1.snapshot.json
SEAT ?=
REFRESH_DOCS ?=
GPU ?=
LIVE ?=
ALERTS ?= out/gpuplan-alerts.yml

SOURCE := $(if $(LIVE),--live,--snapshot $(SNAPSHOT))
ADD    := $(if $(SEAT),--add $(SEAT),)

.PHONY: plan test test-fast lint check report alerts bench test-gpu docs venv clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

plan: $(STAMP)
	$(BIN)/gpuplan plan --catalogue $(CATALOGUE) $(SOURCE) $(ADD)

check: $(STAMP)
	@test -n "$(SEAT)" -a -n "$(GPU)" || { echo "usage: make check SEAT=name GPU=n[,m]"; exit 2; }
	$(BIN)/gpuplan check $(SEAT) --gpu $(GPU) --catalogue $(CATALOGUE) $(SOURCE)

report: $(STAMP)
	@mkdir -p out
	$(BIN)/gpuplan demo-ledger --catalogue $(CATALOGUE) --snapshot $(SNAPSHOT) --out out/demo-ledger.sqlite --force
	$(BIN)/gpuplan report --catalogue $(CATALOGUE) --ledger out/demo-ledger.sqlite --format html --out out/report
	$(BIN)/gpuplan report --catalogue $(CATALOGUE) --ledger out/demo-ledger.sqlite --format md --out out/report

# The catalogue as Prometheus alerting rules (docs/operations.md); checked by promtool when present.
alerts: $(STAMP)
	@mkdir -p $(dir $(ALERTS))
	$(BIN)/gpuplan alerts --catalogue $(CATALOGUE) --out $(ALERTS)
	@if command -v promtool >/dev/null; then promtool check rules $(ALERTS); \
	else echo "promtool not found: $(ALERTS) not checked (Debian: apt-get install prometheus)"; fi

# The tests write their bytecode (__pycache__, git-ignored) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): compiling the package and rewriting every test's asserts anew costs
# each run about 10 s of CPU.
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# Every test but those that need a real GPU (pyproject's addopts), the slow ones included.
test: $(STAMP)
	$(BIN)/python -m pytest -q

# The inner loop: the tests marked `slow` (real servers and processes, fuzzing, exhaustive
# oracles, whole-tree scans, the docs' examples) left out; `make test` runs them before landing.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m 'not slow and not gpu'

# Their temporary files (SQLite ledgers, each write synced) go to RAM where /dev/shm has 1 GiB
# free: on a busy disk the syncs alone cost more wall time than the tests' CPU.
SHM := $(shell df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 && $$4 > 1048576 { print "/dev/shm" }')
test-fast: export TMPDIR := $(or $(SHM),$(TMPDIR))

test-gpu: $(STAMP)
	$(BIN)/python scripts/gpu_check.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Writes out/bench/bench.md (untracked); REFRESH_DOCS=1 rewrites docs/bench.md and its figures.
bench: $(STAMP)
	$(BIN)/python -m bench $(if $(REFRESH_DOCS),--refresh-docs,)

# Rewrites the outputs shown under the console examples of README.md and docs/*.md from real runs.
docs: $(STAMP)
	$(BIN)/python scripts/refresh_docs.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
