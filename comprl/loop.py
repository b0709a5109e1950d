"""The experiment loop, one for every method: roll out, update the actor, feed the extractor, log.

The methods of :data:`comprl.config.METHODS` differ only in configuration: whether rollouts are split into
experience-guided and experience-free halves, and which of the two learners is updated.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import shutil
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import gymnasium
import numpy as np
import torch
from transformers import PreTrainedModel

from comprl import checkpoint, console, tracking
from comprl.actor.rollout import Trajectory, retrieval_query, run_episodes, summarize
from comprl.evaluation import SHARED_FOLDER, evaluate, evaluation_rows, task_metrics
from comprl.actor.trainer import ActorTrainer
from comprl.actor.workers import RolloutWorkers
from comprl.config import TRAINS_ACTOR, ExperimentConfig
from comprl.envs import SECRET_CHECKS, lesson_states_secret
from comprl.envs.mixture import task_name
from comprl.experience import connect
from comprl.experience.interface import ExperienceService, NullExperience, Outcome
from comprl.llm import HFEngine, load_model, make_engine, resolve_dtype, sharing_weights
from comprl.llm.loading import machine
from comprl.runs import AFTER_TRAINING, Run

log = logging.getLogger(__name__)


class _RunLog(logging.LoggerAdapter):
    """Log lines that start with the run's name (a notebook runs several)."""

    def process(self, msg, kwargs):
        return f"{self.extra['run']}: {msg}", kwargs


def resolve_device(config: ExperimentConfig) -> torch.device:
    """The torch device the config asks for, with a clear error when a GPU is required but absent."""
    if config.requires_gpu and not torch.cuda.is_available():
        raise RuntimeError("this profile needs a CUDA GPU (none found); use profile 'cpu' or 'smoke' on this machine")
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but no CUDA GPU is available; use device='cpu'")
    return torch.device(config.device)


def make_envs(config: ExperimentConfig) -> dict[str, list[gymnasium.Env]]:
    """The envs of every task of the run, one per rollout of a step (each with its task's turn cap and options)."""
    mixture = config.mixture()
    return {env_id: mixture.make_envs(env_id, n * config.group_size) for env_id, n in mixture.batch.items()}


def close_envs(envs: Mapping[str, Sequence[gymnasium.Env]]) -> None:
    """Close every env of :func:`make_envs`'s mapping (an env may hold a sandbox, a process or a temporary folder)."""
    for task_envs in envs.values():
        for env in task_envs:
            env.close()


class StepLayout:
    """Where every rollout of a training step sits, built once per run: task by task as
    :meth:`~comprl.envs.mixture.TaskMixture.instances` lists the instances, each instance ``group_size`` times,
    the first K/2 of every group experience-guided (none without experience)."""

    def __init__(self, config: ExperimentConfig, envs_by_task: Mapping[str, Sequence[gymnasium.Env]]) -> None:
        self.config = config
        self.mixture = config.mixture()
        self.envs = [env for task_envs in envs_by_task.values() for env in task_envs]
        self.tasks = [task for task, task_envs in envs_by_task.items() for _ in task_envs]
        self.groups = [g for g in range(self.mixture.size) for _ in range(config.group_size)]
        half = config.group_size // 2 if config.uses_experience else 0
        self.guided = [k < half for _ in range(self.mixture.size) for k in range(config.group_size)]
        self.guided_tasks = [task for task, g in zip(self.tasks, self.guided) if g]

    def seeds(self, step: int) -> list[int]:
        """The env seed of every rollout of ``step``: its task instance's."""
        instances = self.mixture.instances(self.config.seed, step)
        return [i.seed for i in instances for _ in range(self.config.group_size)]

    def guided_seeds(self, seeds: Sequence[int]) -> list[int]:
        return [s for s, g in zip(seeds, self.guided) if g]

    def guided_queries(self, seeds: Sequence[int]) -> list[str]:
        """The bank queries of the guided rollouts, in rollout order, as :func:`run_episodes` asks them: each
        instance's first observation, made by resetting one of its envs with its seed."""
        first: dict[tuple[str, int], str] = {}
        for env, task, seed, guided in zip(self.envs, self.tasks, seeds, self.guided):
            if guided and (task, seed) not in first:  # rollouts of one instance share their first observation
                first[task, seed] = retrieval_query(*env.reset(seed=int(seed)))
        return [first[task, seed] for task, seed, g in zip(self.tasks, seeds, self.guided) if g]


