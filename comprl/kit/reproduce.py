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
link: stored once), not trained again: the committed reference runs (:data:`REFERENCE_RUNS`: at the cpu profile
they are 01's runs) and earlier notebooks' runs (02's single-task runs, 03's smaller extractor and 04's plain
comp_rl are 01's). Wall times go into
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
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pandas as pd
from filelock import FileLock

from comprl import console
from comprl.config import MODEL_PACKAGES, PROFILES, ExperimentConfig
from comprl.kit import paper
from comprl.kit.planner import (
    THROUGHPUT_DIR, Recorded, device_kind, find_throughputs, load_throughput, resource_plan,
)
from comprl.kit.plans import NOTEBOOK_PLANS

SEEDS = {"smoke": [0], "cpu": [0, 1, 2], "paper": [0, 1, 2]}
"""Seeds per profile (cpu: the three of the committed reference runs)."""


def _seeds(profile: str) -> list[int]:
    return SEEDS.get(profile, [0])


def _mixtures(profile: str) -> list[str]:
    """The 6-task mixture only where it fits: the smoke profile keeps CI short with the 3-task one."""
    return ["3-task"] if profile == "smoke" else ["3-task", "6-task"]


MIXTURE_BATCH = {"cpu": 1}
"""Instances of each task per step in the mixtures of 02, where a profile sets them (others: ``batch_instances``).
The paper trains a mixture on the single-task batch of every task (128 rollouts per task, 384 per step for 3
tasks); the cpu profile takes one instance per task (4 rollouts), so that a 6-task step costs about 1.5 steps of
its single-task runs (4 x 4 rollouts) and the 24 runs of 02 fit in hours, not days."""


OVERRIDES = {"cpu": {"actor.generation_adapter_dtype": "float32", "extractor.generation_adapter_dtype": "float32"}}
"""Config fields a profile's reproduction sets in every run. cpu: the sampling path of the committed reference runs
(float32 LoRA adapters while generating, the path they were trained on), so that 01's runs are those runs, linked
(:data:`REFERENCE_RUNS`), and every later run is compared with them on the same path. It costs the cpu runs the
faster rollout of the profile's merged adapters (``benchmarks/rollout_speed.py`` measures how much)."""

REFERENCE_RUNS = {"cpu": ["reference/01_single_task_cpu"]}
"""Folders under ``--results`` whose finished runs a profile's reproduction copies instead of training them again:
the committed reference runs of the cpu profile are 01's twelve runs (four methods, seeds 0-2)."""


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

    def params(self, profile: str, root: Path) -> dict[str, Any]:
        """The papermill parameters of the notebook (:func:`reproduce` adds ``jobs``, ``overrides`` and ``reuse``
        where the notebook takes them)."""
        return {**self.choices(profile), **self.folders(root)}

    def configs(self, profile: str) -> list[ExperimentConfig]:
        """The configs of the notebook's training runs in the reproduction (what ``--dry-run`` checks and plans):
        its plan from its default parameters, those of :attr:`choices` and the profile's :data:`OVERRIDES`."""
        build = NOTEBOOK_PLANS.get(self.notebook)
        if build is None:
            return []
        values = {**notebook_defaults(self.notebook), **self.choices(profile), "profile": profile}
        if OVERRIDES.get(profile):
            values["overrides"] = OVERRIDES[profile]
        taken = inspect.signature(build).parameters
        return list(build(**{key: value for key, value in values.items() if key in taken}).configs.values())


STEPS: tuple[Step, ...] = (
    Step(
        "01_single_task",
        lambda profile: {"seeds": _seeds(profile), "compare_with": ["baseline", "static", "exp_only"]},
    ),
    Step(
        "02_multitask",
        lambda profile: {
            "seeds": _seeds(profile), "mixtures": _mixtures(profile), "batch_per_task": MIXTURE_BATCH.get(profile)
        },
    ),
    Step("03_extractor_size", lambda profile: {"seeds": _seeds(profile)}),
    Step("04_ablations", lambda profile: {"seeds": _seeds(profile)}),
    Step("05_latency_analysis"),
    Step("06_bank_explorer", folders=lambda root: {"run_dir": str(root / "01_single_task" / "comp_rl_seed0")}),
)
"""The notebooks in dependency order (06 explores the bank of 01's comp_rl run)."""


def notebook_defaults(notebook: str) -> dict[str, Any]:
    """The default values of a notebook's parameters cell (the variants a notebook runs live there, once)."""
    from comprl.kit.notebook_runner import declared_parameters, notebook_path

    return declared_parameters(notebook_path(notebook))


def reproduce(profile: str, results: Path, force: bool = False, only: list[str] | None = None, jobs: int = 1) -> Path:
    """Execute the notebooks of :data:`STEPS` (or those named in ``only``) with ``profile``; write the report.
    ``jobs``: runs at once, one core each, in the notebooks that take a ``jobs`` parameter."""
    from comprl.kit.notebook_runner import run_notebook
    from comprl.kit.parallel import check_jobs

    if profile not in PROFILES:
        raise SystemExit(f"comprl: unknown profile {profile!r}; accepted: {', '.join(PROFILES)}")
    try:
        check_jobs(jobs)
    except ValueError as err:
        raise SystemExit(f"comprl: --jobs: {err}")
    root = results / profile
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "reproduce.json"
    done: dict[str, Any] = json.loads(log_path.read_text()) if log_path.exists() else {}
    steps = [  # those asked for, less those that finished before (unless forced)
        step for step in STEPS
        if (only is None or step.notebook in only) and (force or not done.get(step.notebook, {}).get("finished"))
    ]
    if missing := _missing_models(profile, steps):  # before hours of runs, not when the notebook gets there
        raise SystemExit(
            "comprl: a notebook of this reproduction loads a model that is not installed; install it, or leave the "
            "notebook out with --only:\n  " + "\n  ".join(missing)
        )
    bar = console.progress(steps, desc=f"reproduce --profile {profile}", unit="notebook")
    for step in bar:
        bar.set_postfix(notebook=step.notebook)
        params = step.params(profile, root)
        takes = notebook_defaults(step.notebook)
        if "jobs" in takes:
            params["jobs"] = jobs
        if OVERRIDES.get(profile) and "overrides" in takes:
            params["overrides"] = OVERRIDES[profile]
        if "reuse" in takes:  # a finished run of the same config (a reference run, or an earlier notebook's) is linked
            params["reuse"] = _reused(profile, results, step)
        entry = done.setdefault(step.notebook, {})
        earlier = 0.0 if force else entry.get("seconds", 0.0)  # an unfinished notebook's wall time before this call
        entry.pop("finished", None)
        started = time.perf_counter()
        lock = threading.Lock()

        def record(finished: bool = False) -> None:
            with lock:
                entry["seconds"] = round(earlier + time.perf_counter() - started, 1)
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
    :data:`REFERENCE_RUNS`, then the folders of the notebooks before it."""
    return [str(results / folder) for folder in REFERENCE_RUNS.get(profile, [])] + [
        str(results / profile / earlier.notebook) for earlier in STEPS[: STEPS.index(step)]
    ]


NOTES = "NOTES.md"
"""A file in ``results/<profile>/`` whose text the report ends with, as written: what the person who ran the
reproduction wants a reader to know that no metric records (the machine was shared, the run was paused, the code
changed between calls)."""

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
    profile: str, throughput: Path | None = None, throughput_dir: Path | None = None, results: Path | None = None
) -> str:
    """Build every config the reproduction would run (each is validated as it is built) and the resource plan;
    with ``results``, also how far a reproduction there has come, per notebook (:func:`_progress`), and, next to
    each notebook's planned time and floor, the wall time its ``reproduce.json`` recorded.

    ``throughput``: a measurement file of ``benchmarks/rollout_throughput.py --json`` (:func:`load_throughput`)
    that turns the token budget into step times. Without one, the measurements under ``throughput_dir`` (default
    :data:`THROUGHPUT_DIR`) made on the profile's kind of device (a GPU for GPU profiles) are used; where there is
    none, the plan says so and names the command that measures one.
    """
    runs = {step.notebook: step.configs(profile) for step in STEPS}
    configs = [config for configs in runs.values() for config in configs]
    lines = [f"comprl reproduce --profile {profile}: {len(configs)} training runs, every config valid"]
    for step in STEPS:
        its = runs[step.notebook]
        done = f"; {_progress(profile, results, step, its)}" if its and results is not None else ""
        lines.append(f"  {step.notebook}: {len(its)} runs" + (f", {its[0].steps} steps each" if its else "") + done)
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
            recorded=recorded,
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
    root = results / profile
    times: dict[str, Any] = (
        json.loads((root / "reproduce.json").read_text()) if (root / "reproduce.json").exists() else {}
    )
    configs = [
        ExperimentConfig.from_dict(json.loads(path.read_text())) for path in sorted(root.glob("*/**/config.json"))
    ]
    lines = [
        f"# comprl reproduction report: profile `{profile}`",
        "",
        f"Written {datetime.now(timezone.utc).isoformat(timespec='seconds')} "
        f"by `comprl reproduce --profile {profile}`. "
        "Paper: Complementary RL (arXiv 2603.17621). The paper's claims are about 7B actors; read this profile's "
        "numbers as a check of direction at its scale, with the spread over seeds. A direction marked "
        f'"within the seed noise" rests on a change smaller than {NOISE_ERRORS:g} standard errors of the '
        "difference of means over seeds.",
        "",
        "## Claims",
        "",
        *_claims(root),
        "",
    ]
    for step in STEPS:
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
            lines += [f"`{table.name}`:", "", _markdown(pd.read_csv(table)), ""]
        for figure in sorted(folder.glob("*.png")):
            lines += [f"![{figure.stem}]({figure.relative_to(results).as_posix()})", ""]
    lines += ["## Setup", "", *_setup(profile, configs, times), ""]
    if (root / NOTES).exists():
        lines += ["## Notes from whoever ran it", "", (root / NOTES).read_text().strip(), ""]
    path = results / "REPORT.md"
    path.write_text("\n".join(lines))
    return path


def _claims(root: Path) -> list[str]:
    """One line per paper claim: the paper's number, ours where the notebook ran, ours minus the paper's, and
    whether ours points the same way as the paper's from the same reference (:func:`_direction`). At a scale far
    below the paper's the last column is the one to read; the delta says how far the levels are apart."""
    out = ["| claim | paper | this run | delta | direction |", "|---|---|---|---|---|"]

    def claim(
        text: str,
        reported: float | None,
        ours: float | None,
        fmt: str = "{:.2f}",
        unit: str = "",
        sd: float | None = None,
        versus: tuple[float | None, float | None] | None = None,
        change: tuple[float, float | None] | None = None,
    ) -> None:
        """``versus``: the (paper's, ours) reference that ``reported`` and ``ours`` are read against; ``change``:
        our difference of means behind that reading and its standard error (:func:`_standard_error`)."""
        shown = [("-" if v is None or pd.isna(v) else fmt.format(v) + unit) for v in (reported, ours)]
        signed = fmt if fmt.startswith("{:+") else fmt.replace("{:", "{:+", 1)  # a delta always shows its sign
        delta = "-" if "-" in shown else signed.format(ours - reported) + unit
        spread = "" if sd is None or pd.isna(sd) or shown[1] == "-" else f" (sd {fmt.format(sd)} over seeds)"
        known = versus is not None and "-" not in shown and not any(v is None or pd.isna(v) for v in versus)
        direction = _direction(reported - versus[0], ours, versus[1]) + _noise(*(change or (0, None))) if known else "-"
        out.append(f"| {text} | {shown[0]} | {shown[1]}{spread} | {delta} | {direction} |")

    def read(notebook: str, name: str) -> pd.DataFrame | None:
        path = root / notebook / name
        return pd.read_csv(path) if path.exists() else None

    single = read("01_single_task", "summary.csv")
    if single is not None and {"baseline", "comp_rl"} <= set(single["method"]):
        by = single.groupby("method").mean(numeric_only=True)  # one row per seed where there are several
        ratio = _ratio(by.loc["comp_rl", "success_after"], by.loc["baseline", "success_after"])
        fewer = _ratio(by.loc["baseline", "episode_length_after"], by.loc["comp_rl", "episode_length_after"])
        claim(
            "single task Room: comp_rl / baseline success", paper.SINGLE_TASK_SPEEDUP, ratio, unit="x", versus=(1, 1),
            change=_change(by, "success_after", "comp_rl", "baseline"),
        )
        claim(
            "single task Room: baseline / comp_rl actions per episode", paper.FEWER_ACTIONS["room"], fewer, unit="x",
            versus=(1, 1), change=_change(by, "episode_length_after", "baseline", "comp_rl"),
        )
    baseline = paper.TABLE_ROWS[0][0]  # the row every other row of Table 1 is read against
    full_method = next(label for label, method, guided in paper.TABLE_ROWS if method == "comp_rl" and guided)
    table = read("02_multitask", "table1_vs_paper.csv")
    if table is not None:
        rows = table.set_index("row")
        reference = (rows.loc[baseline, "paper_avg"], rows.loc[baseline, "avg"]) if baseline in rows.index else None
        for label, row in rows.iterrows():
            if not pd.isna(row.get("paper_avg")):
                versus = None if label == baseline else reference
                change = _change(rows, "avg", label, baseline) if versus else None
                text = f"3-task Table 1, {label}: avg success"
                claim(text, row["paper_avg"], row["avg"], sd=row.get("avg_sd"), versus=versus, change=change)
        for method, (guided, plain) in _with_and_without(rows.index).items():
            paper_gain = rows.loc[guided, "paper_avg"] - rows.loc[plain, "paper_avg"]
            gain = _change(rows, "avg", guided, plain)
            text = f"3-task Table 1, {method}: eval with experience minus without"
            claim(text, paper_gain, gain[0], "{:+.3f}", versus=(0, 0), change=gain)
    scaling, every_table = read("02_multitask", "task_scaling.csv"), read("02_multitask", "table1.csv")
    if scaling is not None:
        for _, row in scaling.iterrows():
            tasks = int(row["tasks_trained"])
            reported = paper.TASK_SCALING_GAIN.get(tasks)
            mixture = (
                None if every_table is None else every_table[every_table["tasks"] == row.get("tasks")].set_index("row")
            )
            gain = None if mixture is None or mixture.empty else _change(mixture, "avg", full_method, baseline)
            claim(
                f"task scaling, {tasks} tasks: gain over baseline",
                reported,
                row["gain"],
                "{:+.3f}",
                versus=(0, 0),
                change=gain,
            )
    sizes = read("03_extractor_size", "summary.csv")
    if sizes is not None and len(sizes) >= 2 and "guided_success_after" in sizes:
        gain = _change(
            sizes.reset_index(drop=True), "guided_success_after", len(sizes) - 1, 0
        )  # the last minus the first
        claim(
            "larger extractor: avg success gain",
            paper.LARGER_EXTRACTOR_GAIN,
            gain[0],
            "{:+.3f}",
            versus=(0, 0),
            change=gain,
        )
    ablations = read("04_ablations", "summary.csv")
    if ablations is not None and "comp_rl" in set(ablations["variant"]):
        out += _ablation_claims(ablations.set_index("variant"), read("04_ablations", "metrics.csv"))
    latency = read("05_latency_analysis", "overhead.csv")
    if latency is not None and "rollout_ratio" in latency:
        ratios = latency.loc[latency["mode"] == "async", "rollout_ratio"]
        if not ratios.empty:
            out.append(
                "| background track: rollout time vs baseline | 0.98-1.00x | "
                f"{ratios.min():.2f}-{ratios.max():.2f}x | - | - |"
            )
    return out if len(out) > 2 else ["No notebook results yet."]


def _ablation_claims(summary: pd.DataFrame, metrics: pd.DataFrame | None) -> list[str]:
    """Notebook 04 against the paper's directions (:data:`comprl.kit.paper.ABLATIONS`): a variant's held-out success
    with experience minus the full method's, and, where the paper reports a collapse, how far the variant's training
    success fell from its best quarter of the run to its last (mean over seeds) next to the full method's fall."""
    rows = []
    reference = None if metrics is None else _fall(metrics, "comp_rl")
    for variant, direction in paper.ABLATIONS.items():
        if variant not in summary.index:
            continue
        gap, error = _change(summary, "guided_success_after", variant, "comp_rl")
        sds = (
            summary.loc[[variant, "comp_rl"], "guided_success_after_sd"]
            if "guided_success_after_sd" in summary
            else None
        )
        spread = (
            "" if sds is None or sds.isna().any() else f" (sd over seeds {sds.iloc[0]:.3f}, comp_rl {sds.iloc[1]:.3f})"
        )
        rows.append(
            f"| ablation {variant}: held-out success with experience, minus comp_rl's | lower | "
            f"{gap:+.3f}{spread} | - | "
            f"{_direction(-1, gap, 0)}{_noise(gap, error)} |"
        )
        if direction == "collapse" and reference is not None:
            fall = _fall(metrics, variant)
            if fall is not None:
                rows.append(
                    f"| ablation {variant}: training success, last quarter of the run minus its best quarter "
                    f"(comp_rl: {reference:+.3f}) | a collapse | {fall:+.3f} | - | "
                    f"{'falls further than comp_rl' if fall < reference else 'not reproduced'} |"
                )
    return rows


def _fall(metrics: pd.DataFrame, variant: str) -> float | None:
    """A variant's training success (mean over seeds) averaged over the last quarter of its steps, minus the best
    such average over any quarter-long window of the run; None without training rows."""
    curve = metrics[(metrics.variant == variant) & (metrics.phase == "train")].groupby("step")["success_rate"].mean()
    windows = curve.rolling(max(len(curve) // 4, 1)).mean().dropna()
    return None if windows.empty else float(windows.iloc[-1] - windows.max())


def _with_and_without(labels: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Methods with both a "with exp." and a "without exp." row of Table 1 among ``labels``: method -> (the row
    evaluated with experience, the row without)."""
    present = set(labels)
    rows = [row for row in paper.TABLE_ROWS if row[0] in present]
    guided = {method: label for label, method, with_experience in rows if with_experience}
    plain = {method: label for label, method, with_experience in rows if not with_experience}
    return {method: (guided[method], plain[method]) for method in guided if method in plain}


def _direction(paper_change: float, ours: float, our_reference: float) -> str:
    """"same direction" where ours moved from its reference the way the paper's number moved from the paper's
    (``paper_change``: the paper's number minus its reference), "not reproduced" where it moved the other way or not
    at all."""
    change = round(ours - our_reference, 9)  # means of the same numbers differ by rounding, not by a direction
    return "same direction" if change and (change > 0) == (paper_change > 0) else "not reproduced"


NOISE_ERRORS = 2.0
"""A change of our means smaller than this many standard errors is flagged "within the seed noise" in REPORT.md
(about a 95% interval that holds 0). Source: comprl's."""


def _noise(change: float, error: float | None) -> str:
    """The qualifier a direction gets where ``change`` is within :data:`NOISE_ERRORS` standard errors of 0."""
    return ", within the seed noise" if error is not None and abs(change) < NOISE_ERRORS * error else ""


def _standard_error(*sides: tuple[Any, Any]) -> float | None:
    """The standard error of a difference of means over seeds, each side given as (sd over seeds, seeds) and taken
    as independent (for two evaluations of the same runs, which move together, that overstates the error); None where
    a side has under two seeds."""
    if any(sd is None or seeds is None or pd.isna(sd) or pd.isna(seeds) or seeds < 2 for sd, seeds in sides):
        return None
    return float(sum(sd**2 / seeds for sd, seeds in sides) ** 0.5)


def _change(rows: pd.DataFrame, column: str, label: Any, reference: Any) -> tuple[float, float | None]:
    """Row ``label``'s mean in ``column`` minus row ``reference``'s, and its standard error from the table's
    ``<column>_sd`` and ``seeds`` columns (None where either is missing)."""
    sides = [(rows.loc[r].get(f"{column}_sd"), rows.loc[r].get("seeds")) for r in (label, reference)]
    return rows.loc[label, column] - rows.loc[reference, column], _standard_error(*sides)


def _ratio(a: float, b: float) -> float | None:
    return None if not b else a / b


def _setup(profile: str, configs: list[ExperimentConfig], times: dict[str, Any]) -> list[str]:
    from comprl.experience.extractor.prompts import ExtractorFormat, distill_messages

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
        f"- wall time: {sum(t['seconds'] for t in times.values()) / 60:.1f} min over {len(times)} notebooks",
        f"- python {platform.python_version()} on {platform.platform()}; {'; '.join(versions)}",
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


def _markdown(table: pd.DataFrame) -> str:
    """A pipe table (pandas' own needs the optional tabulate)."""
    cells = [
        ["" if pd.isna(value) else str(value).replace("|", "\\|").replace("\n", " ") for value in row]
        for row in table.round(3).itertuples(index=False)
    ]
    rows = [[str(column) for column in table.columns], ["---"] * len(table.columns), *cells]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)
