"""Tuning the cpu profile until an actor visibly learns MiniHack Room: the attempts, run and tabulated.

    python scripts/cpu_tuning.py run lr5e-4 --seed 0 --cores 1      # one attempt (resumes if it was killed)
    python scripts/cpu_tuning.py table                               # every attempt so far, one row per run

Each attempt is a ``baseline`` (GRPO alone) run of the ``cpu`` profile with the overrides below, evaluated on 32
held-out episodes before (zero-shot) and after training, in ``results/tuning/<attempt>_seed<seed>``. The table
puts the uniformly random policy's success at the same turn cap next to them. An attempt stays in
:data:`ATTEMPTS` once run, so the table keeps what was tried.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1] / "results" / "tuning"
EVAL_EPISODES = 32

ATTEMPTS: dict[str, dict[str, Any]] = {
    # the cpu profile as shipped before tuning (lr 1e-4, LoRA 16, 2 x 4 rollouts, 6 turns, temperature 0.7)
    "profile_30steps": {"steps": 30},
    # a larger LoRA learning rate
    "lr5e-4": {"steps": 30, "actor.learning_rate": 5e-4},
    # twice the rollouts per step (4 instances x 4) with the larger rate
    "lr5e-4_b16": {"steps": 30, "actor.learning_rate": 5e-4, "batch_instances": 4},
    # sampling at temperature 1.0 (more varied moves, more invalid replies)
    "lr5e-4_t1": {"steps": 30, "actor.learning_rate": 5e-4, "rollout.temperature": 1.0},
}
"""Attempt name -> config overrides of the ``cpu`` profile."""


def run(name: str, seed: int, cores: list[int] | None) -> None:
    if cores:
        os.sched_setaffinity(0, cores)
    import torch

    from comprl import make_config, run_experiment, show_logs

    if cores:
        torch.set_num_threads(len(cores))
    show_logs()
    config = make_config("cpu", method="baseline", seed=seed, eval_episodes=EVAL_EPISODES, **ATTEMPTS[name])
    run_experiment(config, ROOT, name=f"{name}_seed{seed}", progress=False, resume=True)


def table() -> None:
    import pandas as pd

    from comprl import Run, load_metrics, make_config, random_policy_success

    runs = [Run(p) for p in sorted(ROOT.glob("*_seed*")) if (p / "run.duckdb").exists()]
    if not runs:
        print(f"no attempts under {ROOT}")
        return
    metrics = load_metrics(runs)
    rows = []
    for run_name, group in metrics.groupby("run", sort=False):
        train, evals = group[group.phase == "train"], group[group.phase == "eval"]
        first, last = evals[evals.step == 0], evals[evals.step == evals.step.max()] if len(evals) > 1 else evals.iloc[0:0]
        rows.append({
            "run": run_name,
            "steps": int(train.step.max()) if len(train) else 0,
            "zero_shot": first.success_rate.mean(),
            "after": last.success_rate.mean() if len(last) else float("nan"),
            "train_success_last5": train.tail(5).success_rate.mean(),
            "invalid_last5": train.tail(5).invalid_action_rate.mean(),
            "s_per_step": train.step_seconds.mean(),
        })
    config = make_config("cpu")
    print(f"random policy at {config.max_turns} turns: {random_policy_success(config.env_id, config.max_turns, EVAL_EPISODES):.3f}")
    with pd.option_context("display.width", 200):
        print(pd.DataFrame(rows).round(3).to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("attempt", choices=ATTEMPTS)
    go.add_argument("--seed", type=int, default=0)
    go.add_argument("--cores", type=int, nargs="+", default=None, help="pin to these cores (and as many torch threads)")
    sub.add_parser("table")
    args = parser.parse_args()
    if args.command == "run":
        run(args.attempt, args.seed, args.cores)
    else:
        table()


if __name__ == "__main__":
    main()
