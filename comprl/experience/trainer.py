"""CISPO update of the experience extractor, with the credit assignment that gives its outputs a reward.

An extractor output m (one distillation or merge call) is one training sample. Its reward is the mean outcome
(+1 success, -1 failure) of the experience-guided trajectories that were shown an entry m wrote; it has none until
such a trajectory finishes. Samples wait in a buffer; once ``buffer_size`` of them have a reward, the trainer
takes one CISPO step on exactly those samples with batch-level advantages A_i = r_i - mean(r) (paper,
"Extractor objective"), independently of the actor's schedule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import torch
from transformers import PreTrainedModel

from comprl.config import ExtractorConfig
from comprl.experience.episode import Outcome
from comprl.llm.engine import logprob_temperature
from comprl.objectives import batch_advantages, cispo_loss
from comprl.policy import PackedSequence, PolicyTrainer


@dataclass(kw_only=True)
class ExtractorSample(PackedSequence):
    """One extractor output as a training sample: prompt + reply tokens, and the rewards it has earned."""

    kind: str
    """"distill" or "merge"."""
    step: int
    """Actor step at which it was generated."""
    entry_ids: tuple[int, ...] = ()
    """Bank ids of the entries it wrote."""
    outcomes: list[float] = field(default_factory=list)
    """+1 / -1 per guided trajectory that used one of its entries (or the invalid-output reward)."""

    @property
    def reward(self) -> float:
        return sum(self.outcomes) / len(self.outcomes)


class ExtractorTrainer(PolicyTrainer):
    """Holds the extractor's pending samples, credits them with guided outcomes, and trains with CISPO."""

    def __init__(self, model: PreTrainedModel, pad_token_id: int, config: ExtractorConfig = ExtractorConfig()) -> None:
        loss_fn = functools.partial(
            cispo_loss, eps_low=config.eps_low, eps_high=config.eps_high, aggregation=config.aggregation
        )
        super().__init__(model, pad_token_id, config, loss_fn)
        self.pending: list[ExtractorSample] = []
        self._writer: dict[int, ExtractorSample] = {}

    def logprob_temperature(self, sequence: ExtractorSample) -> float:
        """Every sample was generated at the configured temperature."""
        return logprob_temperature(self.config.temperature)

    def add(self, samples: Sequence[ExtractorSample]) -> None:
        """Queue new outputs; those that wrote entries wait for guided outcomes."""
        for sample in samples:
            if sample.entry_ids or sample.outcomes:
                self.pending.append(sample)
            for entry_id in sample.entry_ids:
                self._writer[entry_id] = sample

    def credit(self, outcomes: Sequence[Outcome], step: int) -> int:
        """Give each guided episode's outcome to the sample that wrote the entry it saw; drop stale samples.

        Returns the number of samples credited.
        """
        credited = 0
        for outcome in outcomes:
            sample = self._writer.get(outcome.entry_id)
            if sample is not None:
                sample.outcomes.append(1.0 if outcome.success else -1.0)
                credited += 1
        stale = [s for s in self.pending if not s.outcomes and step - s.step >= self.config.max_pending_steps]
        self._forget(stale)
        return credited

    @property
    def ready(self) -> list[ExtractorSample]:
        """Samples with a reward, oldest first."""
        return [s for s in self.pending if s.outcomes]

    def maybe_step(self) -> dict[str, float] | None:
        """One CISPO step on the first ``buffer_size`` rewarded samples, once there are that many; else None."""
        batch = self.ready[: self.config.buffer_size]
        if len(batch) < self.config.buffer_size:
            return None
        rewards = torch.tensor([s.reward for s in batch], dtype=torch.float32)
        metrics = self.update(batch, batch_advantages(rewards))
        metrics["reward_mean"] = float(rewards.mean())
        self._forget(batch)
        return metrics

    def _forget(self, samples: Sequence[ExtractorSample]) -> None:
        gone = {id(s) for s in samples}
        self.pending = [s for s in self.pending if id(s) not in gone]
        self._writer = {e: s for e, s in self._writer.items() if id(s) not in gone}
