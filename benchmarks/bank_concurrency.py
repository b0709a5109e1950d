"""Experience bank under threads: the read/write lock against one lock around every call (the old behaviour).

Prints, side by side, the throughput of 8 writer + 8 reader threads and the latency of a one-query search while
a 1,024-query batch search runs. Random unit vectors stand in for embeddings, so no model loads. Ratios only:
timings depend on the machine. ``python benchmarks/bank_concurrency.py``
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write

DIM, ENTRIES, WRITERS, READERS, OPS = 384, 2000, 8, 8, 25


class NoModel(Embedder):
    dim = DIM


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_bank(folder: Path, name: str) -> ExperienceBank:
    bank = ExperienceBank(folder / f"{name}.duckdb", NoModel())
    rng = np.random.default_rng(0)
    for start in range(0, ENTRIES, 500):
        bank.apply(
            [Write("add", entry=NewEntry(f"e{i}", "c")) for i in range(start, start + 500)],
            step=0,
            task="t",
            embeddings=unit(rng, 500),
        )
    return bank


def throughput(bank: ExperienceBank, outer: contextlib.AbstractContextManager) -> float:
    def writer(w: int) -> None:
        rng = np.random.default_rng(w)
        for i in range(OPS):
            with outer:
                bank.apply([Write("add", entry=NewEntry(f"w{w}-{i}", "c"))], step=1, task="t", embeddings=unit(rng, 1))

    def reader(r: int) -> None:
        rng = np.random.default_rng(100 + r)
        for _ in range(OPS):
            with outer:
                bank.search_vectors(unit(rng, 1), k=3, task="t")

    began = time.perf_counter()
    with ThreadPoolExecutor(WRITERS + READERS) as pool:
        for f in [pool.submit(writer, w) for w in range(WRITERS)] + [pool.submit(reader, r) for r in range(READERS)]:
            f.result()
    return (WRITERS + READERS) * OPS / (time.perf_counter() - began)


def latency_behind_batch(bank: ExperienceBank, outer: contextlib.AbstractContextManager, repeats: int = 5) -> float:
    rng = np.random.default_rng(7)
    times = []
    for _ in range(repeats):
        batch, started = unit(rng, 1024), threading.Event()

        def big() -> None:
            with outer:
                started.set()
                bank.search_vectors(batch, k=3)

        thread = threading.Thread(target=big)
        thread.start()
        started.wait()
        time.sleep(0.05)  # let the batch get going
        began = time.perf_counter()
        with outer:
            bank.search_vectors(unit(rng, 1), k=3)
        times.append(time.perf_counter() - began)
        thread.join()
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        results = {}
        for name, outer in (("single lock", threading.Lock()), ("read/write lock", contextlib.nullcontext())):
            with make_bank(Path(folder), name.replace(" ", "_").replace("/", "_")) as bank:
                results[name] = (throughput(bank, outer), latency_behind_batch(bank, outer))
        (old_ops, old_lat), (new_ops, new_lat) = results["single lock"], results["read/write lock"]
        print(f"{'':>18} {'single lock':>12} {'read/write':>12} {'ratio':>8}")
        print(f"{'ops/s (16 thr)':>18} {old_ops:12.1f} {new_ops:12.1f} {new_ops / old_ops:8.2f}x")
        print(f"{'1-query p50 (s)':>18} {old_lat:12.3f} {new_lat:12.3f} {old_lat / new_lat:8.2f}x faster")


if __name__ == "__main__":
    main()
