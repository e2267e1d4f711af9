# The two commands of the README: `make reproduce` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

SCALE  ?= mini

.PHONY: reproduce test test-quick figures bench bench-gpu gpu-wheels clean-venv

# torch==2.13.0 is installed before anything that depends on torch: an unpinned torch pulls a multi-GB CUDA build.
# Which build of 2.13.0 is pip's choice from its indexes: on Linux the main registry holds the CUDA build (what a GPU
# machine needs); a CPU build offered beside it (2.13.0+cpu) outranks it, as the wheel lying on the CI machine does.
# TORCH_INDEX: an index added for torch alone, e.g. torch's own CPU wheel index on a machine without GPUs.
TORCH_INDEX ?=
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The five studies at $(SCALE) (a scale of mlmclm/scales/: tiny, mini, long, longer, twin, small, paper), then the five notebooks: `make reproduce SCALE=tiny`.
reproduce: $(STAMP)
	$(VENV)/bin/mlmclm reproduce --scale $(SCALE)

test: $(STAMP)
	$(PY) -m pytest -q tests
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then $(PY) -m pytest -q --nbval notebooks --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider; fi

# While working: every test but those marked slow (end to end: the tiny reproduction, a study trained from a notebook,
# SmolLM2's conversion and CPT, two-process training, FSDP and cluster launches, two study runs at once, the GPU
# check's CPU run, the benchmarks' whole measurements, the installed wheel), and no nbval. CI runs `make test`.
test-quick: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

figures: $(STAMP)
	$(VENV)/bin/mlmclm notebooks

# Benchmarks (results/bench/*.csv): side by side, medians and ratios (~10 min on two cores).
bench: $(STAMP)
	$(VENV)/bin/mlmclm bench pretrain
	$(VENV)/bin/mlmclm bench memory
	$(VENV)/bin/mlmclm bench finetune
	$(VENV)/bin/mlmclm bench notebooks

# The prepared GPU check (one H100 or H200; every measurement in a fresh process, stopped at --budget, 480 s): the rows never measured
# first (a 1B checkpoint's hashing, compiled CLM micro-batch 16, compiled FSDP 610M/1B), then parity, the eager 210M step, the largest
# micro-batch, eager FSDP, a small step, compiled steps last -> $(OUT)/gpu.csv, each row printed as written. Runs with the
# machine's own python3 and torch (no .venv): on a lent GPU, from the repository root, `make bench-gpu OUT=$$OUT`.
GPU_PY ?= python3
OUT    ?= results/bench
bench-gpu:
	PYTHONPATH=. PYTHONUNBUFFERED=1 $(GPU_PY) -m mlmclm.cli bench gpu $(OUT)

# Wheels for the GPU machine, which has no network. The check needs none (tests/test_gpu_check.py runs it with the
# image's torch, transformers, accelerate and pyyaml only); the image lacks the `kernels` library (without it the
# kernels backend imports its files directly, and says so). Here `make gpu-wheels` (about 23 MB into gpu-wheels/, which
# travels with the working tree); there, from the repository root:
# `python3 -m pip install --no-index --find-links gpu-wheels kernels`.
GPU_WHEELS ?= gpu-wheels
gpu-wheels: $(STAMP)
	$(PY) -m pip download --quiet --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
		--platform manylinux2014_x86_64 --dest $(GPU_WHEELS) "kernels>=0.17.2,<0.19"

clean-venv:
	rm -rf $(VENV)
