"""Per-task turn caps: how often an expert and a uniformly random policy win within each cap (no LLM).

    nice -n 5 .venv/bin/python benchmarks/turn_caps.py                         # every task, default seeds
    .venv/bin/python benchmarks/turn_caps.py --tasks comprl/Sokoban-6x6-2box-v0 --seeds 20 --caps 6 10 30

Tasks: every env id of the 3-task and 6-task mixtures (`comprl.envs.mixture.MIXTURES`) and the single-task
Room ids of the cpu (lit Room) and paper (dark Room) profiles. Seeds are the held-out ones the training loop
evaluates on (``EVAL_SEED_OFFSET + i``: WebShop's test goals, ALFWorld's ``valid_unseen`` games). Default
seeds per task (`DEFAULT_SEEDS`): 500, and ALFWorld's 134 evaluation games; WebShop's searches are the slow
part. The default invocation took 4-5 min on one busy core.

Policies:

- expert (`comprl.kit.reference_bank.expert`, beside the reference bank's lessons made from it): MiniHack, the
  screen-reading `StairsSeeker` (`comprl.envs.minihack.solvers`; it also fetches KeyRoom's key and opens the
  door); Sokoban, a shortest solution from `comprl.envs.sokoban.solver.solve` replayed; ALFWorld,
  `comprl.envs.alfworld.official.expert_plan` (the walkthrough written into exported games: it reads where the
  goal objects are from the scene, as ALFWorld's handcoded expert reads the game state); WebShop, a scripted
  shopper (`webshop_expert`) that knows the goal: it searches the goal's instruction, pages to the goal product,
  clicks it, selects the goal's options and buys. SWE-lite is skipped (`SKIPPED`). The Sokoban, ALFWorld and
  WebShop experts know the solution or where the goal is, so their turns are a floor on what a player who has to
  look needs; the MiniHack seeker explores what it cannot see.
- random: each turn an action drawn uniformly from ``info["admissible_actions"]``, the list the actor's
  constrained choice draws from. WebShop's search page lists only ``search[<your query>]``, which the random
  policy sends as it is (the actor fills the placeholder with free text): that search finds nothing, so the
  random policy never wins WebShop.

Neither policy's moves depend on the cap (each random episode draws from a generator of its own, seeded by task
and seed), so every episode is played once, with the largest cap, and the success within a smaller cap c is
"won on a turn <= c": the largest cap's run gives every smaller cap's number. `tests/test_turn_caps.py` checks
this against episodes played with the smaller cap itself.

Prints one table per task (cap, expert success, random success), the turns the expert needed (median, p90 and
max over the episodes it won; the share it did not win within the largest cap), and writes a CSV
(``--csv``, default ``results/design/turn_caps.csv``; columns task, env_id, cap, seeds, expert_success,
random_success).
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from comprl.config import PROFILES
from comprl.envs import make
from comprl.envs.alfworld.scenes import split_size
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, EVAL_SEED_OFFSET
from comprl.envs.mixture import MIXTURES, task_name
from comprl.kit.reference_bank import MINIHACK_IDS, Policy, expert

TASKS: tuple[str, ...] = tuple(
    dict.fromkeys((*MIXTURES["3-task"], *MIXTURES["6-task"], PROFILES["cpu"].env_id, PROFILES["paper"].env_id))
)
"""The env ids measured: both mixtures' tasks and the single-task Room ids (lit: cpu profile; dark: paper)."""
DEFAULT_CAPS = (3, 6, 8, 10, 12, 15, 20, 30)
DEFAULT_SEEDS = {env_id: 500 for env_id in TASKS} | {"comprl/ALFWorld-v0": split_size("eval")}
"""Held-out seeds per task when ``--seeds`` is not given: 500 (WebShop's test goals), ALFWorld's 134 evaluation
games (more seeds would replay them)."""
SKIPPED = {
    "comprl/SWE-Lite-v0": "not in either mixture; its actions are free-form tool calls (no admissible list for a "
    "random policy to draw from) and an expert would replay the gold patch inside the bubblewrap sandbox",
}
"""Env ids left out, with the reason printed."""
DEFAULT_CSV = Path("results/design/turn_caps.csv")

def random_policy(rng: np.random.Generator) -> Policy:
    """Uniform over the admissible actions the env lists each turn."""
    return lambda info: info["admissible_actions"][rng.integers(len(info["admissible_actions"]))]


