"""The verdicts of ``results/REPORT.md``: each paper claim read against this reproduction's per-seed numbers
(:func:`claims`), each seed's collapse (:func:`collapse_table`), and the power of a design before it runs
(:func:`detectable_difference`).

A claim is "reproduced" where our change points the paper's way and a two-sided 5% t test over seeds
(:mod:`comprl.kit.stats`) calls it beyond the noise: Welch's t with its Welch-Satterthwaite degrees of freedom for two
arms, the paired t (n - 1 df) for the same runs evaluated with and without experience; "opposite" where it points the
other way beyond the noise, and "inconclusive" within it: a change inside the noise says nothing either way. The verdict
gives t and its df. The ``detectable at 80% power`` column is the true difference the seeds behind the claim would find
four times in five, ``(t_{0.975, df} + t_{0.80, df}) x SE``. Each claim has one pre-declared comparison with a
verdict; other readings of the same claim are shown as context, never tested.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
from scipy.stats import fisher_exact

from comprl.kit import paper
from comprl.kit.report import COLLAPSE_FALL, held_out, preamble_share, run_key, seed_collapse
from comprl.kit.stats import (
    LEVEL, POWER, TComparison, critical_t, detectable, paired_comparison, paired_from_discordant, welch_comparison,
)

SEED_SD = 0.13
"""The spread over training seeds of a run's true held-out success, for planning (:func:`detectable_difference`):
the committed cpu reproduction's single-task runs (01: sd over seeds of final success 0.149 pooled over its four
methods; 04: 0.158 over its five variants), less the binomial part of their 32 evaluation episodes (0.078), leave
0.127 and 0.137. Source: ours, measured (issue 46)."""

PAPER_MIXTURE = ("room", "webshop", "alfworld")
"""The tasks of the paper's Table 1 (a mixture of other tasks is no row of that table)."""

HEADER = (
    "| claim | paper | step 0 | this run | this run - paper | detectable at 80% power | shown an entry | verdict |",
    "|---|---|---|---|---|---|---|---|",
)


def detectable_difference(sd: float, n_seeds: int, episodes: int | None = None, success: float = 0.5) -> float:
    """The true difference of mean success between two methods that ``n_seeds`` seeds each find with 80% power
    (:func:`comprl.kit.stats.detectable`: Welch's t at 5%, two-sided, whose df is ``2 x (n_seeds - 1)`` for two
    arms of equal size and spread) from the standard error of the difference of two independent means. ``sd``: the
    spread of one seed's result over seeds. Measured from finished runs, it already holds the evaluation's own
    noise: leave ``episodes`` out. Before any run, give the training seeds' spread (:data:`SEED_SD`) and
    ``episodes``, the held-out episodes each seed is scored on: their binomial variance at ``success`` (0.5: the
    largest) is added."""
    if n_seeds < 2:
        raise ValueError(f"n_seeds={n_seeds!r}: a spread over seeds needs at least 2 seeds")
    if sd < 0 or pd.isna(sd):
        raise ValueError(f"sd={sd!r}: a standard deviation is a number >= 0")
    if episodes is not None and episodes < 1:
        raise ValueError(f"episodes={episodes!r}: at least 1 evaluation episode, or None for a measured sd")
    if not 0 <= success <= 1:
        raise ValueError(f"success={success!r}: a success rate is between 0 and 1")
    variance = sd**2 + (0.0 if episodes is None else success * (1 - success) / episodes)
    return detectable((2 * variance / n_seeds) ** 0.5, 2 * (n_seeds - 1))


def verdict(paper_change: float, change: TComparison | None) -> str:
    """"reproduced" where ``change`` (ours, from our reference: :func:`difference`) has the sign of ``paper_change``
    (the paper's, from its reference) and its two-sided t test gives p < :data:`comprl.kit.stats.LEVEL`;
    "opposite" where it has the other sign beyond the noise; "inconclusive" within it; each with t and its df.
    Without a spread (under two seeds a side) no verdict. Seeds that all moved by the same amount (SE 0) leave no t:
    a nonzero change is then beyond the noise, and the verdict says so."""
    if change is None or not change.tested:
        return "no verdict (under 2 seeds)"
    moved = round(change.difference, 9)  # means of the same numbers differ by rounding, not by a direction
    if change.se == 0:
        reading = "SE 0: every seed moved by the same amount, no t"
    else:
        reading = f"t = {change.t:+.2f}, {change.df_text}, p = {change.p:.3f}"
    if moved == 0 or not change.significant:
        return f"inconclusive ({reading})"
    return f"{'reproduced' if (moved > 0) == (paper_change > 0) else 'opposite'} ({reading})"


