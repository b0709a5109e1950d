"""The run plans of the paper notebooks 01-04: which training runs each one makes, with which configs and names.

Each notebook builds its plan here from its parameters, and ``comprl reproduce`` builds the same plans from the
parameters it gives the notebooks (:mod:`comprl.kit.reproduce`), so the runs a notebook trains and the runs the
reproduction validates, plans and counts are one list. A plan function takes the notebook's parameters under their
notebook names; ``None`` values keep the profile's own (:func:`comprl.make_config`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from comprl.config import EXTRACTOR_SIZES, ExperimentConfig, make_config

if TYPE_CHECKING:  # the run folders' module loads torch; ``comprl reproduce --dry-run`` and the command do not
    from comprl.runs import Run

PAPER_METHODS = ("baseline", "static", "exp_only", "comp_rl")
"""The methods of the paper's Table 1."""

SINGLE_TASK_METHODS = ("baseline", "comp_rl")
"""The methods of the 1-task point of notebook 02's task-scaling figure."""


@dataclass(frozen=True)
class Plan:
    """A notebook's training runs: its key of each run (e.g. ``(method, seed)``) -> config, in the order they run,
    and the run folder name of a key."""

    configs: dict[tuple[Any, ...], ExperimentConfig]
    name: Callable[..., str]
    """The parts of a key -> that run's folder name."""

    def named(self) -> dict[str, ExperimentConfig]:
        """Run name -> config, what :func:`comprl.run_experiments` takes."""
        return {self.name(*key): config for key, config in self.configs.items()}

    def runs(self, done: Mapping[str, Run]) -> dict[tuple[Any, ...], Run]:
        """The runs of :func:`comprl.run_experiments`'s answer under their keys, in plan order."""
        return {key: done[self.name(*key)] for key in self.configs}


def single_task(
    profile: str,
    env_id: str | None = None,
    method: str = "comp_rl",
    compare_with: Sequence[str] = ("baseline",),
    steps: int | None = None,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
    method_seeds: Mapping[str, Sequence[int]] | None = None,
) -> Plan:
    """Notebook 01: ``method`` and the methods it is compared with on one task, seed by seed (so that with several
    runs at once the first to end give every method one seed). ``method_seeds``: a method's own seeds, where it runs
    on others than ``seeds`` (fewer for a diagnostic method, say). Keys ``(method, seed)``, names ``method_seedN``."""
    methods = list(dict.fromkeys([*compare_with, method]))
    own = dict(method_seeds or {})
    if unknown := sorted(set(own) - set(methods)):
        raise ValueError(f"method_seeds names {unknown}, not among the methods run: {methods}")
    every = sorted(set(seeds).union(*own.values()))
    configs = {
        (m, seed): make_config(profile, env_id=env_id, method=m, steps=steps, seed=seed, **(overrides or {}))
        for seed in every for m in methods if seed in own.get(m, seeds)
    }
    return Plan(configs, lambda m, seed: f"{m}_seed{seed}")


def multitask(
    profile: str,
    mixtures: Sequence[str] = ("3-task", "6-task"),
    methods: Sequence[str] = PAPER_METHODS,
    single_task: str | None = None,
    steps: int | None = None,
    batch_per_task: int | None = None,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
) -> Plan:
    """Notebook 02: every method on every mixture preset, then the 1-task point of the task-scaling figure (GRPO
    alone and Complementary RL on ``single_task``: an env id, None for the profile's own task, "" for none).
    Keys ``(tasks, method, seed)``, names ``<tasks>_<method>_seedN``."""
    single_task = make_config(profile).env_id if single_task is None else single_task
    keys = [(mixture, method, seed) for mixture in mixtures for method in methods for seed in seeds]
    if single_task:
        keys += [(single_task, method, seed) for method in SINGLE_TASK_METHODS for seed in seeds]

    def config_of(tasks: str, method: str, seed: int) -> ExperimentConfig:
        """A mixture preset, or one env id for a single-task run."""
        single = tasks.startswith("comprl/")
        where = {"env_id": tasks} if single else {"tasks": tasks, "batch_instances": batch_per_task}
        return make_config(profile, method=method, steps=steps, seed=seed, **where, **(overrides or {}))

    def name(tasks: str, method: str, seed: int) -> str:
        return f"{tasks.removeprefix('comprl/')}_{method}_seed{seed}"

    return Plan({key: config_of(*key) for key in keys}, name)


