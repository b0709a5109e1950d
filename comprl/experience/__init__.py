"""The experience side of Complementary RL: bank, extractor, its trainer, and the manager that runs them.

The actor side talks to it only through the :class:`~comprl.experience.interface.ExperienceService` protocol
(an :class:`~comprl.experience.manager.ExperienceManager` hosted by :func:`connect`, or the baseline's
:class:`~comprl.experience.interface.NullExperience`) with :class:`~comprl.experience.interface.Episode` and
:class:`~comprl.experience.interface.Outcome` records; nothing here imports the actor side.

Modules: ``interface`` (the protocol and its records), ``bank`` (the store, its index and embedder),
``extractor`` (prompts, the per-task track, the CISPO trainer), ``retrieval`` (which entry a query is shown),
``manager`` (the background track that runs them), ``queue_file`` (episodes as JSON lines), ``ray_host``
(:func:`connect` and the Ray client).
"""

import importlib
from typing import Any

_EXPORTS = {
    "ExperienceManager": "comprl.experience.manager",
    "RayExperienceManager": "comprl.experience.ray_host",
    "connect": "comprl.experience.ray_host",
    "RetrievalPolicy": "comprl.experience.retrieval",
    "Episode": "comprl.experience.interface",
    "Outcome": "comprl.experience.interface",
    "ExperienceService": "comprl.experience.interface",
    "NullExperience": "comprl.experience.interface",
    "ExperienceBank": "comprl.experience.bank",
    "Embedder": "comprl.experience.bank",
    "Entry": "comprl.experience.bank",
}
"""Public name -> its module, imported on first use (the bank alone, e.g. for the explorer, loads no model code)."""


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'comprl.experience' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


__all__ = sorted(_EXPORTS)
