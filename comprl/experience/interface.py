"""The interface between the two sides: what the actor side tells the experience side, and what it may ask.

- :class:`Episode` and :class:`Outcome`: a finished episode and how a shown entry fared. The actor side
  (:mod:`comprl.actor.rollout`) turns each finished trajectory into an :class:`Episode`: plain data (text, ids, an
  outcome) with no token tensors, small enough to cross a process boundary to a Ray-hosted manager.
- :data:`SEARCH_OPEN` and :data:`SEARCH_CLOSE`: the tags of the actor's mid-episode question (search_and_ask).
- :class:`ExperienceService`: the calls the actor side makes. The in-process
  :class:`~comprl.experience.manager.ExperienceManager`, its Ray client
  :class:`~comprl.experience.ray_host.RayExperienceManager` and :class:`NullExperience` (the baseline's) provide
  them (``tests/test_interface.py`` checks their signatures against this protocol); :func:`checked_search` checks
  the arguments of a search for each.
"""

from __future__ import annotations

import re
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from comprl.experience.bank import Entry

SEARCH_TAG = "knowledge_search_and_ask"
"""Name of the tag in which the actor writes a search_and_ask question (the official code's tag)."""
SEARCH_OPEN = f"<{SEARCH_TAG}>"
SEARCH_CLOSE = f"</{SEARCH_TAG}>"
"""Closing tag of a question; rollouts add it to the actor's stop strings so a reply ends right after it."""


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


_SEED_IN_SOURCE = re.compile(r"/seed(-?\d+)$")
"""The env seed at the end of an operation's source (:attr:`Episode.source`)."""


def seed_of(source: object) -> int | None:
    """The env seed an operation's source names (:attr:`Episode.source` ends with it); None for another source
    (a merge, a reference lesson) or none."""
    match = _SEED_IN_SOURCE.search(source) if isinstance(source, str) else None
    return None if match is None else int(match.group(1))


@dataclass(frozen=True)
class Outcome:
    """How one guided episode that was shown an entry ended: the credit of that entry (and its writer)."""

    entry_id: int
    success: bool
    free_success: float | None = None
    """The success rate of the free half of the episode's group (None: it had no free episode); the extractor's
    reward subtracts it under ``extractor.reward="over_free"``."""

    @property
    def reward(self) -> float:
        """+1 if the episode succeeded, else -1 (the paper's reward of the entry's writer)."""
        return 1.0 if self.success else -1.0

    @property
    def reward_over_free(self) -> float:
        """:attr:`reward` minus the free half's mean outcome on the same scale (:attr:`reward` without a free half)."""
        return self.reward - (0.0 if self.free_success is None else 2.0 * self.free_success - 1.0)


class ExperienceService(Protocol):
    """What the actor side calls on the experience side, once per training step in this order: ``search`` (or
    ``search_later``) for the guided half's entries, ``credit`` for the entries shown, ``submit`` for the episodes to
    distil, ``fence`` around the actor's update, ``step_done``, ``stats``; ``search_and_ask`` during episodes;
    ``save_checkpoint`` (``wait_checkpoint`` for its files) and ``close`` around the run
    (:class:`~comprl.experience.manager.ExperienceManager` documents each)."""

    def search(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> list[Entry | None]: ...

    def search_later(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> Future: ...

    def submit(self, episodes: Sequence[Episode]) -> int: ...

    def credit(self, outcomes: Sequence[Outcome], step: int) -> None: ...

    def fence(self) -> None: ...

    def step_done(self, step: int) -> None: ...

    def flush(self, timeout: float | None = None) -> bool: ...

    def search_and_ask(self, query: str, task: str) -> str | None: ...

    def stats(self, *, searches_only: bool = False) -> dict[str, float]: ...

    def save_checkpoint(self, directory: str | Path) -> None: ...

    def wait_checkpoint(self) -> None: ...

    def close(self) -> dict[str, Any]: ...


def checked_search(
    queries: Sequence[str], tasks: Sequence[str], seeds: Sequence[int] | None
) -> tuple[list[str], list[str], list[int] | None]:
    """The arguments of a batched search as lists, refused unless they hold one task (and seed) per query."""
    if isinstance(queries, str) or isinstance(tasks, str):  # list("abc") would make three queries of one
        raise TypeError("search takes a sequence of query texts and a sequence of their tasks, got a single str")
    queries, tasks = list(queries), list(tasks)
    if len(tasks) != len(queries):
        raise ValueError(f"got {len(tasks)} tasks for {len(queries)} queries; accepted: one task per query")
    if seeds is not None and len(seeds) != len(queries):
        raise ValueError(f"got {len(seeds)} seeds for {len(queries)} queries; accepted: one seed per query")
    return queries, tasks, None if seeds is None else [int(s) for s in seeds]


class NullExperience:
    """The experience side of a method without one (``baseline``): every call does nothing, so the training step
    reads the same for every method. Searches find nothing, no episode is kept, nothing is written."""

    def search(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> list[Entry | None]:
        return [None] * len(checked_search(queries, tasks, seeds)[0])

    def search_later(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> Future:
        result: Future = Future()
        result.set_result(self.search(queries, tasks, seeds=seeds, record=record))
        return result

    def submit(self, episodes: Sequence[Episode]) -> int:
        return 0

    def credit(self, outcomes: Sequence[Outcome], step: int) -> None:
        pass

    def fence(self) -> None:
        pass

    def step_done(self, step: int) -> None:
        pass

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def search_and_ask(self, query: str, task: str) -> str | None:
        return None

    def stats(self, *, searches_only: bool = False) -> dict[str, float]:
        return {}

    def save_checkpoint(self, directory: str | Path) -> None:
        pass

    def wait_checkpoint(self) -> None:
        pass

    def close(self) -> dict[str, Any]:
        return {}
