# The two commands of README.md:  make run  (set up + default study)  and  make test  (set up + tests).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
CONFIG ?= config/config.yaml
PROFILE ?= profiles/local
# Rule shell lines call `ganstudy` and `mpiexec` from the environment.
export PATH := $(BIN):$(PATH)

# pip on some machines prints one "Location ... is ignored" line per package for missing local
# mirrors; they say nothing about this install.
PIP_QUIET := { grep -v --line-buffered "^WARNING: Location" || true; }

.PHONY: setup run status test test-gpu dry-run lint report tables figures bench bench-gpu bench-gpu-quick clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test]" 2>&1 | $(PIP_QUIET)
	$(BIN)/python -c "import torch, torchvision, torch_fidelity, mpi4py.MPI; print('torch', torch.__version__, '/ torchvision', torchvision.__version__, '/ torch-fidelity', torch_fidelity.__version__)"
	touch $@

run: setup
	$(BIN)/snakemake --profile $(PROFILE) --configfile $(CONFIG)

# Where the study of CONFIG stands (runs done, running, failed, waiting); also while it runs on a cluster.
status: setup
	$(BIN)/ganstudy status $(CONFIG)

# Two test workers, each given whole modules, longest first (tests/conftest.py): much of the suite waits on
# a scheduler or on process starts, so the other worker trains meanwhile. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The CUDA tests only (tests/test_gpu.py): on a GPU node, e.g. inside an salloc/bsub allocation.
test-gpu: setup
	$(BIN)/python -m pytest -m gpu

# The plan on the profile's site, as `make run` would run it: the jobs per rule, and what the plan warns of.
# `snakemake --profile local -n` lists every job with its command line.
dry-run: setup
	$(BIN)/snakemake --profile $(PROFILE) --configfile $(CONFIG) -n --quiet rules

# The Python code's lint rules and format (ruff, pyproject.toml) and the workflow's (snakemake --lint).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakemake --lint --configfile $(CONFIG)

tables figures: setup
	$(BIN)/snakemake --profile $(PROFILE) --configfile $(CONFIG) $@

# Into the study's folder, beside its summary.md (results/<study>/report.html). With the study's metadata
# (written with summary.md) the report opens on the answer, the rule graph a click away. Snakemake titles
# every report "Snakemake Report": a browser's tab names the study instead.
report: setup
	@folder=$$($(BIN)/python -c 'import sys; from ganstudy.report.status import config_study_folder; print(config_study_folder(sys.argv[1]))' $(CONFIG)) && \
	  metadata=$$folder/report/metadata.yaml && \
	  $(BIN)/snakemake --profile $(PROFILE) --configfile $(CONFIG) --report "$$folder/report.html" \
	    $$(test -f "$$metadata" && echo --report-metadata "$$metadata") && \
	  sed -i "0,/<title>Snakemake Report<\/title>/s//<title>$$(basename $$folder): the study's report<\/title>/" \
	    "$$folder/report.html" && \
	  echo "The study's report: $$folder/report.html ($$(($$(stat -c %s "$$folder/report.html") / 1024)) KB)"

# Every benchmark in full, each appending one JSON record (its results and the machine) to BENCH_OUT;
# stops at the first failure. BENCH_ARGS=--quick checks them in minutes. See docs/benchmarks.md.
BENCH_OUT ?= results/benchmarks.jsonl
BENCHMARKS := training_loop per_class_scaling data_parallel data_parallel_networks grid_scaling grid_dispatch scoring
bench: setup
	for name in $(BENCHMARKS); do echo "== $$name"; $(BIN)/python benchmarks/$$name.py $(BENCH_ARGS) --out $(BENCH_OUT) || exit 1; done

# The prepared check of a GPU machine (about 11 minutes on one H200; see docs/benchmarks.md): the thesis's 18x18 grid in float32
# and TF32 against the device's peak, operator and sync counts, a CNN grid, per-class, calo3d and pix2pix
# epochs in float32 and bf16, the profiler's top operators. One JSON record to BENCH_OUT; table in docs/benchmarks.md.
bench-gpu: setup
	$(BIN)/python benchmarks/gpu.py $(BENCH_ARGS) --out $(BENCH_OUT)

# The check of a short GPU allocation (about 4 minutes on one H200): the thesis's grid eager and replaying
# CUDA graphs, float32 and TF32 (gpu.py --short). On a machine without a package index, ci/gpu_check.sh
# runs it from the wheels of ci/gpu_wheels.sh, with the GPU tests of the stacked updates.
bench-gpu-quick: setup
	$(BIN)/python benchmarks/gpu.py --short --out $(BENCH_OUT)

clean:
	rm -rf $(VENV) .snakemake .pytest_cache
