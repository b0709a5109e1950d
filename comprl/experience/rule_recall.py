"""Rule recall of the live bank: the share of its lessons that state the hidden fact of their own task instance.

On a task whose instances each hide a fact that a lesson can state (a vault's secret moves;
:data:`comprl.envs.SECRET_CHECKS`), an entry distilled from an episode names that episode's seed in its source
(``step<N>/episode<I>/seed<S>``, :attr:`~comprl.experience.interface.Episode.source`), and
:func:`comprl.envs.lesson_states_secret` says whether the entry's text (title and content, what the actor is
shown) states the fact of seed S. Merged entries and entries written by anything but a distillation name no seed
and are not judged. The loop's ``rule_recall_shown`` (:mod:`comprl.loop`) is the same judgement of the entries
the guided rollouts were shown.
"""

from __future__ import annotations

import math

import pandas as pd

from comprl.envs import SECRET_CHECKS, lesson_states_secret
from comprl.envs.mixture import task_name
from comprl.experience.bank import ExperienceBank
from comprl.experience.interface import seed_of


class RuleRecall:
    """``rule_recall_live`` and ``rule_recall_judged`` of the live bank, each entry judged once (an entry's text
    and source never change: an update writes a new entry)."""

    def __init__(self, tasks: tuple[str, ...]) -> None:
        self.tasks = tuple(task for task in tasks if task in SECRET_CHECKS)
        """The run's tasks that hide a fact; no metric without one."""
        self.several = len(tasks) > 1
        """Whether the run has several tasks, whose metrics are then also given per task (``vault_...``)."""
        self._verdicts: dict[int, bool | None] = {}

    def live(self, bank: ExperienceBank) -> dict[str, float]:
        """Over the live entries of the tasks with a hidden fact whose source names a seed: how many there are
        (``rule_recall_judged``) and the share that state their seed's fact (``rule_recall_live``, NaN for none);
        also per task under its short name when the run has several tasks. Empty when no task hides a fact."""
        if not self.tasks:
            return {}
        entries = bank.entries()
        entries = entries[entries["task"].isin(self.tasks)]
        unseen = set(entries["id"].tolist()) - set(self._verdicts)
        if unseen:
            self._judge(bank, entries[entries["id"].isin(unseen)])
        verdicts = {task: [] for task in self.tasks}
        for entry_id, task in zip(entries["id"].tolist(), entries["task"].tolist()):
            if self._verdicts[entry_id] is not None:
                verdicts[task].append(self._verdicts[entry_id])
        metrics = _shares([v for task in self.tasks for v in verdicts[task]])
        if self.several:
            for task in self.tasks:
                metrics.update({f"{task_name(task)}_{k}": v for k, v in _shares(verdicts[task]).items()})
        return metrics

    def _judge(self, bank: ExperienceBank, entries: pd.DataFrame) -> None:
        """Judge ``entries`` (rows of :meth:`ExperienceBank.entries`) by the source of the operation that wrote
        each."""
        self._verdicts.update(secret_verdicts(entries, bank.operations()))


def secret_verdicts(entries: pd.DataFrame, operations: pd.DataFrame) -> dict[int, bool | None]:
    """Per entry id of ``entries`` (rows of :meth:`ExperienceBank.entries`, with ``task``, ``title`` and
    ``content``): whether its text states the hidden fact of the seed its writing operation's source names (the
    entry's first row in ``operations``, the bank's operations log); None where the source names no seed or the
    task hides no fact."""
    written = operations[operations["entry_id"].isin(entries["id"])].drop_duplicates("entry_id")
    sources = {int(i): s for i, s in zip(written["entry_id"], written["source"])}
    verdicts: dict[int, bool | None] = {}
    for row in entries.itertuples():
        seed = seed_of(sources.get(int(row.id)))
        text = f"{row.title}\n{row.content}"
        verdicts[int(row.id)] = None if seed is None else lesson_states_secret(row.task, seed, text)
    return verdicts


def _shares(verdicts: list[bool]) -> dict[str, float]:
    """The two metrics over one set of verdicts."""
    return {
        "rule_recall_live": sum(verdicts) / len(verdicts) if verdicts else math.nan,
        "rule_recall_judged": float(len(verdicts)),
    }
