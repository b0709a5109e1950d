# The README's two commands: `make demo` (notebook 07's mechanism check, cut to about 5 min) and `make test`.
# Both create and fill .venv first (scripts/setup.sh): the demo, JupyterLab and the smoke run with what runs need
# (setup-runs), the tests with their tools too (setup).
.PHONY: setup setup-runs demo demo-room test smoke lab

setup:
	bash scripts/setup.sh

setup-runs:
	bash scripts/setup.sh runs

# `make demo`: the mechanism check of notebook 07 cut to about 5 min on 2 quiet cores (NOTES.md has its time), a
# difference beyond its noise with its n and interval: the untrained SmolLM2-135M on MECH_EPISODES held-out vault
# episodes, free and guided by a lesson that states each vault's secret (Stage A, `stage_a.png`), then Complementary
# RL with the scripted extractor (the positive control) for MECH_STEPS steps, evaluated free and guided on
# MECH_EPISODES held-out episodes with the bank it wrote. `comprl run 07_mechanism --profile cpu` runs all of it.
MECH_STEPS = 6
MECH_EPISODES = 128
MECH_ARMS = {"scripted": {"method": "comp_rl", "extractor.model": "scripted"}}

demo: setup-runs
	.venv/bin/comprl run 07_mechanism --profile cpu -p seeds "[0]" -p steps $(MECH_STEPS) \
		-p stage_a_episodes $(MECH_EPISODES) -p stage_a_banks '["correct"]' -p arms '$(MECH_ARMS)' \
		-p overrides '{"eval_episodes": $(MECH_EPISODES)}' --output-dir results/demo/07_mechanism

# `make demo-room`, the lit-Room glimpse (4 of notebook 01's cpu steps), was `make demo` before issue 68: it aims at
# 5 min on 2 quiet cores, with an ETA in its log after every step, the last evaluations included:
# comp_rl and the baseline run at once, one pinned single-thread process per core (DEMO_JOBS; a run keeps its pace
# beside a busy neighbour there, where two torch threads of one run would spin on an oversubscribed core;
# DEMO_JOBS=1 on one core), for DEMO_STEPS steps. It shrinks the cpu profile to fit: one group of K = 8 rollouts a
# step (DEMO_INSTANCES; the profile plays 2), still halves of 4 for comp_rl; a quarter of them distilled, as in the
# profile (DEMO_DISTILL lessons); DEMO_EPISODES held-out episodes before and after training (the profile's 64 make
# evaluation most of a short run). Its numbers are a glimpse of the pipeline, not a result: NOTES.md has its time.
DEMO_STEPS = 4
DEMO_INSTANCES = 1
DEMO_DISTILL = 2
DEMO_EPISODES = 16
DEMO_JOBS = 2
DEMO_OVERRIDES = {"batch_instances": $(DEMO_INSTANCES), "extractor.distill_per_step": $(DEMO_DISTILL), \
	"eval_episodes": $(DEMO_EPISODES)}

demo-room: setup-runs
	.venv/bin/comprl run 01_single_task --profile cpu -p steps $(DEMO_STEPS) -p jobs $(DEMO_JOBS) \
		-p overrides '$(DEMO_OVERRIDES)' --output-dir results/demo/01_single_task

# JupyterLab on the notebooks; as root (a container) jupyter refuses to start without --allow-root, so it is added
# there.
lab: setup-runs
	.venv/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

smoke: setup-runs
	.venv/bin/comprl run 01_single_task --profile smoke --output-dir results/demo-smoke/01_single_task

# Two pytest-xdist workers, each running torch on one thread (tests/conftest.py): on 2 cores the suite took about
# half its time in one process (NOTES.md). More cores: make test TEST_WORKERS=4.
TEST_WORKERS = 2

test: setup
	.venv/bin/python -m pytest -q -n $(TEST_WORKERS)