def distill_choice(config: ExperimentConfig, step: int, n: int) -> list[int]:
    """Indices of the trajectories the extractor reads this step (all, or a seeded random subset)."""
    k = config.extractor.distill_per_step
    if k <= 0 or k >= n:
        return list(range(n))
    return sorted(int(i) for i in np.random.default_rng([config.seed, step, 1]).choice(n, size=k, replace=False))


class Timer:
    """Wall seconds per named phase; ``with timer("update"):`` adds the block's time to that phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - started


MetricsCallback = Callable[[int, dict[str, float], str], None]
"""Called with (step, metrics, phase) after every logged row, e.g. ``comprl.kit.widgets.LiveTrainingPlot.callback``."""


@dataclass
class Learners:
    """What a training step works with: the step's layout, the actor (its trainer, None when the method freezes
    it, and its generation engine), the experience side (a :class:`NullExperience` for the baseline) and the rollout
    workers when the rollouts run on Ray."""

    config: ExperimentConfig
    layout: StepLayout
    engine: HFEngine
    actor: ActorTrainer | None
    experience: ExperienceService
    workers: RolloutWorkers | None = None
    workers_need_weights: bool = True
    """Whether the workers' copies of the actor are older than the actor (they need its weights before playing)."""
    prefetched: _Prefetch | None = None
    """This step's searches, sent during the previous step (``experience.prefetch``)."""


def train_step(learners: Learners, step: int) -> dict[str, float]:
    """One training step on the actor's side of the paper's figure: roll out (the guided half shown entries the
    bank returns), credit the entries shown, hand episodes to the extractor, update the actor, mark the step
    boundary. Returns the step's metrics row."""
    config, layout, experience, actor = learners.config, learners.layout, learners.experience, learners.actor
    timer = Timer()
    with timer("step"):
        with timer("rollout"):
            seeds = layout.seeds(step)
            trajectories, done = _roll_out(learners, step, seeds)
            metrics = {
                **task_metrics(trajectories),
                "generated_tokens": done["generated_tokens"],
                # what the forward passes computed: prompt tokens not served from the prefix cache, and replies
                "processed_tokens": done["prompt_tokens"] - done["reused_prompt_tokens"] + done["generated_tokens"],
                "tokens_per_second": done["generated_tokens"] / max(done["seconds"], 1e-9),
            }
        metrics["rollout_seconds"] = timer.seconds["rollout"]
        with timer("experience"):
            shown = [t for t in trajectories if t.guided and t.experience_ids]
            free = free_success(trajectories)
            experience.credit([Outcome(t.experience_ids[0], t.success, free.get(t.group)) for t in shown], step)
            experience.submit([trajectories[i].episode(step) for i in distill_choice(config, step, len(trajectories))])
        if actor is not None:
            with timer("experience"):
                experience.fence()  # the actor is about to change its weights (ExperienceConfig.fence)
            update = actor.step(trajectories)
            learners.engine.sync_weights()
            learners.workers_need_weights = True
            metrics.update({f"actor_{k}": v for k, v in update.items() if k != "update_seconds"})
            metrics["update_seconds"] = update["update_seconds"]
        with timer("experience"):
            experience.step_done(step)
            stats = experience.stats()
        if config.uses_experience:
            metrics.update(_halves(trajectories))
            metrics.update(rule_recall_shown(trajectories))
            metrics.update(stats)
            metrics["experience_seconds"] = timer.seconds["experience"]
    metrics["step_seconds"] = timer.seconds["step"]
    return metrics


def _roll_out(learners: Learners, step: int, seeds: list[int]) -> tuple[list[Trajectory], dict[str, float]]:
    """The step's trajectories in rollout order and the engine's token counters, played here or on the workers."""
    config, layout, experience = learners.config, learners.layout, learners.experience
    search = functools.partial(experience.search, tasks=layout.guided_tasks, seeds=layout.guided_seeds(seeds))
    retrieve = search if learners.prefetched is None else learners.prefetched.retriever(search)
    learners.prefetched = None
    prefetch = config.uses_experience and config.experience.mode == "async" and config.experience.prefetch
    if prefetch and step < config.steps:
        learners.prefetched = _Prefetch(experience, layout, layout.seeds(step + 1))  # runs during this step
    asks = config.uses_experience and config.experience.search_and_ask
    if learners.workers is not None:
        entries = retrieve(layout.guided_queries(seeds))
        weights = learners.actor.state_dict()["weights"] if learners.workers_need_weights and learners.actor else None
        learners.workers_need_weights = False
        return learners.workers.play(step, weights, seeds, layout.groups, layout.guided, entries)
    engine = learners.engine
    before = dict(engine.stats)
    trajectories = run_episodes(
        engine, layout.envs, seeds, config.rollout, groups=layout.groups, guided=layout.guided, retrieve=retrieve,
        ask=experience.search_and_ask if asks else None, ask_uses=config.experience.search_and_ask_uses,
        show_entries=not config.experience.blind,
    )
    return trajectories, {key: engine.stats[key] - before[key] for key in before}


