# The README's two commands: `make demo` (4 of the cpu profile's 48 steps of notebook 01) and `make test`.
# Both create and fill .venv first (scripts/setup.sh).
.PHONY: setup demo test smoke lab

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/comprl run 01_single_task --profile cpu -p steps 4 --output-dir results/demo/01_single_task

# JupyterLab on the notebooks; as root (a container) jupyter refuses to start without --allow-root, so it is added
# there.
lab: setup
	.venv/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

smoke: setup
	.venv/bin/comprl run 01_single_task --profile smoke --output-dir results/demo-smoke/01_single_task

test: setup
	.venv/bin/python -m pytest -q
