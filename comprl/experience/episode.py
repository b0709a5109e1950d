"""What the experience side is told about a finished episode, and how its entries fared.

The actor side (:mod:`comprl.actor.rollout`) turns each finished trajectory into an :class:`Episode`: plain data (text,
ids, an outcome) with no token tensors, small enough to cross a process boundary to a Ray-hosted manager.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Episode:
    """One finished episode, as the extractor reads it."""

    task: str
    """Environment id; the bank is shared across tasks and searched within one."""
    seed: int
    """The task instance (env seed)."""
    step: int
    """Actor step whose rollouts it belongs to."""
    index: int
    """Position in its step's rollout batch."""
    instruction: str
    """The goal the actor was given."""
    messages: tuple[dict[str, str], ...] = field(default=())
    """The transcript: system, then alternating user (observation) and assistant (reply) messages."""
    success: bool = False
    guided: bool = False
    """Whether it was played in the experience-guided half of its group."""
    experience_ids: tuple[int, ...] = ()
    """Bank ids of the entries it was shown."""

    @property
    def source(self) -> str:
        """Its name in the bank's operations log."""
        return f"step{self.step}/episode{self.index}/seed{self.seed}"


@dataclass(frozen=True)
class Outcome:
    """How one guided episode that was shown an entry ended: the credit of that entry (and its writer)."""

    entry_id: int
    success: bool
