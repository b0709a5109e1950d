"""comprl's text environments, registered with gymnasium under the ``comprl/`` namespace.

    env = comprl.envs.make("comprl/Room-Ultimate-5x5-v0", max_turns=30)
    obs, info = env.reset(seed=123)
    obs, reward, terminated, truncated, info = env.step("<answer>north</answer>")

Observations and actions are text; `info` always carries ``instruction``, ``success``, ``won``,
``invalid_action``, ``invalid_actions``, ``turn`` and ``admissible_actions`` (see `comprl.envs.base`).
Importing this package needs only gymnasium; a MiniHack env needs nle and minihack, whose wheels exist only
for Linux x86_64 (`make` raises an ImportError saying so elsewhere).

Some envs hide a fact that is fixed per task across episodes (the vaults' secrets, `comprl.envs.vault`; the
stairs' corner of the fixed dark Room, `comprl.envs.minihack.hidden`): for them,
`lesson_states_secret` says whether a lesson states it, through the checks in `SECRET_CHECKS`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from comprl.envs import vault
from comprl.envs.minihack import hidden
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, EVAL_SEED_OFFSET, TextEnv

__all__ = ["ENV_IDS", "SECRET_CHECKS", "TextEnv", "lesson_states_secret", "make", "random_policy_success"]


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
    _Registration("comprl/Room-Dark-Fixed-5x5-v0", "comprl.envs.minihack.env:MiniHackTextEnv", "room-dark-fixed"),
    _Registration("comprl/WebShop-Small-v0", "comprl.envs.webshop.env:WebShopTextEnv", "small"),
    _Registration("comprl/Sokoban-6x6-2box-v0", "comprl.envs.sokoban.env:SokobanTextEnv", "6x6-2box"),
    _Registration("comprl/ALFWorld-v0", "comprl.envs.alfworld.env:AlfWorldTextEnv", "all"),
    _Registration("comprl/SWE-Lite-v0", "comprl.envs.swe.env:SweLiteEnv", "lite"),
    *(_Registration(family.env_id, "comprl.envs.vault:VaultTextEnv", task) for task, family in vault.FAMILIES.items()),
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


SECRET_CHECKS: dict[str, Callable[[int, str], bool]] = {
    **{env_id: functools.partial(vault.states_secret, env_id) for env_id in vault.VAULT_IDS},
    "comprl/Room-Dark-Fixed-5x5-v0": hidden.states_secret,
}
"""Per env id whose tasks each hide a fixed fact (a vault's secret): ``check(seed, text)``, whether a lesson's
`text` states the fact of the task that `seed` meets. A check must import nothing heavy at module level (this
package is imported by everything)."""


def lesson_states_secret(env_id: str, seed: int, text: str) -> bool | None:
    """Whether lesson `text` states the hidden fact of `env_id`'s task at `seed` (`SECRET_CHECKS`), or None for an
    env without such a fact: there, "states the secret" has no meaning and is not counted.

    Raises:
        ValueError: `env_id` is not one of `ENV_IDS`.
    """
    if env_id not in ENV_IDS:
        raise ValueError(f"unknown comprl env id {env_id!r}; accepted ids: {', '.join(ENV_IDS)}")
    check = SECRET_CHECKS.get(env_id)
    return None if check is None else check(seed, text)


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
