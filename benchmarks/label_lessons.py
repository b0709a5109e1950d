"""A label is not a lesson (issue 68): the share of note-style lessons stored as a bare label ("Task:"), before and
after the note's stop and parser changed.

    nice -n 10 python benchmarks/label_lessons.py                  # both parts, 24 episodes x 2 replies (minutes)
    nice -n 10 python benchmarks/label_lessons.py --episodes 0     # the committed banks only (seconds)

Before: a note's generation stopped at its first line break (stop "\\n") and its first line was stored. After: it
stops at the first line break after a line that is not a label (``prompts.NOTE_STOP``), a label line is joined
with the lesson line after it, a preamble ("Here is the lesson:") is dropped, and a reply of labels alone is
refused as ``label_only`` (``prompts`` module docstring). A lesson is a *bare label* when it ends with a colon.

(a) **Committed replies.** Every distillation and merge reply logged (``raw``) in notebook 01's comp_rl banks
(``results/cpu/01_single_task/comp_rl_seed*``), read by the old parser and by the new one. These replies were
generated under the old stop, so they end at their first line break: the new parser can refuse a bare label but
has nothing to join it with.

(b) **Fresh replies.** The cpu profile's untrained actor plays ``--episodes`` episodes of its task on training
seeds 0, 1, ...; the cpu profile's extractor (SmolLM2-135M, note style, its temperature and ``max_new_tokens``)
distils each one ``--samples`` times with no stop string, and each rule is applied to the same tokens as the
engine applies it (the reply ends with the token that completes a stop string): a rule's reply is a start of the
unstopped one, so both rules read the same samples. Per rule: lessons stored, stored as a bare label, refused as
``label_only``, stored joined (a label came first), that name a move (1 to 3 of the task's moves: a copy of the
action list names all of them), generated tokens and replies cut at the token cap.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

from comprl.experience.extractor.prompts import NOTE_STOP, ExtractorFormat, parse_distill, parse_merge

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results" / "cpu" / "01_single_task"
OLD_STOP = ("\n",)
MOVES = ("north", "east", "south", "west", "northeast", "southeast", "southwest", "northwest")
NOTE = ExtractorFormat(style="note")
SHARES = ("stored", "bare label", "label_only", "joined", "names a move", "cut at the cap")
"""The rows printed with their share of the replies."""


def old_note(text: str) -> str | None:
    """The lesson the note parser before issue 68 (commit 53e807e) stored from ``text``, or None where it
    rejected the reply: the first line after a leading ``Lesson:`` label, with the text checks of a content."""
    content = text.strip()
    if content[:7].lower() == "lesson:":
        content = content[7:].strip()
    content = content.split("\n", 1)[0].strip()
    clean = "\x00" not in content and not any("\ud800" <= ch <= "\udfff" for ch in content)
    return content if content and len(content) <= NOTE.max_content_chars and clean else None


def new_note(text: str, kind: str, shown: int) -> tuple[str | None, str | None]:
    """(the lesson the current parser stores, None where rejected; the rejection reason, None where stored)."""
    parsed = parse_distill(text, 0, NOTE) if kind == "distill" else parse_merge(text, max(shown, 2), NOTE)
    return (parsed.operations[0].content, None) if parsed.valid else (None, parsed.reason)


def names_a_move(lesson: str) -> bool:
    """Whether ``lesson`` names 1 to 3 of the moves (all eight is a copy of the action list, not a move)."""
    named = {word for word in re.findall(r"[a-z]+", lesson.lower()) if word in MOVES}
    return 1 <= len(named) <= 3


def first_label(text: str) -> bool:
    """Whether the reply's first non-blank line is a label line (ends with a colon)."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    return bool(lines) and lines[0].endswith(":")


def tally(replies: list[tuple[str, str, int]], rule: str) -> dict[str, int]:
    """Counts over ``(reply, kind, prompt entries shown)`` read by the ``rule`` ("old" or "new") parser."""
    counts = dict.fromkeys(("replies", "stored", "bare label", "label_only", "joined", "names a move"), 0)
    for text, kind, shown in replies:
        counts["replies"] += 1
        if rule == "old":
            lesson, reason = old_note(text), None
        else:
            lesson, reason = new_note(text, kind, shown)
        counts["label_only"] += reason == "label_only"
        if lesson is None:
            continue
        counts["stored"] += 1
        counts["bare label"] += lesson.endswith(":")
        counts["joined"] += rule == "new" and first_label(text)
        counts["names a move"] += names_a_move(lesson)
    return counts


def print_side_by_side(columns: dict[str, dict[str, float]]) -> None:
    """One row per count, one column per rule: each count with its share of the replies (counts of replies and
    lessons; other rows, such as a mean, as they are)."""
    names = list(columns)
    print(f"  {'':<22}" + "".join(f"{name:>24}" for name in names))
    for row in next(iter(columns.values())):
        cells = []
        for name in names:
            value, total = columns[name][row], columns[name]["replies"]
            number = f"{value:>6.0f}" if float(value).is_integer() else f"{value:>6.1f}"
            cells.append(f"{number} ({value / total:6.1%})" if row in SHARES else number + " " * 9)
        print(f"  {row:<22}" + "".join(f"{cell:>24}" for cell in cells))


