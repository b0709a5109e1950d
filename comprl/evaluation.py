"""Held-out evaluation: each task's evaluation seeds, without and with experience, and no work done twice.

Every chunk of evaluation episodes is sampled from a random stream of its own, seeded by the run's seed, the task
and the chunk, and the caller's stream is left where it was. An evaluation's numbers therefore depend on the
weights, the bank and the config alone, which lets two kinds of duplicate work go:

* **The step-0 evaluation is shared.** Before training every method evaluates the same untrained model (LoRA starts
  with ``B = 0``, so adapters add exactly nothing; a run started from another's adapters, ``actor.init_from``, is
  keyed by their content) on the same seeds. The first run of a configuration and seed
  stores its experience-free rows under ``<output dir>/shared_eval/``, and every later run with the same
  evaluation-relevant config (everything but the method, the learners' training settings and the experience side)
  reads them: the ``eval_shared`` column is 1 on such rows.
* **A gated with-experience pass is not played.** When the bank answers none of a task's evaluation queries (an
  empty bank, or one below the warm-up threshold), its guided episodes would see exactly the prompts of the free
  ones, from the same random stream: their trajectories are the free ones, reused. ``guided_eval_gated`` counts
  the tasks whose guided rows were taken that way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

import gymnasium
import torch

import comprl
from comprl import console
from comprl.actor.rollout import Trajectory, env_id, retrieval_query, run_episodes, summarize
from comprl.checkpoint import ACTOR_ADAPTERS
from comprl.config import ExperimentConfig
from comprl.envs.base import EVAL_SEED_OFFSET  # evaluation plays seeds EVAL_SEED_OFFSET + i
from comprl.envs.mixture import task_name
from comprl.llm import GenerationEngine

Search = Callable[..., Sequence]
"""A batched bank lookup: ``search(queries, tasks=..., seeds=...)`` -> one entry (or None) per query."""

SHARED_FOLDER = "shared_eval"
"""Where, under a notebook's output folder, the shared step-0 evaluation rows are kept."""

NOT_SHARING = {"method", "steps", "checkpoint_every", "batch_instances", "group_size", "task_batch", "extractor",
               "bank", "experience", "rollout_workers", "rollout_worker_cpus", "requires_gpu", "tracker"}
"""Config fields that cannot change a step-0 experience-free evaluation (of the actor only its generation dtype and
the adapters it starts from matter); every other field, and comprl's version, is part of the shared rows' key."""


