# Reports from result folders: included by the Makefile (`include report.mk`), which defines
# PY (the venv's python) and the `install` target.
#   make tables                      paper tables (Markdown, LaTeX, CSV) in reports/
#   make plots                       PNG + PDF plots in reports/plots/
#   make report                      both, plus reports/index.csv
#   make index                       list the runs
#   make report-cpu                  the CPU replication's tables, plots and index in results/cpu/
# Options: RESULTS=<results dir> REPORTS=<output dir> EXPERIMENT='fly_*' (a name or glob)
RESULTS ?= $(or $(LOOSESPEC_RESULTS_DIR),results)
REPORTS ?= reports
EXPERIMENT ?=
REPORT_ARGS = --results $(RESULTS) $(if $(EXPERIMENT),--experiment '$(EXPERIMENT)')

.PHONY: install-report tables plots report index report-cpu

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
