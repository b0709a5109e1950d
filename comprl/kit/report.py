"""The paper's tables and figures from metric rows (:func:`comprl.runs.load_metrics`): success before and after
training per method, Table 1 per task, and learning curves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd


def summary_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Success before and after training per method and env, from the ``eval`` rows: the mean over seeds, and
    their standard deviation over seeds in the ``_sd`` columns (NaN for one seed).

    Methods with a bank also get ``guided_success_after``: the final evaluation with experience retrieved. Runs
    that logged it get ``before_shared``: how many of the seeds' step-0 rows were read from the step-0 evaluation
    an earlier run of the folder played for the same untrained model and settings (:mod:`comprl.evaluation`), not
    played again.
    """
    evals = metrics[metrics["phase"] == "eval"]
    if evals.empty:
        return pd.DataFrame(columns=["method", "env_id", "seeds", "success_before", "success_after"])
    first = evals.loc[evals.groupby("run")["step"].idxmin()]
    last = evals.loc[evals.groupby("run")["step"].idxmax()]
    after = ["run", "success_rate", "mean_episode_length", "invalid_action_rate"]
    after += ["guided_success_rate"] if "guided_success_rate" in last else []
    shared = ["eval_shared"] if "eval_shared" in first else []
    merged = first[["run", "method", "env_id", "success_rate", *shared]].merge(
        last[after], on="run", suffixes=("_before", "_after")
    )
    columns = {
        "seeds": ("run", "count"),
        "success_before": ("success_rate_before", "mean"),
        "success_before_sd": ("success_rate_before", "std"),
        "success_after": ("success_rate_after", "mean"),
        "success_after_sd": ("success_rate_after", "std"),
        "episode_length_after": ("mean_episode_length", "mean"),
        "episode_length_after_sd": ("mean_episode_length", "std"),
        "invalid_action_rate_after": ("invalid_action_rate", "mean"),
    }
    if shared:
        columns["before_shared"] = ("eval_shared", "sum")
    if "guided_success_rate" in merged:
        columns["guided_success_after"] = ("guided_success_rate", "mean")
        columns["guided_success_after_sd"] = ("guided_success_rate", "std")
    return merged.groupby(["method", "env_id"]).agg(**columns).reset_index()


def task_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 1 from evaluation rows: one row per (tasks, row of :data:`comprl.kit.paper.TABLE_ROWS`)
    whose method was run, final held-out success per task and their average (``avg``), means over seeds, and the
    standard deviation over seeds of each seed's average (``avg_sd``; NaN for one seed).

    Rows "with exp." read the final evaluation that retrieves experience (``guided_*`` columns), the others the
    experience-free one. A multi-task run's tasks are its per-task columns (``room_success_rate``...); a
    single-task run's one task is its overall success.
    """
    from comprl.envs.mixture import TASK_NAMES, task_name
    from comprl.kit.paper import TABLE_ROWS

    evals = metrics[metrics["phase"] == "eval"]
    last = evals.loc[evals.groupby("run")["step"].idxmax()]
    rows = []
    for tasks, group in last.groupby("env_id", sort=False):
        present = [
            n for n in TASK_NAMES.values() if f"{n}_success_rate" in group and group[f"{n}_success_rate"].notna().any()
        ]
        single = [] if present else [task_name(tasks)]
        for label, method, with_experience in TABLE_ROWS:
            runs = group[group["method"] == method]
            if runs.empty:
                continue
            prefix = "guided_" if with_experience else ""
            per_task = pd.DataFrame({name: runs[f"{prefix}{name}_success_rate"] for name in present})
            if single:
                per_task[single[0]] = runs[f"{prefix}success_rate"]
            averages = per_task.mean(axis=1)  # each seed's average over the tasks
            rows.append(
                {
                    "tasks": tasks,
                    "row": label,
                    "seeds": len(runs),
                    **per_task.mean(),
                    "avg": averages.mean(),
                    "avg_sd": averages.std(),
                }
            )
    return pd.DataFrame(rows)


ARM_COLOURS: dict[str, str] = {"baseline": "#4d4d4d", "comp_rl": "#d95f02", "static": "#1b9e77",
                               "exp_only": "#7570b3"}
"""Each method's colour in every figure of the kit: a colour means one arm, in every panel and figure."""

