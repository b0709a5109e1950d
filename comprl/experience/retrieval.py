"""The retrieval policy: which bank entry a guided episode is shown.

:class:`RetrievalPolicy` turns a batch of queries into one entry (or None) each: one embedding call for the
batch, a nearest-neighbour search within each query's task (``bank.candidates`` candidates), the similarity gate
(``bank.min_similarity``), the own-seed guard (``bank.exclude_own_seed``), then the re-ranking (``bank.rerank``)
with its retrieval counts, recency window and dropout draws. It also keeps the warm-up gate
(``experience.warmup``). The manager (:class:`~comprl.experience.manager.ExperienceManager`) batches the queries
and checkpoints this state.
"""

from __future__ import annotations

import math
import operator
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from comprl.config import ExperimentConfig
from comprl.experience.bank import Entry, ExperienceBank, Hit
from comprl.experience.interface import seed_of


@dataclass
class Query:
    """One query waiting for its entry."""

    text: str
    task: str
    seed: int | None
    record: bool
    """A training search (recency and dropout apply, the entry shown counts as retrieved)."""
    result: Future


class RetrievalPolicy:
    """Picks the entry each query is shown, from ``bank``, as ``config.bank`` says.

    Args:
        config: the experiment (its ``bank`` and ``experience`` parts, and ``seed`` for the dropout draws).
        bank: the run's bank.
        clock: seconds, for the "recently retrieved" window.
        wait_for_distillation: called by the warm-up gate with the seconds left to wait; waits up to that long
            (or less) for the extractor's work in progress and returns True, or returns False when none is in
            progress (the gate then stops waiting).
    """

    def __init__(
        self, config: ExperimentConfig, bank: ExperienceBank, *, clock: Callable[[], float],
        wait_for_distillation: Callable[[float], bool],
    ) -> None:
        self.config = config
        self.bank = bank
        self._clock = clock
        self._wait_for_distillation = wait_for_distillation
        self._rng = np.random.default_rng([config.seed, 7])  # retrieval dropout
        self._lock = threading.Lock()  # recency state and the dropout generator
        self._last_retrieved: dict[int, float] = {}
        self._retrievals: dict[int, int] = {}  # the official retrieve_count (BankConfig.counts_from_uses)
        self._origins_lock = threading.Lock()
        self._origins: dict[int, frozenset[int]] = {}
        self._origins_seen = 0
        self.warm: set[str] = set()
        """Tasks whose bank has reached the warm-up size once (the gate stays open for them)."""

    def warmed_up(self, task: str) -> bool:
        """The warm-up gate: the task's bank holds ``warmup`` entries (waiting for distillation in progress)."""
        warmup = self.config.experience.warmup
        if task in self.warm or warmup == 0:
            return True
        deadline = time.monotonic() + self.config.experience.warmup_wait_s
        while True:
            live = self.bank.entries()
            if int((live["task"] == task).sum()) >= warmup:
                self.warm.add(task)
                return True
            if not self._wait_for_distillation(deadline - time.monotonic()):
                return False

    def choose(self, batch: list[Query]) -> list[Entry | None]:
        """One embedding call for the batch, one bank search per task in it, the similarity gate, the own-seed guard,
        the re-ranking."""
        bank = self.config.bank
        vectors = self.bank.embedder.encode([q.text for q in batch])
        pools: list[list[Hit]] = [[] for _ in batch]
        for task in {q.task for q in batch}:
            rows = [i for i, q in enumerate(batch) if q.task == task]
            for i, hits in zip(rows, self.bank.search_vectors(vectors[rows], k=bank.candidates, task=task)):
                pools[i] = hits
        if bank.min_similarity is not None:
            pools = [[h for h in hits if h.score >= bank.min_similarity] for hits in pools]
        if bank.exclude_own_seed:
            origins = self._entry_origins()
            pools = [[h for h in hits if q.seed not in origins.get(h.entry.id, ())] for q, hits in zip(batch, pools)]
        with self._lock:
            return self._rerank(batch, pools)

    def _rerank(self, batch: list[Query], pools: list[list[Hit]]) -> list[Entry | None]:
        """Pick one entry per query from its candidate pool (``BankConfig.rerank``; callers hold ``_lock``).

        The batch's scores are one ``[queries, candidates]`` matrix (-inf where a pool is short). Queries are
        answered in order, each taking its first best candidate (as a stable sort by descending score would).
        comprl's protocol lets a choice change the scores of later queries where their pools hold the chosen entry
        (shown, and with ``record`` retrieved once more and recently), so only those places are recomputed; with
        ``bank.batch_snapshot`` (the official code's) every query sees the state before the batch, and the
        retrievals are recorded after it.
        """
        bank = self.config.bank
        lam = bank.diversity_lambda
        official = bank.rerank == "official"
        snapshot = official and bank.batch_snapshot
        within = operator.le if bank.recent_inclusive else operator.lt
        now = self._clock()
        width = max(map(len, pools), default=0)
        if not width:
            return [None] * len(batch)
        sizes = np.array([len(hits) for hits in pools])
        filled = np.arange(width) < sizes[:, None]
        ids = np.full((len(batch), width), -1, dtype=np.int64)
        ids[filled] = [h.entry.id for hits in pools for h in hits]
        entries = {h.entry.id: h.entry for hits in pools for h in hits}
        scores = np.full((len(batch), width), -math.inf)
        recent = np.zeros((len(batch), width), dtype=bool)
        if official:  # -rank - lambda*log1p(retrievals) - 1[retrieved within the window, by a training search]
            counts = [self._count(h.entry) for hits in pools for h in hits]
            recent[filled] = [
                query.record and within(now - self._last_retrieved.get(h.entry.id, -math.inf), bank.recent_seconds)
                for query, hits in zip(batch, pools)
                for h in hits
            ]
            scores[filled] = -np.nonzero(filled)[1] - np.array([lam * math.log1p(c) for c in counts])
            scores -= recent
        else:  # similarity - lambda*log1p(uses) - 1[shown to an earlier query of the batch]
            scores[filled] = [h.score - lam * math.log1p(h.entry.uses) for hits in pools for h in hits]
        # where each entry id sits in the pools, row-major: a choice updates the later queries' places in O(hits)
        order = np.argsort(ids, axis=None, kind="stable")
        placed = ids.ravel()[order]
        shown: set[int] = set()
        chosen: list[Entry | None] = []
        for i, query in enumerate(batch):
            if not sizes[i]:
                chosen.append(None)
                continue
            best = int(scores[i].argmax())  # the first maximum
            if recent[i, best] and (sizes[i] > 1 or snapshot) and self._rng.random() < bank.dropout:
                best = int(np.where(np.arange(width) == best, -math.inf, scores[i]).argmax())  # the top goes last
            entry = entries[int(ids[i, best])]
            chosen.append(entry)
            if snapshot:
                continue
            places = order[np.searchsorted(placed, entry.id, "left") : np.searchsorted(placed, entry.id, "right")]
            rows, cols = np.divmod(places[places >= (i + 1) * width], width)
            if not official and entry.id not in shown:
                scores[rows, cols] -= 1
            shown.add(entry.id)
            if query.record:
                count = self._retrieved(entry, now)
                if official and len(rows):
                    recent[rows, cols] = [batch[r].record and within(0.0, bank.recent_seconds) for r in rows.tolist()]
                    scores[rows, cols] = -cols - lam * math.log1p(count) - recent[rows, cols]
        if snapshot:
            for query, entry in zip(batch, chosen):
                if query.record and entry is not None:
                    self._retrieved(entry, now)
        return chosen

    def _count(self, entry: Entry) -> int:
        """The entry's retrieval count, started on first sight from its stored uses or from 0
        (``bank.counts_from_uses``)."""
        return self._retrievals.setdefault(entry.id, entry.uses if self.config.bank.counts_from_uses else 0)

    def _retrieved(self, entry: Entry, now: float) -> int:
        """Record that a training search showed ``entry`` at ``now``; its new retrieval count."""
        self._last_retrieved[entry.id] = now
        count = self._retrievals[entry.id] = self._count(entry) + 1
        return count

    def _entry_origins(self) -> dict[int, frozenset[int]]:
        """Seeds of the episodes each entry was distilled from, merged entries inheriting their parents'."""
        with self._origins_lock:
            ops = self.bank.operations()
            for row in ops.iloc[self._origins_seen :].itertuples():
                if row.entry_id is None or (isinstance(row.entry_id, float) and math.isnan(row.entry_id)):
                    continue
                seed = seed_of(row.source)
                seeds: set[int] = set() if seed is None else {seed}
                for parent in row.targets or ():
                    seeds |= self._origins.get(parent, frozenset())
                self._origins[int(row.entry_id)] = self._origins.get(int(row.entry_id), frozenset()) | seeds
            self._origins_seen = len(ops)
            return dict(self._origins)

    def state_dict(self) -> dict[str, Any]:
        """The re-ranking state, as a checkpoint keeps it: the dropout generator, the age of each entry's last
        retrieval (the clock itself does not survive a restart), and the retrieval counts."""
        with self._lock:
            now = self._clock()
            return {
                "dropout_rng": self._rng.bit_generator.state,
                "ages": {entry: now - t for entry, t in self._last_retrieved.items()},
                "counts": dict(self._retrievals),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from what :meth:`state_dict` returned."""
        with self._lock:
            self._rng.bit_generator.state = state["dropout_rng"]
            now = self._clock()
            self._last_retrieved = {entry: now - age for entry, age in state["ages"].items()}
            self._retrievals = dict(state["counts"])
