"""What two details of generation cost a CPU rollout, measured side by side in one run.

    python benchmarks/generation_overheads.py                   # the cpu profile's 16 Room episodes, 2 rounds
    taskset -c 1 python benchmarks/generation_overheads.py --threads 1

Every arm plays the same step of the cpu profile (its envs, seeds, 4 x 4 rollouts of up to 6 turns) with the
actor as the trainer holds it (SmolLM2-135M, LoRA adapters in float32 over bfloat16 weights where the CPU has
native bfloat16), adapters made non-zero as after training:

- ``comprl``: the engine as it runs (:class:`comprl.llm.HFEngine`);
- ``strided_head_input``: without the contiguous copy of the LM head's input in generate's prompt pass (torch
  then copies the head's weight once per batch row);
- ``float32_adapters``: ``generation_adapter_dtype="float32"``, peft's own float32 adapter products.

Arms alternate over ``--rounds`` rounds; the script prints each arm's best rollout time, its ratio to ``comprl``'s,
and whether its episodes equal ``comprl``'s (same seed: the contiguous copy changes no sampled token).
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from unittest import mock

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="times every arm plays the step (best time kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from comprl.config import make_config
    from comprl.llm import HFEngine, load_model, resolve_dtype
    from comprl.actor.rollout import run_episodes
    from comprl.actor.trainer import ActorTrainer

    config = make_config("cpu", method="baseline")
    model, tokenizer = load_model(config.model, dtype=resolve_dtype(config.dtype, "cpu"))
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    torch.manual_seed(0)
    for parameter in actor.model.parameters():  # adapters as after training (peft starts B at zero)
        if parameter.requires_grad:
            torch.nn.init.normal_(parameter, std=0.01)
    envs = config.mixture().make_envs(config.env_id, config.batch_instances * config.group_size)
    groups = [row // config.group_size for row in range(len(envs))]
    arms = {
        "comprl": ("model", None),
        "strided_head_input": (
            "model",
            mock.patch("comprl.llm.engine._contiguous_head_input", lambda model: nullcontext()),
        ),
        "float32_adapters": ("float32", None),
    }
    best: dict[str, float] = {}
    episodes: dict[str, list[tuple[int, ...]]] = {}
    for _ in range(args.rounds):
        for name, (adapter_dtype, patch) in arms.items():
            engine = HFEngine(actor.model, tokenizer, adapter_dtype=adapter_dtype)
            torch.manual_seed(1)
            with patch or nullcontext():
                started = time.perf_counter()
                played = run_episodes(engine, envs, groups, config.rollout, groups=groups)
                took = time.perf_counter() - started
            best[name] = min(best.get(name, float("inf")), took)
            episodes[name] = [tuple(t.token_ids) for t in played]
            print(f"{name}: {took:.1f} s", flush=True)
    print(f"\nrollout of {len(envs)} episodes, {torch.get_num_threads()} torch thread(s), best of {args.rounds}:")
    for name in arms:
        same = "same episodes" if episodes[name] == episodes["comprl"] else "other episodes"
        print(f"  {name:20s} {best[name]:6.1f} s  x{best[name] / best['comprl']:.2f} of comprl's  ({same})")


if __name__ == "__main__":
    main()
