"""``comprl reproduce``: every paper notebook through papermill, in dependency order, then ``results/REPORT.md``.

    comprl reproduce --profile smoke            # minutes, tiny random models
    comprl reproduce --profile cpu              # SmolLM2-135M on a laptop CPU (hours; re-run to resume)
    comprl reproduce --profile cpu --jobs 2     # the same, two runs at once, one core each
    comprl reproduce --profile paper --dry-run  # check every paper-scale config and print the resource plan

Each notebook writes into ``results/<profile>/<notebook>/`` and resumes what it finds there (finished runs are
skipped, killed ones continued), so a second call picks up where a killed one stopped; a notebook that finished
is not executed again (``force=True`` executes it anyway, still skipping its finished runs). ``jobs`` goes to the
notebooks with that parameter (01-04), which then make that many runs at once, each on a core of its own
(:func:`comprl.run_experiments`). A run whose exact config was trained before is linked (a relative symbolic
link: stored once), not trained again: a profile's committed reference runs (:data:`REFERENCE_RUNS`) and earlier
notebooks' runs (02's single-task runs, 03's smaller extractor and 04's plain comp_rl are 01's). Wall times go into
``results/<profile>/reproduce.json``, summed over the calls that executed a notebook (a call killed mid-notebook
keeps its time to the last minute; the time between calls is not counted). Calls on different notebooks may run
side by side, ``taskset`` giving each its cores: each writes only its own entry there, under a file lock. The report
puts every table next to the paper's numbers (:mod:`comprl.kit.paper`) and lists profile, seeds, models, prompts and
package versions.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import platform
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
from filelock import FileLock

from comprl import console
from comprl.config import MODEL_PACKAGES, PROFILES, ExperimentConfig
from comprl.kit.planner import (
    THROUGHPUT_DIR, Recorded, device_kind, find_throughputs, load_throughput, resource_plan,
)
from comprl.kit.plans import NOTEBOOK_PLANS
from comprl.kit.report import markdown_table
from comprl.kit.verdicts import COLLAPSE_FALL, claims, collapse_table, diagnostics, planned_power

SEEDS = {"smoke": [0], "cpu": [0, 1, 2], "gpu": [0, 1, 2], "paper": [0, 1, 2]}
"""Seeds per profile of the notebooks that train (02-04, and 01 where :data:`SINGLE_TASK_SEEDS` names none)."""

SINGLE_TASK_SEEDS = {"cpu": [0, 1, 2, 3, 4], "gpu": [0, 1, 2, 3, 4]}
"""Seeds of notebook 01 where a profile affords more than :data:`SEEDS`. Its single-task claims compare two methods'
means over seeds, and issue 46 asked that a 0.10 difference in success be detectable. With 64 held-out episodes a
seed's success has a standard error of at most 0.0625, so if seeds differed by that alone, the difference Welch's t
finds at 80% power (:func:`comprl.kit.verdicts.detectable_difference`) would be 0.126 over 5 seeds and 0.190 over 3;
a spread between seeds larger than the episodes' widens both, and it does: in the cpu rerun of 2026-12-02 the
held-out success of 5 seeds spread by an sd of 0.110 (baseline) and 0.160 (comp_rl), so the single-task claims
detect 0.283 at 80% power (Welch df 7.1), not 0.10. 0.10 would take 31 seeds a method, about 33 core-hours for
those two methods alone at that rerun's median steps (33 s and 43 s): beyond the overnight budget, so cpu keeps 5
and the report prints each claim's detectable difference."""


DIAGNOSTIC_SEEDS = {"cpu": [0, 1, 2], "gpu": [0, 1, 2]}
"""Seeds of notebook 01's diagnostic methods (``static``, ``exp_only``) where a profile runs them on fewer than
:data:`SINGLE_TASK_SEEDS` (issue 46 asks for at least 3). The single-task claims rest on ``baseline`` against
``comp_rl``, which keep 5; the diagnostics separate the actor's side from the extractor's. At cpu this saves 4 of
notebook 01's 20 runs (about a sixth of its hours) for the overnight budget of issue 43."""


def _seeds(profile: str) -> list[int]:
    return SEEDS.get(profile, [0])


def _ablation_choices(profile: str) -> dict[str, Any]:
    """Notebook 04's variants where a profile sets them (:data:`ABLATIONS`)."""
    return {"variants": ABLATIONS[profile]} if profile in ABLATIONS else {}


REFERENCE_BANK_EPISODES = {"cpu": 64, "gpu": 64}
"""Held-out episodes of notebook 01's reference-bank check (the untrained actor free and guided by lessons from the
task's expert: can it use good experience?) where a profile plays it: 64, as its evaluations."""


