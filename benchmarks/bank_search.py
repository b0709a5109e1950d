"""Experience-bank search paths side by side: the in-memory index, HNSW, exact SQL, FAISS flat and numpy.

Random unit vectors stand in for embeddings, so no model loads. For each bank size it stores the vectors in a
bank file in a temporary folder (``use_vss=False``: no HNSW index to keep up, so inserts are fast; timed), then
runs the same random unit queries through:

1. the bank's in-memory index (``index="memory"``, the default), all queries in one ``search_vectors`` call with
   ``k=16`` as the manager calls it (its 16-candidate pool; the top-1 is the pool's first hit), and with ``k=1``;
2. the same, one query at a time (capped at ``--single-cap`` queries and scaled up; the output says so);
3. ``search_vectors(exact=True)``: the bank's brute-force SQL (``array_cosine_distance``);
4. FAISS ``IndexFlatIP`` (exact), ``k=16`` and ``k=1``;
5. numpy (matrix product + argmax), the reference for top-1 agreement (top-16 recall: numpy argpartition);

6. the manager's batched path, re-ranking included: :meth:`RetrievalPolicy.choose`, the function
   :meth:`ExperienceManager.search` calls for each batch of ``query_batch`` queries (embedding, search of the
   query's task with ``k=candidates``, the official re-ranking with its retrieval counts, recency and dropout),
   with the default :class:`ExperimentConfig`; its embedder looks the query vectors up (the model's time is left
   out, as FAISS has none), and the manager object itself (threads, extractor) is not built. It runs in batches of
   ``--manager-batch`` queries (default the manager's ``query_batch``) and in one batch of all queries, each beside
   FAISS searching the same batches (``/ FAISS`` compares with that, not with row 4);

then closes and reopens the file (the reopen time includes loading the in-memory index) and runs path 1 once more.
Fast paths (1, 4, 5, 6) report the best of 3 runs, the others one run.
Up to ``--hnsw-max`` entries it also reopens the file with ``use_vss=True, index="hnsw"`` (the constructor builds
the HNSW index over the stored rows; timed) and runs the HNSW path batched and one query at a time (rows 7, 8);
above that the HNSW rows are skipped, with the build time measured at the smaller size. Ratios (memory/FAISS,
memory/HNSW) are throughputs at the same ``k``; they only mean something side by side: timings depend on the
machine, and on a loaded one FAISS's OpenMP threads lose most (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``
compares one thread with one).
``python benchmarks/bank_search.py --entries 20000 100000`` (``--manager-only``: rows 4 and 6 alone, a minute)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

import faiss
import numpy as np

from comprl.config import ExperienceConfig, ExperimentConfig
from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
from comprl.experience.retrieval import Query, RetrievalPolicy

INSERT_BATCH = 2000
FAST_REPEATS = 3  # fast paths: best of 3 runs (the table's seconds); slow ones run once
POOL = 16  # the manager's candidates (BankConfig.candidates)


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class Lookup(Embedder):
    """An embedder that never loads a model: the text ``"q<i>"`` is ``queries[i]``; other vectors are given."""

    def __init__(self, queries: np.ndarray) -> None:
        super().__init__("lookup")
        self.queries = queries

    @property
    def dim(self) -> int:
        return self.queries.shape[1]

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.queries[[int(text[1:]) for text in texts]]


def hit_ids(hits: list) -> np.ndarray:
    """Ids of each query's hits, ``[n, k]`` (-1 where a query got fewer)."""
    width = max((len(h) for h in hits), default=0)
    return np.array([[h.entry.id for h in row] + [-1] * (width - len(row)) for row in hits], dtype=np.int64)


def timed(fn, repeats: int = 1):  # noqa: ANN001, ANN201 - a tiny helper
    """The shortest of ``repeats`` runs of ``fn`` and its result. Fast paths take the best of 3: on 2 cores the
    first run after another engine competes with that engine's BLAS/OpenMP threads, which spin for a while."""
    best, result = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - began)
    return best, result


def reference(data: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, list[set[int]]]:
    """numpy's exact top-1 ids and top-``POOL`` id sets (bank ids are 1..n in insert order), in query chunks."""
    top1, pools = [], []
    for start in range(0, len(queries), 128):
        scores = queries[start : start + 128] @ data.T
        top1.append(scores.argmax(axis=1) + 1)
        pools += [set(row) for row in (np.argpartition(scores, -POOL, axis=1)[:, -POOL:] + 1).tolist()]
    return np.concatenate(top1), pools


