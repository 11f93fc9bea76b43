# heapcost: `make help` lists the targets. Every target builds what it needs (the venv on first use).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed

# Measurement parameters (the same names are notebooks/measure.ipynb's parameters).
PROFILE ?= quick
ALLOCATORS ?=
WORKLOADS ?=
EXTRA_ALLOCATORS ?=
EXTRA_WORKLOADS ?=
MODE ?= time
TARGET_CI ?=
BUDGET_MIN ?=
BLOCKS ?=
LOCK_CLOCK ?= 0
SEED ?=
SCALES ?=
PAIRS ?=
SLICE_US ?=
PROTOCOL ?= lockstep
PIN ?= auto
FORCE ?=
# Fleet parameters (workflow/Snakefile): PROFILE names a fleet profile (workflow/profiles/) there.
HOSTS ?= local
EXECUTOR ?= local
RUN ?=
ARCHIVE ?=
# Probe parameters (`python -m analysis probe --help`).
PROBES ?=
RUNS ?=
SIZES ?=
JOBS ?=
ALARM ?=
TECHNIQUES ?=
TECHNIQUES_MUSL ?=
RERUN_ALL ?=

PAPER_INPUTS := $(shell find data notebooks analysis cost_predictions predictions.toml paper/paper.typ paper/common.typ paper/supplement.typ paper/refs.bib -type f \
	-not -path '*/__pycache__/*' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null)

.PHONY: rerun-all help venv git-filter test test-fast measure probe mechanism fleet debates debates-secondary contribute merge allocators system-deps lab paper bench dataset validate clean

help: ## list the targets
	@echo "heapcost: what allocator hardening costs and what it buys"
	@echo
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo
	@echo "measure parameters: PROFILE=smoke|quick|full ALLOCATORS=a,b WORKLOADS=x,y MODE=time|callgrind"
	@echo "  EXTRA_ALLOCATORS=name=/path/lib.so TARGET_CI=0.01 BUDGET_MIN=60 BLOCKS=N LOCK_CLOCK=1 SEED=N"
	@echo "  EXTRA_WORKLOADS='name=/path/prog {scale}, other=prog2 ...' (your programs; WORKLOADS empty: these alone)"
	@echo "  SCALES=1,0.25 (every cell at these multiples of its scale: start-up and per-unit cost)"
	@echo "  PROTOCOL=lockstep|trials PIN=auto|none|N FORCE=1 (measure on a busy machine or beside another campaign)"
	@echo "  PAIRS=a:b,c:d (lockstep: a and b also take turns with each other, not only with the baseline)"
	@echo "  SLICE_US=100000 (brought programs taking turns from outside: each turn's length; default 1000, the cost check's)"
	@echo "probe parameters (defaults: python -m analysis probe --help): ALLOCATORS=a,b EXTRA_ALLOCATORS=name=/path/lib.so"
	@echo "  PROBES=x,y RUNS=N (processes per cell) SIZES=16,4000 (block sizes of the misuse probes)"
	@echo "  JOBS=N (cells run in parallel) ALARM=S (seconds after which a running probe reports itself hung)"
	@echo "  TECHNIQUES=/path (known exploitation techniques: bring how2heap's glibc_2.36 programs, built by hand;"
	@echo "    each runs RUNS times under every allocator into the run's techniques.csv; PROBES=none: these alone)"
	@echo "  TECHNIQUES_MUSL=/path (the same programs built with musl-gcc -static: run under the musl configuration)"
	@echo "fleet parameters: PROFILE=smoke|quick|debates (workflow/profiles/) HOSTS=a,b (Slurm node features) EXECUTOR=local|slurm"
	@echo "  contribute: RUN=data/runs/ID (default the newest complete run); merge: ARCHIVE=dist/ID.heapcost-run.tar.gz"

