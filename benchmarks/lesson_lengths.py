"""How long the extractor's lessons are when no cap cuts them, and what share each token cap would cut.

    python benchmarks/lesson_lengths.py                        # 32 episodes of the cpu profile's task, cap 256
    python benchmarks/lesson_lengths.py --extractor gemma3-270m --episodes 16

The cpu profile's untrained actor (SmolLM2-135M, its rollout settings) plays ``--episodes`` episodes of the profile's
task on training seeds 0, 1, ...; then the profile's extractor settings (note style, its temperature and stop) distil
each episode with a cap of ``--cap`` tokens. One generation at the long cap gives every shorter cap's outcome: the
loop samples token by token, so from the same seed a cap of c tokens draws the same first c tokens, and a lesson
whose natural length (up to and including its stop) is n tokens is cut at cap c exactly when n > c. For each cap
the script prints the share of lessons cut, and the share the extractor's parser accepts (what a run would parse:
the whole lesson, or its first c tokens when cut), and the lengths' quartiles.

    python benchmarks/lesson_lengths.py --lesson-grammar      # and the same episodes under the lesson grammar

``--lesson-grammar`` distils the same episodes a second time with ``extractor.lesson_grammar`` (each lesson begins
"Prefer ACTION when" or "Avoid ACTION when", ACTION one of its episode's) and prints the same table for it, beside
each arm's share of lessons that loop (a third or more of their 4-word runs repeated).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

CAPS = (32, 48, 64, 96, 128, 192, 256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=32, help="episodes played and distilled")
    parser.add_argument("--cap", type=int, default=256, help="the long cap every shorter one is read from")
    parser.add_argument("--extractor", default=None, help="extractor model (default: the cpu profile's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lesson-grammar", action="store_true", help="also distil under the lesson grammar")
    args = parser.parse_args()

    from comprl.actor.rollout import run_episodes
    from comprl.chat import ChatFormat
    from comprl.config import make_config
    from comprl.experience.extractor.prompts import ExtractorFormat, distill_messages, parse_distill, reply_stop
    from comprl.experience.extractor.track import episode_actions, lesson_choices
    from comprl.llm import HFEngine, SamplingParams, load_model, resolve_dtype

    config = make_config("cpu", method="comp_rl", seed=args.seed)
    dtype = resolve_dtype(config.dtype, "cpu")
    actor_model, tokenizer = load_model(config.model, dtype=dtype)
    actor = HFEngine(actor_model, tokenizer)
    envs = config.mixture().make_envs(config.env_id, args.episodes)
    torch.manual_seed(args.seed)
    played = run_episodes(actor, envs, list(range(args.episodes)), config.rollout)
    episodes = [t.episode(0) for t in played]

    extractor_name = args.extractor or config.extractor.model
    if extractor_name == config.model:
        engine = actor
    else:
        engine = HFEngine(*load_model(extractor_name, dtype=dtype))
    chat = ChatFormat.from_tokenizer(engine.tokenizer)
    fmt = ExtractorFormat(style=config.extractor.style)
    stop = reply_stop(fmt)
    prefix = config.extractor.response_prefix
    prompts = []
    for episode in episodes:
        system, user = distill_messages(episode.instruction, episode.success, list(episode.messages), [], fmt)
        prompts.append(chat.start(system["content"], user["content"]) + (chat.encode(prefix) if prefix else []))
    params = SamplingParams(max_new_tokens=args.cap, temperature=config.extractor.temperature, stop=stop)
    arms = {"free": None}
    if args.lesson_grammar:
        actions = [episode_actions(e) for e in episodes]  # an episode that gave none is distilled freely
        arms["lesson grammar"] = [lesson_choices(chat, taken) if taken else None for taken in actions]
    print(f"{extractor_name} ({fmt.style} style, temperature {config.extractor.temperature}) on {config.env_id}: "
          f"{len(episodes)} episodes, {sum(e.success for e in episodes)} won")
    for arm, choices in arms.items():
        torch.manual_seed(args.seed)
        completions = engine.generate(prompts, params, choices=choices)
        natural = np.array([len(c.token_ids) if c.finish_reason != "length" else args.cap + 1 for c in completions])
        print(
            f"{arm}: natural length quartiles {np.percentile(np.minimum(natural, args.cap), [25, 50, 75]).tolist()} "
            f"tokens ({(natural > args.cap).mean():.0%} longer than {args.cap}); "
            f"{np.mean([_loops(c.text) for c in completions]):.0%} loop"
        )
        print("  cap  cut   valid")
        for cap in (c for c in CAPS if c <= args.cap):
            valid = 0
            for completion, n in zip(completions, natural):
                kept = completion.token_ids if n <= cap else completion.token_ids[:cap]
                text = engine.tokenizer.decode(kept, skip_special_tokens=True)
                valid += parse_distill(prefix + text, 0, fmt).valid
            print(f"  {cap:3d}  {(natural > cap).mean():4.0%}  {valid / len(completions):5.0%}")
        for completion in completions[:4]:
            print("  e.g.", repr(completion.text[:300]))


def _loops(text: str) -> bool:
    """Whether a third or more of the text's 4-word runs repeat an earlier one (a degenerate loop)."""
    words = text.split()
    runs = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return bool(runs) and (len(runs) - len(set(runs))) / len(runs) >= 1 / 3

if __name__ == "__main__":
    main()