def _single_task_choices(profile: str) -> dict[str, Any]:
    """Notebook 01's parameters that a profile sets: its seeds, the methods compared, their own seeds, the
    reference-bank check."""
    diagnostic = ["static", "exp_only"]
    own = {"method_seeds": {m: DIAGNOSTIC_SEEDS[profile] for m in diagnostic}} if profile in DIAGNOSTIC_SEEDS else {}
    check = {"reference_bank_episodes": REFERENCE_BANK_EPISODES[profile]} if profile in REFERENCE_BANK_EPISODES else {}
    return {
        "seeds": SINGLE_TASK_SEEDS.get(profile, _seeds(profile)), "compare_with": ["baseline", *diagnostic], **own,
        **check,
    }


MIXTURES_RUN = {"smoke": ["3-task"], "cpu": ["laptop-2"]}
"""The mixture presets notebook 02 trains per profile (others: the paper's ``3-task`` and ``6-task``). smoke keeps
CI short with the 3-task one. cpu trains ``laptop-2`` (the lit and the dark Room) instead of the paper's mixtures:
WebShop, ALFWorld and KeyRoom are never won by a uniformly random policy within 30 turns
(``results/design/turn_caps.csv``), and every committed cpu run of the paper's mixtures ended at 0.00 held-out
success on all three (and on Sokoban): a group of SmolLM2-135M's rollouts there is all losses, which leaves GRPO
nothing to learn from."""

MIXTURE_METHODS = {"cpu": ["baseline", "comp_rl"]}
"""The methods notebook 02 trains per profile (others: the notebook's own, Table 1's four). cpu: GRPO alone and
Complementary RL, the comparison of the task-scaling claim, over 3 seeds."""

MIXTURE_BATCH = {"cpu": 1, "gpu": 1}
"""Instances of each task per step in the mixtures of 02, where a profile sets them (others: ``batch_instances``).
The paper trains a mixture on the single-task batch of every task (128 rollouts per task, 384 per step for 3
tasks). cpu and gpu take one instance per task (8 rollouts): a step of cpu's ``laptop-2`` plays the 16 rollouts of
a single-task step, and gpu's 24 mixture runs of 3 and 6 tasks plan at about a day on one H200 where 4 instances
per task would take over three (``comprl reproduce --profile gpu --dry-run``)."""


def _mixture_choices(profile: str) -> dict[str, Any]:
    """Notebook 02's parameters that a profile sets: its mixtures, and its methods and batch where it names them."""
    mixtures = MIXTURES_RUN.get(profile, ["3-task", "6-task"])
    methods = {"methods": MIXTURE_METHODS[profile]} if profile in MIXTURE_METHODS else {}
    return {"mixtures": mixtures, "batch_per_task": MIXTURE_BATCH.get(profile), **methods}


ABLATIONS = {
    "cpu": {
        "comp_rl": {},
        "no_merge": {"extractor.merge_every": 0},
        "no_split_advantages": {"actor.split_halves": False},
        "shared_weights": {"extractor.share_actor": True},
    },
}
"""The variants notebook 04 trains per profile (others: the notebook's own, the paper's: the full method with
search_and_ask, and each ablation of it). cpu takes the ablations without search_and_ask, from the profile's own
comp_rl (notebook 01's runs, copied), and leaves out the search_and_ask row: each guided rollout's question is an
extractor generation, which made a step of the cpu profile 2.3x longer (the dry run's 3.0 min against 1.3 min on the
Xeon's throughput file) and the notebook 30 of the reproduction's 57 planned core-hours. Run it with
``comprl run 04_ablations --profile cpu`` (the notebook's own variants)."""

LATENCY = {
    "cpu": {"batch_sizes": [8, 16], "steps": 5, "rounds": 3},
    "gpu": {"batch_sizes": [32, 64, 128], "rounds": 3},
    "paper": {"batch_sizes": [128, 256, 512, 1024]},
}
"""Notebook 05's parameters per profile. ``batch_sizes``: rollouts per step, multiples of the group size (K = 8; the
notebook's own [4, 8, 16, 32] suit the smoke profile's K = 4): cpu one and two instances, gpu the profile's batch
up to the paper's single-task one, paper the paper's sizes (RQ3). ``rounds``: the whole measurement repeated, each
ratio given with a 95% t interval over rounds (issue 46: one round of the ``loaded`` control alone spanned
0.92-1.17x). cpu: 3 rounds of 5 steps (3 measured after the 2 of warm-up) at 8 and 16 rollouts, about the hours
of the single round of 8 steps at 8 and 32 it replaces."""

REFERENCE_RUNS: dict[str, list[str]] = {}
"""Folders under ``--results`` whose finished runs a profile's reproduction copies instead of training them again.
None at present: the committed runs of ``results/reference/01_single_task_cpu`` were trained with the cpu profile
as it was before issue 46 (K = 4, 48-token lessons, merges every 2 steps, float32 adapters while sampling), so no
run of today's profile is one of them (``tests/test_reproduce.py`` checks it); notebook 01 draws them beside its
runs only when given ``reference_dir``. A profile names a folder here once reference runs of its current config
are committed."""


