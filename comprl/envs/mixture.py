"""Task mixtures: one training batch drawn from several environments, with a batch size per task.

The paper trains one actor on several tasks at once (total batch 384 = 128 per task in its 3-task setting). A
:class:`TaskMixture` says how many task instances each environment contributes per step and draws their seeds
deterministically from (seed, step), so a multi-task step is reproducible like a single-task one.

Presets (:data:`MIXTURES`), from PAPER.md "Environments":

- ``3-task``: MiniHack Room + WebShop + ALFWorld;
- ``6-task``: those three + MiniHack MazeWalk + MiniHack KeyRoom + Sokoban (River is not part of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from comprl.envs import ENV_IDS
from comprl.envs.base import EVAL_SEED_OFFSET



@dataclass(frozen=True)
class Instance:
    """One task instance of a step: which env, which seed."""

    env_id: str
    seed: int


@dataclass(frozen=True)
class TaskMixture:
    """Environments and how many instances each contributes to one training step."""

    batch: Mapping[str, int]
    """Instances per step for each env id (each is then rolled out ``group_size`` times)."""

    def __post_init__(self) -> None:
        if not self.batch:
            raise ValueError("a TaskMixture needs at least one env id")
        for env_id, n in self.batch.items():
            if env_id not in ENV_IDS:
                raise ValueError(f"unknown env id {env_id!r} in mixture; accepted: {', '.join(ENV_IDS)}")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"batch size {n!r} for {env_id}: expected an integer >= 1")

    @property
    def env_ids(self) -> tuple[str, ...]:
        return tuple(self.batch)

    @property
    def size(self) -> int:
        """Task instances per step, over all envs."""
        return sum(self.batch.values())

    def instances(self, seed: int, step: int) -> list[Instance]:
        """The step's instances, env by env in mixture order, with seeds derived from (seed, step, env index)."""
        out = []
        for index, (env_id, n) in enumerate(self.batch.items()):
            rng = np.random.default_rng([seed, step, index])
            out += [Instance(env_id, int(s)) for s in rng.integers(0, EVAL_SEED_OFFSET, size=n)]
        return out


def preset(name: str, per_task: int = 128) -> TaskMixture:
    """A named mixture of the paper with ``per_task`` instances from each env (paper: 128)."""
    if name not in MIXTURES:
        raise ValueError(f"unknown mixture {name!r}; accepted: {', '.join(MIXTURES)}")
    return TaskMixture({env_id: per_task for env_id in MIXTURES[name]})


MIXTURES: dict[str, tuple[str, ...]] = {
    "3-task": ("comprl/Room-Ultimate-5x5-v0", "comprl/WebShop-Small-v0", "comprl/ALFWorld-v0"),
    "6-task": (
        "comprl/Room-Ultimate-5x5-v0",
        "comprl/WebShop-Small-v0",
        "comprl/ALFWorld-v0",
        "comprl/MazeWalk-9x9-v0",
        "comprl/KeyRoom-Dark-S5-v0",
        "comprl/Sokoban-6x6-2box-v0",
    ),
}
"""The paper's multi-task settings, by name."""