class Table:
    """Rows of (method, k, seconds for all queries, ids found) with agreement against the numpy reference."""

    def __init__(self, n_queries: int, top1: np.ndarray, pools: list[set[int]]) -> None:
        self.n_queries, self.top1, self.pools = n_queries, top1, pools
        self.rows: list[tuple[str, int, float, int, np.ndarray]] = []  # name, k, seconds (all queries), timed, ids

    def add(self, name: str, k: int, seconds: float, ids: np.ndarray, timed_n: int | None = None) -> float:
        self.rows.append((name, k, seconds, timed_n or self.n_queries, ids))
        return self.n_queries / seconds

    def rate(self, name: str, k: int) -> float:
        return next(self.n_queries / s for row_name, row_k, s, _, _ in self.rows if (row_name, row_k) == (name, k))

    def print(self, faiss_rate: dict[int, float]) -> None:
        n = self.n_queries
        print(
            f"{'method':<36}{'k':>4}{'s / ' + str(n) + ' q':>12}{'queries/s':>12}{'/ FAISS':>9}"
            f"{'top-1 agree':>14}{'top-16 recall':>15}"
        )
        for name, k, seconds, timed_n, ids in self.rows:
            agree = np.mean(ids[:, 0] == self.top1[: len(ids)])
            recall = (
                f"{np.mean([len(set(r) & p) / POOL for r, p in zip(ids.tolist(), self.pools)]):>14.1%}"
                if k == POOL
                else f"{'':>14}"
            )
            print(
                f"{name:<36}{k:>4}{seconds:>12.3f}{n / seconds:>12,.0f}{n / seconds / faiss_rate[k]:>8.2f}x"
                f"{agree:>9.1%} /{timed_n:>4}{recall}"
            )


def insert(bank: ExperienceBank, data: np.ndarray) -> float:
    began = time.perf_counter()
    for start in range(0, len(data), INSERT_BATCH):
        stop = min(start + INSERT_BATCH, len(data))
        bank.apply(
            [Write("add", entry=NewEntry(f"e{i}", "c")) for i in range(start, stop)],
            step=0,
            task="t",
            embeddings=data[start:stop],
        )
    return time.perf_counter() - began


def one_at_a_time(bank: ExperienceBank, queries: np.ndarray, cap: int) -> tuple[float, np.ndarray, int]:
    """Seconds for all queries (scaled from the first ``cap``), the ids found, how many were timed."""
    m = min(cap, len(queries))
    s, hits = timed(lambda: [bank.search_vectors(queries[i : i + 1], k=POOL)[0] for i in range(m)])
    return s * len(queries) / m, hit_ids(hits), m


def manager_path(bank: ExperienceBank, index: faiss.IndexFlatIP, batch: int) -> str:
    """Path 6: ``RetrievalPolicy.choose`` over batches of ``batch`` queries beside FAISS over the same batches."""
    policy = RetrievalPolicy(ExperimentConfig(), bank, clock=time.monotonic, wait_for_distillation=lambda _: False)
    queries = bank.embedder.queries
    n, pool = len(queries), policy.config.bank.candidates
    assert policy.warmed_up("t"), "the bank is below the warm-up size"
    starts = range(0, n, batch)

    def choose() -> list:
        return [
            e
            for s in starts
            for e in policy.choose([Query(f"q{i}", "t", i, True, Future()) for i in range(s, min(n, s + batch))])
        ]

    choose()  # warm-up
    seconds, chosen = timed(choose, FAST_REPEATS)
    assert all(chosen), "every query gets an entry"
    faiss_s, _ = timed(lambda: [index.search(queries[s : s + batch], pool) for s in starts], FAST_REPEATS)
    return (
        f"{'6 manager, batches of ' + str(batch):<36}{pool:>4}{seconds:>12.3f}{n / seconds:>12,.0f}"
        f"{faiss_s / seconds:>8.2f}x   (FAISS IndexFlatIP, same batches: {n / faiss_s:,.0f} queries/s)"
    )


