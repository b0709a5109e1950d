"""``comprl eval``: success of a trained run, a bundle or a base model on a fixed manifest of held-out seeds.

The manifest is, for each task, the held-out seeds ``EVAL_SEED_OFFSET + 0 .. episodes - 1`` that
:mod:`comprl.evaluation` plays; it is written beside the CSV. Every episode is played alone, on a random stream of
its own (:func:`comprl.evaluation.play` gives each chunk of episodes one, and here a chunk is one episode), and the
bank entry a guided episode is shown is looked up alone too, reading the bank only (no retrieval is recorded, no
recency or dropout applies, whatever ``bank.record_eval`` says); a task's warm-up gate is open when its live entries
reached ``experience.warmup`` at the end of any step of the bank's log, as the run's gate stays open. An episode's
result therefore depends on the weights, the bank, the config, its task and its seed, never on how many episodes,
tasks, workers or batches run beside it. The price is speed: episodes are not batched. The training loop's own
evaluation rows batch ``batch_instances x group_size`` episodes on one stream, so they are a different sample of the
same distribution.

Success is reported per task and overall with a 95% Wilson score interval (:func:`wilson_interval`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Sequence

import pandas as pd

import comprl
from comprl.config import ExperimentConfig, make_config
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.evaluation import Search, play
from comprl.experience.bank import ExperienceBank
from comprl.experience.retrieval import Query, RetrievalPolicy
from comprl.kit.export import is_bundle, opened
from comprl.kit.widgets import BankExplorer
from comprl.llm.loading import BUILTIN_MODELS
from comprl.loop import base_actor, trained_actor

WILSON_Z = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""

ROW_COLUMNS = ("task", "seed", "experience", "success", "reward", "turns", "entry_ids")
"""Columns of the per-episode CSV (``experience``: ``with`` or ``without``; ``entry_ids``: the bank entries shown,
space-separated)."""


def wilson_interval(successes: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """The Wilson score interval of a success rate (Wilson 1927): it stays inside [0, 1] and keeps its coverage
    at rates near 0 or 1 and for few episodes, where the normal approximation's does not."""
    if n < 1:
        return math.nan, math.nan
    rate = successes / n
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


ACCEPTED_SOURCES = (
    "accepted: a run folder (with config.json), a bundle folder (with bundle.json), or a model: "
    f"{', '.join(BUILTIN_MODELS)} or a Hugging Face id (owner/name)"
)
"""What ``comprl eval`` evaluates, for its errors."""


def names_a_path(source: str) -> bool:
    """Whether ``source`` can only be a path, never a model name or Hugging Face id (``owner/name``): it starts
    at ``/``, ``.`` or ``~``, ends with ``/``, has more than one ``/``, or its folder part is a folder here. A
    mistyped run folder is then said to be missing, instead of looked up as a model."""
    folder = Path(source).parent
    return (
        source.startswith(("/", ".", "~")) or source.endswith("/") or source.count("/") > 1
        or (folder != Path(".") and folder.is_dir())
    )


def manifest(config: ExperimentConfig, tasks: Sequence[str]) -> dict[str, list[int]]:
    """The held-out seeds each task is evaluated on (``config.eval_episodes`` of them)."""
    return {task: [EVAL_SEED_OFFSET + i for i in range(config.eval_episodes)] for task in tasks}