def difference(ours: pd.Series, reference: pd.Series, paired: bool = False) -> TComparison:
    """Mean of ``ours`` minus mean of ``reference`` (values per seed, indexed by seed; NaN left out) with its
    standard error and degrees of freedom: Welch's (:func:`comprl.kit.stats.welch_comparison`), or with ``paired``
    (both are the same runs measured twice, with and without experience) the paired t on the seeds both have
    (:func:`comprl.kit.stats.paired_comparison`). Untested (SE None) where a side has under two seeds."""
    ours, reference = ours.dropna(), reference.dropna()
    if paired:
        seeds = ours.index.intersection(reference.index)
        return paired_comparison(ours[seeds].to_numpy(), reference[seeds].to_numpy())
    return welch_comparison(ours.to_numpy(), reference.to_numpy())


def shown(runs: pd.DataFrame) -> tuple[str, bool]:
    """How many of the last with-experience evaluations' episodes were shown an entry, "k/n" summed over seeds
    ("not logged" for runs from before the count), and whether none was (such an evaluation was unguided)."""
    if runs.empty or runs["shown_after"].isna().any():
        return "not logged", False
    total = runs["shown_after"].sum()
    return f"{int(total)}/{int(runs['episodes_after'].sum())}", total == 0


def claims(root: Path) -> list[str]:
    """One row per paper claim (:data:`HEADER`): the paper's number, ours at step 0 (the untrained actor) and after
    training, ours minus the paper's, the smallest difference our seeds detect, how many evaluation episodes with
    experience were shown an entry, and the verdict (:func:`verdict`). An evaluation "with experience" that showed
    no episode an entry is called unguided, never "with experience"."""
    out = list(HEADER)
    frames = {nb: _held_out(root, nb) for nb in ("01_single_task", "02_multitask", "03_extractor_size",
                                                 "04_ablations")}
    single = frames["01_single_task"]
    if single is not None and {"baseline", "comp_rl"} <= set(single["method"]):
        out += _single_task_claims(single)
    multi = frames["02_multitask"]
    if multi is not None:
        out += _mixture_claims(multi)
        if not any(_is_paper_mixture(env_id) for env_id in multi["env_id"].unique()):
            out.append(_paper_mixture_not_run())
    sizes = frames["03_extractor_size"]
    # the arms that differ in size alone: in the notebook's order (the smallest first), without the lesson grammar
    table = _read(root, "03_extractor_size", "summary.csv")
    grammar = set() if table is None or "lesson_grammar" not in table else set(
        table.loc[table["lesson_grammar"].astype(bool), "extractor"]
    )
    names = [] if sizes is None else [name for name in dict.fromkeys(sizes["extractor"]) if name not in grammar]
    if len(names) >= 2:
        side = _sides(sizes, "extractor")
        small, large = names[0], names[-1]
        before = difference(side(large, "guided_success_before"), side(small, "guided_success_before")).difference
        change = difference(side(large, "guided_success_after"), side(small, "guided_success_after"))
        entry, _ = shown(sizes[sizes["extractor"] == large])
        out.append(_line(f"larger extractor ({large} over {small}): success with experience, gain",
                         paper.LARGER_EXTRACTOR_GAIN, before, change.difference, change, paper.LARGER_EXTRACTOR_GAIN,
                         entry, fmt="{:+.3f}"))
    ablations = frames["04_ablations"]
    if ablations is not None and "comp_rl" in set(ablations["variant"]):
        side = _sides(ablations, "variant")
        falls = seed_collapse(pd.read_csv(root / "04_ablations" / "metrics.csv")).set_index("variant")
        for variant, direction in paper.ABLATIONS.items():
            if variant not in set(ablations["variant"]):
                continue
            before = difference(side(variant, "guided_success_before"),
                                side("comp_rl", "guided_success_before")).difference
            change = difference(side(variant, "guided_success_after"), side("comp_rl", "guided_success_after"))
            entry, _ = shown(ablations[ablations["variant"] == variant])
            # a collapse ablation's one claim is its collapse count; its success row is context
            context = "context: this ablation's claim is its collapse row" if direction == "collapse" else ""
            out.append(_line(f"ablation {variant}: held-out success with experience, minus comp_rl's", "lower",
                             before, change.difference, change, -1.0, entry, fmt="{:+.3f}", untested=context))
            if direction == "collapse":
                out.append(_collapse_line(variant, falls))
    latency = _read(root, "05_latency_analysis", "overhead.csv")
    if latency is not None and "rollout_ratio" in latency:
        out += _latency_claims(latency)
    return out if len(out) > len(HEADER) else ["No notebook results yet."]