def run(
    entries: int,
    n_queries: int,
    dim: int,
    seed: int,
    single_cap: int,
    hnsw_max: int,
    folder: Path,
    notes: dict,
    manager_batch: int,
    manager_only: bool,
) -> None:
    rng = np.random.default_rng(seed)
    data = unit(rng, entries, dim)
    queries = unit(rng, n_queries, dim)
    path = folder / f"bank_{entries}.duckdb"
    embedder = Lookup(queries)
    print(f"\n=== {entries:,} entries, {n_queries:,} queries, dim {dim}, seed {seed} ===")
    top1, pools = reference(data, queries)
    table = Table(n_queries, top1, pools)

    bank = ExperienceBank(path, embedder, capacity=entries, use_vss=False)
    insert_s = insert(bank, data)
    print(
        f"insert (use_vss=False, memory index kept in step): {insert_s:.1f} s "
        f"({entries / insert_s:,.0f} entries/s, batches of {INSERT_BATCH})"
    )

    bank.search_vectors(queries[:1], k=POOL)  # warm-up
    if not manager_only:
        s, hits = timed(lambda: bank.search_vectors(queries, k=POOL), FAST_REPEATS)
        table.add("1 bank memory, batched", POOL, s, hit_ids(hits))
        s, hits = timed(lambda: bank.search_vectors(queries, k=1), FAST_REPEATS)
        table.add("1 bank memory, batched", 1, s, hit_ids(hits))
        s, ids, m = one_at_a_time(bank, queries, single_cap)
        table.add(f"2 bank memory, one at a time{' *' if m < n_queries else ''}", POOL, s, ids, m)
        s, hits = timed(lambda: bank.search_vectors(queries, k=POOL, exact=True))
        table.add("3 bank exact SQL, batched", POOL, s, hit_ids(hits))

    index = faiss.IndexFlatIP(dim)
    index.add(data)
    index.search(queries[:1], 1)  # warm-up: OpenMP threads start
    faiss_rate = {}
    for k in (POOL, 1):
        s, (_, found) = timed(lambda: index.search(queries, k), FAST_REPEATS)
        faiss_rate[k] = table.add("4 FAISS IndexFlatIP", k, s, found + 1)
    managed = [manager_path(bank, index, batch) for batch in dict.fromkeys((manager_batch, n_queries))]
    if manager_only:
        bank.close()
        table.print(faiss_rate)
        print("\n".join(managed))
        return
    np.argmax(queries[:8] @ data.T, axis=1)  # warm-up
    s, best = timed(lambda: np.argmax(queries @ data.T, axis=1), FAST_REPEATS)
    table.add("5 numpy matmul + argmax", 1, s, best[:, None] + 1)

    bank.close()
    reopen_s, bank = timed(lambda: ExperienceBank(path, embedder, capacity=entries, use_vss=False))
    s, hits = timed(lambda: bank.search_vectors(queries, k=POOL))
    table.add("1' bank memory, after reopen (1st)", POOL, s, hit_ids(hits))
    bank.close()
    print(
        f"reopen (constructor, incl. loading the memory index): {reopen_s:.2f} s; "
        f"file {path.stat().st_size / 2**20:.0f} MiB"
    )

    hnsw = None
    if entries <= hnsw_max:
        build_s, bank = timed(lambda: ExperienceBank(path, embedder, capacity=entries, use_vss=True, index="hnsw"))
        notes["hnsw_build"] = (entries, build_s)
        print(f"HNSW: reopen with use_vss=True builds the index over the {entries:,} stored rows: {build_s:.1f} s")
        bank.search_vectors(queries[:1], k=POOL)  # warm-up
        s, hits = timed(lambda: bank.search_vectors(queries, k=POOL))
        hnsw = table.add("7 bank HNSW, batched", POOL, s, hit_ids(hits))
        s, ids, m = one_at_a_time(bank, queries, single_cap)
        table.add(f"8 bank HNSW, one at a time{' *' if m < n_queries else ''}", POOL, s, ids, m)
        bank.close()
    table.print(faiss_rate)
    print("\n".join(managed))
    memory = table.rate("1 bank memory, batched", POOL)
    print(
        f"memory index, {n_queries:,} queries in one call: {n_queries / memory:.3f} s at k={POOL}; "
        f"memory/FAISS throughput {memory / faiss_rate[POOL]:.2f}x at k={POOL}"
        + (f", memory/HNSW {memory / hnsw:.0f}x" if hnsw else "")
    )
    if hnsw is None:
        measured = notes.get("hnsw_build")
        why = (
            f"building it took {measured[1]:.0f} s for {measured[0]:,} entries in this run "
            f"(~{measured[1] * entries / measured[0]:.0f} s for {entries:,} if it grew linearly; "
            "HNSW builds grow faster)"
            if measured
            else "no smaller size measured in this run"
        )
        print(f"HNSW skipped at {entries:,} entries (> --hnsw-max {hnsw_max:,}): {why}")
    if any(timed_n < n_queries for _, _, _, timed_n, _ in table.rows):
        print(f"* one at a time: {single_cap} queries timed, seconds scaled to {n_queries}; agreement over those")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[20_000, 100_000], help="bank sizes, one run each")
    parser.add_argument("--queries", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--single-cap", type=int, default=128, help="most queries timed one at a time (then scaled)")
    parser.add_argument("--hnsw-max", type=int, default=20_000, help="largest bank whose HNSW index is built and timed")
    parser.add_argument(
        "--manager-batch",
        type=int,
        default=ExperienceConfig().query_batch,
        help="queries per RetrievalPolicy.choose call in path 6 (default: the manager's query_batch)",
    )
    parser.add_argument("--manager-only", action="store_true", help="time paths 4 (FAISS) and 6 (the manager) only")
    args = parser.parse_args()
    print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} OpenMP threads; numpy {np.__version__}")
    notes: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        for entries in sorted(args.entries):
            run(
                entries,
                args.queries,
                args.dim,
                args.seed,
                args.single_cap,
                args.hnsw_max,
                Path(folder),
                notes,
                args.manager_batch,
                args.manager_only,
            )


if __name__ == "__main__":
    main()
