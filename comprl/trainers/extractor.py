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

from comprl.extractor import STYLES
from comprl.llm.engine import logprob_temperature
from comprl.objectives import batch_advantages, cispo_loss
from comprl.rollout import PackedSequence, Trajectory
from comprl.trainers.policy import OptimConfig, PolicyTrainer


@dataclass(frozen=True)
class ExtractorConfig(OptimConfig):
    """The extractor: which model, how it writes, and how it is trained (CISPO)."""

    model: str = "smollm2-135m"
    """Extractor model (separate weights from the actor). Paper: Qwen3-4B-Thinking-2507."""
    style: str = "json"
    """Answer format (``comprl.extractor.STYLES``): "json" (the paper's operation list), "lines" (one compact
    line per op) or "note" (one plain-text lesson per call, for models too small to follow either grammar)."""
    max_new_tokens: int = 512
    """Tokens the extractor may write per call (its reasoning and the answer)."""
    response_prefix: str = ""
    """Text pre-filled at the start of every reply (e.g. "<answer>" to skip the reasoning of a tiny model)."""
    temperature: float = 1.0
    """The extractor's sampling temperature (0 = greedy); its trainer recomputes log-probs under it (at 1 for
    greedy), so this one field keeps the extractor on-policy. Default 1.0, like the paper's rollouts (~1.0)."""
    eps_low: float = 0.1
    """CISPO lower clip: importance weights are at least 1 - eps_low. Paper: 0.1."""
    eps_high: float = 0.1
    """CISPO upper clip: importance weights are at most 1 + eps_high. Paper: 0.1."""
    buffer_size: int = 64
    """Train once this many samples have a reward. Paper: 64."""
    max_pending_steps: int = 20
    """A sample whose entries no guided trajectory has used within this many actor steps is dropped."""
    invalid_reward: float | None = None
    """Reward of an output the validator rejected. None (paper): such outputs get no reward and are never
    trained on; a number (e.g. -1.0) makes them samples at once, which teaches a small model the format."""
    distill_per_step: int = 0
    """Trajectories distilled per actor step, chosen at random with the run's seed; 0 = all of them (paper)."""
    merge_every: int = 5
    """Run the merge pass over the bank every this many actor steps (paper: 5); 0 = never."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.style not in STYLES:
            raise ValueError(f"extractor style={self.style!r}; accepted: {', '.join(STYLES)}")
        if self.buffer_size < 1:
            raise ValueError(f"extractor buffer_size={self.buffer_size!r}: must be >= 1")
        if self.temperature < 0:
            raise ValueError(f"extractor temperature={self.temperature!r}: accepted: >= 0 (0 = greedy decoding)")


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

    def credit(self, trajectories: Sequence[Trajectory], step: int) -> int:
        """Give each guided trajectory's outcome to the samples that wrote the entries it saw; drop stale samples.

        Returns the number of samples credited.
        """
        credited = 0
        for trajectory in trajectories:
            for entry_id in trajectory.experience_ids:
                sample = self._writer.get(entry_id)
                if sample is not None:
                    sample.outcomes.append(1.0 if trajectory.success else -1.0)
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