def _collapse_line(variant: str, falls: pd.DataFrame) -> str:
    """The row of a collapse ablation (``falls``: :func:`comprl.kit.report.seed_collapse` indexed by variant): its
    seeds collapsed against comp_rl's, judged by Fisher's exact two-sided test on the two counts, with the smallest
    p-value the two seed counts can reach (3 against 3 seeds: 0.1, never significant)."""
    counts = [int(falls.loc[[name], "collapsed"].sum()) for name in (variant, "comp_rl")]
    seeds = [len(falls.loc[[name]]) for name in (variant, "comp_rl")]
    p_value = fisher_exact([[counts[0], seeds[0] - counts[0]], [counts[1], seeds[1] - counts[1]]]).pvalue
    floor = fisher_exact([[seeds[0], 0], [0, seeds[1]]]).pvalue
    reading = f"Fisher's exact p = {p_value:.3f}"
    if floor >= LEVEL:
        reading += f"; at {seeds[0]} and {seeds[1]} seeds its smallest is {floor:.3f}: cannot reach significance"
    if p_value < LEVEL:
        judged = f"{'reproduced' if counts[0] > counts[1] else 'opposite'} ({reading})"
    else:
        judged = f"inconclusive ({reading})"
    return (f"| ablation {variant}: seeds collapsed (fell >= {COLLAPSE_FALL:g} below their best) | a collapse | - | "
            f"{counts[0]}/{seeds[0]} (comp_rl {counts[1]}/{seeds[1]}) | - | - | - | {judged} |")


def _single_task_claims(single: pd.DataFrame) -> list[str]:
    """The single-task figures' ratios (comp_rl's success over the baseline's, the baseline's actions per episode
    over comp_rl's). Each claim's one pre-declared comparison is comp_rl evaluated with its bank (the method as it
    is used, with how many episodes were shown an entry); the paper's figures do not say which, and reading both
    would give two chances at a verdict. The reading without the bank (the actor alone) is shown beneath as
    context, never tested. The baseline has no bank, so its side is the same in both."""
    side = _sides(single, "method")
    entry, unguided = shown(single[single["method"] == "comp_rl"])
    out = []
    for column, reported, unit in (("success", paper.SINGLE_TASK_SPEEDUP, " success"),
                                   ("episode_length", paper.FEWER_ACTIONS["room"], " actions")):
        baseline = {when: side("baseline", f"{column}_{when}") for when in ("before", "after")}
        for prefix, how, shown_here, untested in (
            ("guided_", "unguided (no entry shown)" if unguided else "with experience", entry,
             "no entry shown" if unguided else ""),
            ("", "without experience", "-", "context: the claim's one test is the row with its bank"),
        ):
            comp_rl = {when: side("comp_rl", f"{prefix}{column}_{when}") for when in ("before", "after")}
            if column == "success":
                ours, theirs, text = comp_rl, baseline, f"comp_rl {how} / baseline success"
            else:  # fewer actions: the baseline's over comp_rl's
                ours, theirs, text = baseline, comp_rl, f"baseline / comp_rl {how} actions per episode"
            ratios = [_ratio(ours[when].mean(), theirs[when].mean()) for when in ("before", "after")]
            change = difference(ours["after"], theirs["after"])
            out.append(_line(f"single task Room: {text}", reported, ratios[0], ratios[1], change, reported - 1,
                             shown_here, fmt="{:.2f}", unit="x", detect_unit=unit, untested=untested))
    return out


def _is_paper_mixture(env_id: str) -> bool:
    """Whether a run's ``env_id`` (a mixture's is its tasks joined by "+") is the paper's Table 1 mixture."""
    return sorted(env_id.split("+")) == sorted(PAPER_MIXTURE)


