"""Zero-shot success of a model on every comprl env: the starting point RL improves on.

    python benchmarks/zero_shot.py                         # SmolLM2-135M, 20 evaluation seeds per env
    python benchmarks/zero_shot.py --model tiny-random --episodes 2 --max-turns 3   # check the script

Episodes run in lockstep (one batched generation call per turn) on the evaluation seeds
(``EVAL_SEED_OFFSET + i``: WebShop test goals, ALFWorld's out-of-distribution set), with the cpu profile's
sampling (temperature 0.7, "<answer>" pre-filled; --constrained restricts replies to the admissible actions) and each
env's own turn cap unless --max-turns is given.
The last column names the valid actions the model played, most frequent first, with their share of its valid
replies: RL can only reinforce actions that sampling ever produces.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import torch

from comprl.envs import ENV_IDS, make
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.llm import HFEngine, load_model, resolve_dtype
from comprl.actor.rollout import RolloutConfig, run_episodes, summarize

REPLY_TOKENS = {"comprl/SWE-Lite-v0": 192}
"""Reply budgets above the default 32 tokens, for envs whose actions are long."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--max-turns", type=int, default=None, help="default: each env's own cap")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: 32, SWE-lite 192 (a JSON tool call)")
    parser.add_argument("--envs", nargs="*", default=list(ENV_IDS))
    parser.add_argument("--dtype", default="auto", help="float32 | bfloat16 | auto (the cpu profile's)")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--constrained", action="store_true", help="replies restricted to the admissible actions")
    parser.add_argument(
        "--env-option", action="append", default=[], metavar="KEY=VALUE",
        help="a keyword of the envs' constructors, e.g. view=brief for MiniHack (repeatable)",
    )
    args = parser.parse_args()

    model, tokenizer = load_model(args.model, dtype=resolve_dtype(args.dtype, "cpu"))
    engine = HFEngine(model, tokenizer)
    seeds = [EVAL_SEED_OFFSET + i for i in range(args.episodes)]
    print(f"{args.model}, {args.episodes} evaluation seeds per env, temperature {args.temperature}"
          + (", constrained to admissible actions" if args.constrained else ""))
    print(f"{'env':32s} {'success':>8s} {'invalid':>8s} {'turns':>6s} {'wall s':>7s}  valid actions played")
    for env_id in args.envs:
        kwargs = dict(option.split("=", 1) for option in args.env_option)
        if args.max_turns is not None:
            kwargs["max_turns"] = args.max_turns
        envs = [make(env_id, **kwargs) for _ in seeds]
        tokens = args.max_new_tokens or REPLY_TOKENS.get(env_id, 32)
        rollout = RolloutConfig(
            max_new_tokens=tokens, temperature=args.temperature, response_prefix="<answer>",
            constrained_actions=args.constrained,
        )
        torch.manual_seed(0)
        started = time.perf_counter()
        trajectories = run_episodes(engine, envs, seeds, rollout)
        wall, stats = time.perf_counter() - started, summarize(trajectories)
        played = Counter(
            action
            for t in trajectories
            for m in t.messages
            if m["role"] == "assistant" and (action := envs[0].unwrapped.parse_action(m["content"])) is not None
        )
        total = sum(played.values()) or 1
        shares = ", ".join(f"{action} {n / total:.0%}" for action, n in played.most_common(4)) or "none"
        print(
            f"{env_id:32s} {stats['success_rate']:8.2f} {stats['invalid_action_rate']:8.2f} "
            f"{stats['mean_episode_length']:6.1f} {wall:7.0f}  {shares}"
        )


if __name__ == "__main__":
    main()
