"""Win rates of the scripted solvers: the Sokoban solver's plans and the MiniHack seeker on River-Narrow.

    python benchmarks/solver_win_rates.py                  # 100 seeds each
    python benchmarks/solver_win_rates.py --seeds 20       # quicker

Sokoban: for each seed, the solver's plan for the generated level is replayed in the env (30-turn cap).
River-Narrow: the scripted seeker plays each seed with a long cap (--river-turns, default 100); since its
moves never depend on the cap, the same episodes also give the wins within the paper's 30 turns.
"""

from __future__ import annotations

import argparse
import time

from comprl.envs import make
from comprl.envs.sokoban.solver import solve

PAPER_MAX_TURNS = 30


def sokoban_wins(seeds: range) -> int:
    """Episodes won by replaying the solver's plan, one per seed."""
    env = make("comprl/Sokoban-6x6-2box-v0", max_turns=PAPER_MAX_TURNS)
    wins = 0
    for seed in seeds:
        env.reset(seed=seed)
        plan = solve(env.unwrapped.level.room, env.unwrapped.state, max_moves=PAPER_MAX_TURNS) or ()
        info: dict = {}
        for move in plan:
            _, _, terminated, truncated, info = env.step(move)
            if terminated or truncated:
                break
        wins += bool(info.get("success"))
    return wins


def river_turns(seeds: range, max_turns: int) -> list[int | None]:
    """Per seed, the turn on which the seeker reached the stairs, or None when it did not within `max_turns`."""
    from comprl.envs.minihack.solvers import StairsSeeker  # Needs nle, like the env itself.

    env = make("comprl/River-Narrow-v0", max_turns=max_turns)
    results: list[int | None] = []
    for seed in seeds:
        env.reset(seed=seed)
        agent = StairsSeeker()
        terminated = truncated = False
        info: dict = {}
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(agent.act(env.unwrapped))
        results.append(info["turn"] if info["success"] else None)
    env.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100, help="seeds 0..N-1 for each env")
    parser.add_argument("--river-turns", type=int, default=100, help="turn cap of the River episodes")
    args = parser.parse_args()
    seeds = range(args.seeds)

    started = time.perf_counter()
    wins = sokoban_wins(seeds)
    print(f"Sokoban-6x6-2box: solver plan wins {wins}/{len(seeds)} within {PAPER_MAX_TURNS} turns "
          f"({time.perf_counter() - started:.1f} s)")

    started = time.perf_counter()
    turns = river_turns(seeds, args.river_turns)
    within_paper_cap = sum(turn is not None and turn <= PAPER_MAX_TURNS for turn in turns)
    won = sum(turn is not None for turn in turns)
    print(f"River-Narrow: seeker wins {within_paper_cap}/{len(seeds)} within {PAPER_MAX_TURNS} turns, "
          f"{won}/{len(seeds)} within {args.river_turns} ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
