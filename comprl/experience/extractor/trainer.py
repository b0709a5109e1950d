"""CISPO update of the experience extractor, with the credit assignment that gives its outputs a reward.

An extractor output m (one distillation or merge call) is one training sample. Its reward is the mean outcome
(+1 success, -1 failure) of the experience-guided trajectories that were shown an entry m wrote; it has none until
such a trajectory finishes. Under ``reward="over_free"`` (comprl's option) each outcome is less the mean outcome of
the free half of its episode's group (:attr:`~comprl.experience.interface.Outcome.reward_over_free`).

- **Credit through merges** (``credit_parents``, comprl's fix; the official code credits only the writer of the
  entry shown): when an update/merge output replaces entries P1, P2 by a new entry E, E keeps P1 and P2 as its
  parents. An outcome of E is given to E's writer and to the writers of E's ancestors (P1, P2, their own parents,
  and so on through any chain of merges), each writer once per outcome however many of its entries the chain
  passes through. So the distillation outputs whose lessons a merge folded together keep earning reward.
- **Buffer** (official code): a sample enters the buffer with its first reward, at its end; rewards of later
  outcomes accumulate in place. The buffer holds at most ``buffer_capacity`` samples: one entering a full buffer
  pushes out the oldest, untrained (FIFO).
- **Schedule** (paper, "Extractor objective"): :meth:`ExtractorTrainer.maybe_step` may be called at any time;
  whenever the buffer holds ``buffer_size`` samples it takes one CISPO step on the oldest ``buffer_size`` of them,
  with batch-level advantages A_i = (r_i - mean(r)) * w_i, and repeats while that holds, independently of the
  actor's steps. The trained samples leave the buffer.
- **Reuse** (``reuse_samples``, official code): a trained sample stays linked to the entries it wrote, so their
  later outcomes bring it back to the buffer, rewarded by those new outcomes only. Its weight is
  w_i = (1 + times_trained) ** -``reuse_weight_power``, and 0 in the ``cooldown`` updates after one that trained it.
  (The official pipeline defines this weighting but, as shipped, never records a training, so its weights stay 1.)
  Without reuse, a sample is forgotten once trained and every weight is 1.
- **Staleness**: a sample out of the buffer whose entries no guided trajectory used within ``max_pending_steps``
  actor steps (since it was generated or since its last outcome) is forgotten.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from transformers import PreTrainedModel

from comprl.config import ExtractorConfig
from comprl.experience.interface import Outcome
from comprl.llm.engine import logprob_temperature
from comprl.objectives import batch_advantages, cispo_loss
from comprl.policy_gradient import PackedSequence, PolicyGradientTrainer


@dataclass(kw_only=True)
class ExtractorSample(PackedSequence):
    """One extractor output as a training sample: prompt + reply tokens, and the rewards it has earned."""

    kind: str
    """"distill" or "merge"."""
    step: int
    """Actor step at which it was generated."""
    entry_ids: tuple[int, ...] = ()
    """Bank ids of the entries it wrote."""
    parent_ids: tuple[tuple[int, ...], ...] = ()
    """For each entry of ``entry_ids``, in that order, the bank ids of the entries it replaced (() for an add)."""
    outcomes: list[float] = field(default_factory=list)
    """+1 / -1 (or less the free half's, ``reward="over_free"``) per guided trajectory that used one of its
    entries (or the invalid-output reward), since it last
    entered the buffer; it is in the buffer exactly while this is not empty."""
    times_trained: int = 0
    """Extractor updates that trained it with a non-zero weight."""
    last_update: int | None = None
    """Number of the extractor update that last trained it (updates count from 1)."""
    last_credited: int | None = None
    """Actor step of the last outcome it earned."""

    @property
    def reward(self) -> float:
        return sum(self.outcomes) / len(self.outcomes)


class ExtractorTrainer(PolicyGradientTrainer):
    """Holds the extractor's samples, credits them with guided outcomes, and trains with CISPO."""

    def __init__(
        self, model: PreTrainedModel, pad_token_id: int, config: ExtractorConfig = ExtractorConfig(),
        weights_of: PolicyGradientTrainer | None = None,
    ) -> None:
        """``weights_of``: the actor's trainer when the extractor trains the actor's weights
        (``ExtractorConfig.share_actor``; :class:`~comprl.policy_gradient.PolicyGradientTrainer`)."""
        loss_fn = functools.partial(
            cispo_loss, eps_low=config.eps_low, eps_high=config.eps_high, aggregation=config.aggregation
        )
        super().__init__(model, pad_token_id, config, loss_fn, weights_of)
        self.buffer: list[ExtractorSample] = []
        """Rewarded samples, oldest first."""
        self.waiting: list[ExtractorSample] = []
        """Samples that wrote entries and were never rewarded nor trained, oldest first."""
        self.updates = 0
        """Extractor updates taken so far."""
        self._writer: dict[int, ExtractorSample] = {}
        self._parents: dict[int, tuple[int, ...]] = {}

    def state_dict(self) -> dict[str, Any]:
        """:meth:`PolicyGradientTrainer.state_dict` plus the samples held (pickled together, so a sample that is both in
        the buffer and an entry's writer stays one object) and the update counter."""
        return {
            **super().state_dict(),
            "samples": {
                "buffer": self.buffer, "waiting": self.waiting, "writer": self._writer, "parents": self._parents,
            },
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        samples = state["samples"]
        self.buffer, self.waiting = list(samples["buffer"]), list(samples["waiting"])
        self._writer, self._parents = dict(samples["writer"]), dict(samples["parents"])
        self.updates = int(state["updates"])

    def logprob_temperature(self, sequence: ExtractorSample) -> float:
        """Every sample was generated at the configured temperature."""
        return logprob_temperature(self.config.temperature)

    @property
    def pending(self) -> list[ExtractorSample]:
        """Samples not trained yet: those waiting for a reward, then the buffer."""
        return self.waiting + self.buffer

    @property
    def ready(self) -> list[ExtractorSample]:
        """Samples with a reward (the buffer), oldest first."""
        return list(self.buffer)

    def add(self, samples: Sequence[ExtractorSample]) -> None:
        """Take new outputs: those with a reward (a rejected one) enter the buffer, those that wrote entries wait."""
        for sample in samples:
            for entry_id in sample.entry_ids:
                self._writer[entry_id] = sample
            if self.config.credit_parents:
                self._parents.update((e, p) for e, p in zip(sample.entry_ids, sample.parent_ids) if p)
            if sample.outcomes:
                self._enter(sample)
            elif sample.entry_ids:
                self.waiting.append(sample)
        self._prune_links()

    def credit(self, outcomes: Sequence[Outcome], step: int) -> int:
        """Give each guided episode's outcome to the writers it reaches (module docstring); drop stale samples.

        Returns the number of (outcome, sample) credits given.
        """
        credited = 0
        over_free = self.config.reward == "over_free"
        for outcome in outcomes:
            for sample in self._writers(outcome.entry_id):
                sample.outcomes.append(outcome.reward_over_free if over_free else outcome.reward)
                sample.last_credited = step
                if len(sample.outcomes) == 1:
                    self._enter(sample)
                credited += 1
        held = {id(s): s for s in self._writer.values()}.values()
        stale = [
            s for s in held
            if not s.outcomes
            and step - (s.step if s.last_credited is None else s.last_credited) >= self.config.max_pending_steps
        ]
        self._forget(stale)
        return credited

    def maybe_step(self) -> dict[str, float] | None:
        """A CISPO step on the oldest ``buffer_size`` buffered samples, repeated while that many wait.

        Returns None if no update was taken, else the updates' metrics averaged, with ``updates`` their number.
        """
        taken = []
        while len(self.buffer) >= self.config.buffer_size:
            batch = self.buffer[: self.config.buffer_size]
            del self.buffer[: self.config.buffer_size]
            taken.append(self._train(batch))
        if not taken:
            return None
        # an update whose advantages are all 0 takes no gradient and reports no grad_norm: each metric is averaged
        # over the updates that report it
        keys = dict.fromkeys(key for m in taken for key in m)
        metrics = {key: sum(m[key] for m in taken if key in m) / sum(key in m for m in taken) for key in keys}
        metrics["updates"] = float(len(taken))
        return metrics

    def weight(self, sample: ExtractorSample) -> float:
        """The factor on ``sample``'s advantage in the next update: 0 within the cooldown, else the reuse decay."""
        if sample.last_update is not None and self.updates + 1 - sample.last_update <= self.config.cooldown:
            return 0.0
        return (1.0 + sample.times_trained) ** -self.config.reuse_weight_power

    def _train(self, batch: list[ExtractorSample]) -> dict[str, float]:
        """One update on ``batch`` (already out of the buffer); then each sample is kept for reuse or forgotten."""
        rewards = torch.tensor([s.reward for s in batch], dtype=torch.float32)
        weights = torch.tensor([self.weight(s) for s in batch], dtype=torch.float32)
        metrics = self.update(batch, batch_advantages(rewards) * weights)
        self.updates += 1
        metrics["reward_mean"] = float(rewards.mean())
        metrics["weight_mean"] = float(weights.mean())
        for sample, weight in zip(batch, weights.tolist()):
            if weight > 0:
                sample.times_trained += 1
                sample.last_update = self.updates
        self._leave(batch)
        return metrics

    def _enter(self, sample: ExtractorSample) -> None:
        """Put a newly rewarded sample at the end of the buffer, pushing out the oldest if it is full."""
        self.waiting = [s for s in self.waiting if s is not sample]
        if self.config.buffer_capacity and len(self.buffer) >= self.config.buffer_capacity:
            self._leave([self.buffer.pop(0)])
        self.buffer.append(sample)

    def _leave(self, samples: Sequence[ExtractorSample]) -> None:
        """Samples out of the buffer spend their outcomes; they stay linked to their entries only if reused."""
        for sample in samples:
            sample.outcomes.clear()
        self._forget([s for s in samples if not (self.config.reuse_samples and s.entry_ids)])

    def _writers(self, entry_id: int) -> list[ExtractorSample]:
        """The held samples that wrote ``entry_id`` or any of its ancestors, each once."""
        found: dict[int, ExtractorSample] = {}
        seen: set[int] = set()
        stack = [entry_id]
        while stack:
            entry = stack.pop()
            if entry in seen:
                continue
            seen.add(entry)
            writer = self._writer.get(entry)
            if writer is not None:
                found.setdefault(id(writer), writer)
            stack.extend(self._parents.get(entry, ()))
        return list(found.values())

    def _forget(self, samples: Sequence[ExtractorSample]) -> None:
        gone = {id(s) for s in samples}
        self.waiting = [s for s in self.waiting if id(s) not in gone]
        self.buffer = [s for s in self.buffer if id(s) not in gone]
        self._writer = {e: s for e, s in self._writer.items() if id(s) not in gone}
        self._prune_links()

    def _prune_links(self) -> None:
        """Keep only the parent links through which an outcome can still reach a held sample."""
        reaching = set(self._writer)
        grew = True
        while grew:
            grew = False
            for entry, parents in self._parents.items():
                if entry not in reaching and reaching.intersection(parents):
                    reaching.add(entry)
                    grew = True
        self._parents = {e: p for e, p in self._parents.items() if reaching.intersection(p)}