def run_experiment(
    config: ExperimentConfig,
    output_dir: str | Path = "results",
    name: str | None = None,
    progress: bool = True,
    callback: MetricsCallback | None = None,
    resume: bool = False,
) -> Run:
    """Run one experiment and return its run folder (``config.json``, metrics in ``run.duckdb``, ``bank.duckdb``).

    Per training step (phase ``train``, :func:`train_step`): episode metrics of the rollouts (success rate, return,
    length, invalid-action rate; for methods with experience also split into the guided and free halves),
    generation tokens/s, wall time per phase (rollout, actor update, experience calls), the actor's and extractor's
    loss diagnostics, bank size, extractor outputs applied or rejected by reason, the fractions of them valid, cut
    at the token cap and empty and the valid ones' length (:func:`comprl.experience.extractor.track.reply_rates`),
    and ``guided_minus_free`` (:func:`guided_minus_free`). On tasks whose instances hide a fact a lesson can state
    (:data:`comprl.envs.SECRET_CHECKS`, the vaults): ``rule_recall_shown``, the share of the guided rollouts shown
    an entry whose entry states their own seed's fact (:func:`rule_recall_shown`); ``rule_recall_live``, that share
    of the live bank's entries that name a seed in their source (each judged against that seed), and
    ``rule_recall_judged``, how many such entries there are (merged ones name none)
    (:class:`comprl.experience.rule_recall.RuleRecall`); per task too in a mixture (``vault_rule_recall_shown``).
    Evaluation rows (phase ``eval``) at step 0 and after the last step, with and without experience (with
    ``guided_with_entry``, the episodes that were shown an entry).
    A training row counts the extractor's work finished since the previous row. In ``experience.mode="async"`` the
    extractor works behind the actor, so the last steps' distillations and merges end during the final evaluation
    and as the experience side closes: one more row at the last step, phase ``after_training``
    (:data:`comprl.runs.AFTER_TRAINING`), holds the experience side's counters read at its close (its columns
    alone; the evaluations' lookups are kept out of every row). Summed over a run's ``train`` and
    ``after_training`` rows, ``extractor_outputs`` and the other counts cover every reply the extractor made. A run
    whose experience side had nothing left to do at the last training row (every ``"sync"`` run) has no such row.
    ``callback`` sees every row as it is written (a live plot in a notebook); ``config.tracker`` gets it too
    (TensorBoard event files in ``<run>/tensorboard/`` by default, :mod:`comprl.tracking`).

    A checkpoint is written every ``config.checkpoint_every`` steps and after the last (:mod:`comprl.checkpoint`).
    With ``resume``, a run folder of that name (give ``name``) continues from its checkpoint: the rows logged
    after it are dropped and the run goes on as if never stopped. On CPU with ``experience.mode="sync"`` the
    resumed run logs the same rows, timings aside, as one never stopped; in ``"async"`` mode what the extractor
    has done by a given actor step depends on timing in any case. A finished run is returned as it is; a run
    killed before its first checkpoint starts again.

    With ``progress`` (the default) the run also shows its progress bars and, when nothing routes comprl's log
    yet (no handler on the ``comprl`` logger or above it), its per-step log lines on stdout
    (:func:`comprl.show_logs`); configure logging first to send them elsewhere.
    """
    if progress and not logging.getLogger("comprl").hasHandlers():
        console.show_logs()
    device = resolve_device(config)
    run = Run.create(output_dir, config, name, resume=resume)
    say = _RunLog(log, {"run": run.path.name})
    if run.finished:
        say.info("finished already (%s), nothing to do", run.path)
        return run
    resumed = checkpoint.latest(run.path) if resume else None
    if resume and resumed is None:
        run.clear()
    run.rollback(resumed.step if resumed else 0)
    tracker = tracking.open_tracker(  # first, so that a missing extra stops the run before anything is loaded
        config.tracker, run.tensorboard_path, run.path.name, config.to_dict(), resumed.step if resumed else None
    )
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    envs_by_task = make_envs(config)
    layout = StepLayout(config, envs_by_task)

    def record(step: int, phase: str, metrics: dict[str, float]) -> None:
        run.log(step, phase, metrics)
        tracker.log(step, phase, metrics)
        if callback is not None:
            callback(step, metrics, phase)

    model, tokenizer = _base_model(config, device)
    say.info("%s on %s in %s", config.model, device, str(model.dtype).removeprefix("torch."))
    run.record_machine(machine(device, model.dtype), resumed.step if resumed else 0)
    extractor_model = sharing_weights(model) if config.extractor_shares_base else None  # before the actor's adapters
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor) if TRAINS_ACTOR[config.method] else None
    engine = make_engine(config, _starting_actor(config, model, tokenizer, actor), tokenizer)
    experience = _experience_service(config, run, device, resumed, actor, engine, extractor_model)
    del extractor_model
    learners = Learners(config, layout, engine, actor, experience)
    checkpoints = checkpoint.Writer(run.path)  # written while training goes on
    try:
        if config.rollout_workers:
            asks = config.uses_experience and config.experience.search_and_ask
            learners.workers = RolloutWorkers(config, layout.tasks, experience if asks else None)
        if resumed is not None:
            state = resumed.state()
            if actor is not None:
                actor.load_state_dict(state["actor"])
                engine.sync_weights()
            checkpoint.set_rng_state(state["rng"])
            say.info("resumed after step %d (%s)", resumed.step, run.path)
        elif config.eval_episodes:
            _log_eval(record, say, 0, engine, envs_by_task, config, experience, run, progress)
        first = resumed.step + 1 if resumed else 1
        bar = console.progress(
            range(first, config.steps + 1), desc=f"{config.method} on {config.task}", unit="step", disable=not progress,
            initial=first - 1, total=config.steps,
        )
        for step in bar:
            metrics = train_step(learners, step)
            record(step, "train", metrics)
            bar.set_postfix(success=f"{metrics['success_rate']:.2f}", invalid=f"{metrics['invalid_action_rate']:.2f}")
            say.info(
                "step %d/%d: success %.2f, invalid actions %.2f, %.0f tokens/s, rollout %.0fs, update %.0fs%s",
                step, config.steps, metrics["success_rate"], metrics["invalid_action_rate"],
                metrics["tokens_per_second"], metrics["rollout_seconds"], metrics.get("update_seconds", 0.0),
                f", bank {metrics['bank_size']:.0f} entries, extractor outputs valid "
                f"{metrics.get('extractor_valid', 0):.0f}/{metrics.get('extractor_outputs', 0):.0f}"
                if config.uses_experience else "",
            )
            if step == config.steps or (config.checkpoint_every and step % config.checkpoint_every == 0):
                checkpoints.save(step, actor, experience if config.uses_experience else None)
        checkpoint.export_adapters(run.path, actor)
        if config.eval_episodes:
            _log_eval(record, say, config.steps, engine, envs_by_task, config, experience, run, progress)
        checkpoints.wait()  # the last checkpoint is committed before the run counts as finished
        _log_after_training(record, say, config.steps, experience.close())
        run.mark_finished()
    finally:
        try:
            checkpoints.wait()  # a write in progress ends before the experience side closes
        finally:
            if learners.workers is not None:
                learners.workers.close()
            report = experience.close()  # the same report when it closed above
            tracker.close()
            close_envs(envs_by_task)
        if config.uses_experience:
            say.info("experience manager closed: %s", {k: v for k, v in report.items() if k != "stats"})
    return run


