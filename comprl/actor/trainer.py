"""GRPO update of the actor from packed rollout trajectories."""

from __future__ import annotations

import functools
from typing import Sequence

import torch
from transformers import PreTrainedModel

from comprl.objectives import grpo_policy_loss, split_group_advantages
from comprl.config import ActorConfig
from comprl.policy_gradient import PolicyGradientTrainer
from comprl.actor.rollout import Trajectory


class ActorTrainer(PolicyGradientTrainer):
    """Updates the actor with the split-group GRPO objective of :mod:`comprl.objectives`."""

    def __init__(self, model: PreTrainedModel, pad_token_id: int, config: ActorConfig = ActorConfig()) -> None:
        loss_fn = functools.partial(grpo_policy_loss, clip_eps=config.clip_eps, aggregation=config.aggregation)
        super().__init__(model, pad_token_id, config, loss_fn)

    def logprob_temperature(self, sequence: Trajectory) -> float:
        """Each trajectory records it at rollout (``RolloutConfig.temperature``, 1 for greedy decoding)."""
        return sequence.temperature

    def advantages(self, trajectories: Sequence[Trajectory]) -> torch.Tensor:
        """Split-group advantages: normalised within (task instance, guided/free) cells (paper Eq. 5), or within
        each task instance's whole group when ``config.split_halves`` is off (the ablation), of the returns with
        ``config.invalid_action_reward`` per invalid action added."""
        shaping = self.config.invalid_action_reward
        split = self.config.split_halves
        return split_group_advantages(
            torch.tensor([t.reward + shaping * t.invalid_actions for t in trajectories], dtype=torch.float32),
            torch.tensor([t.group for t in trajectories], dtype=torch.long),
            torch.tensor([split and t.guided for t in trajectories], dtype=torch.bool),
            scale_by_std=self.config.scale_adv_by_std,
        )

    def step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One GRPO update on a rollout batch; returns diagnostics."""
        return self.update(trajectories, self.advantages(trajectories))

    def loss(self, trajectories: Sequence[Trajectory]) -> float:
        """The GRPO loss of a batch under the current weights (no update)."""
        return self.evaluate_loss(trajectories, self.advantages(trajectories))
