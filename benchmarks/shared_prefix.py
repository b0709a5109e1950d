"""The cpu profile's actor update with and without shared prefixes (``actor.shared_prefix_tokens``), side by side.

    python benchmarks/shared_prefix.py                      # one cpu Room step's 16 episodes, 3 rounds
    taskset -c 1 python benchmarks/shared_prefix.py --threads 1

The untrained actor (SmolLM2-135M, the cpu profile's LoRA adapters made non-zero as after training, its dtype)
plays one training step of the cpu profile: 2 instances x 8 rollouts of the lit Room, constrained choice. Every
episode then gets an advantage of +-1 (so the update trains all of them, as a step where every group has a winner
does), the guided and free halves of comp_rl (``--halves``, default) or the baseline's whole groups (``--no-halves``)
as advantage cells. The same update then runs, alternating, with every sequence scored whole
(``shared_prefix_tokens=0``, every profile's) and with the prompt each cell shares run once (``--min-tokens``), from
the same weights. The script prints each arm's best time over ``--rounds``, the tokens its forward passes computed,
the ratio, and how far each is from the exact gradient (the whole arm's with the same weights in float32): the norm
of the difference over the exact gradient's norm, all LoRA weights as one vector, beside the same for the whole arm
in micro-batches of 2 instead of 1, a control for the rounding any change of batching makes (in float32 the two
arms agree within ~1e-6: ``tests/test_shared_prefix.py``). Guided halves see a lesson in their prompt (a fixed
one), so their prompts differ from the free halves' after the system prompt, as in a comp_rl step.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from types import SimpleNamespace

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="times each arm runs the update (best time kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--min-tokens", type=int, default=64, help="the shared arm's shared_prefix_tokens")
    parser.add_argument("--halves", action=argparse.BooleanOptionalAction, default=True,
                        help="comp_rl's guided and free halves (default), or the baseline's whole groups")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from comprl.actor.rollout import run_episodes
    from comprl.config import make_config
    from comprl.llm import HFEngine
    from comprl.policy_gradient import shared_prefixes
    from rollout_speed import cpu_room_step  # benchmarks/: the script's own folder

    config = make_config("cpu", method="comp_rl" if args.halves else "baseline")
    actor, tokenizer, envs, groups = cpu_room_step(config)
    engine = HFEngine(actor.model, tokenizer, adapter_dtype="merged", jump_forward=True)
    torch.manual_seed(1)
    lesson = "Lesson: the stairs down are the goal; step toward them along the shorter axis first, then the other."
    guided = [args.halves and row % config.group_size >= config.group_size // 2 for row in range(len(envs))]
    played = run_episodes(
        engine, envs, groups, config.rollout, groups=groups, guided=guided,
        retrieve=lambda queries: [SimpleNamespace(id=0, text=lesson) for _ in queries],
    )
    advantages = torch.tensor([1.0 if i % 2 else -1.0 for i in range(len(played))])
    whole_tokens = sum(len(t.token_ids) for t in played)
    cells = shared_prefixes(played, args.min_tokens)
    shared_tokens = sum(
        (length if length else 0) + sum(len(played[m].token_ids) - length for m in members) for length, members in cells
    )

    def update(prefix_tokens: int, micro_batch_size: int = 1) -> tuple[float, float, dict[str, torch.Tensor]]:
        actor.prefix_tokens = prefix_tokens
        actor.config = dataclasses.replace(config.actor, micro_batch_size=micro_batch_size)
        actor.model.train()
        actor.model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        loss = actor._accumulate(played, advantages, backward=True)["loss"]
        took = time.perf_counter() - started
        actor.model.eval()
        return took, loss, {n: p.grad.clone() for n, p in actor.model.named_parameters() if p.requires_grad}

    best = {"whole": float("inf"), "shared": float("inf")}
    results = {}
    for _ in range(args.rounds):
        for name, prefix_tokens in (("whole", 0), ("shared", args.min_tokens)):
            took, loss, grads = update(prefix_tokens)
            best[name] = min(best[name], took)
            results[name] = (loss, grads)
            print(f"{name}: {took:.1f} s", flush=True)
    weights = next(actor.model.parameters()).dtype
    _, control_loss, control = update(0, micro_batch_size=2)
    (loss_whole, g_whole), (loss_shared, g_shared) = results["whole"], results["shared"]
    actor.model.float()  # the same weights in float32: the exact gradient the others round
    _, exact_loss, exact = update(0)

    def apart(grads: dict[str, torch.Tensor]) -> float:
        """|grads - exact| / |exact| over every LoRA weight's gradient as one vector."""
        return float(sum((grads[n].float() - exact[n]).pow(2).sum() for n in exact).sqrt()
                     / sum(g.pow(2).sum() for g in exact.values()).sqrt())
    print(
        f"\n{len(played)} Room episodes ({'guided and free halves' if args.halves else 'whole groups'}), "
        f"{torch.get_num_threads()} torch thread(s), {weights} weights, "
        f"best of {args.rounds}"
    )
    print(f"  cells sharing a prefix: {[(length, len(members)) for length, members in cells]} (length, sequences)")
    print(f"  whole   {best['whole']:6.1f} s  {whole_tokens:6d} tokens")
    print(f"  shared  {best['shared']:6.1f} s  {shared_tokens:6d} tokens  "
          f"x{best['whole'] / best['shared']:.2f} speed, x{shared_tokens / whole_tokens:.2f} tokens")
    print(f"  loss {loss_whole:.6f} whole, {loss_shared:.6f} shared, {control_loss:.6f} whole in micro-batches of 2, "
          f"{exact_loss:.6f} exact")
    print(f"  gradient apart from the exact one: whole {apart(g_whole):.2e}, shared {apart(g_shared):.2e}, whole in "
          f"micro-batches of 2 {apart(control):.2e}")


if __name__ == "__main__":
    main()