def _log_after_training(
    record: Callable[[int, str, dict[str, float]], None], say: logging.LoggerAdapter, step: int,
    report: Mapping[str, Any],
) -> None:
    """The ``after_training`` row of :func:`run_experiment` from the experience side's close report (its
    ``stats``), when that side did anything after the last training row."""
    stats = report.get("stats")
    if not stats:
        return
    record(step, AFTER_TRAINING, stats)
    say.info(
        "after training: extractor outputs valid %.0f/%.0f, finished after the last training row",
        stats.get("extractor_valid", 0), stats.get("extractor_outputs", 0),
    )


def trained_actor(run: Run | str | Path) -> tuple[HFEngine, ExperimentConfig]:
    """A finished LoRA run's actor, ready to generate: the run's base model with its exported adapters
    (``actor_adapters.safetensors``), and the run's config."""
    run = run if isinstance(run, Run) else Run(Path(run))
    config = run.config()
    model, tokenizer = _base_model(config, resolve_device(config))
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    actor.load_weights(checkpoint.load_adapters(run.path))
    return HFEngine(actor.model, tokenizer, adapter_dtype=config.actor.generation_adapter_dtype), config


def _starting_actor(
    config: ExperimentConfig, model: PreTrainedModel, tokenizer: Any, actor: ActorTrainer | None
) -> PreTrainedModel:
    """The model the run's actor plays with at its start: the trainer's (``actor``), or the base ``model`` when the
    actor is frozen; with ``actor.init_from``, carrying that run's exported adapters (a frozen actor gets a
    trainer of its own only to hold them)."""
    source = config.actor.init_from
    if source is None:
        return actor.model if actor is not None else model
    given = Run(Path(source)).config()
    if (given.model, given.actor.lora_rank) != (config.model, config.actor.lora_rank):
        raise ValueError(
            f"actor.init_from={source!r} trained {given.model} with lora_rank={given.actor.lora_rank}; this run's "
            f"actor is {config.model} with lora_rank={config.actor.lora_rank}: they must be the same"
        )
    holder = actor if actor is not None else ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    holder.load_weights(checkpoint.load_adapters(Path(source)))
    return holder.model


