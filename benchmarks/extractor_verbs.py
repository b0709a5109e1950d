"""Does the lesson grammar's verb follow the episode's outcome? (issue 68: why the learned extractor writes "Avoid"
after a won vault episode.)

    nice -n 10 python benchmarks/extractor_verbs.py                                  # SmolLM2-135M (a minute)
    nice -n 10 python benchmarks/extractor_verbs.py --extractor-model gemma3-270m

Under ``extractor.lesson_grammar`` a reply begins "Prefer ACTION when" or "Avoid ACTION when", the verb drawn by the
extractor from its own next-token distribution renormalised over the two (:func:`comprl.llm.choice`; at the
extractor's sampling temperature). A won one-move vault episode's only action is its secret, so "Prefer" states
the secret and "Avoid" turns the actor away from it; after a lost episode the only action is a wrong move, and
"Avoid" is the useful verb. This prints, for each vault of ``--env-id`` (one episode that played its secret and
won, one that played the opposite move and lost, on the real env), the probability that the extractor's first
choice is "Prefer", from one forward pass over the exact distillation prompt the experience track builds (the
cpu profile's note style, no lessons shown). A verb that followed the outcome line ("Outcome: success" /
"failure") would be "Prefer" after the wins and "Avoid" after the losses.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from comprl.chat import ChatFormat
from comprl.envs.vault import secret_of
from comprl.experience.extractor.prompts import ExtractorFormat, distill_messages
from comprl.experience.extractor.track import LESSON_VERBS
from comprl.kit.mechanism import VAULT, mechanism_config, opposite, played, vaults
from comprl.llm import load_model, resolve_dtype


def prefer_probability(model, chat: ChatFormat, messages: list[dict[str, str]], temperature: float) -> float:
    """P(the first choice is "Prefer") at ``temperature``, renormalised over the two verbs' first tokens."""
    context = chat.start(messages[0]["content"], messages[1]["content"])
    firsts = [chat.encode(f"{verb} north when")[0] for verb in LESSON_VERBS]
    if len(set(firsts)) != len(firsts):
        raise RuntimeError(f"the verbs {LESSON_VERBS} share their first token under this tokenizer")
    with torch.no_grad():
        logits = model(torch.tensor([context])).logits[0, -1].float()
    chosen = torch.softmax(logits[firsts] / max(temperature, 1e-6), dim=0)
    return float(chosen[LESSON_VERBS.index("Prefer")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default=VAULT, help="a one-move vault task (comprl.envs.vault.VAULT_IDS)")
    parser.add_argument(
        "--extractor-model", default=None, help="the learned extractor (comprl.config.MODELS; default the profile's)"
    )
    args = parser.parse_args()

    config = mechanism_config("cpu", env_id=args.env_id, **{"extractor.model": args.extractor_model}).extractor
    model, tokenizer = load_model(config.model, dtype=resolve_dtype("auto", "cpu"))
    model.eval()
    chat, fmt = ChatFormat.from_tokenizer(tokenizer), ExtractorFormat(style=config.style)
    print(f"{args.env_id}: extractor {config.model}, {config.style} style, temperature {config.temperature}")
    print(f"  {'vault':<10}{'secret':<11}{'P(Prefer | won)':>17}{'P(Prefer | lost)':>18}")
    won, lost = [], []
    for seed, vault in enumerate(vaults(args.env_id)):
        (secret,) = secret_of(args.env_id, vault)
        row = []
        for move, expected in ((secret, True), (opposite(secret), False)):
            episode = played(args.env_id, seed, [f"<answer>{move}</answer>"])
            if episode.success != expected:
                raise RuntimeError(f"{vault}: playing {move} gave success={episode.success}")
            messages = distill_messages(episode.instruction, episode.success, list(episode.messages), [], fmt)
            row.append(prefer_probability(model, chat, messages, config.temperature))
        won.append(row[0])
        lost.append(row[1])
        print(f"  {vault:<10}{secret:<11}{row[0]:>17.3f}{row[1]:>18.3f}")
    print(f"  {'mean':<21}{np.mean(won):>17.3f}{np.mean(lost):>18.3f}")


if __name__ == "__main__":
    main()
