"""The profiles side by side, read from :data:`comprl.config.PROFILES`: the Markdown table of ``comprl profiles
--markdown`` and of README.md's "Profiles" section, which ``comprl profiles --readme`` rewrites in place (between
:data:`BEGIN` and :data:`END`) and ``tests/test_readme.py`` checks. The ``paper`` profile's column is the paper's
settings."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Callable

from comprl.config import OFFICIAL_RETRIEVAL, PROFILES, BankConfig, ExperimentConfig

BEGIN = "<!-- profiles table: generated from comprl.config.PROFILES by `comprl profiles --readme`; do not edit -->"
END = "<!-- end of the profiles table -->"
"""The lines around the generated table in README.md."""
README = Path(__file__).resolve().parents[2] / "README.md"


def _training(rank: int, learning_rate: float) -> str:
    return f"{f'LoRA r{rank}' if rank else 'full'}, lr {learning_rate:g}"


def _turns(config: ExperimentConfig) -> str:
    """The turn cap of the profile's own task, and the range of the per-task caps its mixtures play."""
    own = config.task_turns.get(config.env_id, config.max_turns)
    caps = sorted(set(config.task_turns.values()))
    return f"{own} (mixtures: {caps[0]}-{caps[-1]} per task)" if len(caps) > 1 else str(own)


def _minihack_view(config: ExperimentConfig) -> str:
    """The view the profile's own MiniHack task is read in (the env's default where ``env_options`` set none)."""
    from comprl.envs.minihack.env import MiniHackTextEnv

    default = inspect.signature(MiniHackTextEnv.__init__).parameters["view"].default
    return config.env_options.get(config.env_id, {}).get("view", default)


def _retrieval(bank: BankConfig) -> str:
    """Whose retrieval protocol the bank follows: the official code's (:data:`OFFICIAL_RETRIEVAL`) or comprl's (the
    fields' defaults)."""
    defaults = {f.name: f.default for f in dataclasses.fields(BankConfig)}
    if all(getattr(bank, name) == value for name, value in OFFICIAL_RETRIEVAL.items()):
        return "official code's"
    if all(getattr(bank, name) == defaults[name] for name in OFFICIAL_RETRIEVAL):
        return "comprl's"
    return "mixed: " + ", ".join(f"{name}={getattr(bank, name)}" for name in OFFICIAL_RETRIEVAL)


ROWS: tuple[tuple[str, Callable[[ExperimentConfig], str]], ...] = (
    ("task (single-task notebooks)", lambda c: c.env_id.removeprefix("comprl/")),
    ("MiniHack view", _minihack_view),
    ("actor", lambda c: c.model),
    ("actor training", lambda c: _training(c.actor.lora_rank, c.actor.learning_rate)),
    ("extractor", lambda c: c.extractor.model),
    ("extractor training", lambda c: _training(c.extractor.lora_rank, c.extractor.learning_rate)),
    ("extractor output (`extractor.style`)", lambda c: c.extractor.style),
    ("weights dtype", lambda c: c.dtype),
    ("steps", lambda c: str(c.steps)),
    ("instances x rollouts (K) per step", lambda c: f"{c.batch_instances} x {c.group_size}"),
    ("turns", _turns),
    ("reply cap, tokens", lambda c: str(c.rollout.max_new_tokens)),
    ("lesson cap, tokens (`extractor.max_new_tokens`)", lambda c: str(c.extractor.max_new_tokens)),
    ("constrained choice", lambda c: "yes" if c.rollout.constrained_actions else "no"),
    ("temperature: rollouts / evaluation", lambda c: f"{c.rollout.temperature:g} / {c.eval_temperature:g}"),
    ("eval episodes", lambda c: str(c.eval_episodes)),
    ("retrieval protocol", lambda c: _retrieval(c.bank)),
    ("generation engine", lambda c: c.rollout.engine),
    ("device", lambda c: c.device),
)
"""The table's rows: a setting and how to read it from a profile's config."""


def markdown() -> str:
    """The profiles side by side as a Markdown table, one column per profile (``paper``: the paper's settings)."""
    names = [f"`{name}`" + (" (the paper's)" if name == "paper" else "") for name in PROFILES]
    lines = ["| setting | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, read in ROWS:
        lines.append(f"| {label} | " + " | ".join(str(read(config)) for config in PROFILES.values()) + " |")
    return "\n".join(lines) + "\n"


def with_table(text: str) -> str:
    """``text`` (README.md's) with the lines between :data:`BEGIN` and :data:`END` replaced by :func:`markdown`."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"README.md needs the line {BEGIN!r} once, and after it the line {END!r} once")
    head, rest = text.split(BEGIN + "\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{markdown()}{END}{tail}"


def rewrite_readme(path: Path | None = None) -> bool:
    """Put the current table into README.md (``path``, by default :data:`README`); whether it changed."""
    path = path or README
    text = path.read_text()
    new = with_table(text)
    if new != text:
        path.write_text(new)
    return new != text
