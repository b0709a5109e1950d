"""Latency analysis (paper RQ3): what the experience side costs the actor's rollouts, per manager mode.

:func:`measure_overhead` runs real experiments (:func:`comprl.run_experiment`) for each manager mode and rollout
batch size, each in a fresh process whose threads are pinned to the actor's cores:

- ``"none"``: the ``baseline`` method, no experience manager at all (the reference);
- ``"sync"``: ``comp_rl`` with the manager in the actor's process, so it necessarily shares the actor's cores:
  searches, distillation, merges and extractor updates run inline between the actor's calls;
- ``"async"``: ``comp_rl`` with the manager in a Ray process pinned to ``manager_cores``, disjoint from the
  actor's (the laptop analogue of the paper's separate GPUs); Ray's own processes run there too;
- ``"loaded"`` (a control, not a host): the ``baseline`` while a process on ``manager_cores`` keeps the
  extractor model generating, as a busy async manager does. Disjoint cores still share caches and memory
  bandwidth, which separate GPUs do not: ``loaded`` shows what that sharing alone costs the actor, so
  ``async`` relative to ``loaded`` is the manager's own cost.

The modes are interleaved per batch size, so drift of the machine hits them alike, and the first ``skip`` steps
of every run (model loading, the bank's warm-up gate) are dropped. :func:`plot_overhead` draws the paper's figure:
rollout time relative to ``none`` per batch size, and search time per step.

Besides the run's own metrics, every step (from one logged row to the next) records how the actor's main thread,
which generates and updates, spent its wall time: on a CPU (``actor_cpu_s``), runnable but waiting for one
(``actor_wait_s``, both from ``/proc/thread-self/schedstat``), or blocked (``actor_blocked_s``: on the manager's
answers, Ray round trips, I/O). This tells an overhead of the manager from other processes crowding the actor's
cores: unpinned processes of other users are moved onto the actor's cores when the manager keeps its own busy,
which pinning cannot prevent.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from comprl.config import ExperimentConfig, make_config
from comprl.ray_start import start_ray
from comprl.runs import Run

MODES: tuple[str, ...] = ("none", "loaded", "sync", "async")
"""Hosts of the experience side compared: none (baseline method), in-process, a separate Ray process; and
``loaded``, a control: the baseline beside a busy neighbour on the manager's cores."""

DEFAULT_MODES: tuple[str, ...] = ("none", "sync", "async")

PER_STEP = {
    "rollout_s": "rollout_seconds",
    "step_s": "step_seconds",
    "experience_s": "experience_seconds",
    "search_s": "manager_search_seconds",
    "queries": "manager_search_queries",
    "tokens": "generated_tokens",
    "seq_tokens": "mean_sequence_tokens",
    "processed": "processed_tokens",
    "actor_cpu_s": "actor_cpu_seconds",
    "actor_wait_s": "actor_wait_seconds",
    "actor_blocked_s": "actor_blocked_seconds",
}
"""Columns of :func:`overhead_table` (means per kept step) and the metric each one averages."""

CLOCKS = "actor_clocks.csv"
"""The file in a run folder holding what the actor's main thread did per step (``actor_*_seconds``), written when
the run is done: with it a finished run's measurement can be read back."""

ASYNC_TARGET = 1.02
"""Rollout time of the async mode relative to ``none`` that counts as no overhead (paper: 0.98-1.00x)."""


def split_cores(
    actor_cores: Sequence[int] | None = None, manager_cores: Sequence[int] | None = None
) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """(actor cores, async manager cores, a caption saying so). By default the manager gets the last core this
    process may use and the actor the others; with one core both share it, and the caption says they overlap."""
    available = sorted(os.sched_getaffinity(0))
    actor = tuple(actor_cores) if actor_cores is not None else tuple(available[:-1] or available)
    manager = tuple(manager_cores) if manager_cores is not None else tuple(available[-1:])
    unknown = sorted(set(actor + manager) - set(available))
    if not actor or not manager or unknown:
        raise ValueError(f"actor_cores={actor}, manager_cores={manager}: need non-empty sets of the cores {available}")
    caption = (
        f"actor on cores {_cores(actor)}, async manager (Ray, with the actor process's Ray client threads) on cores "
        f"{_cores(manager)}; sync manager inside the actor's process"
    )
    shared = sorted(set(actor) & set(manager))
    if shared:
        caption += f". NOT disjoint: core(s) {_cores(shared)} shared ({len(available)} core(s) available)"
        warnings.warn(
            f"latency: the actor and the async manager share core(s) {shared}; async overhead is overstated",
            stacklevel=2,
        )
    return actor, manager, caption


