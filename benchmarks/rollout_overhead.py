"""Rollout overhead of the experience manager (paper RQ3): modes none / sync / async side by side, per batch size.

    python benchmarks/rollout_overhead.py                                   # tiny random models, 4..32 rollouts/step
    python benchmarks/rollout_overhead.py --profile cpu --batch-sizes 8 32  # SmolLM2-135M actor and extractor

Every (mode, batch size) is a real training run in a fresh process pinned to the actor's cores; the async manager
runs in a Ray process on the other cores (``comprl.kit.latency``). Prints, per batch size, the rollout and step time
per step, their ratio to ``none`` measured in the same run of this script, the search time and queries per step,
the actor's time in manager calls, and how its main thread spent the step: on a CPU, waiting for one (a large
wait means other processes crowded the actor's core, and the ratios overstate the manager's cost), or blocked. Then the
verdict against the
targets: async rollout <= 1.02x none at every size, sync visibly above. Writes the table (CSV) and the figure
(PNG, PDF) to ``--out``.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from comprl.kit.latency import DEFAULT_MODES, MODES, measure_overhead, plot_overhead, verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="smoke", choices=("smoke", "cpu"))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[4, 8, 16, 32], help="rollouts per step")
    parser.add_argument(
        "--modes", nargs="+", default=list(DEFAULT_MODES), choices=MODES,
        help="none is needed for the ratios; loaded is the baseline beside a busy neighbour on the manager's cores",
    )
    parser.add_argument(
        "--identical",
        action="store_true",
        help="every mode plays the same episodes (actor frozen, entries retrieved but not shown): "
        "the manager's cost alone",
    )
    parser.add_argument("--steps", type=int, default=8, help="training steps per run")
    parser.add_argument("--skip", type=int, default=2, help="warm-up steps dropped from every run")
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeats of the whole measurement (> 1: 95%% t intervals of the ratios)"
    )
    parser.add_argument("--out", default="results/rollout_overhead", help="run folders and the figure go here")
    parser.add_argument(
        "--resume", action="store_true",
        help="continue a killed call on the same --out: its finished batch sizes are read back, not measured again",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    table = measure_overhead(
        args.profile,
        args.batch_sizes,
        args.modes,
        steps=args.steps,
        skip=args.skip,
        output_dir=args.out,
        identical=args.identical,
        resume=args.resume,
        rounds=args.rounds,
    )
    plot_overhead(table, f"{args.out}/rollout_overhead")
    table.to_csv(f"{args.out}/rollout_overhead.csv", index=False)

    print(
        f"profile={args.profile}, {args.rounds} round(s) of {args.steps} steps per run, first {args.skip} dropped; "
        f"{table.attrs['core_split']}"
    )
    columns = [
        "batch_size",
        "mode",
        "steps",
        "rollout_s",
        "rollout_ratio",
        "rollout_ratio_low",
        "rollout_ratio_high",
        "processed",
        "per_token_ratio",
        "step_s",
        "step_ratio",
        "search_s",
        "queries",
        "experience_s",
        "actor_cpu_s",
        "actor_wait_s",
        "actor_blocked_s",
    ]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[columns].round(3).to_string(index=False))
    print(verdict(table))
    print(f"wall time {time.perf_counter() - started:.0f}s; figure and table in {args.out}/")


if __name__ == "__main__":
    main()
