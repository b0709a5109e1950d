"""comprl's text environments, registered with gymnasium under the ``comprl/`` namespace.

    env = comprl.envs.make("comprl/Room-Ultimate-5x5-v0", max_turns=30)
    obs, info = env.reset(seed=123)
    obs, reward, terminated, truncated, info = env.step("<answer>north</answer>")

Observations and actions are text; `info` always carries ``instruction``, ``success``, ``won``,
``invalid_action``, ``invalid_actions``, ``turn`` and ``admissible_actions`` (see `comprl.envs.base`).
Importing this package needs only gymnasium; a MiniHack env needs nle and minihack, whose wheels exist only
for Linux x86_64 (`make` raises an ImportError saying so elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, EVAL_SEED_OFFSET, TextEnv

__all__ = ["ENV_IDS", "TextEnv", "make", "random_policy_success"]


@dataclass(frozen=True)
class _Registration:
    """One comprl env id and how gymnasium builds it."""

    env_id: str
    entry_point: str
    task: str
    """The `task` argument of the entry point's constructor."""


_REGISTRATIONS: tuple[_Registration, ...] = (
    _Registration("comprl/Room-Ultimate-5x5-v0", "comprl.envs.minihack.env:MiniHackTextEnv", "room"),
    _Registration("comprl/Room-Random-5x5-v0", "comprl.envs.minihack.env:MiniHackTextEnv", "room-lit"),
    _Registration("comprl/MazeWalk-9x9-v0", "comprl.envs.minihack.env:MiniHackTextEnv", "maze"),
    _Registration("comprl/KeyRoom-Dark-S5-v0", "comprl.envs.minihack.env:MiniHackTextEnv", "keyroom"),
    _Registration("comprl/River-Narrow-v0", "comprl.envs.minihack.env:MiniHackTextEnv", "river"),
    _Registration("comprl/WebShop-Small-v0", "comprl.envs.webshop.env:WebShopTextEnv", "small"),
    _Registration("comprl/Sokoban-6x6-2box-v0", "comprl.envs.sokoban.env:SokobanTextEnv", "6x6-2box"),
    _Registration("comprl/ALFWorld-v0", "comprl.envs.alfworld.env:AlfWorldTextEnv", "all"),
    _Registration("comprl/SWE-Lite-v0", "comprl.envs.swe.env:SweLiteEnv", "lite"),
)

ENV_IDS: tuple[str, ...] = tuple(registration.env_id for registration in _REGISTRATIONS)
"""Every env id comprl registers."""


def _register_all() -> None:
    """Register every comprl id with gymnasium (once, also when this module is reloaded)."""
    for registration in _REGISTRATIONS:
        if registration.env_id not in gymnasium.registry:
            gymnasium.register(
                id=registration.env_id,
                entry_point=registration.entry_point,
                kwargs={"task": registration.task},
            )


_register_all()


def make(env_id: str, **kwargs: Any) -> gymnasium.Env:
    """Build a registered comprl env; `kwargs` go to its constructor (e.g. ``max_turns=30``).

    Raises:
        ValueError: `env_id` is not one of `ENV_IDS`.
        ImportError: the env's game package is not installed (nle/minihack exist only for Linux x86_64).
    """
    if env_id not in ENV_IDS:
        raise ValueError(f"unknown comprl env id {env_id!r}; accepted ids: {', '.join(ENV_IDS)}")
    return gymnasium.make(env_id, **kwargs)


def random_policy_success(env_id: str, max_turns: int, episodes: int, seed: int = 0) -> float:
    """Success rate of a policy that plays a uniformly random admissible action every turn, on the held-out
    seeds ``run_experiment`` evaluates on (``EVAL_SEED_OFFSET + i``): the floor a trained actor has to clear."""
    rng = np.random.default_rng(seed)
    env = make(env_id, max_turns=max_turns)
    wins = 0
    try:
        for i in range(episodes):
            _, info = env.reset(seed=EVAL_SEED_OFFSET + i)
            done = False
            while not done:
                if not info["admissible_actions"]:
                    raise ValueError(f"{env_id} lists no admissible actions to choose from at random")
                action = info["admissible_actions"][rng.integers(len(info["admissible_actions"]))]
                _, _, terminated, truncated, info = env.step(f"{ANSWER_OPEN}{action}{ANSWER_CLOSE}")
                done = terminated or truncated
            wins += bool(info["success"])
    finally:
        env.close()
    return wins / episodes if episodes else 0.0
