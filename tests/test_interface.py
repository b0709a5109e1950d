"""The one interface between the two sides (:mod:`comprl.experience.interface`)."""

from __future__ import annotations

import inspect

from comprl.experience.interface import ExperienceService
from comprl.experience.manager import ExperienceManager, RayExperienceManager


def test_both_experience_managers_provide_the_experience_service_protocol() -> None:
    """Every call of :class:`ExperienceService`, with the same parameters, on the in-process manager and its Ray
    client (the actor side holds either)."""
    calls = [name for name, _ in inspect.getmembers(ExperienceService, inspect.isfunction) if not name.startswith("_")]
    assert len(calls) == 11
    for host in (ExperienceManager, RayExperienceManager):
        for name in calls:
            wanted = inspect.signature(getattr(ExperienceService, name)).parameters
            found = inspect.signature(getattr(host, name)).parameters
            assert [(p.name, p.kind, p.default) for p in found.values()] == [
                (p.name, p.kind, p.default) for p in wanted.values()
            ], f"{host.__name__}.{name}"
