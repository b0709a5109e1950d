"""Rollout throughput: lockstep batched generation vs one environment at a time, measured side by side.

    python benchmarks/rollout_throughput.py                      # SmolLM2-135M, 8 Room episodes
    python benchmarks/rollout_throughput.py --model tiny-random  # quick check of the script itself

Both arms play the same seeds with the same sampling settings; the script prints each arm's generated tokens,
wall time and tokens/s, and the ratio batched / sequential (machines are noisy: read the ratio).
"""

from __future__ import annotations

import argparse
import time

import torch

from comprl.envs import make
from comprl.llm import HFEngine, load_model
from comprl.rollout import RolloutConfig, run_episodes


def measure(engine: HFEngine, env_id: str, seeds: list[int], rollout: RolloutConfig, max_turns: int, batched: bool) -> dict[str, float]:
    envs = [make(env_id, max_turns=max_turns) for _ in seeds]
    torch.manual_seed(0)
    started = time.perf_counter()
    if batched:
        trajectories = run_episodes(engine, envs, seeds, rollout)
    else:
        trajectories = [t for env, seed in zip(envs, seeds) for t in run_episodes(engine, [env], [seed], rollout)]
    seconds = time.perf_counter() - started
    tokens = sum(t.num_action_tokens for t in trajectories)
    turns = sum(t.turns for t in trajectories)
    return {"tokens": tokens, "turns": turns, "seconds": seconds, "tokens_per_s": tokens / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="comprl/Room-Ultimate-5x5-v0")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=12)
    args = parser.parse_args()

    model, tokenizer = load_model(args.model)
    engine = HFEngine(model, tokenizer)
    rollout = RolloutConfig(max_new_tokens=args.max_new_tokens, temperature=0.7, response_prefix="<answer>")
    seeds = list(range(args.episodes))
    measure(engine, args.env, seeds[:1], rollout, 1, batched=True)  # warm-up
    results = {
        "batched": measure(engine, args.env, seeds, rollout, args.turns, batched=True),
        "sequential": measure(engine, args.env, seeds, rollout, args.turns, batched=False),
    }
    print(f"{args.model} on {args.env}: {args.episodes} episodes x up to {args.turns} turns, torch threads={torch.get_num_threads()}")
    for name, r in results.items():
        print(f"  {name:10s} tokens={r['tokens']:5.0f} turns={r['turns']:3.0f} wall={r['seconds']:7.1f}s  tokens/s={r['tokens_per_s']:6.1f}")
    ratio = results["batched"]["tokens_per_s"] / results["sequential"]["tokens_per_s"]
    print(f"  ratio batched/sequential tokens/s = {ratio:.2f}x")


if __name__ == "__main__":
    main()