$(VENV_STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@# the package itself, editable: the notebooks' kernels and JupyterLab import analysis/ from this checkout
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

venv: $(VENV_STAMP) git-filter ## create .venv from requirements.txt

# git stores notebooks/*.ipynb without outputs (.gitattributes names them; only the standard library runs); paper,
# test-fast and measure set it again, so a clone whose filter names an older module is repaired by any of them
NBSTRIP := python3 -m analysis.harness.nbstrip
git-filter: ## strip notebook outputs on commit: the nbstrip clean filter in this clone's git config
	@if git rev-parse --git-dir >/dev/null 2>&1; then git config filter.nbstrip.clean "$(NBSTRIP)"; fi

system-deps: $(VENV_STAMP) ## install the Debian packages the tests and measurements use (root), or print the command
	$(PY) -m analysis provision --no-build

paper: $(VENV_STAMP) git-filter paper/paper.pdf paper/paper.html ## render paper/paper.pdf and paper/paper.html, and the supplement beside them, from the published dataset

# one command makes both (grouped target); nothing changed in the inputs: nothing to do. A notebook whose inputs
# (the dataset and the package) are those its committed products were made from is not run again (their sha256 sits
# in paper/generated/.<notebook>.inputs); RERUN_ALL=1 runs every notebook anyway.
paper/paper.pdf paper/paper.html paper/supplement.pdf paper/supplement.html &: $(VENV_STAMP) $(PAPER_INPUTS) CITATION.cff $(if $(RERUN_ALL),rerun-all)
	$(PY) -m analysis paper $(if $(RERUN_ALL),--rerun-all)

rerun-all: ;

# The whole suite runs in one worker more than the CPUs (pytest-xdist), and an idle worker takes tests from a
# busy one (worksteal): many of its tests wait on the programs they start, and a few long ones would otherwise
# end the run alone. On 2 cores it took 5:21 with one worker per CPU, 4:21 with three and 4:40 with four. The
# fast tests keep busy whatever runs them: one worker per CPU (49 s on 2 cores, 55 s with three).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# pytest rewrites every test module's asserts on import, and keeps the result only where Python may write bytecode:
# in a shell that forbids it (PYTHONDONTWRITEBYTECODE) each worker rewrote all of them on every run (about 5 s).
# The tests may write it, into build/ (ignored by git), never beside the sources.
PYTEST := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$(CURDIR)/build/pycache" $(PY) -m pytest
test: $(VENV_STAMP) system-deps paper ## run the whole test suite (real allocators, valgrind, simulated statistics, the paper)
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal tests

FAST := not (slow or allocators or valgrind or paper)
test-fast: $(VENV_STAMP) git-filter ## the tests that need no allocator, valgrind, papermill or Typst (under a minute)
	$(PYTEST) -q -n auto --dist worksteal -m "$(FAST)" tests

measure: $(VENV_STAMP) git-filter ## run a measurement campaign through notebooks/measure.ipynb into data/runs/
	$(PY) -m analysis notebook measure PROFILE="$(PROFILE)" ALLOCATORS="$(ALLOCATORS)" WORKLOADS="$(WORKLOADS)" \
		EXTRA_ALLOCATORS="$(EXTRA_ALLOCATORS)" MODE="$(MODE)" TARGET_CI="$(TARGET_CI)" BUDGET_MIN="$(BUDGET_MIN)" \
		BLOCKS="$(BLOCKS)" LOCK_CLOCK="$(LOCK_CLOCK)" SEED="$(SEED)" PROTOCOL="$(PROTOCOL)" PIN="$(PIN)" \
		FORCE="$(FORCE)" SCALES="$(SCALES)" PAIRS="$(PAIRS)" SLICE_US="$(SLICE_US)" \
		EXTRA_WORKLOADS='$(subst ','"'"',$(EXTRA_WORKLOADS))'

probe: $(VENV_STAMP) ## run the heap-misuse probes under every allocator into data/runs/
	$(PY) -m analysis probe $(if $(ALLOCATORS),--allocators "$(ALLOCATORS)") \
		$(if $(EXTRA_ALLOCATORS),--extra-allocators "$(EXTRA_ALLOCATORS)") \
		$(if $(PROBES),--probes "$(PROBES)") $(if $(RUNS),--runs "$(RUNS)") \
		$(if $(SIZES),--sizes "$(SIZES)") $(if $(JOBS),--jobs "$(JOBS)") $(if $(ALARM),--alarm "$(ALARM)") \
		$(if $(TECHNIQUES),--techniques "$(TECHNIQUES)") $(if $(TECHNIQUES_MUSL),--techniques-musl "$(TECHNIQUES_MUSL)")

mechanism: $(VENV_STAMP) ## time the store sequences a poisoning free executes (rep stos, a memset call) alone on this host, into data/runs/
	$(PY) -m analysis mechanism $(if $(filter 1,$(FORCE)),--force)

fleet: $(VENV_STAMP) ## a fleet profile's campaigns on every host (HOSTS=a,b PROFILE=smoke|quick|debates EXECUTOR=local|slurm), merged into data/runs/, then the paper
	$(if $(filter 1,$(FORCE)),HEAPCOST_FORCE=1) $(VENV)/bin/snakemake -s workflow/Snakefile --workflow-profile workflow/executors/$(EXECUTOR) \
		--config hosts="$(HOSTS)" profile="$(PROFILE)" executor="$(EXECUTOR)"

debates: $(VENV_STAMP) ## the debates' primary cells on this host (first on any host the dataset lacks): what the recipes build, the plan, then the campaigns with what this host has, merged, then the paper
	$(PY) -m analysis fleet-plan --profile debates --provision
	$(MAKE) --no-print-directory fleet PROFILE=debates HOSTS=local EXECUTOR=local

debates-secondary: $(VENV_STAMP) ## the debates' secondary cells on this host (every workload, callgrind, probes), after `make debates`
	$(PY) -m analysis fleet-plan --profile debates-secondary --provision
	$(MAKE) --no-print-directory fleet PROFILE=debates-secondary HOSTS=local EXECUTOR=local

contribute: $(VENV_STAMP) ## pack a run (RUN=data/runs/ID; default the newest complete one) with its machine description into dist/
	$(PY) -m analysis contribute $(RUN)

merge: $(VENV_STAMP) ## add contributed runs (ARCHIVE=file.tar.gz ...) to data/runs/: validated, never overwriting
	@test -n "$(ARCHIVE)" || { echo "make merge: ARCHIVE=path/to/RUN.heapcost-run.tar.gz is required" >&2; exit 2; }
	$(PY) -m analysis merge $(ARCHIVE)

allocators: $(VENV_STAMP) ## install and build every allocator here, into a cache outside the clone (each glibc build: ~10 min)
	$(PY) -m analysis provision

lab: $(VENV_STAMP) git-filter ## open the notebooks in JupyterLab (saved without outputs: git status stays clean)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root) \
		--ContentsManager.pre_save_hook=analysis.harness.nbstrip.pre_save_hook

bench: $(VENV_STAMP) system-deps ## benchmark the measurement itself against hyperfine (results in bench/)
	$(PY) -m analysis bench $(if $(filter 1,$(FORCE)),--force)

dataset: $(VENV_STAMP) ## write the versioned dataset archive and its checksum into dist/
	$(PY) -m analysis dataset

validate: $(VENV_STAMP) ## check data/ against data/datapackage.json
	$(PY) -m analysis validate data

clean: ## remove what the build made (not the dataset, not the allocator cache)
	rm -rf build dist paper/paper.pdf paper/paper.html .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