def _paper_mixture_not_run() -> str:
    """The row that keeps the paper's mixture in the table where notebook 02 trained only others (the cpu profile's
    ``laptop-2``): what the paper reports, and why it is no test here."""
    rows = paper.TABLE_1_3_TASK
    gain = rows["Complementary RL, eval with exp."]["avg"] - rows["Baseline GRPO (no experience)"]["avg"]
    return (f"| 3-task Table 1 (the paper's mixture, {'+'.join(PAPER_MIXTURE)}): Complementary RL with experience "
            f"minus baseline, avg success | {gain:+.3f} | - | not run | - | - | - | not a test: not run here (at the "
            "cpu profile WebShop and ALFWorld were never won, by any method or seed of the 2026-11-27 reproduction "
            "nor by a random policy within 30 turns; `comprl.kit.reproduce.MIXTURES_RUN`) |")


def _mixture_claims(frame: pd.DataFrame) -> list[str]:
    """Table 1 on the paper's mixture (each row against the baseline's, with experience minus without per
    method) and the task-scaling gain on every task count (the Complementary RL row with experience minus the
    baseline), from notebook 02's per-seed rows (:func:`comprl.kit.report.held_out`). The paper gives the gain at 3
    and 6 tasks (:data:`comprl.kit.paper.TASK_SCALING_GAIN`); on another count (cpu's 2-task ``laptop-2``, the
    single Room) the row reads the paper's direction, "higher": Complementary RL above the baseline at every task
    count the paper trains (1.3x on one task)."""
    out: list[str] = []
    scaling: dict[int, str] = {}
    baseline_label = paper.TABLE_ROWS[0][0]
    paper_base = paper.TABLE_1_3_TASK[baseline_label]["avg"]
    for env_id, runs in frame.groupby("env_id", sort=False):
        tasks = env_id.split("+") if "+" in env_id else [env_id]
        side = _sides(runs, "method")
        if "baseline" not in set(runs["method"]):
            continue
        base_after, base_before = side("baseline", "success_after"), side("baseline", "success_before")
        if _is_paper_mixture(env_id):
            for label, method, guided in paper.TABLE_ROWS:
                if method not in set(runs["method"]):
                    continue
                prefix = "guided_" if guided else ""
                entry, unguided = shown(runs[runs["method"] == method]) if guided else ("-", False)
                text = label.replace("eval with exp.", "eval unguided (no entry shown)") if unguided else label
                after, before = side(method, f"{prefix}success_after"), side(method, f"{prefix}success_before")
                reported = paper.TABLE_1_3_TASK[label]["avg"]
                is_base = method == "baseline"
                change = None if is_base else difference(after, base_after)
                out.append(_line(f"3-task Table 1, {text}: avg success", reported, before.mean(), after.mean(),
                                 change, None if is_base else reported - paper_base, entry, sd=after.std()))
            for method in ("static", "comp_rl"):
                labels = [lab for lab, m, _ in paper.TABLE_ROWS if m == method]
                if method not in set(runs["method"]) or len(labels) != 2:
                    continue
                entry, unguided = shown(runs[runs["method"] == method])
                reported = paper.TABLE_1_3_TASK[labels[0]]["avg"] - paper.TABLE_1_3_TASK[labels[1]]["avg"]
                before = difference(side(method, "guided_success_before"), side(method, "success_before"),
                                    True).difference
                change = difference(side(method, "guided_success_after"), side(method, "success_after"), True)
                out.append(_line(f"3-task Table 1, {method}: eval with experience minus without", reported, before,
                                 change.difference, change, reported, entry, fmt="{:+.3f}",
                                 untested="no entry shown" if unguided else ""))
        if "comp_rl" in set(runs["method"]):
            entry, unguided = shown(runs[runs["method"] == "comp_rl"])
            # a task count the paper gives no number for is judged on the paper's direction (above the baseline)
            gain = paper.TASK_SCALING_GAIN.get(len(tasks))
            before = difference(side("comp_rl", "guided_success_before"), base_before).difference
            change = difference(side("comp_rl", "guided_success_after"), base_after)
            how = "unguided (no entry shown)" if unguided else "with experience"
            count = f"{len(tasks)} task{'s' if len(tasks) > 1 else ''}"
            text = f"task scaling, {count} ({'+'.join(tasks)}): comp_rl {how} minus baseline"
            scaling[len(tasks)] = _line(text, "higher" if gain is None else gain, before, change.difference, change,
                                        1.0 if gain is None else gain, entry, fmt="{:+.3f}")
    return out + [scaling[n] for n in sorted(scaling)]


