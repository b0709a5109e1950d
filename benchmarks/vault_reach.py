"""Which vaults the untrained actor can reach (issue 68): its moves and its wins per vault of ``comprl/Vault-v0``
at the mechanism check's rollout settings (the cpu profile's SmolLM2-135M, temperature 2.0), no experience.

    nice -n 10 python benchmarks/vault_reach.py                 # 48 rollouts per vault (minutes)
    nice -n 10 python benchmarks/vault_reach.py --per-vault 16

Only a win writes a scripted lesson, so a vault whose secret the actor seldom plays stays out of the bank: this
prints how often each move is played over all rollouts and each vault's success (free success is 1/8 on average
for any actor that ignores the vault; a lopsided actor reaches some vaults often and others almost never).
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch

from comprl.actor.rollout import run_episodes
from comprl.envs.base import extract_answer
from comprl.kit.mechanism import FAMILY_SIZE, VAULT, mechanism_config, vaults
from comprl.llm import HFEngine, load_model, resolve_dtype


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-vault", type=int, default=48, help="rollouts per vault")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = mechanism_config("cpu", method="baseline")
    engine = HFEngine(*load_model(config.model, dtype=resolve_dtype(config.dtype, "cpu")))
    torch.manual_seed(args.seed)
    # seeds 1000 + v meet vault v (seed mod 8); no seed repeats a training or held-out one of the notebook's runs
    seeds = [1000 + v for v in range(FAMILY_SIZE) for _ in range(args.per_vault)]
    played = run_episodes(engine, config.mixture().make_envs(VAULT, len(seeds)), seeds, config.rollout)
    moves: Counter = Counter()
    wins: Counter = Counter()
    for seed, trajectory in zip(seeds, played):
        replies = [m["content"] for m in trajectory.episode(0).messages if m["role"] == "assistant"]
        moves[extract_answer(replies[0]) if replies else None] += 1
        wins[seed % FAMILY_SIZE] += trajectory.success
    temperature, per = config.rollout.temperature, args.per_vault
    print(f"{VAULT}, {config.model}, rollout temperature {temperature}, {per} rollouts a vault")
    print("moves played:", ", ".join(f"{move} {n} ({n / len(seeds):.1%})" for move, n in moves.most_common()))
    print("success per vault:", ", ".join(f"{name} {wins[v] / per:.3f}" for v, name in enumerate(vaults(VAULT))))


if __name__ == "__main__":
    main()
