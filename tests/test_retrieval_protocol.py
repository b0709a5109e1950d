"""The retrieval protocol around the re-ranking: the official code's (the paper profile's) and comprl's.

:class:`OfficialRetrieval` re-implements, from the behaviour of the official code (pUmpKin-Co/ComplementaryRL,
``roll/pipeline/agentic/memory/async_memory_manager.py`` and ``env_manager/memory_integration_mixin.py``), what a
guided rollout is shown: every guided rollout sends one query at its first step; queries are answered in batches
(``query_batch``, in arrival order); within a batch every query is re-ranked against a snapshot of the usage stats
as they were before the batch (score = -rank - lambda*log1p(retrieve_count) - 1[recent], ties to the better rank;
"recent" is a last retrieval time > 0 and an age < ``recent_seconds``); a recent top-1 draws its dropout and, on
a draw < p, goes to the end of the ranking; the top-1 is shown (``memory_fetch_num`` 1); the entries shown are
recorded (count + 1, last retrieval time now) after the whole batch; counts start at 0 in the manager's memory;
evaluation rollouts query the same manager the same way. Its dropout draws come from the stream comprl's policy
uses, so that agreement includes when each query draws.

comprl's manager runs for real here (the tiny extractor is never asked to write; MiniLM embeds), with a fake clock.
Each protocol field is tested twice: with :data:`~comprl.config.OFFICIAL_RETRIEVAL` comprl agrees with the
re-implementation exactly (entries shown, counts and recency after), and with that field at comprl's value it
differs where issue 44 says it does.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from comprl.config import OFFICIAL_RETRIEVAL, PROFILES, BankConfig, make_config
from comprl.experience.bank import NewEntry, Write
from comprl.experience.manager import ExperienceManager

ROOM = "comprl/Room-Ultimate-5x5-v0"
MAZE = "comprl/MazeWalk-9x9-v0"
START = 1000.0
"""The fake clock's start: the official code takes a last retrieval time of 0 for "never retrieved"."""
COMPRL = {"per_instance": True, "batch_snapshot": False, "record_eval": False, "counts_from_uses": True,
          "recent_inclusive": True}
"""The protocol fields at comprl's values (the cpu and smoke profiles')."""


class OfficialRetrieval:
    """The official code's retrieval protocol, written from its behaviour (see the module docstring)."""

    def __init__(self, lam: float, recent_seconds: float, dropout: float, batch_size: int, draw) -> None:
        self.lam, self.recent_seconds, self.dropout, self.batch_size = lam, recent_seconds, dropout, batch_size
        self.draw = draw
        self.count: dict[int, int] = {}
        self.last: dict[int, float] = {}

    def _recent(self, last: float, now: float) -> bool:
        return last > 0 and now - last < self.recent_seconds

    def _top(self, pool: list[int], now: float) -> int:
        """One query's entry, re-ranked on the usage as it stood before the batch."""
        count = {uid: self.count.get(uid, 0) for uid in pool}
        last = {uid: self.last.get(uid, 0.0) for uid in pool}
        score = {
            uid: -rank - self.lam * math.log1p(count[uid]) - float(self._recent(last[uid], now))
            for rank, uid in enumerate(pool)
        }
        ranking = sorted(range(len(pool)), key=lambda r: (-score[pool[r]], r))
        ranking = [pool[r] for r in ranking]
        if self.dropout and self._recent(last[ranking[0]], now) and self.draw() < self.dropout:
            ranking = ranking[1:] + ranking[:1]
        return ranking[0]

    def search(self, pools: list[list[int]], now: float) -> list[int | None]:
        """The entry each query (one per guided rollout, in arrival order) is shown."""
        shown: list[int | None] = []
        for start in range(0, len(pools), self.batch_size):
            batch = [self._top(pool, now) if pool else None for pool in pools[start : start + self.batch_size]]
            for uid in batch:
                if uid is not None:
                    self.count[uid] = self.count.get(uid, 0) + 1
                    self.last[uid] = now
            shown += batch
        return shown


TITLES = [
    f"{verb} {direction} {n} squares {tail}"
    for verb, direction, n, tail in itertools.product(
        ["walk", "run", "step"], ["east", "north", "south west"], [2, 5], ["to the stairs", "around the lava"]
    )
]
QUERIES = [
    f"The stairs are {n} squares {direction}; {extra}"
    for n, direction, extra in itertools.product([1, 3, 6], ["east", "north", "west"], ["a lit room", "dark corners"])
]


