# The two commands of the README: `make reproduce` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

SCALE  ?= mini

.PHONY: reproduce test figures bench bench-gpu clean-venv

# torch==2.13.0 is installed before anything that depends on torch: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The five studies at $(SCALE) (a scale of mlmclm/scales/: tiny, mini, long, longer, small, paper), then the five notebooks: `make reproduce SCALE=tiny`.
reproduce: $(STAMP)
	$(VENV)/bin/mlmclm reproduce --scale $(SCALE)

test: $(STAMP)
	$(PY) -m pytest -q tests
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then $(PY) -m pytest -q --nbval notebooks --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider; fi

figures: $(STAMP)
	$(VENV)/bin/mlmclm notebooks

# Benchmarks (results/bench/*.csv): side by side, medians and ratios (~10 min on two cores).
bench: $(STAMP)
	$(VENV)/bin/mlmclm bench pretrain
	$(VENV)/bin/mlmclm bench memory
	$(VENV)/bin/mlmclm bench finetune
	$(VENV)/bin/mlmclm bench notebooks

# The prepared GPU check (one H100 or H200; no new measurement after --budget, 420 s): parity, MFU of the 210M step (eager and compiled), FSDP
# 610M/1B, a small step -> $(OUT)/gpu.csv. Runs with the machine's own python3 and torch (no .venv): on a lent GPU,
# from the repository root, `make bench-gpu OUT=$$OUT`.
GPU_PY ?= python3
OUT    ?= results/bench
bench-gpu:
	PYTHONPATH=. PYTHONUNBUFFERED=1 $(GPU_PY) -m mlmclm.cli bench gpu $(OUT)

clean-venv:
	rm -rf $(VENV)