def _line(
    text: str, reported: Any, before: Any, ours: Any, change: TComparison | None,
    paper_change: float | None, entry: str = "-", sd: Any = None, fmt: str = "{:.3f}", unit: str = "",
    untested: str = "", detect_unit: str = "",
) -> str:
    """One row of :data:`HEADER`. ``reported``: the paper's number (or its words, as "lower"); ``before``/``ours``:
    our number at step 0 and after training; ``change``: our difference of means behind the verdict, with its
    standard error and df (:func:`difference`); ``paper_change``: the paper's difference it is read against (None:
    no verdict); ``entry``: :func:`shown`'s count; ``untested``: why the row is no test where it is none (an
    evaluation that showed no entry compared with one that showed none either; a reading other than the claim's
    pre-declared comparison); ``detect_unit``: the unit of the detectable difference where it is not the row's own
    (a ratio row is judged on the difference under it)."""

    def show(value: Any, form: str = fmt) -> str:
        if isinstance(value, str):
            return value
        return "-" if value is None or pd.isna(value) else form.format(value) + unit

    signed = fmt if fmt.startswith("{:+") else fmt.replace("{:", "{:+", 1)  # a delta always shows its sign
    numbers = not any(v is None or isinstance(v, str) or pd.isna(v) for v in (reported, ours))
    delta = show(ours - reported, signed) if numbers else "-"
    spread = "" if sd is None or pd.isna(sd) else f" (sd {sd:.3f} over seeds)"
    power = None if change is None else change.detectable
    found = "-" if power is None else f"{power:.3f}{detect_unit}"
    if untested:
        judged = f"not a test ({untested})"
    else:
        judged = "-" if change is None or paper_change is None else verdict(paper_change, change)
    return (f"| {text} | {show(reported)} | {show(before)} | {show(ours)}{spread} | {delta} | {found} | {entry} "
            f"| {judged} |")


def _latency_claims(latency: pd.DataFrame) -> list[str]:
    """The background track's rollout time against no experience: per batch size where notebook 05 repeated its
    rounds (``rollout_ratio_low``/``_high``: a 95% t interval over rounds), else the range over batch sizes. The
    paper's claim is an absence (0.98-1.00x), so the verdict reads each interval against
    :data:`comprl.kit.latency.ASYNC_TARGET` (:func:`comprl.kit.latency.async_meets_target`): "reproduced" where
    every batch size's interval lies at or under it, "opposite" where one lies wholly above it (async measurably
    slows the rollouts), else "inconclusive"; ``detectable at 80% power`` is read off the widest interval: its
    half-width over the critical t of ``rounds - 1`` df is its standard error. One round gives no interval and no
    verdict."""
    from comprl.kit.latency import ASYNC_TARGET, async_meets_target

    rows = latency[latency["mode"] == "async"]
    if rows.empty:
        return []
    rounds = int(rows["rounds"].min()) if "rounds" in rows else 1
    text = "background track: rollout time vs baseline"
    if rounds > 1:
        shown_ratios = "; ".join(
            f"b{int(r.batch_size)} {r.rollout_ratio:.2f}x [{r.rollout_ratio_low:.2f}, {r.rollout_ratio_high:.2f}]"
            for r in rows.itertuples()
        )
        text += f" (mean and 95% t interval over {rounds} rounds)"
        half = float(((rows["rollout_ratio_high"] - rows["rollout_ratio_low"]) / 2).max())
        found = f"{detectable(half / critical_t(rounds - 1), rounds - 1):.2f}x"
        judged = {True: "reproduced", False: f"opposite (an interval above {ASYNC_TARGET:g}x)",
                  None: f"inconclusive (an interval spans {ASYNC_TARGET:g}x)"}[async_meets_target(latency)]
    else:
        shown_ratios = f"{rows['rollout_ratio'].min():.2f}-{rows['rollout_ratio'].max():.2f}x (one round)"
        found, judged = "-", "no verdict (one round)"
    return [f"| {text} | 0.98-1.00x | - | {shown_ratios} | - | {found} | - | {judged} |"]


DIAGNOSED = ("01_single_task", "03_extractor_size")
"""The notebooks that write ``extractor_diagnostics.csv`` (:func:`comprl.kit.report.extractor_diagnostics`)."""


