"""Rollout workers as Ray actors: the step's episodes played on several processes or machines.

With ``rollout_workers > 0`` the loop (:func:`comprl.loop.run_experiment`) keeps the learners, the
experience manager and the held-out evaluation where they are, and hands each step's rollouts to that many
:class:`RolloutWorker` actors, next to the manager's actor when it runs in Ray too (``experience.mode="async"``).
Each worker holds its own copy of the actor's model and the envs of its share of the rollouts: whole GRPO groups,
contiguous in the step's rollout order, so the trajectories come back in that order and every metric means what
it means in one process. Per step the driver

1. sends the actor's trainable weights when they changed since the last step (LoRA adapters: a few MB; a full
   fine-tune: every weight), put into Ray's object store once and read by every worker;
2. searches the bank for the guided episodes itself (their queries are the instances' first observations, known
   from the seeds), so that a search is made once per query as in one process, and ships the entries;
3. collects the trajectories and each worker's token counts and generation time.

A worker samples from a torch generator seeded with (run seed, step, worker index), so a distributed run is
reproducible and resumes exactly; its samples differ from a one-process run's, which draws the whole batch
from one stream. search_and_ask (``experience.search_and_ask``) needs the manager in Ray
(``experience.mode="async"``): the workers then ask it directly.

The workers join the run's Ray cluster, ``experience.ray_address`` (None: Ray started on this machine). On a
cluster every node needs comprl installed (and the models it loads reachable), as in the README's "Scaling out".
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from comprl.actor.rollout import Trajectory, run_episodes
from comprl.actor.trainer import ActorTrainer
from comprl.config import TRAINS_ACTOR, ExperimentConfig
from comprl.experience.interface import ExperienceService
from comprl.llm import load_model, make_engine, resolve_dtype
from comprl.ray_start import start_ray


class RolloutWorker:
    """One worker: the actor's model (with the same LoRA layout as the learner) and envs for its rows."""

    def __init__(self, config: dict[str, Any], index: int, rows: Sequence[int], tasks: Sequence[str]) -> None:
        self.config = ExperimentConfig.from_dict(config)
        self.index = index
        self.rows = list(rows)
        device = torch.device("cuda" if self.config.device != "cpu" and torch.cuda.is_available() else "cpu")
        model, tokenizer = load_model(
            self.config.model, dtype=resolve_dtype(self.config.dtype, device), device=device, seed=self.config.seed,
            backend=self.config.actor.backend,
        )
        # the learner's layout (LoRA adapters injected), so that its weights load by name; never stepped here
        trains = TRAINS_ACTOR[self.config.method]
        self.actor = ActorTrainer(model, tokenizer.pad_token_id, self.config.actor) if trains else None
        self.engine = make_engine(self.config, self.actor.model if self.actor else model, tokenizer)
        mixture = self.config.mixture()
        self.envs = [mixture.make_envs(tasks[i], 1)[0] for i in self.rows]

    def ready(self) -> int:
        return len(self.envs)

    def play(
        self, step: int, weights: dict[str, torch.Tensor] | None, seeds: Sequence[int], groups: Sequence[int],
        guided: Sequence[bool], entries: Sequence[Any], experience: ExperienceService | None = None,
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """This worker's rows of the step: ``seeds``/``groups``/``guided`` are the whole step's, ``entries`` the
        bank entries of this worker's guided rows in row order. Returns the trajectories and the engine counters."""
        if weights is not None:
            self.actor.load_weights(weights)
            self.engine.sync_weights()
        torch.manual_seed(int(np.random.SeedSequence([self.config.seed, step, self.index]).generate_state(1)[0]))
        before = dict(self.engine.stats)
        entries = list(entries)

        def retrieve(queries: Sequence[str]) -> list[Any]:
            if len(queries) != len(entries):
                raise RuntimeError(
                    f"worker {self.index}: {len(queries)} guided queries, but {len(entries)} entries were sent"
                )
            return entries

        config = self.config
        trajectories = run_episodes(
            self.engine, self.envs, [seeds[i] for i in self.rows], config.rollout,
            groups=[groups[i] for i in self.rows], guided=[guided[i] for i in self.rows], retrieve=retrieve,
            ask=None if experience is None else experience.search_and_ask,
            ask_uses=config.experience.search_and_ask_uses, show_entries=not config.experience.blind,
        )
        self.engine.clear_cache()
        return trajectories, {key: self.engine.stats[key] - before[key] for key in before}

    def close(self) -> None:
        for env in self.envs:
            env.close()


class RolloutWorkers:
    """The driver's handle on ``config.rollout_workers`` Ray actors (:class:`RolloutWorker`), shares fixed for
    the run: the step's rollouts (``tasks``, in rollout order) split into that many runs of whole groups."""

    def __init__(
        self, config: ExperimentConfig, tasks: Sequence[str], experience: ExperienceService | None = None
    ) -> None:
        if experience is not None and config.experience.mode != "async":
            raise ValueError(
                "rollout workers ask search_and_ask of an experience manager in Ray; accepted: experience.mode="
                f"'async' with an experience service, or none (experience.mode={config.experience.mode!r})"
            )
        import ray  # a core dependency, loaded only by runs that use it
        self._ray = ray
        start_ray(config.experience.ray_address, include_dashboard=False, logging_level="ERROR")
        groups = len(tasks) // config.group_size
        n = config.rollout_workers
        if n > groups:
            raise ValueError(f"rollout_workers={n}: a step has only {groups} groups of rollouts to share out")
        bounds = [round(k * groups / n) * config.group_size for k in range(n + 1)]
        self.rows = [list(range(bounds[k], bounds[k + 1])) for k in range(n)]
        self._experience = experience
        remote = ray.remote(RolloutWorker).options(
            num_cpus=config.rollout_worker_cpus, num_gpus=1 if config.device == "cuda" else 0
        )
        payload = config.to_dict()
        self._workers = [remote.remote(payload, k, rows, list(tasks)) for k, rows in enumerate(self.rows)]
        ray.get([w.ready.remote() for w in self._workers])

    def play(
        self, step: int, weights: dict[str, torch.Tensor] | None, seeds: Sequence[int], groups: Sequence[int],
        guided: Sequence[bool], entries: Sequence[Any],
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """Every rollout of the step, in rollout order. ``entries``: one per guided rollout, in rollout order.
        Counters: tokens summed over the workers; ``seconds`` the longest worker's generation time (they run at
        once), so tokens / seconds is the workers' joint throughput."""
        shared = None if weights is None else self._ray.put(weights)
        found = iter(entries)
        calls = []
        for worker, rows in zip(self._workers, self.rows):
            mine = [next(found) for i in rows if guided[i]]
            calls.append(
                worker.play.remote(step, shared, list(seeds), list(groups), list(guided), mine, self._experience)
            )
        trajectories: list[Trajectory] = []
        totals: dict[str, float] = {}
        for share, counters in self._ray.get(calls):
            for traj in share:  # renumbered in the step's rollout order, as one process numbers them
                traj.index = len(trajectories)
                trajectories.append(traj)
            for key, value in counters.items():
                totals[key] = max(totals.get(key, 0.0), value) if key == "seconds" else totals.get(key, 0.0) + value
        return trajectories, totals

    def close(self) -> None:
        try:
            self._ray.get([w.close.remote() for w in self._workers])
        finally:
            for worker in self._workers:
                self._ray.kill(worker)