class Both:
    """comprl's manager and :class:`OfficialRetrieval` over one bank, on one fake clock."""

    def __init__(self, protocol: dict[str, bool], seed: int = 0, **overrides) -> None:
        self.config = make_config(
            "smoke", method="comp_rl", seed=seed,
            **{"experience.warmup": 0, **{f"bank.{k}": v for k, v in protocol.items()}, **overrides},
        )
        self.now = [START]
        self.manager = ExperienceManager(self.config, None, clock=lambda: self.now[0])
        bank = self.config.bank
        draws = np.random.default_rng([self.config.seed, 7])  # the stream comprl's dropout draws come from
        self.official = OfficialRetrieval(
            bank.diversity_lambda, bank.recent_seconds, bank.dropout, self.config.experience.query_batch, draws.random
        )
        self.compared = 0

    def add(self, titles: list[str], task: str = ROOM, uses: int = 0) -> list[int]:
        ids = self.manager.bank.apply([Write("add", entry=NewEntry(t, f"how to {t}")) for t in titles], step=0,
                                      task=task)
        if uses:
            self.manager.bank.record_uses([i for i in ids for _ in range(uses)], [True] * uses * len(ids), step=0)
        return ids

    def pools(self, queries: list[str], tasks: list[str]) -> list[list[int]]:
        """Each query's candidates (nearest first), as both sides search the same bank."""
        bank, k = self.manager.bank, self.config.bank.candidates
        vectors = bank.embedder.encode(queries)
        return [[h.entry.id for h in bank.search_vectors(vectors[i : i + 1], k=k, task=t)[0]]
                for i, t in enumerate(tasks)]

    def rollouts(self, instances: list[tuple[str, str, int]], group: int = 4, record: bool = True):
        """One search for ``group`` guided rollouts of each (query, task, seed) instance, as the actor's loop (or,
        with ``record=False``, evaluation) calls comprl; the official code's answer to the same rollouts."""
        queries = [q for q, _, _ in instances for _ in range(group)]
        tasks = [t for _, t, _ in instances for _ in range(group)]
        seeds = [s for _, _, s in instances for _ in range(group)]
        expected = self.official.search(self.pools(queries, tasks), self.now[0])
        shown = self.manager.search(queries, tasks, seeds=seeds, record=record)
        self.compared += len(queries)
        return [None if e is None else e.id for e in shown], expected

    def counts(self) -> tuple[dict[int, int], dict[int, int]]:
        """comprl's and the official retrieval counts of the entries retrieved at least once."""
        ours = {k: v for k, v in self.manager.retrieval.state_dict()["counts"].items() if v}
        return ours, dict(self.official.count)

    def ages(self) -> tuple[dict[int, float], dict[int, float]]:
        """comprl's and the official seconds since each entry's last retrieval."""
        return self.manager.retrieval.state_dict()["ages"], {k: self.now[0] - t for k, t in self.official.last.items()}

    def close(self) -> None:
        self.manager.close()


@pytest.fixture()
def both():
    made: list[Both] = []
    yield lambda *args, **kwargs: made.append(Both(*args, **kwargs)) or made[-1]
    for b in made:
        b.close()


def seeded_steps(b: Both, rng: np.random.Generator, steps: int) -> int:
    """Training steps (1-6 instances of 4 guided rollouts, over two tasks) and every third step an evaluation
    (8 seeds, one rollout each), on a clock that moves by 0-300 s in steps of 100 (so ages of exactly 300 s
    occur); asserts agreement after every search. Returns the number of searches compared."""
    searches = 0
    for step in range(steps):
        picks = rng.integers(len(QUERIES), size=int(rng.integers(1, 7)))
        instances = [(QUERIES[q], [ROOM, MAZE][int(q) % 2], 10 * step + j) for j, q in enumerate(picks)]
        shown, expected = b.rollouts(instances)
        assert shown == expected, f"step {step}"
        searches += 1
        if step % 3 == 2:
            evaluation = [(QUERIES[int(q)], ROOM, 10_000 + i) for i, q in enumerate(rng.integers(len(QUERIES), size=8))]
            shown, expected = b.rollouts(evaluation, group=1, record=False)
            assert shown == expected, f"evaluation after step {step}"
            searches += 1
        assert b.counts()[0] == b.counts()[1] and b.ages()[0] == b.ages()[1], f"step {step}"
        b.now[0] += 100.0 * float(rng.integers(0, 4))
    return searches


def test_the_official_protocol_agrees_with_the_official_code_on_seeded_batches(both):
    """Over seeds: entries shown, counts and recency equal the re-implementation's after every search, through
    multi-batch steps (up to 24 queries, batches of 16), a one-entry task (its pool of one still draws dropout),
    stored uses the official counts ignore, evaluations that count, and windows closing at exactly 300 s."""
    compared = 0
    for seed in range(3):
        b = both(OFFICIAL_RETRIEVAL, seed=seed)
        b.add(TITLES[:20], uses=3)
        b.add(["follow the maze wall"], task=MAZE)
        seeded_steps(b, np.random.default_rng(seed), steps=12)
        assert b.counts()[1] and max(b.counts()[1].values()) > 1
        compared += b.compared
    assert compared > 300