def diagnostics(root: Path) -> list[str]:
    """Which side holds the method back, read directly (issue 46), in words and one table:

    - can the actor use good experience? notebook 01's ``reference_bank.csv``: the untrained actor on the same
      held-out episodes free and guided by a bank of lessons from the task's expert; the two differ only where the
      pre-declared test, the exact two-sided sign test on the episodes that one pass won alone (paired binary
      outcomes: McNemar's exact test), gives p < :data:`comprl.kit.stats.LEVEL`. The line also gives the paired
      difference and its SE (:func:`comprl.kit.stats.paired_from_discordant`; no t interval: with a handful of
      discordant episodes its normal approximation does not hold, and the sign test is the one test), and where the
      discordant episodes are too few for any outcome of them to reach significance, says so and the smallest p
      they could give;
    - does the extractor write usable experience? per arm of :data:`DIAGNOSED`: its replies (valid, cut at the token
      cap, empty; tokens of a valid lesson, from ``extractor_diagnostics.csv``) and, during training, the success of
      the group's half shown an entry minus the other half's (``guided_minus_free``), averaged per seed and judged as
      the claims are: the paired t of the per-seed means against 0 (n - 1 df) at 5%, or inconclusive."""
    out: list[str] = []
    reference = _read(root, "01_single_task", "reference_bank.csv")
    for row in [] if reference is None else reference.itertuples():
        pairs = paired_from_discordant(int(row.episodes), int(row.won_only_guided), int(row.won_only_free))
        if not pairs.discordant:
            judged = "no episode told the two passes apart"
        elif pairs.sign_p < LEVEL:
            judged = "guided better" if pairs.a_only > pairs.b_only else "guided worse"
        elif pairs.smallest_sign_p >= LEVEL:
            judged = (f"inconclusive: with {pairs.discordant} discordant episodes the smallest p the test can reach "
                      f"is {pairs.smallest_sign_p:.3f}, so it cannot reach significance")
        else:
            judged = f"inconclusive (p >= {LEVEL:g})"
        error = f"SE {pairs.se:.3f}" if pairs.tested and pairs.se > 0 else pairs.note
        paired = f"guided - free {pairs.difference:+.3f}, {error}"
        out.append(
            f"- **Can the actor use good experience?** `{row.env_id}`, the untrained actor on the same "
            f"{int(row.episodes)} held-out episodes: free {row.free_success:.3f} (95% Wilson {row.free_low:.3f}-"
            f"{row.free_high:.3f}), guided by the reference bank {row.guided_success:.3f} ({row.guided_low:.3f}-"
            f"{row.guided_high:.3f}; {int(row.guided_with_entry)} episodes shown an entry); {int(row.won_only_guided)} "
            f"episodes won only guided, {int(row.won_only_free)} only free ({paired}): exact sign test p = "
            f"{pairs.sign_p:.3f}, {judged}."
        )
    rows = []
    for notebook in DIAGNOSED:
        metrics, table = _read(root, notebook, "metrics.csv"), _read(root, notebook, "extractor_diagnostics.csv")
        if metrics is None or table is None or "guided_minus_free" not in metrics:
            continue
        key = run_key(metrics)
        train = metrics[metrics["phase"] == "train"]
        for arm in table.itertuples(index=False):
            name = getattr(arm, key)
            rows_of_arm = train[(train[key] == name) & (train["env_id"] == arm.env_id)]
            seeds = rows_of_arm.groupby("seed")["guided_minus_free"].mean().dropna()
            written, preambles = preamble_share(root / notebook / run for run in rows_of_arm["run"].unique())
            gain = paired_comparison(seeds.to_numpy(), [0.0] * len(seeds))  # per seed, guided minus free
            judged = verdict(1.0, gain) if len(seeds) else "-"
            for word, reading in (("reproduced", "guided above free"), ("opposite", "guided below free")):
                judged = judged.replace(word, reading, 1) if judged.startswith(word) else judged
            rows.append(
                f"| {notebook} | {name} | {arm.env_id} | {len(seeds)} | {arm.valid:.3f} | {arm.cut:.3f} | "
                f"{arm.empty:.3f} | {f'{preambles:.3f} of {written}' if written else '-'} | {arm.lesson_tokens:.1f} | "
                f"{'-' if seeds.empty else f'{seeds.mean():+.3f}'} | "
                f"{'-' if gain.detectable is None else f'{gain.detectable:.3f}'} | {judged} |"
            )
    if rows:
        out += [
            "",
            "**Does the extractor write usable experience?** Its replies over training (valid, cut at the token cap, "
            "empty: shares of its replies; tokens of a valid lesson), the lessons it wrote into the bank that end "
            "with a colon (`preamble`: a label such as \"Task:\" whose lesson is not there, since a note stops at its "
            "first newline; valid all the same), and the success of each group's half shown an entry minus its free "
            "half's during training, averaged per seed (`guided - free`), with the difference its seeds would find at "
            f"{POWER:.0%} power (a paired t over seeds, n - 1 df):",
            "",
            "| notebook | arm | env_id | seeds | valid | cut | empty | preamble | lesson tokens | guided - free | "
            "detectable at 80% power | reading |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    return out


def collapse_table(root: Path) -> pd.DataFrame:
    """Per notebook and method (:func:`comprl.kit.report.run_key`): seeds, how many collapsed
    (:func:`comprl.kit.report.seed_collapse`), and the worst fall of training and of held-out success."""
    rows = []
    for notebook in ("01_single_task", "02_multitask", "03_extractor_size", "04_ablations"):
        metrics = _read(root, notebook, "metrics.csv")
        if metrics is None or metrics.empty:
            continue
        falls = seed_collapse(metrics)
        key = run_key(metrics)
        for (method, env_id), group in falls.groupby([key, "env_id"], sort=False):
            rows.append({"notebook": notebook, "method": method, "env_id": env_id, "seeds": len(group),
                         "collapsed": int(group["collapsed"].sum()), "worst_train_fall": group["train_fall"].min(),
                         "worst_held_out_fall": group["held_out_fall"].min()})
    return pd.DataFrame(rows)


def planned_power(runs: Mapping[str, Sequence[Any]]) -> list[str]:
    """Per notebook (``runs``: its run configs), the true difference of held-out success that two of its arms
    detect at 80% power with their seeds and evaluation episodes: :func:`detectable_difference` at :data:`SEED_SD`
    and success 0.5. An arm is a config but for its seed; a notebook whose arms differ in seeds or episodes (01's
    diagnostic methods run on fewer seeds) gives each design. 05's timing runs, which do not evaluate, are left out.
    Usable before any run, from the planned configs."""
    parts = []
    for notebook, configs in runs.items():
        arms: dict[str, tuple[set[int], int]] = {}
        for config in configs:
            if config.eval_episodes > 0:
                key = json.dumps({**config.to_dict(), "seed": None}, sort_keys=True, default=str)
                arms.setdefault(key, (set(), config.eval_episodes))[0].add(config.seed)
        designs = sorted({(len(seeds), episodes) for seeds, episodes in arms.values()}, reverse=True)
        if designs:
            parts.append(f"{notebook} " + ", ".join(_power(seeds, episodes) for seeds, episodes in designs))
    if not parts:
        return []
    return [f"- power (the true difference of two arms' means a two-sided {LEVEL:.0%} Welch t test finds at "
            f"{POWER:.0%} power, at a spread over seeds of {SEED_SD} and success 0.5): " + "; ".join(parts)]


def _power(seeds: int, episodes: int) -> str:
    """One design of :func:`planned_power`: its seeds and episodes, and what they detect."""
    if seeds < 2:
        return f"{seeds} seed x {episodes} held-out episodes per task: no spread over seeds, so no verdict"
    return (f"{seeds} seeds x {episodes} held-out episodes per task detect at {POWER:.0%} power a difference of "
            f"{detectable_difference(SEED_SD, seeds, episodes):.3f}")


def _read(root: Path, notebook: str, name: str) -> pd.DataFrame | None:
    path = root / notebook / name
    return pd.read_csv(path) if path.exists() else None


def _held_out(root: Path, notebook: str) -> pd.DataFrame | None:
    """A notebook's per-seed first and last evaluations (:func:`comprl.kit.report.held_out`), None where it has no
    metric rows."""
    metrics = _read(root, notebook, "metrics.csv")
    return None if metrics is None or metrics.empty else held_out(metrics)


def _sides(frame: pd.DataFrame, key: str) -> Callable[[str, str], pd.Series]:
    """``(name, column) -> values per seed`` of the runs whose ``key`` is ``name``, indexed by seed."""
    def side(name: str, column: str) -> pd.Series:
        runs = frame[frame[key] == name]
        return pd.Series(runs[column].to_numpy(dtype=float), index=runs["seed"].to_numpy())
    return side


def _ratio(a: float, b: float) -> float | None:
    return None if not b or pd.isna(b) else a / b