def committed_replies() -> list[tuple[str, str, int]]:
    """(raw reply, kind, entries shown) of every lesson-writing or rejected reply in notebook 01's comp_rl banks."""
    from comprl.runs import Run

    replies = []
    for folder in sorted(COMMITTED.glob("comp_rl_seed*")):
        log = Run(folder).bank_operations()
        rows = log[log["op"].isin(["add", "update", "reject"]) & log["raw"].notna()]
        for row in rows.itertuples(index=False):
            shown = 0 if row.targets is None or not hasattr(row.targets, "__len__") else len(row.targets)
            replies.append((row.raw, row.origin, shown))
    return replies


def fresh_replies(episodes: int, samples: int, seed: int) -> tuple[dict[str, list], dict[str, dict[str, float]]]:
    """Replies to the cpu profile's distillation prompts, cut by each stop rule: per rule the replies as
    :func:`tally` takes them, and the generation counts (tokens, replies cut at the cap)."""
    import torch

    from comprl.actor.rollout import run_episodes
    from comprl.chat import ChatFormat
    from comprl.config import make_config
    from comprl.experience.extractor.prompts import distill_messages
    from comprl.llm import HFEngine, SamplingParams, load_model, resolve_dtype

    config = make_config("cpu", method="comp_rl", seed=seed)
    dtype = resolve_dtype(config.dtype, "cpu")
    actor = HFEngine(*load_model(config.model, dtype=dtype))
    torch.manual_seed(seed)
    envs = config.mixture().make_envs(config.env_id, episodes)
    played = run_episodes(actor, envs, list(range(episodes)), config.rollout)
    print(f"(b) {config.extractor.model}, note style, temperature {config.extractor.temperature}, "
          f"{config.extractor.max_new_tokens} new tokens, on {episodes} episodes of {config.env_id} played by the "
          f"untrained actor ({sum(t.success for t in played)} won), {samples} replies each")
    same = config.extractor.model == config.model
    engine = actor if same else HFEngine(*load_model(config.extractor.model, dtype=dtype))
    chat = ChatFormat.from_tokenizer(engine.tokenizer)
    prompts = []
    for trajectory in played:
        episode = trajectory.episode(0)
        system, user = distill_messages(episode.instruction, episode.success, list(episode.messages), [], NOTE)
        prompts += [chat.start(system["content"], user["content"])] * samples
    cap = config.extractor.max_new_tokens
    params = SamplingParams(max_new_tokens=cap, temperature=config.extractor.temperature)
    completions = engine.generate(prompts, params)
    replies: dict[str, list] = {"old": [], "new": []}
    generation: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    for rule, stop in (("old", OLD_STOP), ("new", NOTE_STOP)):
        tokens = cut = 0
        for completion in completions:
            kept, reason = stopped(engine.tokenizer, completion.token_ids, completion.finish_reason, stop)
            replies[rule].append((engine.tokenizer.decode(kept, skip_special_tokens=True), "distill", 0))
            tokens += len(kept)
            cut += reason == "length"
        generation[rule] = {"mean tokens": tokens / len(completions), "cut at the cap": cut}
    anywhere = sum(names_a_move(c.text) for c in completions)
    print(f"  replies naming a move anywhere in their {cap} tokens (no stop): {anywhere} of {len(completions)}")
    return replies, generation


def stopped(tokenizer, tokens: list[int], finish: str, stop: tuple[str, ...]) -> tuple[list[int], str]:
    """The start of an unstopped reply that ``stop`` keeps, as the engine cuts it (through the first token whose
    text completes a stop string), and its finish reason."""
    for i in range(len(tokens)):
        if any(s in tokenizer.decode(tokens[: i + 1], skip_special_tokens=True) for s in stop):
            return tokens[: i + 1], "stop"
    return tokens, finish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=24, help="episodes played and distilled in (b); 0 skips (b)")
    parser.add_argument("--samples", type=int, default=2, help="extractor replies per episode in (b)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    committed = committed_replies()
    kinds = pd.Series([kind for _, kind, _ in committed]).value_counts().to_dict()
    print(f"(a) the {len(committed)} replies logged in {COMMITTED.relative_to(ROOT)}/comp_rl_seed*'s banks {kinds}, "
          "generated under the old stop")
    print_side_by_side({"old parser": tally(committed, "old"), "new parser": tally(committed, "new")})
    if args.episodes:
        replies, generation = fresh_replies(args.episodes, args.samples, args.seed)
        print_side_by_side({
            'old: stop "\\n"': {**tally(replies["old"], "old"), **generation["old"]},
            "new: NOTE_STOP": {**tally(replies["new"], "new"), **generation["new"]},
        })
        for text, _, _ in replies["new"][:6]:
            print("  e.g.", repr(text[:160]), "->", new_note(text, "distill", 0))


if __name__ == "__main__":
    main()
