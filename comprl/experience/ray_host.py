"""Hosting the experience manager: :func:`connect` picks the host, :class:`RayExperienceManager` is the client of
a manager running as a Ray actor.

``experience.mode="sync"`` keeps the :class:`~comprl.experience.manager.ExperienceManager` in the caller's process,
every call done before it returns (the reference behaviour). ``"async"`` runs it as a Ray actor in its own process,
where a background thread does the extractor's work and searches are batched on threads of their own; the client
pickles to the actor's handle alone, so rollout workers in other Ray processes can call it too.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any, Sequence

from transformers import PreTrainedModel

from comprl.config import ExperimentConfig
from comprl.experience.bank import Entry
from comprl.experience.interface import Episode, ExperienceService, Outcome, checked_search
from comprl.experience.manager import ExperienceManager
from comprl.llm import HFEngine
from comprl.policy_gradient import PolicyGradientTrainer
from comprl.ray_start import start_ray


class RayExperienceManager:
    """Client of an :class:`ExperienceManager` running as a Ray actor in its own process (``mode="async"``).

    Joins ``experience.ray_address`` (None: starts a private local node, see that field) and calls the same methods;
    ``submit``, ``credit`` and ``step_done`` return as soon as the work is queued there.
    """

    def __init__(
        self, config: ExperimentConfig, bank_path: str | Path, *, device: str = "cpu",
        checkpoint: str | Path | None = None,
    ) -> None:
        import ray  # a core dependency, loaded only by runs that host the manager in Ray

        self._ray = ray
        start_ray(config.experience.ray_address, include_dashboard=False, log_to_driver=True, logging_level="ERROR")
        cores = len(config.experience.manager_cores) or 1
        remote = ray.remote(ExperienceManager).options(
            num_cpus=cores, max_concurrency=config.experience.search_workers + 4, name=None
        )
        checkpoint = None if checkpoint is None else str(checkpoint)
        self._handle = remote.remote(config, str(bank_path), device=device, background=True, checkpoint=checkpoint)
        self._report: dict[str, Any] | None = None  # what close returned
        ray.get(self._handle.ready.remote())

    def __getstate__(self) -> dict[str, Any]:
        """Only the actor handle travels, so that the client works in other Ray processes of the run (the rollout
        workers ask search_and_ask through it)."""
        return {"_handle": self._handle}

    def __setstate__(self, state: dict[str, Any]) -> None:
        import ray

        self._ray, self._handle, self._report = ray, state["_handle"], None

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._ray.get(getattr(self._handle, name).remote(*args, **kwargs))

    def search(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> list[Entry | None]:
        return self._ray.get(self._search(queries, tasks, seeds, record))

    def search_later(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> Future:
        """:meth:`search` running in the manager's process while the caller goes on."""
        return self._search(queries, tasks, seeds, record).future()

    def _search(
        self, queries: Sequence[str], tasks: Sequence[str], seeds: Sequence[int] | None, record: bool
    ) -> Any:
        queries, tasks, seeds = checked_search(queries, tasks, seeds)
        return self._handle.search.remote(queries, tasks, seeds=seeds, record=record)

    def submit(self, episodes: Sequence[Episode]) -> int:
        return self._call("submit", list(episodes))

    def credit(self, outcomes: Sequence[Outcome], step: int) -> None:
        self._call("credit", list(outcomes), step)

    def fence(self) -> None:
        self._call("fence")

    def step_done(self, step: int) -> None:
        self._call("step_done", step)

    def flush(self, timeout: float | None = None) -> bool:
        return self._call("flush", timeout)

    def search_and_ask(self, query: str, task: str) -> str | None:
        return self._call("search_and_ask", query, task)

    def stats(self, *, searches_only: bool = False) -> dict[str, float]:
        return self._call("stats", searches_only=searches_only)

    def save_checkpoint(self, directory: str | Path) -> None:
        """Written by the manager's process: ``directory`` must be a path it can reach (shared storage on a
        cluster)."""
        self._call("save_checkpoint", str(directory))

    def wait_checkpoint(self) -> None:
        self._call("wait_checkpoint")

    def close(self) -> dict[str, Any]:
        """Close the manager and end its actor; a later call returns the same report (the actor is gone)."""
        if self._report is None:
            self._report = self._call("close")
            self._ray.kill(self._handle)
        return self._report


def connect(
    config: ExperimentConfig, bank_path: str | Path, *, device: str = "cpu", checkpoint: str | Path | None = None,
    actor: PolicyGradientTrainer | None = None, actor_engine: HFEngine | None = None,
    model: PreTrainedModel | None = None,
) -> ExperienceService:
    """The experience manager of a run, hosted as ``config.experience.mode`` says, continuing from ``checkpoint``
    (a folder :meth:`ExperienceManager.save_checkpoint` wrote) when given. ``actor`` and ``actor_engine``: the
    actor's trainer and engine, for ``extractor.share_actor``; ``model``: the extractor's model, loaded by the
    caller (``extractor.share_base``); all three in-process only (see :class:`ExperienceManager`)."""
    if config.experience.mode == "async":
        if actor is not None or actor_engine is not None or model is not None:
            raise ValueError(
                "the actor's model cannot be handed to a manager in another process (experience.mode='async')"
            )
        return RayExperienceManager(config, bank_path, device=device, checkpoint=checkpoint)
    return ExperienceManager(
        config, bank_path, device=device, checkpoint=checkpoint, actor=actor, actor_engine=actor_engine, model=model
    )
