# Reports from result folders: included by the Makefile (`include report.mk`), which defines
# PY (the venv's python) and the `install` target.
#   make tables                      paper tables (Markdown, LaTeX, CSV) in reports/
#   make plots                       PNG + PDF plots in reports/plots/
#   make report                      both, plus reports/index.csv
#   make index                       list the runs
#   make report-cpu                  the CPU replication's tables, plots and index in results/cpu/
#   make report-cpu-evidence         the CPU evidence's claims, frontier and speed figures in results/cpu/evidence/
#   make report-cpu-claims           re-decide the three committed claims files (no figure) and print the verdict table
#   make report-cpu-pilot            the archived n = 3 pilot's tables and plots, redrawn from its runs
#   make notebook-html               notebooks/report.html: the report notebook executed on the committed CPU replication
# Options: RESULTS=<results dir> REPORTS=<output dir> EXPERIMENT='fly_*' (a name or glob)
RESULTS ?= $(or $(LOOSESPEC_RESULTS_DIR),results)
REPORTS ?= reports
EXPERIMENT ?=
REPORT_ARGS = --results $(RESULTS) $(if $(EXPERIMENT),--experiment '$(EXPERIMENT)')

.PHONY: install-report tables plots report index report-cpu report-cpu-evidence report-cpu-claims report-cpu-pilot notebook-html

# pandas + matplotlib (the `report` extra); W&B and the notebook tools are separate extras.
install-report: install
	$(PY) -m pip install -q -e '.[report]'

tables: install-report  ## paper tables (Markdown, LaTeX, CSV) in reports/
	$(PY) -m loosespec_bench.report tables $(REPORT_ARGS) --out $(REPORTS)

plots: install-report  ## PNG + PDF plots in reports/plots/
	$(PY) -m loosespec_bench.report plots $(REPORT_ARGS) --out $(REPORTS)/plots

report: install-report  ## tables, plots and reports/index.csv
	$(PY) -m loosespec_bench.report all $(REPORT_ARGS) --out $(REPORTS)

index: install-report  ## list the runs (reports/index.csv)
	$(PY) -m loosespec_bench.report index $(REPORT_ARGS) --csv $(REPORTS)/index.csv

# The committed CPU replication (make replicate-cpu): tables/, plots/ and index.csv beside its runs.
report-cpu: install-report  ## the CPU replication's tables, plots and index in results/cpu/
	$(PY) -m loosespec_bench.report all --results $(or $(CPU_RESULTS),results/cpu/runs) --out results/cpu

# The CPU replication's evidence runs (make replicate-cpu-evidence; EVIDENCE_RESULTS in replicate.mk):
# the claims under evidence/claims.yaml, the float32 frontier (its predicted speedups priced by
# the float32 calibration in results/loose_rules/, which its caption names), the two-occasion speed
# figure and table of every speed folder analysed so far, and the verdict table over the three
# claims files that results/cpu/README.md prints.
EVIDENCE_CALIBRATION ?= results/loose_rules/calibration_fp32.json
SPEED_PANELS ?= GSM8K=speed_gsm8k HumanEval=speed_humaneval GSM8K/SmolLM2-135M-draft=speed_xtok
report-cpu-evidence: install-report  ## the CPU evidence's claims, float32 frontier, speed figure and table, verdict table
	$(PY) -m loosespec_bench.report claims --results $(EVIDENCE_RESULTS)/runs --out $(EVIDENCE_RESULTS)
	$(PY) -m loosespec_bench.report.claims.losses \
		"FLy + MLA, GSM8K float32=$(firstword $(wildcard $(EVIDENCE_RESULTS)/runs/cpu_quality_fp32/fly_mla-*_gsm8k_*))" \
		"DropMatch, GSM8K float32=$(firstword $(wildcard $(EVIDENCE_RESULTS)/runs/cpu_quality_fp32/dropmatch_*_gsm8k_*))" \
		--out $(EVIDENCE_RESULTS)/loss_breakdown.md
	$(PY) -m loosespec_bench.report.frontier --results $(EVIDENCE_RESULTS)/runs --experiment 'cpu_quality_fp32*' \
		--out $(EVIDENCE_RESULTS)/plots --calibration $(EVIDENCE_CALIBRATION)
	$(if $(strip $(foreach p,$(SPEED_PANELS),$(wildcard $(EVIDENCE_RESULTS)/$(lastword $(subst =, ,$(p)))/report.json))),\
		$(PY) -m loosespec_bench.report speed $(foreach p,$(SPEED_PANELS),$(if $(wildcard $(EVIDENCE_RESULTS)/$(lastword $(subst =, ,$(p)))/report.json),$(firstword $(subst =, ,$(p)))=$(EVIDENCE_RESULTS)/$(lastword $(subst =, ,$(p))))) \
		--out $(EVIDENCE_RESULTS)/plots,\
		@echo "speed: no speed folder analysed yet under $(EVIDENCE_RESULTS)")
	$(PY) -m loosespec_bench.report verdicts results/cpu/claims.csv results/cpu/autojudge/claims.csv $(EVIDENCE_RESULTS)/claims.csv

# Issue 70: the three committed claims files re-decided (provenance, p on the declared scale, one
# Holm per file), the loss breakdown, and the verdict table results/cpu/README.md prints; then the
# reviewer check. No figure is redrawn.
report-cpu-claims: install-report  ## re-decide results/cpu's three claims files, the verdict table, the reviewer check
	$(PY) -m loosespec_bench.report claims --results results/cpu/runs --out results/cpu
	$(PY) -m loosespec_bench.report claims --results results/cpu/autojudge/runs --out results/cpu/autojudge
	$(PY) -m loosespec_bench.report claims --results $(EVIDENCE_RESULTS)/runs --out $(EVIDENCE_RESULTS)
	$(PY) -m loosespec_bench.report.claims.losses \
		"FLy + MLA, GSM8K float32=$(firstword $(wildcard $(EVIDENCE_RESULTS)/runs/cpu_quality_fp32/fly_mla-*_gsm8k_*))" \
		"DropMatch, GSM8K float32=$(firstword $(wildcard $(EVIDENCE_RESULTS)/runs/cpu_quality_fp32/dropmatch_*_gsm8k_*))" \
		--out $(EVIDENCE_RESULTS)/loss_breakdown.md
	$(PY) -m loosespec_bench.report verdicts results/cpu/claims.csv results/cpu/autojudge/claims.csv $(EVIDENCE_RESULTS)/claims.csv
	$(PY) -m pytest -q tests/report/claims/test_reviewer.py

# The archived n = 3 pilot (results/cpu/pilot_n3/README.md): its tables and plots redrawn with
# today's code from its own runs (the figures a reader opens are today's style; its index stays).
report-cpu-pilot: install-report  ## the archived n = 3 pilot's tables and plots, redrawn from its runs
	$(PY) -m loosespec_bench.report tables --results results/cpu/pilot_n3/runs --out results/cpu/pilot_n3
	$(PY) -m loosespec_bench.report plots --results results/cpu/pilot_n3/runs --out results/cpu/pilot_n3/plots

# The report notebook executed headless on the committed CPU replication (no model loads: it
# reads results/cpu/runs) and exported to HTML, which a reader opens in a browser, each figure
# with its caption.
notebook-html: install-report  ## notebooks/report.html: the report notebook executed on the committed CPU replication
	$(PY) -m pip install -q -e '.[notebook]'
	cd notebooks && $(abspath $(PY)) -m nbconvert --to html --execute --ExecutePreprocessor.timeout=600 report.ipynb --output report.html
