"""Can the actor use good experience? The untrained actor on held-out episodes, guided by a reference bank vs free.

    nice -n 5 .venv/bin/python benchmarks/reference_bank.py                      # lit Room, 64 episodes
    nice -n 5 .venv/bin/python benchmarks/reference_bank.py --tasks comprl/Room-Random-5x5-v0 \\
        comprl/Room-Ultimate-5x5-v0 --episodes 64

A reference bank (`comprl.kit.reference_bank`: lessons written from the experts' play on training seeds) is
written for the tasks, and the profile's untrained actor (cpu: SmolLM2-135M with constrained choice, evaluation
temperature 0.7) plays each task's held-out seeds twice through the library's evaluation
(`comprl.evaluation.play`, the episodes `evaluate` sums up): free, and with every episode guided by the entry
the experience manager retrieves from a copy of the bank (method ``static``, as a run started with
``bank.init_from`` would; evaluation searches record nothing; ``experience.warmup=0``, since a task with fewer
lessons than the profile's warm-up would be gated). Both passes play the same seeds from the same random
streams, so the only difference is the lesson in the prompt. Prints per task: free and guided success with 95%
Wilson intervals, the difference, how many guided episodes were shown an entry, the seeds won by one pass only
with the paired t and the exact sign test on them (and the smallest p their count allows), and (MiniHack) how
many were shown the lesson for what their first observation shows (the stairs, the key, a door, nothing useful)
and how many first moves, free and guided, are the move the stairs rule gives for the first view. ``--told`` adds
a third pass whose lesson is narrowed to the rule's one move for the episode's first view (an upper bound on what
the lesson can tell the actor at the first turn; the counts above cover the first two passes).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import tempfile
import time
from pathlib import Path

from comprl.actor.rollout import Trajectory
from comprl.config import make_config
from comprl.envs.base import extract_answer
from comprl.evaluation import task_metrics
from comprl.kit.reference_bank import (
    MINIHACK_IDS, REFERENCE_TASKS, ROOM_LIT, Turn, rule_moves, situation, write_reference_bank,
)
from comprl.kit.evaluate import wilson_interval
from comprl.kit.guidance import guidance_row, guided_and_free
from comprl.kit.stats import paired_from_discordant


def rate(successes: int, n: int) -> str:
    low, high = wilson_interval(successes, n)
    return f"{successes / n:.3f} [{low:.3f}, {high:.3f}]"


def matches_view(query: str, title: str) -> bool:
    """Whether a MiniHack lesson is about the kind of thing (stairs, key, door, nothing) the query's view shows."""
    kind, _ = situation(Turn(query, ""))  # the instruction holds no "You see:" list
    return kind in title


def follows(trajectory: Trajectory, table: dict[str, str]) -> bool | None:
    """Whether an episode's first move is the one the rule ``table`` gives for its first view (None: no rule)."""
    _, direction = situation(Turn(trajectory.messages[1]["content"], ""))
    if direction not in table:
        return None
    return extract_answer(trajectory.messages[2]["content"]) == table[direction]


def adherence(trajectories: list[Trajectory], table: dict[str, str]) -> str:
    """How many episodes' first move follows the rule, of those whose first view the rule covers."""
    marks = [mark for t in trajectories if (mark := follows(t, table)) is not None]
    return f"{sum(marks)}/{len(marks)}"


def told(search, queries, **kwargs) -> list:
    """``search``'s entries with a stairs rule narrowed to the one move it gives for the query's first view ("The
    stairs down are to the east: answer <answer>northeast</answer>."): the most usable form of the same lesson."""
    entries = search(queries, **kwargs)
    narrowed = []
    for query, entry in zip(queries, entries):
        kind, direction = situation(Turn(query, ""))
        table = {} if entry is None else rule_moves(entry.content)
        if direction in table and kind in entry.title:
            entry = dataclasses.replace(entry, content=f"{kind.capitalize()} are to the {direction}: answer "
                                                       f"<answer>{table[direction]}</answer>.")
        narrowed.append(entry)
    return narrowed


def compare(env_id: str, bank: Path, args: argparse.Namespace) -> None:
    """Evaluate free and guided on one task and print the row."""
    # warm-up 0: the lit Room's bank holds one lesson, under the profile's warm-up of 5, which would gate it
    overrides = {"env_id": env_id, "eval_episodes": args.episodes, "method": "static", "seed": args.seed,
                 "experience.warmup": 0}
    config = make_config(args.profile, **overrides)
    started = time.perf_counter()
    narrowed = (lambda search: functools.partial(told, search)) if args.told else None
    passes = guided_and_free(config, bank, extra_search=narrowed)
    seconds = time.perf_counter() - started
    free_episodes, guided_episodes, shown, told_episodes = passes.free, passes.guided, passes.shown, passes.extra
    row = guidance_row(passes)
    n = row["episodes"]
    free, guided = task_metrics(free_episodes), task_metrics(guided_episodes)
    print(f"\n{env_id} ({config.model}, profile {args.profile}, {n} held-out episodes, {seconds:.0f} s)")
    for name, metrics in (("free", free), ("guided", guided)):
        interval = f"[{row[f'{name}_low']:.3f}, {row[f'{name}_high']:.3f}]"
        print(f"  {name:<6}  success {row[f'{name}_success']:.3f} {interval}  invalid actions "
              f"{metrics['invalid_action_rate']:.3f}")
    print(f"  guided - free = {row['guided_minus_free']:+.3f}; guided episodes shown an entry: "
          f"{row['guided_with_entry']}/{n}")
    print(f"  seeds won only guided: {row['won_only_guided']}, only free: {row['won_only_free']}")
    print(f"  paired: {paired_from_discordant(n, row['won_only_guided'], row['won_only_free']).describe()}")
    if told_episodes is not None:
        told_wins = sum(t.success for t in told_episodes)
        print(f"  told    success {rate(told_wins, n)}  (the rule's move for the first view, as the lesson)")
    if env_id in MINIHACK_IDS:
        on_point = sum(entry is not None and matches_view(q, entry.title) for q, entry in shown)
        print(f"  shown the lesson for what their first view shows: {on_point}/{n}")
        stairs = [entry for _, entry in shown if entry is not None and "stairs down" in entry.title]
        table = rule_moves(stairs[0].content) if stairs else {}
        if table:
            told_part = "" if told_episodes is None else f", told {adherence(told_episodes, table)}"
            print(f"  first move as the stairs rule says: free {adherence(free_episodes, table)}, guided "
                  f"{adherence(guided_episodes, table)}{told_part}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=[ROOM_LIT], choices=REFERENCE_TASKS, metavar="ENV_ID",
                        help=f"env ids (default: {ROOM_LIT})")
    parser.add_argument("--episodes", type=int, default=64, help="held-out episodes per task (default 64)")
    parser.add_argument("--profile", default="cpu", help="config profile of the actor (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="run seed: evaluation streams and the bank's seed")
    parser.add_argument("--told", action="store_true",
                        help="a third pass shown only the rule's move for each episode's first view")
    parser.add_argument("--bank", type=Path, help="an existing reference bank file (default: write one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        bank = args.bank
        if bank is None:
            bank = Path(folder) / "reference.duckdb"
            started = time.perf_counter()
            written = write_reference_bank(bank, args.tasks, seed=args.seed, config=make_config(args.profile))
            counts = ", ".join(f"{env_id}: {len(ids)}" for env_id, ids in written.items())
            print(f"reference bank written in {time.perf_counter() - started:.0f} s ({counts} entries)")
        for env_id in args.tasks:
            compare(env_id, bank, args)


if __name__ == "__main__":
    main()
