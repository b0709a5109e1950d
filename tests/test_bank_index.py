"""The bank's in-memory index (``index="memory"``): always the same answers as exact SQL search, through every
kind of write, failed writes, reopening the file, and concurrent writers and readers."""

from __future__ import annotations

import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from comprl.config import make_config
from comprl.experience.bank import BankWriteError, Embedder, ExperienceBank, Hit, NewEntry, Write
from comprl.experience.bank.store import SEARCH_INDEXES
from comprl.experience.bank import index as memory_index
from comprl.experience.bank.index import MemoryIndex, _top_k
from comprl.experience.retrieval import Query, RetrievalPolicy

DIM = 64
TASKS = (None, "a", "b", "c", "nobody")
KS = (1, 3, 16, 1000)


class NoModel(Embedder):
    """An embedder that never loads a model: every embedding is passed in."""

    dim = DIM


def unit_vectors(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def add(title: str) -> Write:
    return Write("add", entry=NewEntry(title, f"content of {title}"))


def write(bank: ExperienceBank, rng: np.random.Generator, writes: list[Write], task: str, step: int = 0) -> list[int]:
    n_new = sum(w.entry is not None for w in writes)
    return bank.apply(writes, step=step, task=task, embeddings=unit_vectors(rng, n_new))


def assert_same_hits(fast: list[list], exact: list[list]) -> None:
    """Same ids in the same order and the same scores; where ids differ, only a float-rounding near-tie may swap
    them (the two paths compute cosines differently, so scores may differ in the 7th digit)."""
    assert len(fast) == len(exact)
    for f, e in zip(fast, exact):
        assert len(f) == len(e)
        np.testing.assert_allclose([h.score for h in f], [h.score for h in e], atol=1e-5)
        for i, (a, b) in enumerate(zip(f, e)):
            if a.entry.id != b.entry.id:
                assert abs(a.score - b.score) < 1e-5, (i, a, b)


def check(bank: ExperienceBank, queries: np.ndarray) -> None:
    """The memory index answers like exact SQL for every task filter and several k, with current rows."""
    live = bank.entries()
    stored = {int(i): bank.get(int(i)) for i in live["id"]}  # rows as the file has them
    for task in TASKS:
        matching = live if task is None else live[live["task"] == task]
        for k in KS:
            fast = bank.search_vectors(queries, k=k, task=task)
            assert_same_hits(fast, bank.search_vectors(queries, k=k, task=task, exact=True))
            assert all(len(hits) == min(k, len(matching)) for hits in fast)
            if k >= len(matching):
                assert all(sorted(h.entry.id for h in hits) == sorted(matching["id"]) for hits in fast)
        assert all(hit.entry == stored[hit.entry.id] for hits in fast for hit in hits)  # memory rows = file rows
    assert len(bank._live.vectors) == len(live) == len(bank._live.entries)


@pytest.fixture
def bank(tmp_path):
    with ExperienceBank(tmp_path / "bank.duckdb", NoModel(), capacity=120, use_vss=False) as bank:
        assert bank.index == "memory"
        yield bank


def test_memory_search_equals_exact_search_through_every_kind_of_write(bank, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    queries = unit_vectors(rng, 12)
    sql_searches: list[int] = []
    exact_search = bank._exact_search
    monkeypatch.setattr(
        bank, "_exact_search", lambda v, k, task: sql_searches.append(len(v)) or exact_search(v, k, task)
    )
    bank.search_vectors(queries, k=3)
    assert bank.search_vectors(queries, k=3) == [[]] * len(queries) and not sql_searches  # empty bank, no SQL

    ids = {task: write(bank, rng, [add(f"{task}{i}") for i in range(30)], task) for task in "abc"}
    check(bank, queries)
    sql_searches.clear()
    bank.search_vectors(queries, k=16, task="a")
    assert not sql_searches, "index='memory' should not search in SQL"

    # updates and merges: the targets go, one new entry comes
    write(bank, rng, [Write("update", targets=(ids["a"][0],), entry=NewEntry("a0'", "rewritten"))], "a", step=1)
    write(bank, rng, [Write("update", targets=tuple(ids["b"][:3]), entry=NewEntry("b012", "merged"))], "b", step=1)
    check(bank, queries)
    # discards, one of them emptying what is left of a task's first entries
    write(
        bank,
        rng,
        [Write("discard", targets=tuple(ids["c"][:10])), Write("discard", targets=(ids["a"][1],))],
        "c",
        step=2,
    )
    check(bank, queries)
    # capacity (120): 77 live + 50 new evicts the 7 oldest live ones (of task a)
    write(bank, rng, [add(f"c-new{i}") for i in range(50)], "c", step=3)
    evicted = bank.operations().query("op == 'evict'")
    assert len(bank) == 120 and set(evicted["task"]) == {"a"} and len(evicted) == 7
    check(bank, queries)
    # a batch larger than the capacity evicts some of its own new entries in the same transaction
    new = write(bank, rng, [add(f"big{i}") for i in range(130)], "b", step=4)
    assert len(bank) == 120 and set(bank.entries()["id"]) == set(new[-120:])
    check(bank, queries)
    # enough small writes that tombstoned rows get compacted away more than once
    for step in range(5, 25):
        live_b = bank.entries().query("task == 'b'")["id"].tolist()
        write(bank, rng, [Write("discard", targets=tuple(live_b[:3])), add(f"a-late{step}")], "a", step=step)
    check(bank, queries)
    # use counts show in the rows search returns
    top = bank.search_vectors(queries[:1], k=1)[0][0].entry
    bank.record_uses([top.id, top.id], [True, False], step=30)
    again = bank.search_vectors(queries[:1], k=1)[0][0].entry
    assert (again.id, again.uses, again.successes, again.updated_step) == (top.id, top.uses + 2, top.successes + 1, 30)
    check(bank, queries)

    before = [bank.search_vectors(queries, k=5, task=task) for task in TASKS]
    bank.close()
    with pytest.raises(RuntimeError, match="closed"):
        bank.search_vectors(queries, k=5)
    with ExperienceBank(tmp_path / "bank.duckdb", NoModel(), capacity=120, use_vss=False) as reopened:
        assert [reopened.search_vectors(queries, k=5, task=task) for task in TASKS] == before
        check(reopened, queries)


def test_rejected_and_rolled_back_writes_leave_the_index_unchanged(bank, monkeypatch):
    rng = np.random.default_rng(1)
    queries = unit_vectors(rng, 8)
    ids = write(bank, rng, [add(f"e{i}") for i in range(40)], "a")
    write(bank, rng, [Write("discard", targets=(ids[0],))], "a")
    before = [bank.search_vectors(queries, k=50, task=task) for task in TASKS]

    with pytest.raises(BankWriteError, match="deleted"):  # refused before any SQL write
        write(bank, rng, [add("x"), Write("discard", targets=(ids[0],))], "a")

    def failing_log(ops, step):
        raise RuntimeError("disk full")

    monkeypatch.setattr(bank, "_log", failing_log)  # fails inside the transaction, after the inserts and deletes
    with pytest.raises(RuntimeError, match="disk full"):
        write(bank, rng, [add("y"), Write("update", targets=(ids[1], ids[2]), entry=NewEntry("m", "merged"))], "a")
    with pytest.raises(RuntimeError, match="disk full"):
        bank.record_uses([ids[3]], [True], step=1)
    monkeypatch.undo()

    assert [bank.search_vectors(queries, k=50, task=task) for task in TASKS] == before
    assert len(bank) == 39 and bank.get(ids[3]).uses == 0
    check(bank, queries)


def test_an_index_update_that_fails_after_the_commit_is_rebuilt_from_the_file(bank, monkeypatch):
    rng = np.random.default_rng(2)
    queries = unit_vectors(rng, 8)
    ids = write(bank, rng, [add(f"e{i}") for i in range(20)], "a")

    def failing_remove(ids):
        raise MemoryError("no room")

    monkeypatch.setattr(bank._live.vectors, "remove", failing_remove)
    with pytest.raises(MemoryError):
        write(bank, rng, [add("new"), Write("discard", targets=(ids[0],))], "a", step=1)
    assert bank._live is None  # dropped, since it may be half updated
    assert bank.get(ids[0]).deleted and len(bank) == 20  # the write itself committed
    write(bank, rng, [Write("discard", targets=(ids[1],))], "a", step=2)  # while dropped, writes go on
    check(bank, queries)  # the first search reloads it from the file
    assert bank._live is not None and len(bank._live.vectors) == 19


def test_equal_scores_go_to_the_lower_id(bank):
    rng = np.random.default_rng(3)
    same = unit_vectors(rng, 1)
    others = unit_vectors(rng, 20)
    bank.apply([add(f"o{i}") for i in range(20)], step=0, task="a", embeddings=others)
    twins = bank.apply([add(f"twin{i}") for i in range(5)], step=0, task="a", embeddings=np.repeat(same, 5, axis=0))
    bank.apply([Write("discard", targets=(twins[1],))], step=1, task="a")
    for exact in (False, True):
        hits = bank.search_vectors(same, k=3, task="a", exact=exact)[0]
        assert [h.entry.id for h in hits] == [twins[0], twins[2], twins[3]], exact
        assert bank.search_vectors(same, k=1, task="a", exact=exact)[0][0].entry.id == twins[0]


def test_concurrent_writers_and_readers_see_only_committed_states(tmp_path):
    """8 threads apply random batches (capacity evictions included), 8 search: a search never sees a write half
    done (memory and exact SQL agree inside one read), every hit was live at some moment of its search, and at
    the end the index equals exact search, also after reopening the file."""
    path = tmp_path / "bank.duckdb"
    n_writers, n_readers, n_ops = 8, 8, 12
    start = threading.Barrier(n_writers + n_readers, timeout=60)
    seen: list[tuple[int, int, int]] = []  # (hit id, last seq before the search, last seq after it)
    rng0 = np.random.default_rng(4)
    queries_at_end = unit_vectors(rng0, 6)

    def last_seq(bank: ExperienceBank) -> int:
        return int(bank.operations()["seq"].max())

    with ExperienceBank(path, NoModel(), capacity=40, use_vss=False) as bank:
        write(bank, rng0, [add("seed")], "task0")

        def writer(w: int) -> None:
            rng = np.random.default_rng(100 + w)
            mine: list[int] = []
            start.wait()
            for i in range(n_ops):
                kind = rng.choice(["add", "update", "discard", "use"]) if mine else "add"
                try:
                    if kind == "use":
                        bank.record_uses(mine[:2], [True] * len(mine[:2]), step=i)
                        continue
                    if kind == "add":
                        writes = [add(f"w{w}-{i}-{j}") for j in range(int(rng.integers(1, 4)))]
                    elif kind == "update":
                        writes = [Write("update", targets=tuple(mine[:2]), entry=NewEntry(f"w{w}-{i}", "merged"))]
                    else:
                        writes = [Write("discard", targets=(mine[0],))]
                    new = write(bank, rng, writes, f"task{w % 3}", step=i)
                except BankWriteError as error:  # another writer's adds evicted one of mine meanwhile
                    assert error.reason == "deleted_target", error
                    mine = [m for m in mine if not bank.get(m).deleted]
                    continue
                targeted = {t for wr in writes for t in wr.targets}
                mine = [m for m in mine if m not in targeted] + new

        def reader(r: int) -> None:
            rng = np.random.default_rng(200 + r)
            start.wait()
            for i in range(n_ops):
                queries = unit_vectors(rng, int(rng.integers(1, 5)))
                task = [None, "task0", "task1", "task2"][i % 4]
                k = int(rng.choice([1, 4, 16]))
                if i % 2:
                    with bank._lock.read():  # one committed state: both paths must agree on it
                        assert_same_hits(
                            bank.search_vectors(queries, k=k, task=task),
                            bank.search_vectors(queries, k=k, task=task, exact=True),
                        )
                else:
                    before = last_seq(bank)
                    found = bank.search_vectors(queries, k=k, task=task)
                    after = last_seq(bank)
                    for hits in found:
                        assert all(not h.entry.deleted and (task is None or h.entry.task == task) for h in hits)
                        seen.extend((h.entry.id, before, after) for h in hits)

        with ThreadPoolExecutor(n_writers + n_readers) as pool:
            futures = [pool.submit(writer, w) for w in range(n_writers)]
            futures += [pool.submit(reader, r) for r in range(n_readers)]
            for future in futures:
                future.result(timeout=120)

        ops = bank.operations()
        born = {int(row.entry_id): int(row.seq) for row in ops.itertuples() if row.op in ("add", "update")}
        died = {
            int(t): int(row.seq)
            for row in ops.itertuples()
            if row.op in ("update", "discard", "evict")
            for t in row.targets
        }
        assert seen, "the readers should have found entries"
        for entry_id, before, after in seen:
            assert born[entry_id] <= after, (entry_id, born[entry_id], after)  # written before the search ended
            assert died.get(entry_id, after + 1) > before, (
                entry_id,
                died[entry_id],
                before,
            )  # not gone before it began
        assert ops["op"].eq("evict").any(), "the writers should have filled the bank past its capacity"
        check(bank, queries_at_end)
        final = bank.search_vectors(queries_at_end, k=10)
    with ExperienceBank(path, NoModel(), capacity=40, use_vss=False) as reopened:
        assert reopened.search_vectors(queries_at_end, k=10) == final
        check(reopened, queries_at_end)


def test_index_argument():
    from comprl.config import SEARCH_INDEXES as CONFIG_INDEXES

    assert SEARCH_INDEXES == CONFIG_INDEXES
    with pytest.raises(ValueError, match="accepted: memory, hnsw, exact"):
        ExperienceBank(None, NoModel(), index="faiss")
    with pytest.raises(ValueError, match="use_vss"):
        ExperienceBank(None, NoModel(), index="hnsw", use_vss=False)
    rng = np.random.default_rng(5)
    queries = unit_vectors(rng, 4)
    with ExperienceBank(None, NoModel(), index="exact", use_vss=False) as bank:
        write(bank, rng, [add(f"e{i}") for i in range(30)], "a")
        assert bank._live is None  # nothing held in memory
        assert bank.search_vectors(queries, k=5) == bank.search_vectors(queries, k=5, exact=True)


# ---------------------------------------------------------------------------------------------------------------
# MemoryIndex on its own
# ---------------------------------------------------------------------------------------------------------------


def reference(
    store: dict[int, tuple[str, np.ndarray]], queries: np.ndarray, k: int, task: str | None
) -> list[list[int]]:
    """Top-k ids by float64 cosine, computed elementwise (identical vectors get identical scores), ties by id."""
    items = sorted((i, v) for i, (t, v) in store.items() if task is None or t == task)
    if not items:
        return [[] for _ in queries]
    ids = np.array([i for i, _ in items])
    vectors = np.array([v / np.linalg.norm(v) for _, v in items], dtype=np.float64)
    scores = (queries.astype(np.float64)[:, None, :] * vectors[None]).sum(-1)
    scores /= np.linalg.norm(queries, axis=1, keepdims=True)
    order = np.lexsort((np.broadcast_to(ids, scores.shape), -scores), axis=-1)[:, :k]
    return ids[order].tolist()


@pytest.mark.parametrize("tile_rows, chunk_bytes", [(None, None), (128, 4096)], ids=["default", "tiled"])
def test_memory_index_matches_a_brute_force_reference_through_adds_and_removals(tile_rows, chunk_bytes, monkeypatch):
    """Also with tiny tiles and chunks, so that blocks are searched in several tiles of rows and query chunks."""
    if tile_rows:
        monkeypatch.setattr(memory_index, "TILE_ROWS", tile_rows)
        monkeypatch.setattr(memory_index, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(6)
    dim = 24
    index = MemoryIndex(dim)
    store: dict[int, tuple[str, np.ndarray]] = {}
    pool = rng.normal(size=(40, dim)).astype(np.float32)  # few distinct directions, so many exact ties
    next_id = 1
    for round_ in range(150):
        if rng.random() < 0.6 or not store:
            n, task = int(rng.integers(1, 60)), ["x", "y"][int(rng.integers(2))]
            vectors = pool[rng.integers(len(pool), size=n)]
            index.add(task, range(next_id, next_id + n), vectors)
            store.update((next_id + j, (task, vectors[j])) for j in range(n))
            next_id += n
        else:
            gone = rng.choice(sorted(store), size=int(rng.integers(1, len(store) + 1)), replace=False).tolist()
            index.remove(gone)
            for entry_id in gone:
                del store[entry_id]
        assert len(index) == len(store)
        queries = rng.normal(size=(int(rng.integers(1, 12)), dim)).astype(np.float32)
        k = int(rng.integers(1, 40))
        for task in ("x", "y", "z"):  # within one task, a tie is exact (one matrix product), so ids must match
            ids, scores = index.search(queries, k, task)
            assert ids.tolist() == reference(store, queries, k, task), (round_, task, k)
            assert np.all(np.diff(scores, axis=1) <= 0)
        ids, scores = index.search(queries, k)  # across tasks, equal vectors may differ in the last bit
        for query, got, got_scores, want in zip(queries, ids.tolist(), scores, reference(store, queries, k, None)):
            assert len(set(got)) == len(got) == len(want)
            np.testing.assert_allclose(_scores(store, query, got), _scores(store, query, want), atol=1e-6)
            np.testing.assert_allclose(got_scores, _scores(store, query, got), atol=1e-6)


def _scores(store: dict[int, tuple[str, np.ndarray]], query: np.ndarray, ids: list[int]) -> list[float]:
    """Cosine of each stored vector with the query."""
    return [float(store[i][1] @ query / np.linalg.norm(store[i][1]) / np.linalg.norm(query)) for i in ids]


def test_memory_index_refuses_bad_input_without_changing():
    index = MemoryIndex(4)
    index.add("t", [1, 2, 3], np.eye(4, dtype=np.float32)[:3])
    with pytest.raises(ValueError, match="increase"):
        index.add("t", [3, 4], np.eye(4, dtype=np.float32)[:2])
    with pytest.raises(ValueError, match="already"):
        index.add("u", [2], np.eye(4, dtype=np.float32)[:1])
    with pytest.raises(ValueError, match="shape"):
        index.add("t", [4], np.eye(4, dtype=np.float32))
    with pytest.raises(KeyError, match="9"):
        index.remove([1, 9])
    assert len(index) == 3
    ids, scores = index.search(np.eye(4, dtype=np.float32), k=5, task="t")
    assert ids.tolist() == [[1, 2, 3], [2, 1, 3], [3, 1, 2], [1, 2, 3]]
    assert scores[:3, 0].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="k must be"):
        index.search(np.eye(4, dtype=np.float32), k=0)


def test_top_k_selection_equals_a_full_stable_sort():
    """The grouped selection against a stable sort, on integer scores (ties everywhere) with masked columns."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, width = int(rng.integers(1, 20)), 64 * int(rng.integers(1, 40))
        scores = rng.integers(0, int(rng.integers(2, 3000)), size=(n, width)).astype(np.float32)
        scores[:, rng.random(width) < rng.random() * 0.5] = -np.inf
        k = min(int(rng.integers(1, 40)), int(np.isfinite(scores[0]).sum()))
        if k < 1:
            continue
        cols, values = _top_k(scores.copy(), k)
        want = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        assert cols.tolist() == want.tolist(), (n, width, k)
        assert values.tolist() == np.take_along_axis(scores, want, 1).tolist()


# ---------------------------------------------------------------------------------------------------------------
# The manager's batched path: candidate pools and the re-ranking
# ---------------------------------------------------------------------------------------------------------------


class Lookup(Embedder):
    """Query ``"q<i>"`` embeds to ``queries[i]``."""

    dim = DIM

    def __init__(self, queries: np.ndarray) -> None:
        super().__init__("lookup")
        self.queries = queries

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.queries[[int(text[1:]) for text in texts]]


class QueryByQuery:
    """The re-ranking written plainly, one query after another (its own retrieval counts, times and dropout)."""

    def __init__(self, policy: RetrievalPolicy) -> None:
        self.bank = policy.config.bank
        self.rng = np.random.default_rng([policy.config.seed, 7])
        self.last: dict[int, float] = {}
        self.counts: dict[int, int] = {}

    def choose(self, records: list[bool], pools: list[list[Hit]], now: float) -> list[int | None]:
        bank, shown, chosen = self.bank, set(), []
        for record, hits in zip(records, pools):
            if not hits:
                chosen.append(None)
                continue
            if bank.rerank == "batch":
                scores = [
                    h.score - bank.diversity_lambda * math.log1p(h.entry.uses) - (h.entry.id in shown) for h in hits
                ]
                recent = [False] * len(hits)
            else:
                counts = [self.counts.setdefault(h.entry.id, h.entry.uses) for h in hits]
                recent = [record and now - self.last.get(h.entry.id, -math.inf) <= bank.recent_seconds for h in hits]
                scores = [
                    -rank - bank.diversity_lambda * math.log1p(c) - r for rank, (c, r) in enumerate(zip(counts, recent))
                ]
            order = sorted(range(len(hits)), key=lambda i: -scores[i])
            if recent[order[0]] and len(order) > 1 and self.rng.random() < bank.dropout:
                order = order[1:] + order[:1]
            entry = hits[order[0]].entry
            chosen.append(entry.id)
            shown.add(entry.id)
            if record:
                self.last[entry.id] = now
                self.counts[entry.id] = self.counts.get(entry.id, entry.uses) + 1
        return chosen


@pytest.mark.parametrize("rerank", ["official", "batch"])
def test_batched_pools_and_reranking_equal_a_numpy_and_query_by_query_reference(rerank):
    """``RetrievalPolicy.choose``: each query's 16 candidates are numpy's exact top 16 within its task, and the
    entry shown is the one a query-by-query re-ranking picks, through batches whose pools overlap (few distinct
    directions, so ties and repeats everywhere), windows that open and close, and dropout draws."""
    rng = np.random.default_rng(11)
    directions = unit_vectors(rng, 12)
    queries = directions[rng.integers(12, size=600)] + 0.05 * unit_vectors(rng, 600)
    now = [0.0]
    overrides = {"bank.rerank": rerank, "bank.recent_seconds": 5.0, "experience.warmup": 0}
    with ExperienceBank(None, Lookup(queries), use_vss=False) as bank:
        policy = RetrievalPolicy(
            make_config("smoke", **overrides), bank, clock=lambda: now[0], wait_for_distillation=lambda _: False
        )
        plain = QueryByQuery(policy)
        store: dict[int, tuple[str, np.ndarray]] = {}
        asked = 0
        for round_ in range(25):
            task = ["x", "y"][round_ % 2]
            vectors = directions[rng.integers(12, size=int(rng.integers(1, 30)))]
            ids = bank.apply(
                [add(f"e{round_}-{j}") for j in range(len(vectors))], step=round_, task=task, embeddings=vectors
            )
            store.update(zip(ids, ((task, v) for v in vectors)))
            bank.record_uses(rng.choice(sorted(store), size=5).tolist(), [True] * 5, step=round_)
            size = int(rng.integers(1, 40))
            batch = [
                Query(f"q{i}", ["x", "y", "z"][i % 3], i, bool(rng.random() < 0.8), Future())
                for i in range(asked, asked + size)
            ]
            pools = [
                bank.search_vectors(queries[i : i + 1], k=16, task=q.task)[0]
                for i, q in zip(range(asked, asked + size), batch)
            ]
            for q, hits, i in zip(batch, pools, range(asked, asked + size)):
                assert [h.entry.id for h in hits] == reference(store, queries[i : i + 1], 16, q.task)[0]
            want = plain.choose([q.record for q in batch], pools, now[0])
            assert [None if e is None else e.id for e in policy.choose(batch)] == want, round_
            asked += size
            now[0] += float(rng.choice([0.0, 2.0, 10.0]))
        assert policy.state_dict()["counts"] == plain.counts