def _no_params(_: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Step:
    """One notebook of the reproduction and the parameters it gets per profile; its runs are its notebook's plan
    (:data:`comprl.kit.plans.NOTEBOOK_PLANS`) built from those parameters."""

    notebook: str
    choices: Callable[[str], dict[str, Any]] = _no_params
    """profile -> the papermill parameters that choose the notebook's runs (seeds, mixtures...)."""
    folders: Callable[[Path], dict[str, Any]] = _no_params
    """results folder of the profile -> the papermill parameters that name folders in it."""
    profiles: tuple[str, ...] | None = None
    """The profiles whose reproduction runs this notebook (None: every profile)."""
    shares_runs: bool = True
    """Whether the notebooks after it look for runs to copy in its folder (07's vault runs are no other's)."""

    def runs_on(self, profile: str) -> bool:
        """Whether ``profile``'s reproduction runs this notebook."""
        return self.profiles is None or profile in self.profiles

    def params(self, profile: str, root: Path) -> dict[str, Any]:
        """The papermill parameters of the notebook (:func:`reproduce` adds ``jobs`` and ``reuse`` where the
        notebook takes them)."""
        return {**self.choices(profile), **self.folders(root)}

    def configs(self, profile: str) -> list[ExperimentConfig]:
        """The configs of the notebook's training runs in the reproduction (what ``--dry-run`` checks and plans):
        its plan from its default parameters and those of :attr:`choices`."""
        build = NOTEBOOK_PLANS.get(self.notebook)
        if build is None or not self.runs_on(profile):
            return []
        values = {**notebook_defaults(self.notebook), **self.choices(profile), "profile": profile}
        taken = inspect.signature(build).parameters
        return list(build(**{key: value for key, value in values.items() if key in taken}).configs.values())


MECHANISM = {"smoke": {"seeds": [0], "stage_a_episodes": 8}, "cpu": {"seeds": [0, 1, 2], "stage_a_episodes": 256}}
"""Notebook 07's parameters per profile (issue 68): Stage A's paired held-out episodes (at least 256 at cpu, where a
guided-minus-free difference of 4 standard errors is the target) and Stage B's seeds (3, the fewest for Welch's t
over seeds). Profiles without mechanism settings (gpu, paper) leave the notebook out."""


STEPS: tuple[Step, ...] = (
    Step("07_mechanism", lambda profile: MECHANISM.get(profile, {}), profiles=tuple(MECHANISM), shares_runs=False),
    Step("01_single_task", _single_task_choices),
    Step("02_multitask", lambda profile: {"seeds": _seeds(profile), **_mixture_choices(profile)}),
    Step("03_extractor_size", lambda profile: {"seeds": _seeds(profile)}),
    Step("04_ablations", lambda profile: {"seeds": _seeds(profile), **_ablation_choices(profile)}),
    Step(
        "05_latency_analysis",
        lambda profile: LATENCY.get(profile, {}),
    ),
    Step("06_bank_explorer", folders=lambda root: {"run_dir": str(root / "01_single_task" / "comp_rl_seed0")}),
)
"""The notebooks in dependency order: 07 first, the mechanism check whose positive control says whether this
pipeline can show an effect at all (the report opens with it); 06 explores the bank of 01's comp_rl run."""


def step_of(notebook: str) -> Step:
    """The step of :data:`STEPS` that executes ``notebook`` (e.g. ``"01_single_task"``)."""
    for step in STEPS:
        if step.notebook == notebook:
            return step
    raise ValueError(f"no reproduction step runs {notebook!r}; accepted: {', '.join(s.notebook for s in STEPS)}")


def notebook_defaults(notebook: str) -> dict[str, Any]:
    """The default values of a notebook's parameters cell (the variants a notebook runs live there, once)."""
    from comprl.kit.notebook_runner import declared_parameters, notebook_path

    return declared_parameters(notebook_path(notebook))


CHECK_EPISODES = 4
"""Held-out episodes per evaluation (and per reference-bank pass) in ``comprl reproduce --check``."""


def shrunk(params: dict[str, Any], takes: dict[str, Any]) -> dict[str, Any]:
    """A notebook's papermill ``params`` for ``comprl reproduce --check`` (``takes``: the notebook's own
    parameters and defaults): the profile's runs with every setting as it is, cut to one training step (05: one
    past its warm-up steps), each method's first seed and :data:`CHECK_EPISODES` held-out episodes per evaluation;
    05 to one round at its smallest batch. Every code path of the reproduction runs, on its models, in minutes."""
    values = {**takes, **params}
    out = dict(params)
    if "seeds" in takes:
        out["seeds"] = values["seeds"][:1]
    if values.get("method_seeds"):
        out["method_seeds"] = {method: seeds[:1] for method, seeds in values["method_seeds"].items()}
    if "steps" in takes:
        out["steps"] = values.get("skip", 0) + 1
    if "overrides" in takes:
        out["overrides"] = {**values["overrides"], "eval_episodes": CHECK_EPISODES}
    if values.get("reference_bank_episodes"):
        out["reference_bank_episodes"] = CHECK_EPISODES
    if values.get("stage_a_episodes"):
        out["stage_a_episodes"] = CHECK_EPISODES
    if "batch_sizes" in takes:
        out["batch_sizes"] = [min(values["batch_sizes"])]
    if "rounds" in takes:
        out["rounds"] = 1
    return out


def reproduce(
    profile: str, results: Path, force: bool = False, only: list[str] | None = None, jobs: int = 1,
    tracker: str | None = None, check: bool = False,
) -> Path:
    """Execute the notebooks of :data:`STEPS` (or those named in ``only``) with ``profile``; write the report.
    ``jobs``: runs at once, one core each, in the notebooks that take a ``jobs`` parameter; ``tracker``: where every
    run streams its rows (:mod:`comprl.tracking`; None: the profile's), set in each notebook's overrides. Each run is
    compacted as it finishes (:mod:`comprl.kit.compact`: Parquet in place of DuckDB; the notebooks' ``compact``
    parameter), ready to commit while the others go on, and once a notebook finished, every finished run in its
    folder; runs still going keep DuckDB.

    ``check``: every notebook with its parameters :func:`shrunk` (one step, one seed, a few episodes), into
    ``results/check/`` (emptied first; its report is ``results/check/REPORT.md``), to see in minutes that the
    whole reproduction runs on this machine before it takes hours; its numbers mean nothing."""
    from comprl.kit.compact import compact_paths
    from comprl.kit.notebook_runner import check_tracker, run_notebook, with_tracker
    from comprl.kit.parallel import check_jobs

    if profile not in PROFILES:
        raise SystemExit(f"comprl: unknown profile {profile!r}; accepted: {', '.join(PROFILES)}")
    try:
        check_jobs(jobs)
    except ValueError as err:
        raise SystemExit(f"comprl: --jobs: {err}")
    check_tracker(tracker)
    if check:
        results = results / "check"
        shutil.rmtree(results, ignore_errors=True)
    root = results / profile
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "reproduce.json"
    done: dict[str, Any] = json.loads(log_path.read_text()) if log_path.exists() else {}
    steps = [  # those asked for, less those that finished before (unless forced)
        step for step in STEPS
        if (only is None or step.notebook in only) and (force or not done.get(step.notebook, {}).get("finished"))
        and step.runs_on(profile)
    ]
    if missing := _missing_models(profile, steps):  # before hours of runs, not when the notebook gets there
        raise SystemExit(
            "comprl: a notebook of this reproduction loads a model that is not installed; install it, or leave the "
            "notebook out with --only:\n  " + "\n  ".join(missing)
        )
    bar = console.progress(steps, desc=f"reproduce --profile {profile}", unit="notebook")
    for step in bar:
        bar.set_postfix(notebook=step.notebook)
        params = with_tracker(step.params(profile, root), tracker)
        takes = notebook_defaults(step.notebook)
        if "jobs" in takes:
            params["jobs"] = jobs
        if "reuse" in takes:  # a finished run of the same config (a reference run, or an earlier notebook's) is linked
            params["reuse"] = _reused(profile, results, step)
        if "compact" in takes:
            params["compact"] = True
        if check:
            params = shrunk(params, takes)
        entry = done.setdefault(step.notebook, {})
        earlier = 0.0 if force else entry.get("seconds", 0.0)  # an unfinished notebook's wall time before this call
        entry.pop("finished", None)
        # this call's start and (in record) its latest time: the report's elapsed time is the union of the calls
        call = {"start": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        entry["calls"] = [*([] if force else entry.get("calls", [])), call]
        started = time.perf_counter()
        lock = threading.Lock()

        def record(finished: bool = False) -> None:
            with lock:
                entry["seconds"] = round(earlier + time.perf_counter() - started, 1)
                call["end"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
                if finished:
                    entry["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
                    if "jobs" in params:
                        entry["jobs"] = jobs
                _record_entry(log_path, step.notebook, entry)

        with _every(CLOCK_SECONDS, record):
            try:
                run_notebook(step.notebook, profile, params, root / step.notebook)
            except BaseException:
                record()
                raise
        record(finished=True)
        if (root / step.notebook).is_dir():
            for outcome in compact_paths([root / step.notebook]):
                bar.write(outcome.line())
    return write_report(profile, results)


def _record_entry(log_path: Path, notebook: str, entry: dict[str, Any]) -> None:
    """Write ``notebook``'s ``entry`` into ``log_path``, keeping every other notebook's entry as the file holds it
    now: two ``comprl reproduce`` calls on different notebooks (one per core, say) share the file, so each one
    re-reads it under a lock and replaces only its own entry (through a temporary file: readers never see half)."""
    with FileLock(log_path.with_name(f"{log_path.name}.lock")):
        latest = json.loads(log_path.read_text()) if log_path.exists() else {}
        latest[notebook] = entry
        tmp = log_path.with_name(f"{log_path.name}.tmp")
        tmp.write_text(json.dumps(latest, indent=2) + "\n")
        tmp.replace(log_path)


def _missing_models(profile: str, steps: list[Step]) -> list[str]:
    """``notebook loads model: how to install it`` for each built-in offline model (:data:`MODEL_PACKAGES`) that a
    run of ``steps`` loads and whose package is not installed."""
    out = []
    for step in steps:
        models = {name for config in step.configs(profile) for name in (config.model, config.extractor.model)}
        for model in sorted(models & set(MODEL_PACKAGES)):
            module, install = MODEL_PACKAGES[model]
            if importlib.util.find_spec(module) is None:
                out.append(f"{step.notebook} loads {model}: {install}")
    return out


def _reused(profile: str, results: Path, step: Step) -> list[str]:
    """The folders whose finished runs ``step``'s notebook copies instead of training them again: the profile's
    :data:`REFERENCE_RUNS`, then the folders of the notebooks before it that share their runs."""
    return [str(results / folder) for folder in REFERENCE_RUNS.get(profile, [])] + [
        str(results / profile / earlier.notebook) for earlier in STEPS[: STEPS.index(step)] if earlier.shares_runs
    ]


NOTES = "NOTES.md"
"""A file in ``results/<profile>/`` that the report links at its end: what the person who ran the reproduction
wants a reader to know that no metric records (the machine was shared, the run was paused, the code changed between
calls)."""

CLOCK_SECONDS = 60.0
"""How often a running notebook's wall time is written to ``reproduce.json``: a reproduction killed and resumed
(across sessions, say) adds each call's time to the notebook's, losing at most this much per kill."""


@contextmanager
def _every(seconds: float, call: Callable[[], None]) -> Iterator[None]:
    """Call ``call`` every ``seconds`` in a daemon thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            call()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def dry_run(
    profile: str, throughput: Path | None = None, throughput_dir: Path | None = None, results: Path | None = None,
    jobs: int = 1,
) -> str:
    """Build every config the reproduction would run (each is validated as it is built) and the resource plan;
    with ``results``, also how far a reproduction there has come, per notebook (:func:`_progress`), where its runs
    computed (:func:`_machines`), and, next to each notebook's planned time and floor, the wall time its
    ``reproduce.json`` recorded.

    ``throughput``: a measurement file of ``benchmarks/rollout_throughput.py --json`` (:func:`load_throughput`)
    that turns the token budget into step times. Without one, the measurements under ``throughput_dir`` (default
    :data:`THROUGHPUT_DIR`) made on the profile's kind of device (a GPU for GPU profiles) are used; where there is
    none, the plan says so and names the command that measures one. ``jobs``: runs at once, one core each, as
    ``reproduce(jobs=...)`` runs them on a CPU (the plan's wall time; not checked against this machine's cores, since
    the plan may be for another).
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs!r}: accepted: an int >= 1 (runs at once, one core each)")
    runs = {step.notebook: step.configs(profile) for step in STEPS}
    configs = [config for configs in runs.values() for config in configs]
    lines = [f"comprl reproduce --profile {profile}: {len(configs)} training runs, every config valid"]
    for step in STEPS:
        its = runs[step.notebook]
        done = f"; {_progress(profile, results, step, its)}" if its and results is not None else ""
        lines.append(f"  {step.notebook}: {len(its)} runs" + (f", {its[0].steps} steps each" if its else "") + done)
    lines += [f"  {line[2:]}" for line in planned_power(runs)]  # before any run: what the design can detect
    if results is not None:  # the actual times below come from these machines, not necessarily the plan's
        lines += [f"  {line[2:]}" for line in _machines(results / profile)]
    folder = THROUGHPUT_DIR if throughput_dir is None else Path(throughput_dir)
    if throughput is not None:
        measured, elsewhere = [load_throughput(throughput)], []
    else:
        measured, elsewhere = find_throughputs(folder, device_kind(configs))
    log = None if results is None else results / profile / "reproduce.json"
    recorded = Recorded(log, json.loads(log.read_text())) if log is not None and log.exists() else None
    lines += [
        "",
        resource_plan(
            runs, measured, elsewhere, profile=profile, searched=folder, copied=_copied(profile, results, runs),
            recorded=recorded, jobs=jobs,
        ),
    ]
    return "\n".join(lines)


def _copied(
    profile: str, results: Path | None, runs: dict[str, list[ExperimentConfig]]
) -> dict[str, list[ExperimentConfig]]:
    """Per notebook, the runs a reproduction copies instead of training them (as :func:`_reused` finds them): the
    configs an earlier notebook has too, and, with ``results``, those a finished run of the profile's
    :data:`REFERENCE_RUNS` holds."""
    from comprl.runs import find_runs

    references = [] if results is None else [results / folder for folder in REFERENCE_RUNS.get(profile, [])]
    out: dict[str, list[ExperimentConfig]] = {}
    earlier: list[ExperimentConfig] = []
    for step in STEPS:
        its = runs[step.notebook]
        reuses = bool(its) and "reuse" in notebook_defaults(step.notebook)
        out[step.notebook] = [
            config for config in its
            if reuses and (config in earlier or any(run.finished for run in find_runs(config, references)))
        ]
        earlier += its
    return out


def _progress(profile: str, results: Path, step: Step, configs: list[ExperimentConfig]) -> str:
    """How far the reproduction under ``results`` has come with ``configs``, the runs of ``step``'s notebook: how
    many finished (in the notebook's folder, or in a folder it copies finished runs from), how many are under way
    (a run folder with a checkpoint: the step it covers; a reproduction resumes them there) and how many are still
    to start."""
    from comprl.checkpoint import covered_step
    from comprl.runs import find_runs

    own = results / profile / step.notebook
    finished, under_way = 0, []
    for config in configs:
        if any(run.finished for run in find_runs(config, [own, *_reused(profile, results, step)])):
            finished += 1
        elif covered := [s for run in find_runs(config, [own]) if (s := covered_step(run.path)) is not None]:
            under_way.append(max(covered))
    going = f" (at step {', '.join(map(str, sorted(under_way, reverse=True)))})" if under_way else ""
    return (
        f"{finished} finished, {len(under_way)} under way{going}, {len(configs) - finished - len(under_way)} to start"
    )


# ---------------------------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------------------------

PACKAGES = ("torch", "transformers", "peft", "duckdb", "ray", "papermill", "nle", "minihack", "sentence-transformers")


def write_report(profile: str, results: Path) -> Path:
    """``results/REPORT.md`` from what the notebooks wrote under ``results/<profile>/``."""
    from comprl.kit.latency import ASYNC_TARGET
    from comprl.kit.mechanism import report_section

    root = results / profile
    times: dict[str, Any] = (
        json.loads((root / "reproduce.json").read_text()) if (root / "reproduce.json").exists() else {}
    )
    placed = [
        (run.relative_to(root).parts[0], ExperimentConfig.from_dict(json.loads((run / "config.json").read_text())))
        for run in _run_folders(root, True)
    ]
    unfinished = [
        step.notebook for step in STEPS if step.runs_on(profile) and not times.get(step.notebook, {}).get("finished")
    ]
    partial = [
        f"**Partial: the reproduction is under way.** Not finished: {', '.join(f'`{n}`' for n in unfinished)}. The "
        "claims below rest on the notebooks that finished, and on the finished runs of the others where their "
        "tables were written; a claim whose notebook has not run is absent.",
        "",
    ] if unfinished else []
    lines = [
        f"# comprl reproduction report: profile `{profile}`",
        "",
        f"Written {datetime.now(timezone.utc).isoformat(timespec='seconds')} "
        f"by `comprl reproduce --profile {profile}`. "
        "Paper: Complementary RL (arXiv 2603.17621). The paper's claims are about 7B actors; read this profile's "
        "numbers as a check of direction at its scale, with the spread over seeds.",
        "",
        *partial,
        *(report_section(root / "07_mechanism") if step_of("07_mechanism").runs_on(profile) else []),
        "## Claims",
        "",
        'A claim is "reproduced" where our change points the paper\'s way and a two-sided 5% t test over seeds calls'
        " it beyond the noise (Welch's t with its Welch-Satterthwaite degrees of freedom for two arms, the paired t"
        ' on n - 1 df for the same runs evaluated with and without experience; the verdict gives t, df and p), '
        '"opposite" where it points the other way beyond the noise, and "inconclusive" within it. Each claim has '
        'one pre-declared comparison; another reading of it is shown as context and marked not a test. `detectable '
        'at 80% power` is the true difference the seeds would find four times in five, (t_0.975,df + t_0.80,df) x '
        'SE (about 2.8 SE at many seeds, 3.7 at 3 seeds a side); a ratio is judged on the difference under it. A '
        '`paper` cell in words ("higher", "lower") is a direction the paper reports without a number for that '
        'setting: the verdict reads the direction. `step 0` is the same number for the untrained actor (the first '
        "evaluation of the same runs). `this run - paper` sets our number against the paper's, which comes from 7B "
        'models: context, not the test (the verdict reads our change). `shown an entry` counts the evaluation '
        'episodes with experience that the bank gave an entry, over seeds; an evaluation that showed none was '
        "unguided and is labelled so. The single-task ratios' comparison is comp_rl with its bank (the paper's "
        'figures do not say which); the reading without it is shown as context. Success is held-out success; a '
        "mixture's is the average over its tasks. The background track's row claims an absence (no added rollout "
        "time): it is reproduced where each batch size's 95% interval over rounds lies at or under "
        f'{ASYNC_TARGET:g}x, opposite where one lies wholly above it, and its `detectable at 80% power` is read off '
        'the widest interval.',
        "",
        *claims(root),
        "",
        "### Collapse per seed",
        "",
        f"A seed collapsed where its training success over the last quarter of its steps fell {COLLAPSE_FALL:g} or "
        "more below its best quarter-long window, or its last held-out evaluation (with or without experience) fell "
        f"{COLLAPSE_FALL:g} or more below its best one.",
        "",
        *_collapse(root),
        "",
        *_diagnostics(root),
    ]
    for step in STEPS:
        if not step.runs_on(profile):
            continue
        folder = root / step.notebook
        lines += [f"## {step.notebook}", ""]
        if not folder.is_dir():
            lines += ["Not run.", ""]
            continue
        if step.notebook in times:
            unfinished = "" if times[step.notebook].get("finished") else " so far (not finished)"
            lines += [f"Wall time: {times[step.notebook]['seconds'] / 60:.1f} min{unfinished}.", ""]
        for table in sorted(folder.glob("*.csv")):
            if table.name in ("metrics.csv", "bank.csv"):  # every step's row; the entries (06 shows them)
                continue
            lines += [f"`{table.name}`:", "", markdown_table(pd.read_csv(table)), ""]
        for figure in sorted(folder.glob("*.png")):
            lines += [f"![{figure.stem}]({figure.relative_to(results).as_posix()})", ""]
    lines += ["## Setup", "", *_setup(profile, placed, times, _machines(root, True)), ""]
    if (root / NOTES).exists():
        link = (root / NOTES).relative_to(results).as_posix()
        lines += ["## Notes from whoever ran it", "", f"The working notes of this reproduction: [{link}]({link}).", ""]
    path = results / "REPORT.md"
    path.write_text("\n".join(lines))
    return path


def _setup(
    profile: str, placed: list[tuple[str, ExperimentConfig]], times: dict[str, Any], machines: list[str]
) -> list[str]:
    """The report's setup section from the finished runs' configs, each with the notebook that trained it."""
    from comprl.experience.extractor.prompts import ExtractorFormat, distill_messages

    configs = [config for _, config in placed]
    by_notebook: dict[str, list[ExperimentConfig]] = {}
    for notebook, config in placed:
        by_notebook.setdefault(notebook, []).append(config)
    models = sorted({c.model for c in configs})
    extractors = sorted({c.extractor.model for c in configs if c.uses_experience})
    tasks = {t: c for c in configs for t in c.task_ids}  # a config that plays each task, for its turn cap
    versions = []
    for package in PACKAGES:
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} (not installed)")
    out = [
        f"- profile: `{profile}`; seeds: {sorted({c.seed for c in configs})}; runs: {len(configs)}",
        f"- actor models: {', '.join(models) or '-'}; extractor models: {', '.join(extractors) or '-'}",
        *_wall_time(times),
        *planned_power(by_notebook),
        *machines,
        f"- this report written with python {platform.python_version()} on {platform.platform()}; "
        f"{'; '.join(versions)}",
        "",
        "### Settings against the paper's",
        "",
        *_settings(placed, PROFILES["paper"]),
        "",
        "### Prompts",
        "",
    ]
    for env_id, config in sorted(tasks.items()):
        (env,) = config.mixture().make_envs(env_id, 1)
        _, info = env.reset(seed=0)
        env.close()
        out += [
            f"Actor instruction, `{env_id}` (the system prompt before any experience entry):",
            "",
            "```",
            info["instruction"],
            "```",
            "",
        ]
    for style in sorted({c.extractor.style for c in configs if c.uses_experience}):
        system = distill_messages("", False, [], [], ExtractorFormat(style=style))[0]["content"]
        out += [f"Extractor distillation system prompt, style `{style}`:", "", "```", system, "```", ""]
    return out


def _run_folders(root: Path, finished_only: bool) -> list[Path]:
    """The runs under ``root``, each once under its first path in name order (a later notebook's link to an earlier
    notebook's run: under the earlier one, which trained it); with ``finished_only`` the
    finished ones, on which the report rests (a run still under way is neither committed nor in a table yet)."""
    from comprl.runs import Run, run_folders

    runs: dict[Path, Path] = {}
    for folder in run_folders(root):
        runs.setdefault(folder.resolve(), folder)
    return [folder for folder in runs.values() if not finished_only or Run(folder).finished]


def _machines(root: Path, finished_only: bool = False) -> list[str]:
    """Where the runs under ``root`` computed (:data:`comprl.runs.MACHINES`), each run counted once (a linked run
    where it lives) under every machine one of its calls ran on: a reproduction spread over sessions may mix CPUs
    that compute in bfloat16 and in float32. The report counts the finished runs only (``finished_only``), the dry
    run those under way too."""
    from comprl.runs import MACHINES, Run

    runs = [Run(folder) for folder in _run_folders(root, finished_only)]
    counts: dict[str, int] = {}
    codes: dict[str, int] = {}
    for run in runs:
        seen = {f"{m['device']}, {m['dtype']}, {m['cores']} core{'s' * (m['cores'] != 1)}" for m in run.machines()}
        for machine in seen or {"not recorded (a run older than comprl.runs.MACHINES)"}:
            counts[machine] = counts.get(machine, 0) + 1
        shortened = {m["code"].split("+")[0][:12] + "+changes" * m["code"].endswith("+changes")
                     for m in run.machines() if "code" in m}
        for code in shortened or {"not recorded"}:
            codes[code] = codes.get(code, 0) + 1
    if not counts:
        return []

    def listed(counted: dict[str, int]) -> str:
        return "; ".join(f"{what}: {n} run{'s' * (n != 1)}" for what, n in sorted(counted.items()))

    return [
        f"- where the runs computed (each run's `{MACHINES}`): {listed(counts)}",
        f"- the comprl code that trained them (commits, `+changes` where comprl/ differed; a run resumed by later code "
        f"under each): {listed(codes)}",
    ]


def _wall_time(times: dict[str, Any]) -> list[str]:
    """The compute summed over the notebooks' calls and, where every call logged its start and end
    (:func:`reproduce`), the elapsed wall time: the union of the calls' intervals, so that calls running side by
    side (``--jobs 2``, or two notebooks on two cores) count once."""
    summed = sum(t.get("seconds", 0.0) for t in times.values())
    out = [f"- compute: {summed / 60:.1f} min summed over the calls of {len(times)} notebooks"]
    calls = [call for t in times.values() for call in t.get("calls", [])]
    if not calls or any("end" not in call for call in calls) or any("calls" not in t for t in times.values()):
        return out + ["- elapsed wall time: not recorded (some calls logged no start and end); the sum above adds "
                      "calls that ran side by side"]
    spans = sorted((datetime.fromisoformat(c["start"]), datetime.fromisoformat(c["end"])) for c in calls)
    elapsed, (start, end) = 0.0, spans[0]
    for begin, finish in spans[1:]:
        if begin > end:
            elapsed, start = elapsed + (end - start).total_seconds(), begin
        end = max(end, finish)
    elapsed += (end - start).total_seconds()
    return out + [f"- elapsed wall time: {elapsed / 60:.1f} min over {len(calls)} calls (overlaps counted once)"]


SETTINGS: tuple[tuple[str, Callable[[ExperimentConfig], Any], bool], ...] = (
    ("actor model", lambda c: c.model, False),
    ("extractor model", lambda c: c.extractor.model, True),
    ("training steps", lambda c: c.steps, False),
    ("rollouts per step (instances x K)", lambda c: f"{sum(c.mixture().batch.values())} x {c.group_size}", False),
    ("turns per episode", lambda c: _turns(c), False),
    ("lesson cap (extractor tokens)", lambda c: c.extractor.max_new_tokens, True),
    ("actor reply cap (tokens)", lambda c: c.rollout.max_new_tokens, False),
    ("constrained choice of actions", lambda c: c.rollout.constrained_actions, False),
    ("held-out episodes per task", lambda c: c.eval_episodes, False),
)
"""The settings the report puts beside the paper's: (name, config -> value, whether only runs with experience have
it)."""


def _turns(config: ExperimentConfig) -> str:
    """A run's turn cap per task, by the tasks' short names."""
    from comprl.envs.mixture import task_name

    return ", ".join(f"{task_name(env_id)} {n}" for env_id, n in config.mixture().max_turns.items())


def _settings(placed: list[tuple[str, ExperimentConfig]], paper_config: ExperimentConfig) -> list[str]:
    """A table of :data:`SETTINGS`: the distinct values over this reproduction's runs beside the paper profile's
    (05's timing runs, which do not evaluate, are left out). Where the notebooks differ in a setting, each value
    names the notebooks (by number) whose runs have it."""
    runs = [(notebook, c) for notebook, c in placed if c.eval_episodes > 0]
    rows = []
    for name, value, experience in SETTINGS:
        where: dict[str, set[str]] = {}  # value -> the numbers of the notebooks with it, values in run order
        for notebook, c in runs:
            if c.uses_experience or not experience:
                where.setdefault(str(value(c)), set()).add(notebook.split("_")[0])
        ours = [f"{v} ({', '.join(sorted(n))})" if len(where) > 1 else v for v, n in where.items()]
        rows.append({"setting": name, "this reproduction": "; ".join(ours) or "-", "paper": value(paper_config)})
    return [markdown_table(pd.DataFrame(rows))]


def _collapse(root: Path) -> list[str]:
    """Notebooks 01-04's seeds collapsed per method (:func:`comprl.kit.verdicts.collapse_table`)."""
    table = collapse_table(root)
    return ["No training runs yet."] if table.empty else [markdown_table(table)]


def _diagnostics(root: Path) -> list[str]:
    """The section that reads each side of the method directly (:func:`comprl.kit.verdicts.diagnostics`), where
    notebook 01 or 03 wrote what it reads."""
    found = diagnostics(root)
    return ["### Diagnostics: which side holds the method back", "", *found, ""] if found else []