def _cores(cores: Sequence[int]) -> str:
    return ",".join(str(c) for c in cores)


def mode_config(
    profile: str, mode: str, batch_size: int, manager_cores: Sequence[int] = (), **overrides: Any
) -> ExperimentConfig:
    """The experiment of one (mode, rollout batch size): ``batch_size`` = batch_instances x group_size."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; accepted: {', '.join(MODES)}")
    group = overrides.pop("group_size", None) or make_config(profile).group_size
    if batch_size % group:
        raise ValueError(f"batch size {batch_size} is not a multiple of group_size={group}")
    if mode in ("sync", "async"):
        overrides.update({"experience.mode": mode, "experience.manager_cores": tuple(manager_cores)})
    method = "baseline" if mode in ("none", "loaded") else "comp_rl"
    overrides.setdefault("eval_episodes", 0)
    config = make_config(profile, method=method, batch_instances=batch_size // group, group_size=group, **overrides)
    if config.extractor.scripted:
        raise ValueError(
            "extractor.model='scripted': the latency analysis measures what an extractor model costs the actor (and "
            "its 'loaded' control generates with that model), and the scripted extractor is none; accepted: a model"
        )
    return config


def measure_overhead(
    profile: str = "smoke",
    batch_sizes: Sequence[int] = (4, 8, 16, 32),
    modes: Sequence[str] = DEFAULT_MODES,
    steps: int = 4,
    skip: int = 2,
    actor_cores: Sequence[int] | None = None,
    manager_cores: Sequence[int] | None = None,
    output_dir: str | Path = "results/latency",
    identical: bool = False,
    resume: bool = False,
    rounds: int = 1,
    **overrides: Any,
) -> pd.DataFrame:
    """Run every (mode, batch size) as a real experiment and return :func:`overhead_table` of their metrics.

    Args:
        profile: config profile (``smoke``: tiny random models; ``cpu``: SmolLM2-135M).
        batch_sizes: rollouts per step (multiples of the profile's ``group_size``).
        modes: some of :data:`MODES`; ``none`` is needed for the ratios.
        steps: training steps per run, of which the first ``skip`` are dropped: step 1 loads the models and finds
            an empty bank; in async mode step 2's searches wait at the bank's warm-up gate for step 1's distillation.
        actor_cores / manager_cores: see :func:`split_cores` (default: the manager gets the last core).
        output_dir: run folders go to ``output_dir/<mode>_b<batch size>`` (later rounds: ``..._r<round>``); runs
            found there are replaced, unless ``resume``.
        identical: make every mode play the same episodes, so that only the manager's work differs: the actor is
            frozen (learning rate 0; its update still runs) and entries are retrieved and credited but kept out
            of the prompts (``experience.blind``). Without it the modes' episodes differ (the guided half reads
            an entry, the actors learn apart), and so does the work of their rollouts.
        resume: a batch size whose modes all have a finished, measured run of the same config in ``output_dir``
            is read back, not run again: a measurement killed part way resumes at the batch size it was in, whose
            modes all run again, back to back (half a batch size's modes from an earlier call would break the
            interleaving).
        rounds: times the whole measurement is repeated, every batch size of a round before the next round, so
            that slow drift of the machine's load falls on every round alike; the table then gives each ratio's
            mean over rounds and its 95% t interval (:func:`overhead_table`).
        overrides: any other config field (``eval_episodes`` defaults to 0).

    The returned frame's ``attrs["core_split"]`` says which cores each side ran on (the figure's caption). The
    runs' processes are spawned, so a script that calls this needs an ``if __name__ == "__main__":`` guard.
    """
    actor, manager, caption = split_cores(actor_cores, manager_cores)
    if identical:
        overrides.update({"actor.learning_rate": 0.0, "experience.blind": True})
        caption += "; identical episodes in every mode (actor frozen, entries retrieved but not shown)"
    if steps <= skip:
        raise ValueError(f"steps={steps} with skip={skip}: no step would be measured")
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: need at least 1")
    root = Path(output_dir)
    frames = []
    for round_, batch in ((r, b) for r in range(rounds) for b in batch_sizes):
        configs = {mode: mode_config(profile, mode, batch, manager, steps=steps, **overrides) for mode in modes}
        names = {mode: f"{mode}_b{batch}" + (f"_r{round_}" if round_ else "") for mode in modes}
        found = {mode: _measured(root / names[mode], config) if resume else None for mode, config in configs.items()}
        if any(metrics is None for metrics in found.values()):  # interleaved: the modes run back to back, in one go
            found = {
                mode: _in_pinned_process(config, root, names[mode], actor, manager, mode == "loaded")
                for mode, config in configs.items()
            }
        frames += [metrics.assign(mode=mode, batch_size=batch, round=round_) for mode, metrics in found.items()]
    table = overhead_table(pd.concat(frames, ignore_index=True), skip)
    table.attrs["core_split"] = caption
    return table


RATIOS = {"rollout_s": "rollout_ratio", "step_s": "step_ratio", "token_s": "per_token_ratio"}
"""Columns of :func:`overhead_table` divided by mode ``none``'s at the same batch size (and round), and the ratio's
name."""


def overhead_table(metrics: pd.DataFrame, skip: int = 2) -> pd.DataFrame:
    """Per (mode, batch size): the mean of each :data:`PER_STEP` metric over the training steps after ``skip``;
    the rollout and step time relative to mode ``none`` at the same batch size; rollout time per token its
    forward passes processed (``token_s``) and its ratio to ``none`` (``per_token_ratio``).

    ``metrics`` holds the runs' metric rows with ``mode`` and ``batch_size`` columns added, and ``round`` where the
    measurement was repeated: each round's ratios are then taken against that round's ``none``, the table gives
    their mean over rounds (``rounds``: how many; ``steps``: measured steps over all rounds) and a 95% t interval
    (``<ratio>_low``, ``<ratio>_high``; NaN for one round).
    """
    from comprl.kit.report import t_interval

    kept = metrics[(metrics["phase"] == "train") & (metrics["step"] > skip)]
    kept = kept if "round" in kept else kept.assign(round=0)
    columns = {name: (metric, "mean") for name, metric in PER_STEP.items() if metric in kept}
    keys = ["batch_size", "mode", "round"]
    per_round = kept.groupby(keys, sort=False).agg(steps=("step", "count"), **columns).reset_index()
    for name in PER_STEP:
        per_round[name] = per_round[name].fillna(0.0) if name in per_round else 0.0
    # The modes' rollouts are not the same amount of work: the guided half's prompts carry an entry, and episodes
    # end at different turns in different runs. Time per token the rollout's forward passes processed corrects
    # for most of that (not for attention's cost growing with the context).
    per_round["token_s"] = per_round["rollout_s"] / per_round["processed"].where(per_round["processed"] > 0)
    reference = per_round[per_round["mode"] == "none"].set_index(["batch_size", "round"])
    at = pd.MultiIndex.from_frame(per_round[["batch_size", "round"]])
    for column, ratio in RATIOS.items():
        per_round[ratio] = per_round[column].to_numpy() / reference[column].reindex(at).to_numpy()
    grouped = per_round.groupby(["batch_size", "mode"], sort=False)
    table = grouped.mean(numeric_only=True).drop(columns="round").reset_index()
    table["steps"] = grouped["steps"].sum().to_numpy()
    table["rounds"] = grouped["round"].nunique().to_numpy()
    for ratio in RATIOS.values():
        bounds = grouped[ratio].apply(t_interval)
        table[f"{ratio}_low"] = [low for low, _ in bounds]
        table[f"{ratio}_high"] = [high for _, high in bounds]
    return table.sort_values(
        ["batch_size", "mode"], key=lambda c: c.map(MODES.index) if c.name == "mode" else c, ignore_index=True
    )


def plot_overhead(table: pd.DataFrame, path_stem: str | Path, caption: str | None = None) -> Any:
    """The paper's latency figure from :func:`overhead_table`: rollout time relative to ``none`` per batch size
    (step time dashed; a bar: the 95% interval over rounds, where there were), and search time per step; saved
    as ``path_stem.png`` and ``.pdf``. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, (ratio_ax, search_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
    for mode, rows in table[table["mode"] != "none"].groupby("mode", sort=False):
        spread = (rows["rollout_ratio"] - rows["rollout_ratio_low"], rows["rollout_ratio_high"] - rows["rollout_ratio"])
        line = ratio_ax.errorbar(
            rows["batch_size"], rows["rollout_ratio"], yerr=spread if rows["rounds"].min() > 1 else None, marker="o",
            capsize=3, label=f"{mode}: rollout",
        ).lines[0]
        ratio_ax.plot(
            rows["batch_size"],
            rows["step_ratio"],
            ls="--",
            marker=".",
            color=line.get_color(),
            label=f"{mode}: whole step",
        )
        search_ax.plot(rows["batch_size"], rows["search_s"], marker="o", color=line.get_color(), label=mode)
    ratio_ax.axhline(1.0, color="black", lw=0.8)
    ratio_ax.axhline(ASYNC_TARGET, color="grey", lw=0.8, ls=":", label=f"target for async ({ASYNC_TARGET})")
    ratio_ax.set_ylabel("time / time without experience (none)")
    search_ax.set_ylabel("search time per step (s)")
    for ax in (ratio_ax, search_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(table["batch_size"].unique()), [str(b) for b in sorted(table["batch_size"].unique())])
        ax.set_xlabel("rollouts per step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Rollout overhead of the experience manager", fontsize=10)
    fig.text(0.5, -0.02, caption or table.attrs.get("core_split", ""), ha="center", va="top", fontsize=8)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(f"{path_stem}.{ext}", bbox_inches="tight", dpi=150)
    return fig


def async_meets_target(table: pd.DataFrame) -> bool | None:
    """Whether async's rollout time per step is at or under :data:`ASYNC_TARGET` of ``none``'s at every batch size
    of :func:`overhead_table`: where the rounds were repeated, True only where every 95% interval lies at or under
    it, False where one lies wholly above it, None (cannot tell) where an interval spans it; from one round, its
    mean against the target."""
    rows = table[table["mode"] == "async"]
    if rows["rounds"].min() <= 1:
        return bool(rows["rollout_ratio"].max() <= ASYNC_TARGET)
    if (rows["rollout_ratio_low"] > ASYNC_TARGET).any():
        return False
    return True if (rows["rollout_ratio_high"] <= ASYNC_TARGET).all() else None


def verdict(table: pd.DataFrame) -> str:
    """One line per mode but ``none``: its range of rollout time (per step and per token) and step time relative
    to ``none``, with each batch size's interval where the measurement had rounds; for async, whether its rollout
    time per step meets :data:`ASYNC_TARGET` at every batch size (:func:`async_meets_target`); with ``loaded``
    measured too, async's rollout time relative to it."""
    lines = []
    for mode, rows in table[table["mode"] != "none"].groupby("mode", sort=False):
        rollout, step, token = rows["rollout_ratio"], rows["step_ratio"], rows["per_token_ratio"]
        line = (
            f"{mode}: rollout {rollout.min():.2f}x..{rollout.max():.2f}x of none "
            f"({token.min():.2f}x..{token.max():.2f}x per token), "
            f"whole step {step.min():.2f}x..{step.max():.2f}x"
        )
        if mode == "async":
            meets = {True: "meets", False: "MISSES", None: "cannot tell (an interval spans it) whether it meets"}
            line += f": {meets[async_meets_target(table)]} the target <= {ASYNC_TARGET}x at every batch size"
        if rows["rounds"].min() > 1:
            line += f"; rollout, mean and 95% t interval over {rows['rounds'].min()} rounds: " + ", ".join(
                f"b{r.batch_size} {r.rollout_ratio:.2f}x [{r.rollout_ratio_low:.2f}, {r.rollout_ratio_high:.2f}]"
                for r in rows.itertuples()
            )
        lines.append(line)
    same = table.groupby("batch_size")["processed"].nunique().eq(1).all() and table["processed"].gt(0).all()
    lines.append(
        f"the modes' rollouts processed {'the same' if same else 'different'} numbers of tokens at each batch size"
    )
    by = table.set_index(["mode", "batch_size"])["rollout_s"]
    if {"loaded", "async"} <= set(table["mode"]):
        own = (by["async"] / by["loaded"]).dropna()
        lines.append(
            "async rollout / loaded (the manager's own cost, shared caches and memory aside): "
            f"{own.min():.2f}x..{own.max():.2f}x"
        )
    return "\n".join(lines)


def _in_pinned_process(
    config: ExperimentConfig,
    root: Path,
    name: str,
    actor: tuple[int, ...],
    manager: tuple[int, ...],
    neighbour: bool = False,
) -> pd.DataFrame:
    """Run one experiment in a fresh interpreter pinned to ``actor``; returns its metric rows. With
    ``neighbour``, a process pinned to ``manager`` generates with the extractor model all the while."""
    spawn = multiprocessing.get_context("spawn")
    busy = spawn.Process(
        target=_busy_neighbour, args=(config.extractor.model, config.extractor.max_new_tokens, manager), daemon=True
    )
    if neighbour:
        busy.start()
    try:
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            return pool.submit(_pinned_run, config.to_dict(), str(root), name, actor, manager).result()
    finally:
        if neighbour:
            busy.terminate()
            busy.join()


def _busy_neighbour(model_name: str, max_new_tokens: int, cores: tuple[int, ...]) -> None:
    """Generate replies of ``max_new_tokens`` to a batch of 8 prompts with ``model_name``, forever, on ``cores``."""
    import torch

    from comprl.llm import HFEngine, SamplingParams, load_model

    os.sched_setaffinity(0, cores)
    torch.set_num_threads(len(cores))
    model, tokenizer = load_model(model_name)
    engine = HFEngine(model, tokenizer)
    prompt = tokenizer("Summarise what the agent should remember from this episode: " * 20).input_ids
    while True:
        engine.generate([prompt] * 8, SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, stop=()))