def test_per_rollout_search_counts_each_guided_rollout(both):
    """Official: each of an instance's 4 guided rollouts searches, adding 4 to the count of the entry shown, and
    each draws its own dropout, so one group can see several entries. comprl's ``per_instance``: one search per
    instance, count + 1, one entry per group."""
    for per_instance in (False, True):
        b = both({**OFFICIAL_RETRIEVAL, "per_instance": per_instance})
        b.add(TITLES[:6])
        groups = []
        for step in range(12):  # one instance a step, 100 s apart: its entries stay recent
            shown, expected = b.rollouts([(QUERIES[0], ROOM, step)])
            if not per_instance:
                assert shown == expected and b.counts()[0] == b.counts()[1], step
            groups.append(len(set(shown)))
            b.now[0] += 100.0
        retrievals = sum(b.counts()[0].values())
        if per_instance:
            assert retrievals == 12 and max(groups) == 1
        else:
            assert retrievals == 48 and max(groups) > 1


def test_a_batch_is_reranked_on_the_counts_before_it(both):
    """Official: 4 identical queries in one batch see 1 distinct entry on a fresh bank (their counts and recency
    are those before the batch). comprl's ``batch_snapshot=False`` records each retrieval before the next query:
    the 4 see several entries."""
    distinct = {}
    for snapshot in (True, False):
        b = both({**OFFICIAL_RETRIEVAL, "batch_snapshot": snapshot})
        b.add(TITLES[:12])
        seen = []
        for i, query in enumerate(QUERIES[:8]):
            shown, expected = b.rollouts([(query, ROOM, i)])
            if snapshot:
                assert shown == expected and b.counts()[0] == b.counts()[1]
            seen.append(len(set(shown)))
            b.now[0] += 1000.0  # outside the window: every group starts with nothing recent
        distinct[snapshot] = np.mean(seen)
    assert distinct[True] == 1.0 and distinct[False] > 1.0


def test_evaluation_searches_go_through_the_training_protocol(both):
    """Official: an evaluation query right after a training retrieval sees it as recent (and may draw dropout),
    and counts. comprl's ``record_eval=False``: the evaluation search sees the bank only and counts nothing."""
    for record_eval in (True, False):
        b = both({**OFFICIAL_RETRIEVAL, "record_eval": record_eval, "dropout": 0.0})
        b.add(TITLES[:6])
        trained, _ = b.rollouts([(QUERIES[0], ROOM, 1)], group=1)
        before = b.counts()[0]
        shown, expected = b.rollouts([(QUERIES[0], ROOM, 10_000)], group=1, record=False)
        assert (shown == expected) == record_eval
        assert (shown[0] == trained[0]) == (not record_eval), "a clean evaluation shows the bank's top-1 again"
        assert (b.counts()[0] == before) == (not record_eval)
        if record_eval:
            assert b.counts()[0] == b.counts()[1]


def test_counts_start_from_zero_not_from_the_stored_uses(both):
    """Official: counts live in the manager's memory, from 0. comprl's ``counts_from_uses``: from the bank's
    stored uses (after ``init_from`` or a resume), so a much-used top-1 loses to the next candidate."""
    for from_uses in (False, True):
        b = both({**OFFICIAL_RETRIEVAL, "counts_from_uses": from_uses})
        b.add(TITLES[:6])
        top = b.pools([QUERIES[0]], [ROOM])[0][0]
        b.manager.bank.record_uses([top] * 20, [True] * 20, step=0)  # 0.4 * log1p(20) = 1.22: over a rank apart
        shown, expected = b.rollouts([(QUERIES[0], ROOM, 1)], group=1)
        assert expected == [top] and (shown == expected) == (not from_uses)


def test_the_recency_window_is_open_at_its_end(both):
    """Official: an age of exactly ``recent_seconds`` is no longer recent. comprl's ``recent_inclusive``: it is."""
    for inclusive in (False, True):
        b = both({**OFFICIAL_RETRIEVAL, "recent_inclusive": inclusive, "dropout": 0.0})
        b.add(TITLES[:6])
        first, _ = b.rollouts([(QUERIES[0], ROOM, 1)], group=1)
        b.now[0] += b.config.bank.recent_seconds
        shown, expected = b.rollouts([(QUERIES[0], ROOM, 2)], group=1)
        assert expected == first and (shown == expected) == (not inclusive)


def test_the_paper_profile_uses_the_official_protocol_and_the_others_comprls():
    for field, value in OFFICIAL_RETRIEVAL.items():
        assert getattr(PROFILES["paper"].bank, field) == value, field
        assert getattr(PROFILES["cpu"].bank, field) == getattr(PROFILES["smoke"].bank, field) == COMPRL[field]
    with pytest.raises(ValueError, match="bank.batch_snapshot='yes' is of type str; accepted: bool"):
        make_config("paper", **{"bank.batch_snapshot": "yes"})


def test_the_official_protocol_fields_refuse_comprls_batch_reranking():
    with pytest.raises(ValueError, match="batch_snapshot=True with rerank='batch'.*accepted: rerank='official'"):
        BankConfig(rerank="batch", batch_snapshot=True)
    with pytest.raises(ValueError, match="counts_from_uses=False, recent_inclusive=False with rerank='batch'"):
        BankConfig(rerank="batch", counts_from_uses=False, recent_inclusive=False)
    BankConfig(rerank="batch", per_instance=False, record_eval=True)  # these two act on any re-ranking
