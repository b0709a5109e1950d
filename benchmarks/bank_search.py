"""Experience-bank top-1 search against exact baselines (SQL brute force, FAISS flat, numpy), side by side.

Random unit vectors stand in for embeddings, so no model loads. For each bank size it stores the vectors in a
bank file in a temporary folder (timing the insert), then runs the same random unit queries through:

1. ``search_vectors`` on the whole batch (HNSW via DuckDB ``vss``), as the manager calls it;
2. ``search_vectors`` one query at a time (capped at ``--single-cap`` queries and scaled up; the output says so);
3. ``search_vectors(exact=True)``: the bank's brute-force SQL (``array_cosine_distance``);
4. FAISS ``IndexFlatIP`` (exact);
5. numpy (matrix product + argmax), the floor and the reference for agreement;

and, after closing and reopening the file, path 1 again (the reopen time, including any index load, is printed).
Ratios and agreement only mean something side by side: timings depend on the machine.
``python benchmarks/bank_search.py --entries 20000 100000``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write

INSERT_BATCH = 2000


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def no_model(dim: int) -> Embedder:
    """An embedder that never loads a model: every vector is given explicitly."""
    return type("NoModel", (Embedder,), {"dim": dim})()


def top1_ids(hits: list) -> np.ndarray:
    return np.array([h[0].entry.id if h else -1 for h in hits], dtype=np.int64)


def timed(fn):  # noqa: ANN001, ANN201 - a tiny helper
    began = time.perf_counter()
    result = fn()
    return time.perf_counter() - began, result


def run(entries: int, n_queries: int, dim: int, seed: int, single_cap: int, folder: Path) -> None:
    rng = np.random.default_rng(seed)
    data = unit(rng, entries, dim)
    queries = unit(rng, n_queries, dim)
    path = folder / f"bank_{entries}.duckdb"
    embedder = no_model(dim)

    print(f"\n=== {entries:,} entries, {n_queries:,} queries, dim {dim}, seed {seed} ===")
    bank = ExperienceBank(path, embedder, capacity=entries)
    # Peeks at the bank's own connection only to report whether the HNSW index exists before the first insert.
    indexes = [r[0] for r in bank._db().execute("SELECT index_name FROM duckdb_indexes() WHERE table_name = 'entries'").fetchall()]
    began = time.perf_counter()
    for start in range(0, entries, INSERT_BATCH):
        stop = min(start + INSERT_BATCH, entries)
        bank.apply(
            [Write("add", entry=NewEntry(f"e{i}", "c")) for i in range(start, stop)],
            step=0,
            task="t",
            embeddings=data[start:stop],
        )
        if stop % 20_000 == 0 and stop < entries:
            print(f"  inserted {stop:,} in {time.perf_counter() - began:.0f} s", flush=True)
    insert_s = time.perf_counter() - began
    print(
        f"insert: {insert_s:.1f} s ({entries / insert_s:,.0f} entries/s, batches of {INSERT_BATCH}); "
        f"vss enabled: {bank.vss_enabled}; HNSW index in place during inserts: {bool(indexes)} {indexes}"
    )

    # numpy exact: the reference (bank ids are 1..entries in insert order); one untimed call first
    np.argmax(queries[:8] @ data.T, axis=1)
    np_s, best = timed(lambda: np.argmax(queries @ data.T, axis=1))
    reference = best + 1
    rows: list[tuple[str, float, int, np.ndarray]] = []  # name, seconds for all queries, queries timed, ids

    bank.search_vectors(queries[:1], k=1)  # warm-up: first statement
    s, hits = timed(lambda: bank.search_vectors(queries, k=1))
    rows.append(("1 bank batched (HNSW)", s, n_queries, top1_ids(hits)))

    m = min(single_cap, n_queries)
    s, hits = timed(lambda: [bank.search_vectors(queries[i : i + 1], k=1)[0] for i in range(m)])
    rows.append((f"2 bank one at a time{' *' if m < n_queries else ''}", s * n_queries / m, m, top1_ids(hits)))

    s, hits = timed(lambda: bank.search_vectors(queries, k=1, exact=True))
    rows.append(("3 bank exact SQL", s, n_queries, top1_ids(hits)))

    build_s, index = timed(lambda: faiss.IndexFlatIP(dim))
    add_s, _ = timed(lambda: index.add(data))
    index.search(queries[:1], 1)  # warm-up: OpenMP threads start
    s, (_, found) = timed(lambda: index.search(queries, 1))
    faiss_s = s
    rows.append(("4 FAISS IndexFlatIP", s, n_queries, found[:, 0] + 1))
    rows.append(("5 numpy exact", np_s, n_queries, reference))

    close_s, _ = timed(bank.close)
    reopen_s, bank = timed(lambda: ExperienceBank(path, embedder, capacity=entries))
    s, hits = timed(lambda: bank.search_vectors(queries, k=1))
    rows.append(("1' batched after reopen (1st)", s, n_queries, top1_ids(hits)))
    s, hits = timed(lambda: bank.search_vectors(queries, k=1))
    rows.append(("1' batched after reopen (2nd)", s, n_queries, top1_ids(hits)))
    bank.close()
    print(
        f"close (checkpoint): {close_s:.2f} s; reopen (constructor, incl. any index load): {reopen_s:.2f} s; "
        f"file {path.stat().st_size / 2**20:.0f} MiB; FAISS index build+add: {build_s + add_s:.3f} s"
    )

    print(f"{'method':<32}{'s / ' + str(n_queries) + ' q':>12}{'queries/s':>12}{'x FAISS':>10}{'top-1 agree':>13}")
    for name, seconds, timed_n, ids in rows:
        agree = np.mean(ids == reference[: len(ids)])
        print(
            f"{name:<32}{seconds:>12.3f}{n_queries / seconds:>12,.0f}{seconds / faiss_s:>10.1f}"
            f"{agree:>9.1%} /{len(ids):>4}"
        )
    if m < n_queries:
        print(f"* one at a time: {m} queries timed, seconds scaled to {n_queries}; agreement over those {m}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[20_000], help="bank sizes, one run each")
    parser.add_argument("--queries", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--single-cap", type=int, default=128, help="most queries timed one at a time (then scaled)")
    args = parser.parse_args()
    print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} OpenMP threads")
    with tempfile.TemporaryDirectory() as folder:
        for entries in args.entries:
            run(entries, args.queries, args.dim, args.seed, args.single_cap, Path(folder))


if __name__ == "__main__":
    main()
