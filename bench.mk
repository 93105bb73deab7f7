# Engine benchmark (python -m loosespec_bench.bench): our decoding loop against transformers generate(),
# assisted generation and prompt lookup, plus FLy / FLy+MLA / DropMatch against our SPD, on the
# embedded pair (bf16, CPU), interleaved prompt by prompt; prints tokens/s, tau, median paired
# time ratios, per-step overheads and the cost model. Included from the Makefile.
#   make bench                                   # 2 prompts x 3 sets, 3 repeats, 128 new tokens
#   make bench BENCH_ARGS="--fp32 --contestants ar,hf-ar,spd,hf-assist,pld,hf-pld"  # exact token check
#   make bench-smoke                             # tiny random models, seconds
BENCH_ARGS ?=
BENCH_OUT ?= results/bench/engine-$(shell date +%Y%m%d-%H%M%S).json

.PHONY: bench bench-smoke

bench: install-embedded  ## engine benchmark: our loop vs transformers generate() on the embedded pair
	$(PY) -m loosespec_bench.bench --out $(BENCH_OUT) $(BENCH_ARGS)

bench-smoke: install  ## the engine benchmark on tiny random models (seconds)
	$(PY) -m loosespec_bench.bench --tiny --max-new-tokens 16 --repeats 1 --prompts-per-set 1 $(BENCH_ARGS)
