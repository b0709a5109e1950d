"""The extractor at work on one task: reading finished episodes and writing the bank.

:class:`ExperienceTrack` ties together an extractor generation engine, an
:class:`~comprl.experience.bank.ExperienceBank` and the prompts/validation of
:mod:`comprl.experience.extractor.prompts` (the manager, :mod:`comprl.experience.manager`, keeps one per task over
one shared bank and schedules their work):

- ``distill`` prompts the extractor with finished trajectories and applies each valid answer atomically;
- ``merge`` slides over the bank in chunks and lets the extractor merge, rewrite or discard entries.

Every extractor call becomes an :class:`~comprl.experience.extractor.trainer.ExtractorSample` carrying its prompt
and reply tokens with behaviour log-probs, so the extractor trainer can learn from it later. Invalid answers are
rejected whole, logged in the bank's operations log with their reason, and counted; the bank never sees half of one.

Each step's replies (distillation and merge, not search_and_ask's rewrites) are also counted as the extractor's
diagnostics (:func:`reply_rates` turns the counts into the fractions of the training rows): how many were cut at
the token cap, how many were empty, and how long the valid ones were.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from comprl.experience.bank import BankWriteError, Entry, ExperienceBank
from comprl.chat import ChatFormat
from comprl.config import ExtractorConfig
from comprl.envs.base import ANSWER_OPEN, extract_answer
from comprl.experience.extractor.prompts import (
    ExtractorFormat,
    distill_messages,
    merge_messages,
    parse_distill,
    parse_merge,
    parse_refine,
    refine_messages,
    reply_stop,
    to_writes,
)
from comprl.llm.choice import ReplyChoices
from comprl.llm.engine import GenerationEngine, SamplingParams
from comprl.experience.interface import Episode
from comprl.experience.extractor.trainer import ExtractorSample


@dataclass
class TrackStats:
    """Counters of one actor step, reset by :meth:`ExperienceTrack.take_stats`."""

    outputs: int = 0
    valid: int = 0
    cut: int = 0
    """Replies that reached ``max_new_tokens`` without ending (no EOS token, no stop string): their text is cut
    off. A reply whose last allowed token is the EOS token, or completes a stop string, ended and is not cut."""
    empty: int = 0
    """Rejected replies with no text to write: blank (whitespace only, after the response prefix), or an answer
    the validator found empty (no operation, or an operation with an empty title or content)."""
    valid_tokens: int = 0
    """Generated tokens of the valid replies, summed (the closing EOS token or stop string's tokens included)."""
    writes_applied: int = 0
    rejected: Counter = field(default_factory=Counter)
    extraction_seconds: float = 0.0
    merge_seconds: float = 0.0

    def as_metrics(self) -> dict[str, float]:
        metrics = {
            "extractor_outputs": float(self.outputs),
            "extractor_valid": float(self.valid),
            "extractor_cut": float(self.cut),
            "extractor_empty": float(self.empty),
            "extractor_valid_tokens": float(self.valid_tokens),
            "extractor_rejected": float(sum(self.rejected.values())),
            "bank_writes_applied": float(self.writes_applied),
            "extraction_seconds": self.extraction_seconds,
            "merge_seconds": self.merge_seconds,
        }
        metrics.update({f"rejected_{reason}": float(n) for reason, n in self.rejected.items()})
        return metrics


LESSON_VERBS = ("Prefer", "Avoid")
"""How a lesson of the lesson grammar begins (``ExtractorConfig.lesson_grammar``): "<verb> ACTION when"."""


def episode_actions(episode: Episode) -> list[str]:
    """The distinct actions an episode's replies gave, in the order first given: the answer of every assistant
    message that has answer tags, as the environment reads it (:func:`comprl.envs.base.extract_answer`)."""
    answers = (
        extract_answer(m["content"]) for m in episode.messages
        if m["role"] == "assistant" and ANSWER_OPEN in m["content"].lower()
    )
    return list(dict.fromkeys(a for a in answers if a))


def lesson_actions(entries: Sequence[Entry]) -> list[str]:
    """The distinct actions that lessons of the lesson grammar among ``entries`` name ("Prefer ACTION when ...",
    "Avoid ACTION when ..."), in the order first named: what a merge of them may speak of. Read from the bank's
    entries, so a resumed run merges as the uninterrupted one would."""
    named = []
    for entry in entries:
        verb, _, rest = entry.content.partition(" ")
        action, when, _ = rest.partition(" when")
        if verb in LESSON_VERBS and when and action:
            named.append(action)
    return list(dict.fromkeys(named))


def lesson_choices(chat: ChatFormat, actions: Sequence[str]) -> ReplyChoices:
    """The lesson grammar's admissible beginnings of a reply (``ExtractorConfig.lesson_grammar``): "Prefer
    ACTION when" or "Avoid ACTION when" for each of ``actions``, the rest of the reply free."""
    starts = [f"{verb} {action} when" for verb in LESSON_VERBS for action in actions]
    return ReplyChoices.build([], free=[chat.encode(start) for start in starts])


EMPTY_REASONS = ("empty_list", "empty_text")
"""Rejection reasons that mean the answer held no text to write (:data:`~.prompts.REJECTION_REASONS`)."""


def reply_rates(counts: Mapping[str, float]) -> dict[str, float]:
    """The extractor's per-step diagnostics from the summed counts of :meth:`TrackStats.as_metrics` (over the
    tasks, since the last row): the fractions of its replies that were valid, cut at the token cap and empty, and
    ``extractor_lesson_tokens``, the mean generated tokens of a valid reply. NaN where there is nothing to divide
    by (no reply, or no valid one, since the last row)."""
    outputs, valid = counts.get("extractor_outputs", 0.0), counts.get("extractor_valid", 0.0)
    share = (lambda n: n / outputs) if outputs else (lambda n: float("nan"))
    return {
        "extractor_valid_fraction": share(valid),
        "extractor_cut_fraction": share(counts.get("extractor_cut", 0.0)),
        "extractor_empty_fraction": share(counts.get("extractor_empty", 0.0)),
        "extractor_lesson_tokens": counts.get("extractor_valid_tokens", 0.0) / valid if valid else float("nan"),
    }


class ExperienceTrack:
    """Retrieval for the actor, distillation and merging by the extractor, for one task's bank."""

    def __init__(
        self, engine: GenerationEngine, bank: ExperienceBank, config: ExtractorConfig, task: str) -> None:
        self.engine = engine
        self.bank = bank
        self.config = config
        self.task = task
        self.format = ExtractorFormat(style=config.style)
        self.chat = ChatFormat.from_tokenizer(engine.tokenizer)
        self.sampling = SamplingParams(
            max_new_tokens=config.max_new_tokens, temperature=config.temperature, stop=reply_stop(self.format)
        )
        self.stats = TrackStats()
        self._grammars: dict[tuple[str, ...], ReplyChoices] = {}

    def take_stats(self) -> dict[str, float]:
        """This step's counters as metrics, then zero them."""
        metrics = self.stats.as_metrics()
        self.stats = TrackStats()
        return metrics

    def distill(self, episodes: Sequence[Episode], step: int) -> list[ExtractorSample]:
        """Ask the extractor for operations on each episode and apply the valid answers."""
        started = time.perf_counter()
        used = [[self.bank.get(i) for i in e.experience_ids] for e in episodes]
        prompts = [
            distill_messages(e.instruction, e.success, list(e.messages), entries, self.format)
            for e, entries in zip(episodes, used)
        ]
        generated = self._generate(prompts, "distill", step, [self._grammar(episode_actions(e)) for e in episodes])
        samples = [
            self.apply_output(sample, text, [e.id for e in entries], step, episode.source)
            for episode, entries, (sample, text) in zip(episodes, used, generated)
        ]
        self.stats.extraction_seconds += time.perf_counter() - started
        return samples

    def merge(self, step: int) -> list[ExtractorSample]:
        """One pass over this task's live entries, oldest first, in chunks of ``merge_chunk``."""
        started = time.perf_counter()
        live = self.bank.entries()
        ids = [int(i) for i in live.loc[live["task"] == self.task].sort_values("id")["id"]]
        size = self.format.merge_chunk
        chunks = [[self.bank.get(i) for i in ids[s : s + size]] for s in range(0, len(ids), size)]
        chunks = [chunk for chunk in chunks if len(chunk) > 1]
        generated = self._generate(
            [merge_messages(chunk, self.format) for chunk in chunks], "merge", step,
            [self._grammar(lesson_actions(chunk)) for chunk in chunks],
        )
        samples = [
            self.apply_output(sample, text, [e.id for e in chunk], step, f"step{step}/merge")
            for chunk, (sample, text) in zip(chunks, generated)
        ]
        self.stats.merge_seconds += time.perf_counter() - started
        return samples

    def refine(self, entry: Entry, query: str) -> str | None:
        """search_and_ask: the extractor's rewrite of ``entry`` as an answer to the actor's ``query``, or None
        when its reply fails validation (counted as ``rejected_refine``). Refinements are not training samples."""
        prefix = self.chat.encode(self.config.response_prefix) if self.config.response_prefix else []
        system, user = refine_messages(entry, query, self.format)
        prompt = self.chat.start(system["content"], user["content"]) + prefix
        (completion,) = self.engine.generate([prompt], self.sampling)
        answer = parse_refine(self.config.response_prefix + completion.text, self.format)
        if answer is None:
            self.stats.rejected["refine"] += 1
        return answer

    def _grammar(self, actions: Sequence[str]) -> ReplyChoices | None:
        """:func:`lesson_choices` over ``actions``, tokenised once per action list; None (a free reply) without
        the grammar or without an action."""
        if not self.config.lesson_grammar or not actions:
            return None
        key = tuple(actions)
        if key not in self._grammars:
            self._grammars[key] = lesson_choices(self.chat, key)
        return self._grammars[key]

    def _generate(
        self, prompts: list[list[dict[str, str]]], kind: str, step: int, choices: list[ReplyChoices | None]
    ) -> list[tuple[ExtractorSample, str]]:
        """One batched extractor call; each reply comes back as a sample (tokens, log-probs, the allowed tokens
        where ``choices`` constrained them) and its full text."""
        if not prompts:
            return []
        prefix = self.chat.encode(self.config.response_prefix) if self.config.response_prefix else []
        contexts = [self.chat.start(m[0]["content"], m[1]["content"]) + prefix for m in prompts]
        out = []
        for context, completion in zip(contexts, self.engine.generate(contexts, self.sampling, choices=choices)):
            sample = ExtractorSample(kind=kind, step=step)
            sample.extend(context)
            sample.extend(completion.token_ids, completion.logprobs, completion.choices)
            out.append((sample, self.config.response_prefix + completion.text))
            self.stats.cut += completion.finish_reason == "length"
        self.stats.outputs += len(out)
        return out

    def apply_output(
        self, sample: ExtractorSample, raw: str, ids: Sequence[int], step: int, source: str
    ) -> ExtractorSample:
        """Validate one extractor reply, apply it atomically, and record the new entry ids on its sample.

        ``ids`` are the bank ids of the entries the prompt showed, in prompt order; ``sample.kind`` says which
        prompt it answered. With the new entry ids the sample records, per new entry, the ids it replaced (an
        update/merge's targets), through which the trainer credits the writers of merged entries. A rejection (by
        the validator, or by the bank, e.g. an update of an entry deleted meanwhile) is logged with its reason and
        counted, and earns the configured invalid-output reward, if any.
        """
        parse = parse_distill if sample.kind == "distill" else parse_merge
        parsed = parse(raw, len(ids), self.format)
        reason = parsed.reason
        if reason is None:
            writes = to_writes(parsed, ids)
            try:
                new_ids = self.bank.apply(writes, step=step, task=self.task, source=source, raw=raw, origin=sample.kind)
            except BankWriteError as error:
                reason = error.reason
            else:
                self.stats.valid += 1
                self.stats.valid_tokens += sample.num_action_tokens
                self.stats.writes_applied += len(writes)
                sample.entry_ids = tuple(new_ids)
                sample.parent_ids = tuple(w.targets for w in writes if w.entry is not None)
                return sample
        self.stats.rejected[reason] += 1
        self.stats.empty += reason in EMPTY_REASONS or not raw.removeprefix(self.config.response_prefix).strip()
        self.bank.log_rejection(step=step, task=self.task, reason=reason, source=source, raw=raw, origin=sample.kind)
        if self.config.invalid_reward is not None:
            sample.outcomes.append(self.config.invalid_reward)
        return sample
