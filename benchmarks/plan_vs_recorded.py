"""The planner's step times against the step times finished runs recorded, per notebook, as ratios.

    python benchmarks/plan_vs_recorded.py        # results/cpu/ against the cpu measurements in results/throughput/
    python benchmarks/plan_vs_recorded.py --results results/cpu --throughput results/throughput/<device>.json

Every finished run directly under a notebook folder of ``--results`` (a linked copy counted once, under the first
notebook that holds it) is priced from its own config (``comprl.kit.planner.step_time``) at the measured rates,
and compared with the median of its training rows' ``step_seconds`` and of their ``rollout_seconds``,
``update_seconds`` and ``experience_seconds`` (the extractor's calls and updates). A ratio is planned / recorded,
summed over a notebook's runs; 1 is a plan that prices what the runs took, above 1 an overpriced plan. The runs
ran on the machine of their reproduction, the measurement may come from another: read the ratios across
notebooks and phases (how far the plan's shape is off), and their level as that of the two machines.
"""

from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=REPO / "results" / "cpu", help="a reproduction's folder")
    parser.add_argument("--throughput", type=Path, default=None, help="a measurement (default: the cpu ones found)")
    args = parser.parse_args()

    from comprl.kit.planner import THROUGHPUT_DIR, find_throughputs, load_throughput, step_budget, step_time
    from comprl.runs import Run

    measured = [load_throughput(args.throughput)] if args.throughput else find_throughputs(THROUGHPUT_DIR, "cpu")[0]
    if not measured:
        raise SystemExit(f"no cpu measurement in {THROUGHPUT_DIR}; pass one with --throughput")
    phases = {"step": "step_seconds", "rollout": "rollout_seconds", "actor update": "update_seconds",
              "extractor": "experience_seconds"}
    for throughput in measured:
        print(f"plan from {throughput.path.name} ({throughput.device}) / recorded in {args.results}:")
        print(f"  {'notebook':20s} {'runs':>4s} " + " ".join(f"{name:>13s}" for name in phases)
              + f" {'planned step':>13s} {'recorded step':>13s}")
        seen: set[Path] = set()
        for notebook in sorted(p for p in args.results.iterdir() if p.is_dir()):
            planned = dict.fromkeys(phases, 0.0)
            recorded = dict.fromkeys(phases, 0.0)
            runs = 0
            for folder in sorted(p for p in notebook.iterdir() if (p / "config.json").is_file()):
                run = Run(folder)
                if not run.finished or folder.resolve() in seen:
                    continue
                seen.add(folder.resolve())
                config = run.config()
                took = step_time(config, step_budget(config), throughput)
                rows = run.metrics()
                rows = rows[rows.phase == "train"]
                plan = {"step": took.step, "rollout": took.rollout, "actor update": took.actor_update,
                        "extractor": took.extraction + took.extractor_update}
                for name, column in phases.items():
                    if column in rows and rows[column].notna().any():
                        planned[name] += plan[name]
                        recorded[name] += float(rows[column].median())
                runs += 1
            if not runs:
                continue
            ratios = " ".join(
                f"{planned[name] / recorded[name]:13.2f}" if recorded[name] else f"{'-':>13s}" for name in phases
            )
            print(f"  {notebook.name:20s} {runs:4d} {ratios} {planned['step'] / runs:12.1f}s "
                  f"{recorded['step'] / runs:12.1f}s")
        print("  ratios: planned / recorded, summed over the runs (a run's recorded time: its median training step)")


if __name__ == "__main__":
    main()
