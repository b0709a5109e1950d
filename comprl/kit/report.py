"""The paper's tables and figures from metric rows (:func:`comprl.runs.load_metrics`): success before and after
training per method, Table 1 per task, and learning curves.
"""

from __future__ import annotations

from typing import Any

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


def plot_learning_curves(
    metrics: pd.DataFrame, metric: str = "success_rate", phase: str = "train", ax: Any = None
) -> Any:
    """Mean (+/- min-max band over seeds) of ``metric`` against step, one line per method. Returns the figure."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3.2))
    else:
        fig = ax.figure
    rows = metrics[metrics["phase"] == phase]
    for method, group in rows.groupby("method"):
        stats = group.groupby("step")[metric].agg(["mean", "min", "max"])
        ax.plot(stats.index, stats["mean"], marker="o", label=method)
        ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2)
    ax.set_xlabel("actor step")
    ax.set_ylabel(metric.replace("_", " "))
    envs = ", ".join(sorted(rows["env_id"].unique())) if "env_id" in rows else ""
    ax.set_title(envs, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


EXTRACTOR_DIAGNOSTICS = ("valid", "cut", "empty", "lesson_tokens", "guided_minus_free")
"""What :func:`extractor_diagnostics` reports, over the whole run and (``_last_quarter``) over its last quarter."""


def extractor_diagnostics(metrics: pd.DataFrame) -> pd.DataFrame:
    """Does the extractor write usable experience? One row per method with an extractor and env, from the ``train``
    rows of its seeds (:func:`comprl.runs.load_metrics`):

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
    keys = ["method", "env_id"]
    train = metrics[metrics["phase"] == "train"] if "phase" in metrics else metrics.iloc[0:0]
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
