"""What knowing the fixed stairs' corner is worth on comprl/Room-Dark-Fixed-5x5-v0 (issue 68; no LLM).

    nice -n 10 .venv/bin/python benchmarks/hidden_room.py                 # 500 held-out seeds, caps 4..30
    .venv/bin/python benchmarks/hidden_room.py --seeds 100 --caps 6 10

Three policies on the held-out seeds (``EVAL_SEED_OFFSET + i``), each episode played once with the largest cap
(no policy's moves depend on the cap, so "won on a turn <= c" is the success within a smaller cap c):

- random: a uniformly random admissible move each turn (its own generator per seed);
- seeker: `StairsSeeker`, which explores the dark room the way a careful player would, knowing nothing of the
  corner (the experts' policy of `benchmarks/turn_caps.py` and the reference bank);
- corner walker: `CornerWalker`, which knows that the stairs are in the south-east corner and reads only the
  brief view's text, as the actor does: what a lesson that states the secret is worth to a player who follows it;
- always southeast: the corner's move word every turn, as an actor that copies the lesson's word without reading
  the screen would play (it wins only from the room's diagonal).

Then `comprl.envs.random_policy_success` at ``--cap`` (the chosen cap), the floor the kit's evaluation reports.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np

from comprl.envs import make, random_policy_success
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, EVAL_SEED_OFFSET
from comprl.envs.minihack.hidden import STAIRS_CORNER, CornerWalker
from comprl.envs.minihack.solvers import StairsSeeker

ENV_ID = "comprl/Room-Dark-Fixed-5x5-v0"
DEFAULT_CAPS = (4, 6, 8, 10, 12, 15, 20, 30)
DEFAULT_CAP = 10
"""The cap reported by `random_policy_success` unless ``--cap`` says otherwise."""

Player = Callable[[str, dict[str, Any]], str]
"""A policy of one episode: the next action word for the last observation and info."""


def random_player(rng: np.random.Generator) -> Player:
    return lambda observation, info: info["admissible_actions"][rng.integers(len(info["admissible_actions"]))]


def seeker_player(env: gymnasium.Env) -> Player:
    seeker = StairsSeeker()
    return lambda observation, info: seeker.act(env.unwrapped)


def walker_player() -> Player:
    walker = CornerWalker()
    return lambda observation, info: walker.act(observation)


def winning_turn(env: gymnasium.Env, seed: int, new_player: Callable[[], Player]) -> int | None:
    """Play one episode on `seed` with a player made after the reset: the turn it was won on, or None."""
    observation, info = env.reset(seed=seed)
    player = new_player()
    while True:
        reply = f"{ANSWER_OPEN}{player(observation, info)}{ANSWER_CLOSE}"
        observation, _, terminated, truncated, info = env.step(reply)
        if info["success"]:
            return info["turn"]
        if terminated or truncated:
            return None


def success_table(seeds: int, caps: Sequence[int]) -> dict[str, list[float]]:
    """Per policy, the share of `seeds` held-out seeds won within each of `caps`."""
    env = make(ENV_ID, max_turns=max(caps), view="brief")
    held_out = [EVAL_SEED_OFFSET + i for i in range(seeds)]
    players: dict[str, Callable[[int], Callable[[], Player]]] = {
        "random": lambda i: lambda: random_player(np.random.default_rng([68, i])),
        "seeker": lambda i: lambda: seeker_player(env),
        "corner walker": lambda i: walker_player,
        "always SE": lambda i: lambda: lambda observation, info: STAIRS_CORNER,
    }
    try:
        turns = {name: [winning_turn(env, seed, make_player(i)) for i, seed in enumerate(held_out)]
                 for name, make_player in players.items()}
    finally:
        env.close()
    return {name: [sum(t is not None and t <= cap for t in won) / seeds for cap in caps] for name, won in turns.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=500, help="held-out seeds (default 500)")
    parser.add_argument("--caps", type=int, nargs="+", default=list(DEFAULT_CAPS), help="turn caps of the table")
    parser.add_argument("--cap", type=int, default=DEFAULT_CAP, help="the cap random_policy_success is run at")
    args = parser.parse_args()
    if args.seeds < 1 or min(args.caps) < 1 or args.cap < 1:
        parser.error(f"seeds={args.seeds}, caps={args.caps}, cap={args.cap}: expected integers >= 1")
    caps = sorted(set(args.caps))
    started = time.perf_counter()
    table = success_table(args.seeds, caps)
    print(f"{ENV_ID}, {args.seeds} held-out seeds, {time.perf_counter() - started:.0f} s")
    print(f"{'cap':>4}" + "".join(f"  {name:>13}" for name in table))
    for column, cap in enumerate(caps):
        print(f"{cap:>4}" + "".join(f"  {shares[column]:>13.3f}" for shares in table.values()))
    floor = random_policy_success(ENV_ID, max_turns=args.cap, episodes=args.seeds)
    print(f"random_policy_success({ENV_ID!r}, max_turns={args.cap}, episodes={args.seeds}) = {floor:.3f}")


if __name__ == "__main__":
    main()
