"""The one interface between the two sides (:mod:`comprl.experience.interface`)."""

from __future__ import annotations

import inspect

import pytest

from comprl.experience.interface import Episode, ExperienceService, NullExperience, Outcome
from comprl.experience.manager import ExperienceManager
from comprl.experience.ray_host import RayExperienceManager


def test_every_experience_service_provides_the_protocol() -> None:
    """Every call of :class:`ExperienceService`, with the same parameters, on the in-process manager, its Ray
    client and the baseline's null service (the loop holds any of them). Once a test has hosted the manager as a
    Ray actor, Ray has added its tracing keyword ``_ray_trace_ctx`` to the class's methods: not part of the call."""
    calls = [name for name, _ in inspect.getmembers(ExperienceService, inspect.isfunction) if not name.startswith("_")]
    assert len(calls) == 12
    for host in (ExperienceManager, RayExperienceManager, NullExperience):
        for name in calls:
            wanted = inspect.signature(getattr(ExperienceService, name)).parameters
            found = inspect.signature(getattr(host, name)).parameters
            assert [(p.name, p.kind, p.default) for p in found.values() if p.name != "_ray_trace_ctx"] == [
                (p.name, p.kind, p.default) for p in wanted.values()
            ], f"{host.__name__}.{name}"


def test_the_null_experience_service_finds_nothing_keeps_nothing_and_writes_nothing(tmp_path) -> None:
    null = NullExperience()
    tasks = ["comprl/Room-Ultimate-5x5-v0", "comprl/WebShop-Small-v0"]
    assert null.search(["a", "b"], tasks, seeds=[1, 2]) == [None, None]
    assert null.search_later(["a"], tasks[:1]).result() == [None]
    assert null.submit([Episode(tasks[0], 1, 1, 0, "go")]) == 0
    null.credit([Outcome(3, True)], step=1)
    null.fence()
    null.step_done(1)
    null.save_checkpoint(tmp_path / "experience")
    assert not (tmp_path / "experience").exists()
    assert (null.flush(), null.search_and_ask("how?", tasks[0]), null.stats(), null.close()) == (True, None, {}, {})


@pytest.mark.parametrize("queries, tasks", [("one query", ["t"]), (["q"], "comprl/Room-Ultimate-5x5-v0")])
def test_a_single_string_where_a_sequence_belongs_is_refused(tmp_path, queries, tasks) -> None:
    from comprl.config import make_config

    manager = ExperienceManager(make_config("smoke", method="comp_rl"), tmp_path / "bank.duckdb")
    try:
        for service in (manager, NullExperience()):  # both check their arguments alike (checked_search)
            with pytest.raises(TypeError, match="sequence of their tasks"):
                service.search(queries, tasks)
            with pytest.raises(ValueError, match="one task per query"):
                service.search(["a", "b"], ["t"])
    finally:
        manager.close()
