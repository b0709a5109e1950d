"""The scripted extractor: a positive control for the experience pipeline, NOT the paper's method (issue 68).

With ``ExtractorConfig.model = "scripted"`` no extractor model is loaded or trained. :class:`ScriptedTrack` takes
the place of :class:`~comprl.experience.extractor.track.ExperienceTrack` and writes, for each successful episode,
one lesson that names the task instance (the first line of the episode's first observation, e.g. "You stand
before the vault Opal.") and states the moves that won it, in order and as the actor writes them::

    You stand before the vault Opal. Winning moves: <answer>north</answer> then <answer>east</answer>

A failed episode gets no lesson (counted as ``extractor_scripted_skipped``), and a merge changes nothing. The
lesson is written as a reply in the config's ``style`` ("note": the lesson as one line; "json": one ``add``
operation) and goes through the same parser and :meth:`~ExperienceTrack.apply_output` as a model's reply, so
credit, bank writes, retrieval and the warm-up gate run as they do with a model. If the guided half does not beat
the free half with these lessons on a task whose knowledge a lesson can carry (the vault tasks), the pipeline,
not the extractor, is at fault.
"""

from __future__ import annotations

import json
import time
from typing import Sequence

from comprl.config import ExtractorConfig
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, extract_answer
from comprl.experience.bank import ExperienceBank
from comprl.experience.extractor.prompts import ExtractorFormat
from comprl.experience.extractor.track import ExperienceTrack, TrackStats
from comprl.experience.extractor.trainer import ExtractorSample
from comprl.experience.interface import Episode

INVALID_FEEDBACK = "Invalid "
"""How every comprl env's answer to a reply that named no valid action begins (``TextEnv.invalid_feedback``:
"Invalid action: ...", SWE-lite's "Invalid tool call: ..."): such a reply was not a move."""

MOVES_LABEL = "Winning moves:"
"""Between the instance's line and the moves in a scripted lesson."""

MORE = " then ..."
"""Ends a lesson whose moves were cut to fit the content limit."""


def winning_moves(episode: Episode) -> list[str]:
    """The moves an episode played, in order, repeats kept: the answer of each assistant reply as the env read it
    (:func:`~comprl.envs.base.extract_answer`), leaving out replies the env answered as invalid."""
    messages = episode.messages
    moves = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        answered = messages[i + 1]["content"] if i + 1 < len(messages) else ""
        move = extract_answer(message["content"])
        if move and not answered.startswith(INVALID_FEEDBACK):
            moves.append(move)
    return moves


def first_line(episode: Episode) -> str:
    """The first non-blank line of the episode's first observation: what names its task instance."""
    observation = next((m["content"] for m in episode.messages if m["role"] == "user"), "")
    return next((line.strip() for line in observation.splitlines() if line.strip()), "")


def scripted_lesson(episode: Episode, max_chars: int) -> str | None:
    """The lesson of a successful episode (the instance's line, then its winning moves), at most ``max_chars``
    long (moves cut from the end, marked with :data:`MORE`); None for a failed episode or one without a move."""
    moves = winning_moves(episode)
    if not episode.success or not moves:
        return None
    head = f"{first_line(episode)} {MOVES_LABEL} ".lstrip()
    said = [f"{ANSWER_OPEN}{move}{ANSWER_CLOSE}" for move in moves]
    lesson = head + " then ".join(said)
    while len(lesson) > max_chars and len(said) > 1:
        said.pop()
        lesson = head + " then ".join(said) + MORE
    return lesson[:max_chars]


def scripted_reply(lesson: str, fmt: ExtractorFormat) -> str:
    """``lesson`` as an extractor reply in ``fmt.style`` that its distillation parser reads as one ``add`` of it:
    the lesson itself ("note"), or a JSON operation list inside the answer tags ("json", its title the lesson's
    first sentence, every "<" escaped so that the lesson's own answer tags do not end the answer block)."""
    if fmt.style == "note":
        return lesson
    if fmt.style == "json":
        title = lesson.split(f" {MOVES_LABEL}", 1)[0][: fmt.max_title_chars].strip()
        operations = json.dumps([{"op": "add", "title": title, "content": lesson}]).replace("<", "\\u003c")
        return f"{ANSWER_OPEN}{operations}{ANSWER_CLOSE}"
    raise ValueError(f"scripted extractor style={fmt.style!r}; accepted: note, json")


class ScriptedTrack(ExperienceTrack):
    """One task's experience track with the scripted extractor: no engine, no prompts, no samples to train."""

    def __init__(self, bank: ExperienceBank, config: ExtractorConfig, task: str) -> None:
        # what apply_output uses; the generation engine, chat format and sampling of a model track do not exist
        self.bank = bank
        self.config = config
        self.task = task
        self.format = ExtractorFormat(style=config.style)
        self.stats = TrackStats()
        self.skipped = 0

    def take_stats(self) -> dict[str, float]:
        """This step's counters, ``extractor_scripted_skipped`` (failed episodes, no lesson) among them."""
        metrics = {**super().take_stats(), "extractor_scripted_skipped": float(self.skipped)}
        self.skipped = 0
        return metrics

    def distill(self, episodes: Sequence[Episode], step: int) -> list[ExtractorSample]:
        """Write the lesson of each successful episode through the parser and the bank, as a model's reply."""
        started = time.perf_counter()
        samples = []
        for episode in episodes:
            lesson = scripted_lesson(episode, self.format.max_content_chars)
            if lesson is None:
                self.skipped += 1
                continue
            self.stats.outputs += 1
            sample = ExtractorSample(kind="distill", step=step)
            samples.append(self.apply_output(sample, scripted_reply(lesson, self.format), [], step, episode.source))
        self.stats.extraction_seconds += time.perf_counter() - started
        return samples

    def merge(self, step: int) -> list[ExtractorSample]:
        """Merges change nothing: every lesson stays as its episode wrote it."""
        return []