def _pinned_run(
    config: dict[str, Any], root: str, name: str, actor: tuple[int, ...], manager: tuple[int, ...]
) -> pd.DataFrame:
    import torch

    from comprl.loop import run_experiment

    config = ExperimentConfig.from_dict(config)
    ray = None
    actor_threads = set(os.listdir("/proc/self/task"))
    if config.uses_experience and config.experience.mode == "async" and config.experience.ray_address is None:
        import ray

        # Ray's processes (GCS, raylet, the manager's worker) and the client threads ray.init starts in this
        # process inherit the affinity of the thread that starts them: all of them stay on the manager's cores,
        # as the paper's RPC threads are not on the actor's GPUs.
        os.sched_setaffinity(0, manager)
        start_ray(num_cpus=len(manager), include_dashboard=False, logging_level="ERROR")
    _pin_threads(actor_threads, actor)
    torch.set_num_threads(len(actor))
    clock = {0: _clocks()}

    def sample(step: int, metrics: dict[str, float], phase: str) -> None:
        if phase == "train":
            clock[step] = _clocks()

    try:
        run = run_experiment(config, output_dir=root, name=name, progress=False, callback=sample)
    except BaseException as error:  # Ray's exception classes cannot be pickled back to the parent process
        raise RuntimeError(f"run {name} failed:\n{''.join(traceback.format_exception(error))}") from None
    finally:
        if ray is not None:
            ray.shutdown()
    steps = sorted(clock)
    spent = pd.DataFrame(
        [
            (step, *(now - before for now, before in zip(clock[step], clock[prev])))
            for prev, step in zip(steps, steps[1:])
        ],
        columns=["step", "wall", "actor_cpu_seconds", "actor_wait_seconds"],
    )
    spent["actor_blocked_seconds"] = spent.pop("wall") - spent["actor_cpu_seconds"] - spent["actor_wait_seconds"]
    spent.to_csv(run.path / CLOCKS, index=False)
    return _measured(run.path, config)


def _measured(path: Path, config: ExperimentConfig) -> pd.DataFrame | None:
    """The metric rows of a finished run of ``config`` in ``path``, with its actor clocks (:data:`CLOCKS`); None
    where there is no such run (none, another config, unfinished, or killed before its clocks were written)."""
    run = Run(path)
    if not (run.finished and run.holds(config) and (path / CLOCKS).exists()):
        return None
    spent = pd.read_csv(path / CLOCKS)
    return run.metrics().merge(spent.assign(phase="train"), on=["step", "phase"], how="left")


def _pin_threads(threads: set[str], cores: tuple[int, ...]) -> None:
    """Pin these threads of this process (``sched_setaffinity(0)`` alone pins only the calling thread); threads
    they start later inherit the pinning."""
    for thread in threads:
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(thread), cores)


def _clocks() -> tuple[float, float, float]:
    """Wall seconds, and seconds this thread has run on a CPU and waited runnable for one (called on the actor's
    main thread; torch's worker threads, when the actor has several cores, are not counted)."""
    ran, waited, _ = Path("/proc/thread-self/schedstat").read_text().split()
    return time.perf_counter(), int(ran) / 1e9, int(waited) / 1e9