def extractor_size(
    profile: str,
    env_id: str | None = None,
    extractors: Mapping[str, str | Mapping[str, Any]] | None = None,
    steps: int | None = None,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
) -> Plan:
    """Notebook 03: one comp_rl run per extractor (label -> model, or the overrides that make that arm, e.g.
    ``{"extractor.model": "smollm2-135m", "extractor.lesson_grammar": True}``; smaller first; None: the
    profile's, :data:`comprl.config.EXTRACTOR_SIZES`) and seed. Keys ``(label, seed)``, names
    ``comp_rl_<label>_seedN`` with the label in word characters only, as the log lines show it."""
    extractors = extractors or EXTRACTOR_SIZES[profile]
    arms = {label: {"extractor.model": arm} if isinstance(arm, str) else dict(arm) for label, arm in extractors.items()}
    configs = {
        (label, seed): make_config(
            profile, env_id=env_id, method="comp_rl", steps=steps, seed=seed, **{**(overrides or {}), **arm}
        )
        for label, arm in arms.items() for seed in seeds
    }
    return Plan(configs, lambda label, seed: f"comp_rl_{_slug(label)}_seed{seed}")


def _slug(label: str) -> str:
    """``label`` in word characters only (runs of others become one underscore)."""
    return re.sub(r"\W+", "_", label).strip("_")


def ablations(
    profile: str,
    variants: Mapping[str, Mapping[str, Any]],
    env_id: str | None = None,
    steps: int | None = None,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
) -> Plan:
    """Notebook 04: method comp_rl with the common ``overrides``, then each variant's own (variant name: letters,
    digits and underscores, as it names run folders and prefixes log lines). Keys ``(variant, seed)``, names
    ``variant_seedN``."""
    for name in variants:
        if not name.isidentifier():
            raise ValueError(f"variant name {name!r}: use letters, digits and underscores")
    configs = {
        (name, seed): make_config(
            profile, env_id=env_id, steps=steps, seed=seed, **{"method": "comp_rl", **(overrides or {}), **changes}
        )
        for name, changes in variants.items() for seed in seeds
    }
    return Plan(configs, lambda name, seed: f"{name}_seed{seed}")


def mechanism(
    profile: str,
    arms: Mapping[str, Mapping[str, Any]] | None = None,
    env_id: str | None = None,
    steps: int | None = None,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
) -> Plan:
    """Notebook 07's Stage B: each arm (name -> its overrides, e.g. ``{"method": "baseline"}``, an ``env_id`` of
    its own for a stream; None: :data:`comprl.kit.mechanism.STAGE_B_ARMS`) on a vault task with the settings of
    ``profile`` (:func:`comprl.kit.mechanism.mechanism_config`), seed by seed. Keys ``(arm, seed)``, names
    ``arm_seedN`` (arm names: letters, digits and underscores). ``{seed}`` in a text value is the run's seed, e.g.
    ``{"actor.init_from": "../results/cpu/07_mechanism/scripted_seed{seed}"}`` starts each seed from that seed's
    trained actor (a run that must have finished first; a relative folder is read from the process's working
    directory, which is ``notebooks/`` when the notebook runs through ``comprl run``)."""
    from comprl.kit.mechanism import STAGE_B_ARMS, mechanism_config

    arms = STAGE_B_ARMS if arms is None else arms
    for name in arms:
        if not name.isidentifier():
            raise ValueError(f"arm name {name!r}: use letters, digits and underscores")
    def at(seed: int, changes: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v.replace("{seed}", str(seed)) if isinstance(v, str) else v for k, v in changes.items()}

    configs = {
        (name, seed): mechanism_config(
            profile, **{"env_id": env_id, "steps": steps, "seed": seed, **at(seed, {**(overrides or {}), **changes})}
        )
        for seed in seeds for name, changes in arms.items()
    }
    return Plan(configs, lambda name, seed: f"{name}_seed{seed}")


NOTEBOOK_PLANS: dict[str, Callable[..., Plan]] = {
    "01_single_task": single_task,
    "02_multitask": multitask,
    "03_extractor_size": extractor_size,
    "04_ablations": ablations,
    "07_mechanism": mechanism,
}
"""The notebooks that train a plan of runs -> the function that builds it from their parameters."""