def task_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Episode metrics over all trajectories, and, when they come from several tasks, per task under the task's
    short name (``webshop_success_rate``; :data:`comprl.envs.mixture.TASK_NAMES`)."""
    metrics = summarize(trajectories)
    tasks = dict.fromkeys(t.env_id for t in trajectories)
    if len(tasks) > 1:
        for env_id in tasks:
            own = summarize([t for t in trajectories if t.env_id == env_id])
            metrics.update({f"{task_name(env_id)}_{key}": value for key, value in own.items()})
    return metrics


def evaluate(
    engine: GenerationEngine, envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig,
    search: Search | None = None, progress: bool = False,
) -> dict[str, float]:
    """Success and episode statistics on each task's held-out seeds (``eval_episodes`` per task), overall and per
    task (:func:`task_metrics`); every episode guided when ``search`` is given (evaluation searches record no
    retrievals, so that what an episode is shown does not depend on how the episodes are chunked, unless
    ``bank.record_eval`` asks for the official code's protocol)."""
    return task_metrics(play(engine, envs, config, search, progress))


def play(
    engine: GenerationEngine, envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig,
    search: Search | None = None, progress: bool = False,
) -> list[Trajectory]:
    """The episodes :func:`evaluate` sums up, one trajectory per task and seed, in task and seed order."""
    found = None if search is None else lookups(envs, config, search)
    with _bar(envs, config, 1, progress) as bar:
        return _play(engine, envs, config, found, None, bar)


def evaluation_rows(
    engine: GenerationEngine, envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig,
    search: Search | None, shared: Path | None = None, progress: bool = False,
    say: logging.Logger | logging.LoggerAdapter | None = None,
) -> dict[str, float]:
    """One evaluation row: experience-free metrics and, with ``search``, the ``guided_*`` ones, without duplicate
    work (see the module). ``shared``: the folder of shared step-0 rows (None: neither read nor written).
    ``progress``: a progress bar; without it, where ``say`` is given (a run's logger, which names the run), a line
    per chunk of episodes to it.

    Also ``eval_seconds``, the row's wall time (lookups included), and ``eval_pass_seconds``, that time per pass
    played (NaN when none was: rows read, a bank that answers nothing), which the plan's ETA scales to the
    evaluations still to come (:mod:`comprl.kit.parallel`)."""
    started = time.perf_counter()
    stored = shared / f"{shared_key(config)}.json" if shared is not None else None
    metrics = json.loads(stored.read_text()) if stored is not None and stored.exists() else None
    found = None if search is None else lookups(envs, config, search)
    gated = [] if found is None else [task for task, entries in found.items() if entries is None]
    # a guided pass is played for the tasks the bank answers; the others' guided episodes are their free ones
    passes = (metrics is None) + (found is not None and len(gated) < len(envs))
    with _bar(envs, config, passes, progress, say) as bar:
        free: list[Trajectory] | None = None
        if metrics is None:
            free = _play(engine, envs, config, None, None, bar)
            metrics = task_metrics(free)
            if stored is not None:
                _write_atomically(stored, json.dumps(metrics))
            metrics["eval_shared"] = 0.0
        else:
            metrics["eval_shared"] = 1.0
        if found is not None:
            if free is None and len(gated) == len(envs):  # read rows, a bank that answers nothing: the same rows
                guided = {k: v for k, v in metrics.items() if k != "eval_shared"}
            else:  # with rows read, not played, a gated task among answered ones is played again, unguided
                guided = task_metrics(_play(engine, envs, config, found, free, bar))
            metrics.update({f"guided_{k}": v for k, v in guided.items() if not k.endswith("episodes")})
            metrics["guided_eval_gated"] = float(len(gated))
            metrics.update(entries_shown(found))
    metrics["eval_seconds"] = time.perf_counter() - started
    metrics["eval_pass_seconds"] = metrics["eval_seconds"] / passes if passes else float("nan")
    return metrics


def entries_shown(found: Mapping[str, list | None]) -> dict[str, float]:
    """How many episodes of the with-experience pass were shown an entry (:func:`lookups`' answers), in all
    (``guided_with_entry``) and, for several tasks, per task (``guided_room_with_entry``...): an evaluation "with
    experience" whose count is 0 was played unguided."""
    counts = {task: 0 if entries is None else sum(e is not None for e in entries) for task, entries in found.items()}
    metrics = {"guided_with_entry": float(sum(counts.values()))}
    if len(counts) > 1:
        metrics.update({f"guided_{task_name(task)}_with_entry": float(n) for task, n in counts.items()})
    return metrics


def lookups(
    envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig, search: Search
) -> dict[str, list | None]:
    """Per task, the entry the bank gives each evaluation episode (in seed order), or None when it gives none
    at all (the task is gated); one batched search per task."""
    seeds = [EVAL_SEED_OFFSET + i for i in range(config.eval_episodes)]
    found: dict[str, list | None] = {}
    for task, task_envs in envs.items():
        env = task_envs[0]
        queries = [retrieval_query(*env.reset(seed=seed)) for seed in seeds]
        entries = list(search(queries, tasks=[task] * len(queries), seeds=seeds))
        found[task] = None if all(entry is None for entry in entries) else entries
    return found


def _play(
    engine: GenerationEngine, envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig,
    found: Mapping[str, list | None] | None, free: list[Trajectory] | None, bar,
) -> list[Trajectory]:
    """Every task's evaluation episodes, chunk by chunk, each chunk on its own random stream; guided by the
    entries in ``found`` (:func:`lookups`) where given. A gated task (``found[task] is None``) takes its ``free``
    trajectories when given, else is played unguided: the same episodes."""
    rollout = dataclasses.replace(config.rollout, temperature=config.eval_temperature)
    seeds = [EVAL_SEED_OFFSET + i for i in range(config.eval_episodes)]
    trajectories: list[Trajectory] = []
    for task, task_envs in envs.items():
        entries = None if found is None else found[task]
        if found is not None and entries is None and free is not None:
            trajectories += [t for t in free if t.env_id == env_id(task_envs[0])]
            bar.update(len(seeds))
            continue
        for index, start in enumerate(range(0, len(seeds), len(task_envs))):
            chunk = seeds[start : start + len(task_envs)]
            shown = None if entries is None else entries[start : start + len(chunk)]
            with torch.random.fork_rng():
                torch.manual_seed(_chunk_seed(config.seed, task, index))
                trajectories += run_episodes(
                    engine, task_envs[: len(chunk)], chunk, rollout, guided=[shown is not None] * len(chunk),
                    retrieve=None if shown is None else (lambda queries, shown=shown: shown),
                )
            bar.update(len(chunk))
    return trajectories


def _chunk_seed(seed: int, task: str, index: int) -> int:
    """The torch seed of one chunk of a task's evaluation episodes."""
    digest = hashlib.sha256(f"eval/{seed}/{task}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def shared_key(config: ExperimentConfig) -> str:
    """What a step-0 experience-free evaluation depends on, hashed."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if k not in NOT_SHARING}
    fields["actor"] = {"generation_adapter_dtype": config.actor.generation_adapter_dtype}
    if config.actor.init_from is not None:  # the weights it starts from, whatever the folder is called
        adapters = Path(config.actor.init_from) / ACTOR_ADAPTERS
        fields["actor"]["init_from"] = hashlib.sha256(adapters.read_bytes()).hexdigest()
    fields["comprl"] = comprl.__version__
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        out.write(text)
    os.replace(out.name, path)


def _bar(
    envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig, passes: int, progress: bool,
    say: logging.Logger | logging.LoggerAdapter | None = None,
):
    """Progress over the episodes of ``passes`` evaluation passes, with its ETA: a bar, or without ``progress`` and
    with ``say`` (a run in a worker process, which shows no bar) a line per chunk to it (:class:`_ProgressLines`)."""
    total = passes * len(envs) * config.eval_episodes
    if not progress and total and say is not None:
        return _ProgressLines(total, say)
    return console.progress(
        total=total, desc="evaluation", unit="episode", disable=not progress or not total, leave=False
    )


class _ProgressLines:
    """An evaluation's progress as comprl log lines, for a run that shows no bar (a run of ``run_experiments(...,
    jobs>1)``, whose lines its parent prints, prefixed with the run's name): after each chunk of episodes but the
    last, the episodes played, the time so far and the time left at that pace."""

    def __init__(self, total: int, say: logging.Logger | logging.LoggerAdapter) -> None:
        self.total, self.say, self.done, self.started = total, say, 0, time.perf_counter()

    def __enter__(self) -> "_ProgressLines":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, episodes: int) -> None:
        self.done += episodes
        if self.done < self.total:
            spent = time.perf_counter() - self.started
            left = spent / self.done * (self.total - self.done)
            self.say.info("evaluation: %d of %d episodes in %.0f s, about %.1f min left", self.done, self.total, spent,
                          left / 60)