OTHER_COLOURS = ("#1f78b4", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#17becf", "#b15928", "#6a3d9a")
"""The colours of other arms (ablation variants, extractor sizes), handed out in turn by :func:`arm_colours`."""

HALVES: dict[str, tuple[str, str]] = {"guided_success_rate": ("guided", "-"), "free_success_rate": ("free", "--")}
"""Training metrics of one half of each group (label and line style): a point holds half its row's episodes."""


def arm_colours(arms: Iterable[str]) -> dict[str, str]:
    """A colour per arm: a method's own (:data:`ARM_COLOURS`), others from :data:`OTHER_COLOURS` in the order given.
    Give every arm of a figure at once, and pass the result to each panel, so that a colour means the same arm in
    all of them."""
    others = iter(OTHER_COLOURS * (1 + len(list(arms)) // len(OTHER_COLOURS)))
    return {arm: ARM_COLOURS.get(arm) or next(others) for arm in dict.fromkeys(arms)}


def plot_learning_curves(
    metrics: pd.DataFrame, metric: str = "success_rate", phase: str = "train", ax: Any = None,
    colours: dict[str, str] | None = None,
) -> Any:
    """``metric`` against step, one line per method (the ``method`` column), each in its colour (``colours``: method
    -> colour, from :func:`arm_colours` of all the figure's arms; a method missing from it takes :func:`arm_colours`'
    colour among the methods drawn), with the steps as integers. A guided and a free half share their method's
    colour, the free half dashed. Returns the figure.

    A success rate (``success_rate`` and the halves of :data:`HALVES`) is each step's success pooled over seeds, its
    band the 95% Wilson interval of those pooled episodes, and its legend gives the seeds and n, the episodes a point
    holds (a half holds half of its row's ``episodes``): 1 win in 4 episodes gives 0.05-0.70. Other
    metrics draw the mean and the min-max band over seeds."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from comprl.kit.evaluate import wilson_interval

    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3.2))
    else:
        fig = ax.figure
    rows = metrics[metrics["phase"] == phase].dropna(subset=[metric])
    colours = {**arm_colours(rows["method"]), **(colours or {})}
    half, style = HALVES.get(metric, ("", "-")) if phase == "train" else ("", "-")
    share = 0.5 if half else 1.0
    pooled = metric in HALVES or metric == "success_rate"
    band = "95% Wilson of the n episodes a point pools over seeds" if pooled and "episodes" in rows else (
        "min-max over seeds")
    for method, group in rows.groupby("method", sort=False):
        seeds = group["seed"].nunique() if "seed" in group else group["run"].nunique()
        label = f"{method} {half}".strip() + f" ({seeds} seed{'s' if seeds != 1 else ''}"
        if band.startswith("95%"):
            n = group["episodes"] * share
            points = group.assign(wins=(group[metric] * n).round(), n=n).groupby("step")[["wins", "n"]].sum()
            mean = points["wins"] / points["n"]
            low, high = zip(*(wilson_interval(int(w), int(k)) for w, k in zip(points["wins"], points["n"])))
            least, most = int(points["n"].min()), int(points["n"].max())
            label += f", n={least if least == most else f'{least}-{most}'})"
        else:
            stats = group.groupby("step")[metric].agg(["mean", "min", "max"])
            mean, low, high = stats["mean"], stats["min"], stats["max"]
            label += ")"
        ax.plot(mean.index, mean, marker="o", linestyle=style, color=colours[method], label=label)
        ax.fill_between(mean.index, low, high, color=colours[method], alpha=0.15)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("actor step")
    ax.set_ylabel(metric.replace("_", " "))
    envs = ", ".join(sorted(rows["env_id"].unique())) if "env_id" in rows else ""
    ax.set_title(f"{envs}\nband: {band}" if envs else f"band: {band}", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def run_key(metrics: pd.DataFrame) -> str:
    """The column that names what a notebook compares: ``variant`` (04), ``extractor`` (03), else ``method``."""
    return next((column for column in ("variant", "extractor") if column in metrics), "method")


def held_out(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per run from its first (step 0: the untrained actor) and last evaluation: held-out success without
    (``success_*``) and with (``guided_success_*``, NaN for runs without a bank) experience, episode length likewise
    (``episode_length_*``, ``guided_episode_length_*``), and ``shown_before`` / ``shown_after``: how many of the
    first / last with-experience evaluation's episodes were shown an entry (NaN where the run did not log it; at step
    0 the bank is empty, so 0). A mixture's success is the average over its tasks, as in :func:`task_table`; the
    column that names what is compared (:func:`run_key`) comes first."""
    from comprl.envs.mixture import TASK_NAMES

    key = run_key(metrics)
    evals = metrics[metrics["phase"] == "eval"]
    columns = [key, "env_id", "seed", "run", "success_before", "success_after", "guided_success_before",
               "guided_success_after", "episode_length_before", "episode_length_after", "guided_episode_length_before",
               "guided_episode_length_after", "shown_before", "shown_after", "episodes_after"]
    if evals.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for _, runs in evals.groupby("env_id", sort=False):
        tasks = [n for n in TASK_NAMES.values() if runs.get(f"{n}_success_rate", pd.Series()).notna().any()]
        for run, group in runs.groupby("run", sort=False):
            first, last = group.loc[group["step"].idxmin()], group.loc[group["step"].idxmax()]
            row = {key: last[key], "env_id": last["env_id"], "seed": last["seed"], "run": run}
            for when, at in (("before", first), ("after", last)):
                for prefix in ("", "guided_"):
                    names = [f"{prefix}{n}_success_rate" for n in tasks] or [f"{prefix}success_rate"]
                    values = [at.get(name, float("nan")) for name in names]
                    row[f"{prefix}success_{when}"] = float(pd.Series(values, dtype=float).mean(skipna=False))
                    row[f"{prefix}episode_length_{when}"] = at.get(f"{prefix}mean_episode_length", float("nan"))
            row["shown_before"] = first.get("guided_with_entry", float("nan"))
            row["shown_after"] = last.get("guided_with_entry", float("nan"))
            row["episodes_after"] = last["episodes"]
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


COLLAPSE_FALL = 0.15
"""A seed counts as collapsed (:func:`seed_collapse`) when its success fell at least this far below its best.
Source: comprl's (issue 46), about four standard errors of a quarter-run window of training success at the cpu
profile (12 steps of 16 episodes) and well above the spread of one evaluation's 32 episodes at a success near 0.1."""


def seed_collapse(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per run: ``train_fall``, its training success averaged over the last quarter of its steps minus the best such
    average over any quarter-long window of the run; ``held_out_fall``, its last held-out success minus the best of
    its evaluations (the larger fall of the evaluations without and with experience); ``collapsed`` where either
    fell by :data:`COLLAPSE_FALL` or more. A single run's collapse, which a mean over seeds hides."""
    key = run_key(metrics)
    rows = []
    for run, group in metrics.groupby("run", sort=False):
        curve = group[group["phase"] == "train"].groupby("step")["success_rate"].mean()
        windows = curve.rolling(max(len(curve) // 4, 1)).mean().dropna()
        evals = group[group["phase"] == "eval"].sort_values("step")
        falls = [
            scores.iloc[-1] - scores.max()
            for column in ("success_rate", "guided_success_rate") if column in evals
            for scores in [evals[column].dropna()] if len(scores)
        ]
        train = float(windows.iloc[-1] - windows.max()) if len(windows) else float("nan")
        held = float(min(falls)) if falls else float("nan")
        rows.append({key: group[key].iloc[0], "env_id": group["env_id"].iloc[0], "seed": group["seed"].iloc[0],
                     "run": run, "train_fall": train, "held_out_fall": held,
                     "collapsed": bool(min(train, held) <= -COLLAPSE_FALL)})
    return pd.DataFrame(rows, columns=[key, "env_id", "seed", "run", "train_fall", "held_out_fall", "collapsed"])


def t_interval(values: Any, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` Student-t interval of the mean of ``values`` (NaN ignored); (NaN, NaN) for under two."""
    from scipy import stats

    data = pd.Series(values, dtype=float).dropna()
    if len(data) < 2:
        return float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, len(data) - 1) * data.std() / len(data) ** 0.5
    return float(data.mean() - half), float(data.mean() + half)


HELDOUT_BARS = (("success_before", "step 0", 0.35, ""), ("success_after", "trained", 1.0, ""),
                ("guided_success_before", "step 0, with exp.", 0.35, ".."),
                ("guided_success_after", "trained, with exp.", 1.0, ".."))
"""The bars of :func:`plot_heldout` per arm: column, label, opacity (step 0 pale) and hatch (with experience)."""


def plot_heldout(metrics: pd.DataFrame, ax: Any = None, colours: dict[str, str] | None = None) -> Any:
    """Held-out success per method (:func:`run_key`) before and after training, without and with experience: bars
    at the mean over seeds in the arm's colour (``colours``, as :func:`plot_learning_curves`; pale at step 0,
    dotted with experience), each seed a point, and the 95% t interval of the mean (:func:`t_interval`), drawn within
    [0, 1], the range of a success rate (with two seeds it reaches far beyond). Each arm's label gives its seeds, and
    says "no interval" where it has one. A with-experience bar whose evaluations showed no episode an entry (step 0's
    always: the bank is empty) is hatched ``//`` and labelled "unguided". Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    table = held_out(metrics)
    key = run_key(metrics)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(5, 1.6 * table[key].nunique() + 2), 3.4))
    else:
        fig = ax.figure
    methods = list(dict.fromkeys(table[key]))
    colours = {**arm_colours(methods), **(colours or {})}
    width = 0.8 / len(HELDOUT_BARS)
    any_unguided = False
    for offset, (column, _, alpha, hatch) in enumerate(HELDOUT_BARS):
        for position, method in enumerate(methods):
            seeds = table.loc[table[key] == method, column].dropna()
            if seeds.empty:
                continue
            x = position + (offset - (len(HELDOUT_BARS) - 1) / 2) * width
            shown = table.loc[table[key] == method, column.replace("guided_success", "shown")]
            unguided = column.startswith("guided_") and shown.notna().all() and shown.sum() == 0
            any_unguided |= unguided
            ax.bar(x, seeds.mean(), width, color=colours[method], alpha=alpha, hatch="//" if unguided else hatch,
                   edgecolor="black", linewidth=0.4)
            low, high = t_interval(seeds)
            top = seeds.max()
            if not pd.isna(low):
                low, high = max(low, 0.0), min(high, 1.0)
                ax.errorbar(x, seeds.mean(), yerr=[[seeds.mean() - low], [high - seeds.mean()]], color="black",
                            capsize=3, linewidth=0.8)
                top = max(top, high)
            ax.scatter([x] * len(seeds), seeds, color="black", s=10, zorder=3)
            if unguided:  # above its interval and points, clear of both
                ax.annotate("unguided", (x, top), xytext=(0, 3), textcoords="offset points", rotation=90, fontsize=6,
                            ha="center", va="bottom")
    counts = [table.loc[table[key] == method, "run"].nunique() for method in methods]
    ax.set_xticks(range(len(methods)), [f"{method}\n{n} seeds" if n > 1 else f"{method}\n1 seed: no interval"
                                        for method, n in zip(methods, counts)])
    for label, method in zip(ax.get_xticklabels(), methods):
        label.set_color(colours[method])
    ax.set_ylabel("held-out success")
    ax.set_title("held-out success per seed, mean and 95% t interval (within [0, 1])", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    legend = [Patch(facecolor="#777777", alpha=alpha, hatch=hatch, edgecolor="black", label=label)
              for _, label, alpha, hatch in HELDOUT_BARS]
    if any_unguided:
        legend.append(Patch(facecolor="white", hatch="//", edgecolor="black", label="with exp., unguided"))
    ax.legend(handles=legend, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the axes
    fig.tight_layout()
    return fig


EXTRACTOR_DIAGNOSTICS = ("valid", "cut", "empty", "lesson_tokens", "guided_minus_free")
"""What :func:`extractor_diagnostics` reports, over the whole run and (``_last_quarter``) over its last quarter."""


def extractor_diagnostics(metrics: pd.DataFrame) -> pd.DataFrame:
    """Does the extractor write usable experience? One row per method with an extractor and env, from the ``train``
    rows of its seeds (:func:`comprl.runs.load_metrics`) and their ``after_training`` rows (async runs: the replies
    finished after the last training row, counted with the last step's; :func:`comprl.loop.run_experiment`):

    - ``replies``: extractor replies (distillations and merges); ``valid``, ``cut``, ``empty``: the fractions of
      them that were applied, that reached the token cap without ending, and that held no text (pooled over the
      steps and seeds, each reply counting once);
    - ``lesson_tokens``: generated tokens of a valid reply, on average;
    - ``guided_minus_free``: the mean over the steps that have one (``guided_minus_free_steps`` of them, seeds
      pooled) of the step's guided-minus-free success, read on the groups whose guided half was shown an entry;

    each over the whole run, and again (``_last_quarter`` columns) over each run's last quarter of steps (the steps
    after three quarters of its last one). NaN where a run logged none of it (runs from before these columns
    existed have no ``cut``, ``empty`` or ``lesson_tokens``).
    """
    from comprl.runs import AFTER_TRAINING

    keys = ["method", "env_id"]
    train = metrics[metrics["phase"].isin(("train", AFTER_TRAINING))] if "phase" in metrics else metrics.iloc[0:0]
    if "extractor_outputs" in train:
        train = train[train.groupby(keys)["extractor_outputs"].transform("sum") > 0]
    else:
        train = train.iloc[0:0]
    late = train[train["step"] > 0.75 * train.groupby("run")["step"].transform("max")]
    columns = ["seeds", "replies", *EXTRACTOR_DIAGNOSTICS, "guided_minus_free_steps"]
    rows = []
    for (method, env), runs in train.groupby(keys, sort=False):
        row = {"method": method, "env_id": env, "seeds": runs["run"].nunique()}
        last = late[(late["method"] == method) & (late["env_id"] == env)]
        for suffix, part in (("", runs), ("_last_quarter", last)):
            row.update({f"{name}{suffix}": value for name, value in _reply_diagnostics(part).items()})
        rows.append(row)
    ordered = keys + columns[:1] + [f"{c}{s}" for s in ("", "_last_quarter") for c in columns[1:]]
    return pd.DataFrame(rows, columns=ordered)


LESSON_WRITES = ("add", "update")
"""The bank operations that carry a lesson's text as the extractor wrote it (distillations, merges, rewrites)."""


def preamble_share(runs: Iterable[str | Path]) -> tuple[int, float]:
    """(lessons the runs' extractors wrote into their banks, the share of them that end with a colon), from each
    run's bank log (:meth:`comprl.runs.Run.bank_operations`). A lesson ending in a colon ("Task:", "Here is the
    lesson:") announces text that is not there: until issue 68 a note stopped at its first newline, so a model
    that put a label on a line of its own wrote the label alone, which passed validation though it says nothing
    (a note's label is now joined with the lesson line after it, or the reply refused as ``label_only``).
    NaN for the share where no lesson was written."""
    from comprl.runs import Run

    texts = [
        ops.loc[ops["op"].isin(LESSON_WRITES), "content"].dropna().str.strip()
        for ops in (Run(Path(run)).bank_operations() for run in runs)
    ]
    lessons = pd.concat(texts, ignore_index=True) if texts else pd.Series(dtype=str)
    return len(lessons), float(lessons.str.endswith(":").mean()) if len(lessons) else float("nan")


def _reply_diagnostics(rows: pd.DataFrame) -> dict[str, float]:
    """The columns of :func:`extractor_diagnostics` but ``seeds`` over some training rows, counts pooled."""

    def share(count: str, of: str) -> float:
        """``count`` summed over ``of`` summed, on the rows that logged ``count`` (NaN when none did)."""
        if count not in rows:
            return float("nan")
        logged = rows[rows[count].notna()]
        whole = logged[of].sum()
        return float(logged[count].sum() / whole) if whole else float("nan")

    gains = rows["guided_minus_free"].dropna() if "guided_minus_free" in rows else pd.Series(dtype=float)
    return {
        "replies": float(rows["extractor_outputs"].sum()),
        "valid": share("extractor_valid", "extractor_outputs"),
        "cut": share("extractor_cut", "extractor_outputs"),
        "empty": share("extractor_empty", "extractor_outputs"),
        "lesson_tokens": share("extractor_valid_tokens", "extractor_valid"),
        "guided_minus_free": float(gains.mean()) if len(gains) else float("nan"),
        "guided_minus_free_steps": float(len(gains)),
    }


def markdown_table(table: pd.DataFrame) -> str:
    """A frame as a markdown pipe table, numbers to 3 decimals (pandas' own needs the optional tabulate)."""
    cells = [
        ["" if pd.isna(value) else str(value).replace("|", "\\|").replace("\n", " ") for value in row]
        for row in table.round(3).itertuples(index=False)
    ]
    rows = [[str(column) for column in table.columns], ["---"] * len(table.columns), *cells]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)
