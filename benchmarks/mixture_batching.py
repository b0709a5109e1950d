"""What generating a mixture's tasks in one batch costs a CPU rollout, measured side by side in one run.

    python benchmarks/mixture_batching.py                       # the cpu profile's 3-task step, 3 rounds
    taskset -c 1 python benchmarks/mixture_batching.py --threads 1 --tasks 6-task

Both arms play the training rollout of notebook 02's cpu runs (the cpu profile, one instance per task, 8
rollouts each, up to each task's turn cap) with SmolLM2-135M as the actor holds it (the profile's sampling path):

- ``per_task``: :func:`comprl.actor.rollout.run_episodes` as it runs, one ``generate`` call per task and turn;
- ``one_batch``: every active episode of a turn in one call, as before per-task calls (a batch is left padded to
  its longest prompt and prefills every row's longest uncached suffix, so a Room row pays for a WebShop page).

Each round plays new instances (seeds 100 x round); within a round both arms start from the same torch seed, so
their first turns are identical and they part where sampling does. The script prints each arm's rollout seconds
summed over the rounds, the prompt tokens it generated from, and its time's ratio to ``per_task``'s.
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from unittest import mock

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="steps every arm plays (new instances each round)")
    parser.add_argument("--tasks", default="3-task", help="the mixture preset (default 3-task)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from comprl.actor import rollout
    from comprl.config import make_config
    from comprl.llm import HFEngine, load_model, resolve_dtype
    from comprl.actor.trainer import ActorTrainer

    config = make_config("cpu", method="baseline", tasks=args.tasks, batch_instances=1)
    model, tokenizer = load_model(config.model, dtype=resolve_dtype(config.dtype, "cpu"))
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    mixture = config.mixture()
    envs = [env for env_id, n in mixture.batch.items() for env in mixture.make_envs(env_id, n * config.group_size)]

    def one_batch(engine, trajectories, active, params, sessions, choices):
        return engine.generate(
            [trajectories[i].token_ids for i in active], params, sessions=[sessions[i] for i in active], choices=choices
        )

    arms = {"per_task": None, "one_batch": one_batch}
    seconds = dict.fromkeys(arms, 0.0)
    prompt_tokens = dict.fromkeys(arms, 0)
    for round_ in range(args.rounds):
        seeds = [100 * round_ + i // config.group_size for i in range(len(envs))]
        for name, replacement in arms.items():
            engine = HFEngine(actor.model, tokenizer, adapter_dtype=config.actor.generation_adapter_dtype)
            torch.manual_seed(round_)
            patch = mock.patch.object(rollout, "_generate_by_task", replacement) if replacement else nullcontext()
            started = time.perf_counter()
            with patch:
                rollout.run_episodes(engine, envs, seeds, config.rollout)
            seconds[name] += time.perf_counter() - started
            prompt_tokens[name] += engine.stats["prompt_tokens"] - engine.stats["reused_prompt_tokens"]
            print(f"round {round_}: {name} {seconds[name]:.1f} s so far", flush=True)
    turns = max(map(mixture.turns, mixture.env_ids))
    print(f"\n{args.tasks}, {len(envs)} rollouts of up to {turns} turns, {args.rounds} rounds, "
          f"{torch.get_num_threads()} threads")
    print(f"{'arm':<10} {'rollout s':>10} {'uncached prompt tokens':>23} {'time / per_task':>16}")
    for name in arms:
        print(
            f"{name:<10} {seconds[name]:>10.1f} {prompt_tokens[name]:>23,} {seconds[name] / seconds['per_task']:>16.2f}"
        )


if __name__ == "__main__":
    main()
