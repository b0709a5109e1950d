# The README's two commands: `make demo` (cpu profile of notebook 01) and `make test` (the test suite).
# Both create and fill .venv first (scripts/setup.sh).
.PHONY: setup demo test smoke

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/comprl run 01_single_task --profile cpu --output-dir results/01_single_task_cpu

smoke: setup
	.venv/bin/comprl run 01_single_task --profile smoke --output-dir results/01_single_task_smoke

test: setup
	.venv/bin/python -m pytest -q
