"""Task mixtures: one training batch drawn from several environments, with a batch size and a turn cap per task.

The paper trains one actor on several tasks at once (total batch 384 = 128 per task in its 3-task setting). A
:class:`TaskMixture` says how many task instances each environment contributes per step, how many turns its
episodes get and how its envs are built, and draws the instances' seeds deterministically from (seed, step), so a
multi-task step is reproducible like a single-task one. The experiment loop runs every experiment as a mixture; a
single-task run is the mixture of one task.

Presets (:data:`MIXTURES`), from the paper's environments:

- ``3-task``: MiniHack Room + WebShop + ALFWorld (the paper's);
- ``6-task``: those three + MiniHack MazeWalk + MiniHack KeyRoom + Sokoban (the paper's; River is not part of it);
- ``3-task-lit``: ``3-task`` with the lit Room in place of the dark one (comprl's);
- ``laptop-2``: the lit Room + the dark Room, two tasks a small untrained actor wins now and then (comprl's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import gymnasium
import numpy as np

from comprl.envs import ENV_IDS, make
from comprl.envs.base import DEFAULT_MAX_TURNS, EVAL_SEED_OFFSET

TASK_NAMES: Mapping[str, str] = {
    "comprl/Room-Ultimate-5x5-v0": "room",
    "comprl/Room-Random-5x5-v0": "room_lit",
    "comprl/MazeWalk-9x9-v0": "maze",
    "comprl/KeyRoom-Dark-S5-v0": "keyroom",
    "comprl/River-Narrow-v0": "river",
    "comprl/Room-Dark-Fixed-5x5-v0": "room_dark_fixed",
    "comprl/WebShop-Small-v0": "webshop",
    "comprl/Sokoban-6x6-2box-v0": "sokoban",
    "comprl/ALFWorld-v0": "alfworld",
    "comprl/SWE-Lite-v0": "swe",
    "comprl/Vault-v0": "vault",
    "comprl/Vault-Code-v0": "vault_code",
    "comprl/Vault-Fresh-v0": "vault_fresh",
}
"""A short name per env id (the paper's table columns, lower case): the prefix of a task's metric names."""


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
    max_turns: Mapping[str, int] = field(default_factory=dict)
    """Turn cap per env id; an env id not named here gets ``DEFAULT_MAX_TURNS`` (30, the paper's)."""
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Further constructor keywords per env id (e.g. MiniHack's ``view``)."""

    def __post_init__(self) -> None:
        if not self.batch:
            raise ValueError("a TaskMixture needs at least one env id")
        for env_id in (*self.batch, *self.max_turns, *self.options):
            if env_id not in ENV_IDS:
                raise ValueError(f"unknown env id {env_id!r} in mixture; accepted: {', '.join(ENV_IDS)}")
        for what, counts in (("batch size", self.batch), ("turn cap", self.max_turns)):
            for env_id, n in counts.items():
                if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                    raise ValueError(f"{what} {n!r} for {env_id}: expected an integer >= 1")
            stray = set(counts) - set(self.batch)
            if stray:
                raise ValueError(f"{what} given for env ids not in the mixture: {sorted(stray)}")

    @property
    def env_ids(self) -> tuple[str, ...]:
        return tuple(self.batch)

    @property
    def size(self) -> int:
        """Task instances per step, over all envs."""
        return sum(self.batch.values())

    def instances(self, seed: int, step: int) -> list[Instance]:
        """The step's instances, env by env in mixture order, their env seeds drawn from one stream seeded with
        (seed, step) (below ``EVAL_SEED_OFFSET``: training seeds never meet the held-out ones)."""
        seeds = iter(np.random.default_rng([seed, step]).integers(0, EVAL_SEED_OFFSET, size=self.size))
        return [Instance(env_id, int(next(seeds))) for env_id, n in self.batch.items() for _ in range(n)]

    def turns(self, env_id: str) -> int:
        """The turn cap of `env_id`'s episodes."""
        return self.max_turns.get(env_id, DEFAULT_MAX_TURNS)

    def make_envs(self, env_id: str, n: int) -> list[gymnasium.Env]:
        """``n`` envs of `env_id` with its turn cap and options."""
        return [make(env_id, max_turns=self.turns(env_id), **self.options.get(env_id, {})) for _ in range(n)]


def task_name(env_id: str) -> str:
    """The short name of an env id (:data:`TASK_NAMES`), an identifier usable in metric names."""
    if env_id not in TASK_NAMES:
        raise ValueError(f"unknown env id {env_id!r}; accepted: {', '.join(TASK_NAMES)}")
    return TASK_NAMES[env_id]


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
    # comprl's: the paper's 3 tasks with the lit Room (stairs in view, the cpu profile's single task) in place of the
    # dark Room-Ultimate, so that a mixture and the single-task runs share their Room
    "3-task-lit": ("comprl/Room-Random-5x5-v0", "comprl/WebShop-Small-v0", "comprl/ALFWorld-v0"),
    # comprl's: two tasks a uniformly random mover wins within the cpu profile's caps (lit Room 15% in 6 turns, dark
    # Room 29% in 15; results/design/turn_caps.csv), so that a group of 8 such rollouts holds a win and a loss to
    # learn from 73% / 94% of the time (1 - (1 - p)^8); WebShop, ALFWorld and KeyRoom are never won at random
    "laptop-2": ("comprl/Room-Random-5x5-v0", "comprl/Room-Ultimate-5x5-v0"),
}
"""Multi-task settings, by name: the paper's (``3-task``, ``6-task``) and comprl's variants for small actors."""