def base_actor(config: ExperimentConfig) -> HFEngine:
    """The untrained actor every run of ``config`` starts from (its base model, no adapters), ready to generate."""
    model, tokenizer = _base_model(config, resolve_device(config))
    return HFEngine(model, tokenizer)


def evaluate_trained(run: Run | str | Path, episodes: int | None = None, progress: bool = False) -> dict[str, float]:
    """Held-out evaluation of a finished run's actor (:func:`trained_actor`), experience-free, on ``episodes``
    episodes (default: the run's ``eval_episodes``), with the run's turn cap and temperature."""
    engine, config = trained_actor(run)
    if episodes is not None:
        config = dataclasses.replace(config, eval_episodes=episodes)
    envs = make_envs(config)
    try:
        return evaluate(engine, envs, config, progress=progress)
    finally:
        close_envs(envs)


def _base_model(config: ExperimentConfig, device: torch.device) -> tuple[PreTrainedModel, Any]:
    """The run's base model, before any adapters, and its tokenizer."""
    dtype = resolve_dtype(config.dtype, device)
    return load_model(config.model, dtype=dtype, device=device, seed=config.seed, backend=config.actor.backend)


def _experience_service(
    config: ExperimentConfig, run: Run, device: torch.device, resumed: checkpoint.Checkpoint | None,
    actor: ActorTrainer | None, engine: HFEngine, extractor_model: PreTrainedModel | None,
) -> ExperienceService:
    """The experience side of the run (a :class:`NullExperience` for methods without one), on the run's bank
    file: a copy of ``bank.init_from`` when given, the checkpoint's bank when resuming; handed the actor's trainer
    and engine with ``extractor.share_actor``, and ``extractor_model`` when the caller loaded it
    (``extractor.share_base``)."""
    if not config.uses_experience:
        return NullExperience()
    shared = {"actor": actor, "actor_engine": engine} if config.extractor.share_actor else {"model": extractor_model}
    if resumed is not None:
        return connect(config, run.bank_path, device=str(device), checkpoint=resumed.experience, **shared)
    if config.bank.init_from is not None:
        if not Path(config.bank.init_from).is_file():
            compacted = Run(Path(config.bank.init_from).parent).compacted
            raise FileNotFoundError(
                f"bank.init_from={config.bank.init_from!r}: no such bank file"
                + ("; its run is compacted (bank_*.parquet): comprl.kit.export.bank_from_bundle(RUN_FOLDER, FILE) "
                   "rebuilds it as a file" if compacted else "")
            )
        shutil.copyfile(config.bank.init_from, run.bank_path)
    return connect(config, run.bank_path, device=str(device), **shared)


class _Prefetch:
    """The searches of a step's guided episodes, sent one step ahead (``experience.prefetch``) so that they run
    in the manager's process during the previous step; its :meth:`retriever` hands their entries to the rollout."""

    def __init__(self, experience: ExperienceService, layout: StepLayout, seeds: Sequence[int]) -> None:
        self.queries = layout.guided_queries(seeds)
        self.pending = experience.search_later(self.queries, layout.guided_tasks, seeds=layout.guided_seeds(seeds))

    def retriever(self, fallback: Callable[[Sequence[str]], Sequence]) -> Callable[[Sequence[str]], Sequence]:
        """The prefetched entries when the rollout asks the same queries (it always should), else ``fallback``."""
        return lambda queries: self.pending.result() if list(queries) == self.queries else fallback(queries)


