"""Trainers (actor GRPO) and the experiment loop."""

from comprl.trainers.actor import ActorConfig, ActorTrainer

__all__ = ["ActorConfig", "ActorTrainer"]
