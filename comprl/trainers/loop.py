"""The experiment loop: roll out, update the actor, log; evaluation before and after training."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from comprl.config import ExperimentConfig
from comprl.envs import make
from comprl.llm import HFEngine, load_model
from comprl.rollout import RolloutConfig, Trajectory, run_episodes, summarize
from comprl.runs import Run
from comprl.trainers.actor import ActorTrainer

log = logging.getLogger(__name__)

EVAL_SEED_OFFSET = 1_000_000
"""Evaluation episodes use env seeds ``EVAL_SEED_OFFSET + i``; training seeds are drawn below it, so they never overlap."""


def resolve_device(config: ExperimentConfig) -> torch.device:
    """The torch device the config asks for, with a clear error when a GPU is required but absent."""
    if config.requires_gpu and not torch.cuda.is_available():
        raise RuntimeError("this profile needs a CUDA GPU (none found); use profile 'cpu' or 'smoke' on this machine")
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but no CUDA GPU is available; use device='cpu'")
    return torch.device(config.device)


def training_seeds(config: ExperimentConfig, step: int) -> list[int]:
    """Env seeds of the task instances of one step, derived from (config.seed, step) alone."""
    rng = np.random.default_rng([config.seed, step])
    return [int(s) for s in rng.integers(0, EVAL_SEED_OFFSET, size=config.batch_instances)]


def evaluate(engine: HFEngine, envs: Sequence, config: ExperimentConfig, progress: bool = False) -> dict[str, float]:
    """Success and episode statistics on the held-out evaluation seeds (experience-free)."""
    rollout = RolloutConfig(**{**config.rollout.__dict__, "temperature": config.eval_temperature})
    trajectories: list[Trajectory] = []
    seeds = [EVAL_SEED_OFFSET + i for i in range(config.eval_episodes)]
    for start in range(0, len(seeds), len(envs)):
        chunk = seeds[start : start + len(envs)]
        trajectories += run_episodes(engine, envs[: len(chunk)], chunk, rollout, progress=progress)
    return summarize(trajectories)


def run_experiment(
    config: ExperimentConfig, output_dir: str | Path = "results", name: str | None = None, progress: bool = True
) -> Run:
    """Run one experiment and return its run folder (config, metrics in ``run.duckdb``).

    Logged per training step (phase ``train``): episode metrics of the rollouts (success rate, return, length,
    invalid-action rate), generation tokens/s, wall time per phase, and the actor's loss diagnostics.
    Evaluation rows (phase ``eval``) are logged at step 0 and after the last step.
    """
    device = resolve_device(config)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    envs = [make(config.env_id, max_turns=config.max_turns) for _ in range(config.batch_instances * config.group_size)]
    run = Run.create(output_dir, config, name)
    model, tokenizer = load_model(config.model, dtype=getattr(torch, config.dtype), device=device, seed=config.seed)
    trainer = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    engine = HFEngine(trainer.model, tokenizer)

    if config.eval_episodes:
        _log_eval(run, 0, evaluate(engine, envs, config))
    bar = tqdm(range(1, config.steps + 1), desc=f"{config.method} on {config.env_id}", unit="step", disable=not progress)
    for step in bar:
        tokens0, seconds0 = engine.stats["generated_tokens"], engine.stats["seconds"]
        started = time.perf_counter()
        seeds = [s for s in training_seeds(config, step) for _ in range(config.group_size)]
        groups = [g for g in range(config.batch_instances) for _ in range(config.group_size)]
        trajectories = run_episodes(engine, envs, seeds, config.rollout, groups=groups)
        rollout_seconds = time.perf_counter() - started
        update = trainer.step(trajectories)
        engine.sync_weights()
        generated = engine.stats["generated_tokens"] - tokens0
        metrics = {
            **summarize(trajectories),
            **{f"actor_{k}": v for k, v in update.items() if k != "update_seconds"},
            "generated_tokens": generated,
            "tokens_per_second": generated / max(engine.stats["seconds"] - seconds0, 1e-9),
            "rollout_seconds": rollout_seconds,
            "update_seconds": update["update_seconds"],
            "step_seconds": time.perf_counter() - started,
        }
        run.log(step, "train", metrics)
        bar.set_postfix(success=f"{metrics['success_rate']:.2f}", invalid=f"{metrics['invalid_action_rate']:.2f}")
        log.info(
            "step %d/%d: success %.2f, invalid actions %.2f, %.0f tokens/s, rollout %.0fs, update %.0fs",
            step, config.steps, metrics["success_rate"], metrics["invalid_action_rate"], metrics["tokens_per_second"],
            rollout_seconds, update["update_seconds"],
        )
    if config.eval_episodes:
        _log_eval(run, config.steps, evaluate(engine, envs, config))
    return run


def _log_eval(run: Run, step: int, metrics: dict[str, float]) -> None:
    run.log(step, "eval", metrics)
    log.info("eval after step %d: success %.2f over %d episodes", step, metrics["success_rate"], metrics["episodes"])
