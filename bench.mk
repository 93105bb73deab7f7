# Engine benchmark (python -m loosespec_bench.bench): our decoding loop against transformers generate(),
# assisted generation and prompt lookup, plus FLy / FLy+MLA / DropMatch against our SPD, on the
# embedded pair (bf16, CPU), interleaved prompt by prompt; prints tokens/s, tau, median paired
# time ratios, per-step overheads and the cost model. Included from the Makefile.
#   make bench                                   # 2 prompts x 3 sets, 3 repeats, 128 new tokens
#   make bench BENCH_ARGS="--fp32 --contestants ar,hf-ar,spd,hf-assist,pld,hf-pld"  # exact token check
#   make bench-smoke                             # tiny random models, seconds
#   make bench-peers                             # ours vs transformers and vLLM-CPU, one command (~1 h here)
#   make bench-speed-smoke                       # the speed benchmark over two occasions, tiny random models
#   make bench-memory                            # make run's peak resident memory, first (converting) and second run
BENCH_ARGS ?=
BENCH_OUT ?= results/bench/engine-$(shell date +%Y%m%d-%H%M%S).json

.PHONY: bench bench-smoke bench-peers bench-speed-smoke bench-memory

bench: install-embedded  ## engine benchmark: our loop vs transformers generate() on the embedded pair
	$(PY) -m loosespec_bench.bench --out $(BENCH_OUT) $(BENCH_ARGS)

bench-smoke: install  ## the engine benchmark on tiny random models (seconds)
	$(PY) -m loosespec_bench.bench --tiny --max-new-tokens 16 --repeats 1 --prompts-per-set 1 $(BENCH_ARGS)

# Ours against the engines a user would pick instead, on held-out Spec-Bench prompts, bf16, one
# command: our loop vs transformers (generate, assisted generation, prompt lookup) and FLy + MLA /
# DropMatch vs our SPD (one process), then vLLM-CPU's target alone, SPD and n-gram on the same
# prompt ids (its own environment, .venv-vllm; its model on the same cores as ours, none reserved
# for its front end: docs/vllm.md), then the forward-cost curve and the bandwidth floor. Each step prints its load; run it on a quiet machine. Files in PEERS_DIR.
PEERS_ARGS ?= --sets spec_bench --prompts-per-set 8 --repeats 2 --max-new-tokens 128
PEERS_DIR ?= results/bench/peers
bench-peers: install-embedded $(VLLM_PY)  ## ours vs transformers and vLLM-CPU (target alone, SPD, prompt lookup), FLy+MLA and DropMatch vs SPD, the forward-cost curve
	$(PY) -m loosespec_bench.bench $(PEERS_ARGS) --contestants ar,hf-ar,spd,hf-assist,pld,hf-pld,fly_mla,dropmatch --out $(PEERS_DIR)/ours.json
	VLLM_CPU_OMP_THREADS_BIND=0-$$(($$(nproc) - 1)) VLLM_CPU_NUM_OF_RESERVED_CPU=0 \
	  $(VLLM_PY) -m loosespec_bench.bench.vllm --sequential --ours $(PEERS_DIR)/ours.json --out $(PEERS_DIR)/vllm.json
	$(PY) -m loosespec_bench.bench.forward_cost --out $(PEERS_DIR)/forward_cost.json

# The speed benchmark over occasions (python -m loosespec_bench.bench.speed, docs/speed_evidence.md)
# on the tiny random pair: two occasions in child processes, then the analysis. Its speedups mean
# nothing (a random draft); it shows the protocol end to end. --max-others-share 1: on a busy
# machine every block would be contaminated otherwise; --calibrate never: it leaves no calibration
# in results/ (the counts are then not priced). The real runs: make replicate-cpu-evidence.
SPEED_SMOKE_DIR ?= /tmp/loosespec_speed_smoke
SPEED_SMOKE_ARGS ?=
bench-speed-smoke: install  ## the speed benchmark over two occasions on tiny random models (a minute)
	$(PY) -m loosespec_bench.bench.speed --pair tiny --problems 3 --max-new-tokens 16 --occasions 2 --gap-s 0 \
	  --threads 1 --max-others-share 1 --calibrate never --out $(SPEED_SMOKE_DIR) $(SPEED_SMOKE_ARGS)

# make run's peak resident memory (python -m loosespec_bench.bench.memory): the run twice, first on an
# empty model cache (so it converts, in child processes), then warm; the process tree's summed peak
# and the largest single process's against 8 GiB. Needs ~9 GB of free disk for the fresh cache.
MEMORY_OUT ?= results/bench/memory-$(shell date +%Y%m%d-%H%M%S).json
bench-memory: install-embedded data  ## make run's peak resident memory (first run converting, second warm) against 8 GiB
	$(PY) -m loosespec_bench.bench.memory --json $(MEMORY_OUT)
