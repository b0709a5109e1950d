"""A CPU rollout against the machine's raw forward throughput, and what each generation lever buys, side by side.

    python benchmarks/rollout_speed.py                      # the cpu profile's 16 Room episodes, 2 rounds
    taskset -c 1 python benchmarks/rollout_speed.py --threads 1

Every arm plays the same step of the cpu profile (its envs and seeds, its groups: 2 x 8 rollouts of up to 6 turns,
constrained choice) with the actor as the trainer holds it: SmolLM2-135M, LoRA adapters in float32 over bfloat16
weights where the CPU multiplies bfloat16 natively, adapters made non-zero as after training. The arms:

- ``float32_adapters``: peft's float32 adapter products, a forward pass for every token (the path the committed
  cpu reference runs were sampled on; ``generation_adapter_dtype="float32"``, ``jump_forward=False``);
- ``model_dtype_adapters``: adapters cast to bfloat16 for the call (``"model"``), every pass;
- ``merged``: a generation copy with the adapters merged into its weights (``"merged"``), every pass;
- ``merged_jump_forward``: merged, and no forward pass while every row's next token is forced;
- ``merged_jf_shared_prefix``: and a prompt prefix several distinct prompts share (the system prompt and the
  instructions of every first turn) prefilled once and kept for the step (the default; a new prefix waits for
  ``HFEngine.shared_prefix_prompts`` distinct prompts, so a step of a few groups plays as without it). The first
  four arms run without it (``shared_prefix=False``).

The last two arms play 16 distinct seeds instead of the profile's groups (evaluation's case, where no two prompts are
identical), with and without the shared prefix; their speed-up is relative to the first of them.

A rollout's *processed* tokens are those its forward passes computed (the engine's ``computed_tokens``: uncached
prompt suffixes and generated tokens fed back). ``raw`` is the base model's plain batched forward pass (no
adapters, no cache, batch 16 of ``--raw-tokens`` random tokens, best of 3): the rate the hardware gives this model.
The script prints, for each arm, its best rollout time over ``--rounds`` alternating rounds, processed tokens/s,
the ratio to ``raw`` and to ``float32_adapters``, forward passes, and the behaviour-vs-trainer log-prob gap on
sampled choice tokens (mean / max |behaviour - recomputed| in nats; the trainer recomputes with float32 adapters).
Forced tokens' log-probs are exactly 0 in every arm.
"""

from __future__ import annotations

import argparse
import time

import torch


def cpu_room_step(config):
    """The actor of ``config`` (a cpu profile) as its trainer holds it, with its LoRA adapters made non-zero as after
    training, and the envs of one training step with each env's GRPO group: (actor trainer, tokenizer, envs,
    groups)."""
    from comprl.actor.trainer import ActorTrainer
    from comprl.llm import load_model, resolve_dtype

    model, tokenizer = load_model(config.model, dtype=resolve_dtype(config.dtype, "cpu"))
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    torch.manual_seed(0)
    for parameter in actor.model.parameters():  # adapters as after training (peft starts B at zero)
        if parameter.requires_grad:
            torch.nn.init.normal_(parameter, std=0.01)
    envs = config.mixture().make_envs(config.env_id, config.batch_instances * config.group_size)
    return actor, tokenizer, envs, [row // config.group_size for row in range(len(envs))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="times every arm plays the step (best time kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--raw-tokens", type=int, default=256, help="tokens per row of the raw forward pass")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from comprl.actor.rollout import run_episodes
    from comprl.config import make_config
    from comprl.llm import HFEngine
    from comprl.llm.scoring import token_logprobs
    from comprl.policy_gradient import pad_batch

    config = make_config("cpu", method="baseline")
    actor, tokenizer, envs, groups = cpu_room_step(config)
    arms = {
        "float32_adapters": ("float32", False, False),
        "model_dtype_adapters": ("model", False, False),
        "merged": ("merged", False, False),
        "merged_jump_forward": ("merged", True, False),
        "merged_jf_shared_prefix": ("merged", True, True),
    }
    engines = {
        name: HFEngine(actor.model, tokenizer, adapter_dtype=d, jump_forward=j, shared_prefix=p)
        for name, (d, j, p) in arms.items()
    }

    cases = {name: (name, groups, groups) for name in arms}
    distinct = list(range(len(envs)))
    for name in ("merged_jump_forward", "merged_jf_shared_prefix"):
        cases[f"{name}, 16 seeds"] = (name, distinct, None)

    def raw_rate() -> float:
        ids = torch.randint(0, tokenizer.vocab_size, (len(envs), args.raw_tokens))
        best = float("inf")
        with torch.no_grad(), actor.model.disable_adapter():
            for _ in range(3):
                started = time.perf_counter()
                actor.model(input_ids=ids, use_cache=False, logits_to_keep=1)
                best = min(best, time.perf_counter() - started)
        return ids.numel() / best

    raw = 0.0
    best: dict[str, tuple[float, float, float, list]] = {}
    for _ in range(args.rounds):
        raw = max(raw, raw_rate())
        for name, (arm, seeds, grouped) in cases.items():
            engine = engines[arm]
            engine.clear_cache()  # each round starts cold, as a training step does after sync_weights
            before = dict(engine.stats)
            torch.manual_seed(1)
            started = time.perf_counter()
            played = run_episodes(engine, envs, seeds, config.rollout, groups=grouped)
            took = time.perf_counter() - started
            computed = engine.stats["computed_tokens"] - before["computed_tokens"]
            passes = engine.stats["forward_passes"] - before["forward_passes"]
            if name not in best or took < best[name][0]:
                best[name] = (took, computed, passes, played)
            print(f"{name}: {took:.1f} s, {computed:.0f} tokens processed, {passes:.0f} passes", flush=True)

    def gap(played) -> tuple[float, float]:
        batch = pad_batch(played, tokenizer.pad_token_id)
        with torch.no_grad():
            scored = token_logprobs(
                actor.model, batch["input_ids"], batch["attention_mask"], batch["action_mask"],
                config.rollout.temperature, choices=[t.choices for t in played],
            )
        diffs = [
            abs(float(scored[row, p]) - t.logprobs[p])
            for row, t in enumerate(played)
            for p, allowed in t.choices.items()
            if len(allowed) > 1
        ]
        return sum(diffs) / max(len(diffs), 1), max(diffs, default=0.0)

    print(
        f"\n{len(envs)} Room episodes, {torch.get_num_threads()} torch thread(s), best of {args.rounds}; "
        f"raw forward {raw:.0f} tokens/s"
    )
    for name, (took, computed, passes, played) in best.items():
        base = best["merged_jump_forward, 16 seeds" if name.endswith("seeds") else "float32_adapters"][0]
        mean, worst = gap(played)
        rate = computed / took
        print(
            f"  {name:34s} {took:6.1f} s  {rate:6.0f} tok/s  x{rate / raw:.2f} of raw  x{base / took:.2f} speed  "
            f"{passes:4.0f} passes  gap {mean:.3f} / {worst:.3f}"
        )


if __name__ == "__main__":
    main()