def _halves(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Success of the guided and the free half, how many guided episodes were shown an entry, and
    ``guided_minus_free`` (:func:`guided_minus_free`)."""
    guided = [t for t in trajectories if t.guided]
    return {
        "guided_success_rate": summarize(guided)["success_rate"],
        "free_success_rate": summarize([t for t in trajectories if not t.guided])["success_rate"],
        "guided_with_entry": float(sum(1 for t in guided if t.experience_ids)),
        "guided_minus_free": guided_minus_free(trajectories),
    }


def guided_minus_free(trajectories: Sequence[Trajectory]) -> float:
    """The paper's mechanism read directly: for each group (task instance) whose guided half was shown a bank
    entry, the success rate of its guided episodes that were shown one minus that of its free half, averaged over
    those groups; NaN when no group was shown an entry. A guided episode the bank gave nothing played as a free one
    and is left out. With ``experience.blind`` the entries were retrieved but hidden: the difference of a placebo."""
    shown: dict[int, list[bool]] = defaultdict(list)
    for t in trajectories:
        if t.guided and t.experience_ids:
            shown[t.group].append(t.success)
    free = free_success(trajectories)
    differences = [np.mean(shown[g]) - free[g] for g in shown if g in free]
    return float(np.mean(differences)) if differences else float("nan")


def free_success(trajectories: Sequence[Trajectory]) -> dict[int, float]:
    """The success rate of each group's free half (the rollouts that did not ask the bank), by group; a group with
    no free rollout is absent."""
    free: dict[int, list[bool]] = defaultdict(list)
    for t in trajectories:
        if not t.guided:
            free[t.group].append(t.success)
    return {group: float(np.mean(wins)) for group, wins in free.items()}


def rule_recall_shown(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """On the tasks whose instances hide a fact (:data:`comprl.envs.SECRET_CHECKS`): of the guided rollouts that
    were shown an entry, the share whose entry states the fact of the rollout's own seed
    (:func:`comprl.envs.lesson_states_secret`), NaN when none was shown; also per task under its short name when the
    trajectories come from several tasks. Empty when no task hides a fact."""
    tasks = dict.fromkeys(t.env_id for t in trajectories)
    judged: dict[str, list[bool]] = {task: [] for task in tasks if task in SECRET_CHECKS}
    for t in trajectories:
        if t.env_id in judged and t.guided and t.experience is not None:
            judged[t.env_id].append(bool(lesson_states_secret(t.env_id, t.seed, t.experience)))

    def share(verdicts: list[bool]) -> float:
        return sum(verdicts) / len(verdicts) if verdicts else float("nan")

    if not judged:
        return {}
    metrics = {"rule_recall_shown": share([v for verdicts in judged.values() for v in verdicts])}
    if len(tasks) > 1:
        metrics.update({f"{task_name(task)}_rule_recall_shown": share(v) for task, v in judged.items()})
    return metrics


def _log_eval(
    record: Callable[[int, str, dict[str, float]], None], say: logging.LoggerAdapter, step: int, engine: HFEngine,
    envs: Mapping[str, Sequence[gymnasium.Env]], config: ExperimentConfig, experience: ExperienceService, run: Run,
    progress: bool,
) -> None:
    """Evaluation rows: experience-free, and for methods with a bank also with experience (``guided_*`` columns);
    the step-0 rows are shared between the runs of one output folder (:mod:`comprl.evaluation`)."""
    search = functools.partial(experience.search, record=False) if config.uses_experience else None
    shared = run.path.parent / SHARED_FOLDER if step == 0 else None
    metrics = evaluation_rows(engine, envs, config, search, shared=shared, progress=progress, say=say)
    if config.uses_experience:
        # the evaluation's lookups are not part of the next row's counters; what the extractor did meanwhile is
        experience.stats(searches_only=True)
    record(step, "eval", metrics)
    say.info(
        "eval after step %d: success %.2f over %d episodes%s%s", step, metrics["success_rate"], metrics["episodes"],
        f" (with experience {metrics['guided_success_rate']:.2f})" if config.uses_experience else "",
        " (shared with an earlier run of this configuration)" if metrics["eval_shared"] else "",
    )