def evaluate_source(
    source: str | Path, episodes: int | None = None, tasks: Sequence[str] | None = None,
    experience: str | None = None, profile: str = "cpu", progress: bool = False,
) -> tuple[pd.DataFrame, dict]:
    """Play the manifest and return one row per episode (:data:`ROW_COLUMNS`) and the manifest record.

    Args:
        source: a run folder (its adapters and final bank), a bundle (:mod:`comprl.kit.export`), or a model name
            :func:`comprl.llm.load_model` accepts, evaluated untrained with ``profile``'s settings.
        episodes: held-out seeds per task (default: the config's ``eval_episodes``).
        tasks: env ids among the config's tasks (default: all of them).
        experience: ``"with"`` or ``"without"`` only (default: both when there is a bank, else without).
        profile: the settings of a base model's evaluation (ignored for a run or bundle).
        progress: show a progress bar per pass.
    """
    if experience not in (None, "with", "without"):
        raise ValueError(f"experience={experience!r}; accepted: 'with', 'without' or None (both)")
    with contextlib.ExitStack() as stack:
        path = Path(source)
        if path.is_dir():
            if not (is_bundle(path) or (path / "config.json").is_file()):
                raise FileNotFoundError(
                    f"{path} is neither a run folder (config.json) nor a bundle (bundle.json); {ACCEPTED_SOURCES}"
                )
            run = stack.enter_context(opened(path))
            engine, config = trained_actor(run)
            bank = run.bank_path if run.bank_path.is_file() else None
        elif path.exists() or names_a_path(str(source)):
            found = "is a file" if path.exists() else f"does not exist ({path.resolve()})"
            raise FileNotFoundError(f"no run folder or bundle at {source}: it {found}; {ACCEPTED_SOURCES}")
        else:
            config = make_config(profile, model=str(source), method="baseline")
            engine, bank = base_actor(config), None
        if episodes is not None:
            config = dataclasses.replace(config, eval_episodes=episodes)
        chosen = _tasks(config, tasks)
        if experience == "with" and bank is None:
            raise ValueError(f"{source} has no experience bank; accepted for it: --without-experience")
        modes = [experience] if experience else ["without", "with"] if bank is not None else ["without"]
        envs = {task: config.mixture().make_envs(task, 1) for task in chosen}  # one env: one episode per stream
        for task_envs in envs.values():
            stack.callback(task_envs[0].close)
        rows: list[dict] = []
        for mode in modes:
            search = None if mode == "without" else _bank_reader(config, stack.enter_context(BankExplorer(bank)).bank)
            for t in play(engine, envs, config, search, progress):
                rows.append(dict(
                    task=t.env_id, seed=t.seed, experience=mode, success=int(t.success), reward=t.reward,
                    turns=t.turns, entry_ids=" ".join(map(str, t.experience_ids)),
                ))
    record = {
        "source": str(source), "seeds": manifest(config, chosen), "experience": modes, "config_seed": config.seed,
        "eval_temperature": config.eval_temperature, "max_turns": config.max_turns, "comprl": comprl.__version__,
        "stream": "one torch stream per episode: comprl.evaluation's chunk seed of (config seed, task, seed index)",
    }
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS)), record


def _tasks(config: ExperimentConfig, tasks: Sequence[str] | None) -> list[str]:
    """The tasks asked for, checked against the config's."""
    known = list(config.mixture().batch)
    if tasks is None:
        return known
    unknown = [task for task in tasks if task not in known]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; accepted: {', '.join(known)}")
    return list(dict.fromkeys(tasks))


def _bank_reader(config: ExperimentConfig, bank: ExperienceBank) -> Search:
    """A search that answers each query alone from ``bank`` with the run's retrieval policy, recording nothing:
    an episode's entry depends on the bank and its own query only."""
    policy = RetrievalPolicy(config, bank, clock=time.monotonic, wait_for_distillation=lambda seconds: False)
    policy.warm |= _warmed_up(bank, config.experience.warmup)

    def search(queries: Sequence[str], tasks: Sequence[str], seeds: Sequence[int]) -> list:
        return [
            policy.choose([Query(query, task, seed, record=False, result=Future())])[0]
            if policy.warmed_up(task) else None
            for query, task, seed in zip(queries, tasks, seeds)
        ]

    return search


def _warmed_up(bank: ExperienceBank, warmup: int) -> set[str]:
    """The tasks whose live entries reached ``warmup`` at the end of some logged step: the run's warm-up gate,
    once open, stays open, so a final bank that merging made smaller still answers them."""
    warm: set[str] = set()
    for step in sorted(set(bank.operations()["step"].tolist())):
        counts = bank.at_step(step)["task"].value_counts()
        warm |= {task for task, n in counts.items() if n >= warmup}
    return warm


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Success per experience mode, per task and overall (``task`` = ``all``), with the 95% Wilson interval."""
    out = []
    for mode, own in rows.groupby("experience", sort=False):
        groups = [*own.groupby("task", sort=False)] + ([("all", own)] if own["task"].nunique() > 1 else [])
        for task, part in groups:
            n, wins = len(part), int(part["success"].sum())
            low, high = wilson_interval(wins, n)
            out.append(dict(experience=mode, task=task, episodes=n, successes=wins, success_rate=wins / n,
                            ci_low=low, ci_high=high))
    return pd.DataFrame(out)


def write(rows: pd.DataFrame, record: dict, csv: Path) -> Path:
    """The per-episode rows as ``csv`` and the manifest record beside it (``<csv stem>.manifest.json``); returns
    the manifest's path."""
    csv.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(csv, index=False)
    beside = csv.with_name(f"{csv.stem}.manifest.json")
    beside.write_text(json.dumps(record, indent=2) + "\n")
    return beside


def report(table: pd.DataFrame) -> str:
    """The summary as aligned text lines."""
    lines = [f"{'experience':10s} {'task':32s} {'success':>9s} {'rate':>6s}  95% Wilson"]
    for row in table.itertuples(index=False):
        lines.append(
            f"{row.experience:10s} {row.task:32s} {row.successes:>4d}/{row.episodes:<4d} {row.success_rate:6.3f}  "
            f"[{row.ci_low:.3f}, {row.ci_high:.3f}]"
        )
    return "\n".join(lines)