def winning_turn(env: gymnasium.Env, seed: int, make_policy: Callable[[Any], Policy]) -> int | None:
    """Play one episode on `seed`: the turn on which it was won, or None (lost, cut at the cap, or given up)."""
    _, info = env.reset(seed=seed)
    policy = make_policy(env.unwrapped)
    while True:
        action = policy(info)
        if action is None:
            return None
        _, _, terminated, truncated, info = env.step(f"{ANSWER_OPEN}{action}{ANSWER_CLOSE}")
        if info["success"]:
            return info["turn"]
        if terminated or truncated:
            return None


@dataclass(frozen=True)
class CapResult:
    """Both policies' winning turns on the seeds of one task, played with the largest cap."""

    env_id: str
    max_cap: int
    expert_turns: tuple[int | None, ...]
    random_turns: tuple[int | None, ...]

    @property
    def seeds(self) -> int:
        return len(self.expert_turns)

    def success(self, cap: int, policy: str = "expert") -> float:
        """Share of the seeds won within `cap` turns by "expert" or "random"."""
        if not 1 <= cap <= self.max_cap:
            raise ValueError(f"cap {cap} outside the measured 1..{self.max_cap}")
        if policy not in ("expert", "random"):
            raise ValueError(f"unknown policy {policy!r}; accepted: expert, random")
        turns = self.expert_turns if policy == "expert" else self.random_turns
        return sum(turn is not None and turn <= cap for turn in turns) / len(turns)


def measure(env_id: str, seeds: int, caps: Sequence[int]) -> CapResult:
    """Play the expert and the random policy once on each of `seeds` held-out seeds with the largest of `caps`."""
    if env_id not in TASKS:
        raise ValueError(f"unknown task {env_id!r}; accepted: {', '.join(TASKS)}")
    if seeds < 1 or not caps or min(caps) < 1:
        raise ValueError(f"seeds={seeds}, caps={list(caps)}: expected seeds >= 1 and caps >= 1")
    max_cap = max(caps)
    # the view only changes the observation text; the brief one is the cheapest to render
    options = {"view": "brief"} if env_id in MINIHACK_IDS else {}
    env = make(env_id, max_turns=max_cap, **options)
    try:
        held_out = [EVAL_SEED_OFFSET + i for i in range(seeds)]
        expert_turns = tuple(winning_turn(env, seed, lambda e: expert(env_id, e)) for seed in held_out)
        task = TASKS.index(env_id)
        random_turns = tuple(
            winning_turn(env, seed, lambda e, i=i: random_policy(np.random.default_rng([task, i])))
            for i, seed in enumerate(held_out)
        )
    finally:
        env.close()
    return CapResult(env_id, max_cap, expert_turns, random_turns)


def expert_turn_summary(result: CapResult) -> str:
    """Median, p90 and max of the turns the expert needed on the seeds it won, and the share it did not win."""
    won = [turn for turn in result.expert_turns if turn is not None]
    unsolved = 1 - len(won) / result.seeds
    if not won:
        return f"expert won no seed within {result.max_cap} turns"
    median, p90 = np.percentile(won, [50, 90])
    return (
        f"expert turns on the {len(won)} seeds won: median {median:g}, p90 {p90:g}, max {max(won)}; "
        f"not won within {result.max_cap}: {unsolved:.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS, metavar="ENV_ID",
                        help=f"env ids (default: {' '.join(TASKS)})")
    parser.add_argument("--seeds", type=int, help="held-out seeds per task (default: 500; ALFWorld 134)")
    parser.add_argument("--caps", type=int, nargs="+", default=list(DEFAULT_CAPS), help="turn caps")
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="where to write the table")
    args = parser.parse_args()
    caps = sorted(set(args.caps))

    rows = []
    for env_id in args.tasks:
        started = time.perf_counter()
        result = measure(env_id, args.seeds or DEFAULT_SEEDS[env_id], caps)
        print(f"\n{task_name(env_id)} ({env_id}), {result.seeds} seeds, {time.perf_counter() - started:.0f} s")
        print(f"{'cap':>4}  {'expert':>6}  {'random':>6}")
        for cap in caps:
            expert_success, random_success = result.success(cap), result.success(cap, "random")
            print(f"{cap:>4}  {expert_success:>6.2f}  {random_success:>6.2f}")
            rows.append((task_name(env_id), env_id, cap, result.seeds, expert_success, random_success))
        print(expert_turn_summary(result))
    for env_id, reason in SKIPPED.items():
        print(f"\n{env_id}: not measured: {reason}")

    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("task", "env_id", "cap", "seeds", "expert_success", "random_success"))
        writer.writerows((*row[:4], f"{row[4]:.3f}", f"{row[5]:.3f}") for row in rows)
    print(f"\nwrote {args.csv}")


if __name__ == "__main__":
    main()
