"""The experience bank: persistence, atomic writes, time travel from the log, capacity, and search quality."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from comprl.experience.bank import BankLockedError, BankWriteError, Embedder, ExperienceBank, NewEntry, Write
from comprl.experience.bank.embedder import MeanPooled, bundled_model_path
from comprl.experience.bank.store import HNSW_OPTIONS

DIM = 384


def add(title: str, content: str | None = None) -> Write:
    return Write("add", entry=NewEntry(title, content if content is not None else f"content of {title}"))


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def top_ids(results: list[list]) -> list[list[int]]:
    return [[hit.entry.id for hit in hits] for hits in results]


def test_embedder_gives_unit_vectors(embedder):
    vectors = embedder.encode(["pick up the key", "push the boulder"])
    assert embedder.dim == DIM
    assert vectors.shape == (2, DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.encode([]).shape == (0, DIM)
    with pytest.raises(TypeError, match="single str"):
        embedder.encode("one text")


def test_the_bundled_model_runs_without_sentence_transformers_and_agrees_with_it(tmp_path, embedder):
    # lengths from one word to past the 256-token cap, in an order that is not by length, and an empty text
    words = "key door box push left north shelf apple buy red size price under find the a".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=n)) for n in rng.integers(1, 400, size=70)] + ["", "Push the box."]
    ours = embedder.encode(texts)
    from sentence_transformers import SentenceTransformer

    theirs = SentenceTransformer(str(bundled_model_path()), device="cpu").encode(texts, normalize_embeddings=True)
    assert np.abs(ours - theirs).max() < 1e-6  # float32 rounding (3e-8 measured), row for row
    code = (
        "import sys; from comprl.experience.bank import Embedder; e = Embedder(); e.encode(['a key']); "
        "print(e.dim, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(DIM), "False"]
    # another layout (here CLS pooling) is sentence-transformers' to run
    folder = tmp_path / "cls"
    shutil.copytree(bundled_model_path(), folder)
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    assert MeanPooled.fits(bundled_model_path()) and not MeanPooled.fits(folder)
    cls = Embedder(str(folder)).encode(texts[:4])
    np.testing.assert_allclose(cls, SentenceTransformer(str(folder)).encode(texts[:4], normalize_embeddings=True),
                               atol=1e-6)
    assert np.abs(cls - ours[:4]).max() > 1e-3  # a different pooling, a different vector


def test_round_trip_through_the_file(tmp_path, embedder):
    path = tmp_path / "bank.duckdb"
    rng = np.random.default_rng(0)
    queries = unit_vectors(rng, 5)
    with ExperienceBank(path, embedder) as bank:
        assert bank.vss_enabled, "the vss extension should load offline from the duckdb-extension-vss wheel"
        ids = bank.apply(
            [add("keys", "Pick up the key first."), add("water", "Push a boulder into the river.")], step=0, task="t"
        )
        bank.record_uses([ids[0], ids[0]], [True, False], step=1)
        bank.apply(
            [Write("update", targets=(ids[0],), entry=NewEntry("keys v2", "Key, then door."))],
            step=1,
            task="t",
            raw="<answer>",
        )
        bank.log_rejection(step=2, task="t", reason="bad_json", raw="{oops")
        bank.apply([Write("discard", targets=(ids[1],))], step=2, task="t", origin="merge")
        bank.apply([add(f"filler {i}") for i in range(20)], step=3, task="u", embeddings=unit_vectors(rng, 20))
        entries, ops = bank.entries(include_deleted=True), bank.operations()
        hits = top_ids(bank.search_vectors(queries, k=3))
        live = len(bank)
    with ExperienceBank(path, embedder, ef_search=512) as bank:
        assert bank.vss_enabled
        pd.testing.assert_frame_equal(bank.entries(include_deleted=True), entries)
        pd.testing.assert_frame_equal(bank.operations(), ops)
        assert len(bank) == live == 21
        assert (
            top_ids(bank.search_vectors(queries, k=3)) == hits == top_ids(bank.search_vectors(queries, k=3, exact=True))
        )
        assert bank.at_step(1)["title"].tolist() == ["water", "keys v2"]
    with pytest.raises(RuntimeError, match="closed"):
        len(bank)


def test_time_travel_replays_the_log(embedder):
    rng = np.random.default_rng(1)
    bank = ExperienceBank(None, embedder, capacity=5)

    def write(writes, step, task="t"):
        n_new = sum(w.kind != "discard" for w in writes)
        return bank.apply(writes, step=step, task=task, embeddings=unit_vectors(rng, n_new))

    snapshots = {}
    a, b, c = write([add("A"), add("B"), add("C")], step=0)
    snapshots[0] = bank.entries()
    bank.record_uses([a, a, b], [True, False, True], step=1)
    (d,) = write([Write("update", targets=(a, b), entry=NewEntry("D", "A and B merged"))], step=1)
    bank.log_rejection(step=1, task="t", reason="too_many_ops")
    snapshots[1] = bank.entries()
    e, f, g, h = write([add("E"), add("F"), add("G"), add("H")], step=2, task="u")  # 6 live: evicts C
    bank.record_uses([c], [True], step=2)  # a use landing after its entry was evicted still counts
    snapshots[2] = bank.entries()
    bank.record_uses([d, e], [False, True], step=3)
    write([Write("discard", targets=(f,))], step=3)
    write([], step=3)
    snapshots[3] = bank.entries()
    i, j = write([add("I"), add("J")], step=4)  # 6 live: evicts D
    (k,) = write([Write("update", targets=(e,), entry=NewEntry("K", "E rewritten"))], step=4)
    snapshots[4] = bank.entries()
    bank.record_uses([k, g, g], [True, True, True], step=5)
    snapshots[5] = bank.entries()
    snapshots[6] = bank.entries()  # a step without any operation

    assert bank.at_step(-1).empty
    for step, snapshot in snapshots.items():
        pd.testing.assert_frame_equal(bank.at_step(step), snapshot, obj=f"bank at step {step}")
    assert snapshots[1].set_index("id").loc[d, "parents"] == (a, b)
    assert bank.get(a).uses == 2 and bank.get(a).successes == 1 and bank.get(a).deleted
    assert bank.get(c).uses == 1 and bank.get(c).deleted

    ops = bank.operations()
    assert ops["op"].tolist() == [
        "add", "add", "add", "use", "use", "update", "reject", "add", "add", "add", "add", "evict", "use",
        "use", "use", "discard", "none", "add", "add", "evict", "update", "use", "use",
    ]  # fmt: skip
    assert ops.loc[ops["op"] == "evict", "entry_id"].tolist() == [c, d]

    changes = bank.diff(1, 4)
    assert set(changes["added"]["id"]) == {g, h, i, j, k}
    assert set(changes["removed"]["id"]) == {c, d}
    assert changes["changed"].empty  # the survivors G and H were not used between steps 1 and 4
    assert bank.diff(4, 5)["changed"].set_index("id").loc[g, ["uses", "uses_before"]].tolist() == [2, 0]
    bank.close()


def test_capacity_evicts_oldest_first(embedder):
    rng = np.random.default_rng(2)
    with ExperienceBank(None, embedder, capacity=3) as bank:
        ids = bank.apply([add(f"e{i}") for i in range(3)], step=0, task="t", embeddings=unit_vectors(rng, 3))
        new = bank.apply([add("e3"), add("e4")], step=1, task="t", embeddings=unit_vectors(rng, 2))
        assert bank.entries()["id"].tolist() == [ids[2], *new]
        (merged,) = bank.apply(
            [Write("update", targets=(ids[2], new[0]), entry=NewEntry("m", "merged"))],
            step=2,
            task="t",
            embeddings=unit_vectors(rng, 1),
        )
        assert bank.entries()["id"].tolist() == [new[1], merged]  # 2 live, nothing to evict
        last = bank.apply([add("e5"), add("e6")], step=3, task="t", embeddings=unit_vectors(rng, 2))
        assert bank.entries()["id"].tolist() == [merged, *last]
        evicted = bank.operations().query("op == 'evict'")
        assert evicted["entry_id"].tolist() == [ids[0], ids[1], new[1]]
        assert evicted["step"].tolist() == [1, 1, 3]
        assert len(bank) == 3


def test_failed_batch_changes_nothing(embedder):
    rng = np.random.default_rng(3)
    with ExperienceBank(None, embedder) as bank:
        ids = bank.apply([add("a"), add("b"), add("c")], step=0, task="t", embeddings=unit_vectors(rng, 3))
        bank.apply([Write("discard", targets=(ids[1],))], step=0, task="t")
        entries, ops = bank.entries(include_deleted=True), bank.operations()

        bad_batches = {
            "deleted_target": [add("x"), Write("update", targets=(ids[1],), entry=NewEntry("y", "z"))],
            "missing_target": [add("x"), Write("discard", targets=(999,))],
            "duplicate_target": [
                Write("discard", targets=(ids[0],)),
                Write("update", targets=(ids[0],), entry=NewEntry("y", "z")),
            ],
            "empty_text": [add("x"), Write("add", entry=NewEntry("title", "  \n"))],
            "malformed_write": [add("x"), Write("add", targets=(ids[0],), entry=NewEntry("y", "z"))],
        }
        for reason, writes in bad_batches.items():
            with pytest.raises(BankWriteError) as caught:
                bank.apply(
                    writes, step=1, task="t", embeddings=unit_vectors(rng, sum(w.entry is not None for w in writes))
                )
            assert caught.value.reason == reason and caught.value.write_index == 1
            pd.testing.assert_frame_equal(bank.entries(include_deleted=True), entries)
            pd.testing.assert_frame_equal(bank.operations(), ops)
        for malformed in (
            Write("merge", targets=(ids[0],)),
            Write("discard"),
            Write("update", entry=NewEntry("y", "z")),
        ):  # type: ignore[arg-type]
            with pytest.raises(BankWriteError, match="write 0") as caught:
                bank.apply([malformed], step=1, task="t")
            assert caught.value.reason == "malformed_write"
        with pytest.raises(KeyError, match="999"):
            bank.record_uses([ids[0], 999], [True, True], step=1)

        bank.log_rejection(step=1, task="t", reason="bad_json", source="step1/group0", raw="[{'op': add")
        pd.testing.assert_frame_equal(bank.entries(include_deleted=True), entries)
        last = bank.operations().iloc[-1]
        assert (last["op"], last["result"], last["raw"], last["source"]) == (
            "reject",
            "rejected:bad_json",
            "[{'op': add",
            "step1/group0",
        )
        assert len(bank.operations()) == len(ops) + 1


def test_text_is_stored_verbatim(embedder):
    texts = [
        ("'); DROP TABLE entries; --", "Robert'); DELETE FROM operations WHERE ('1'='1"),
        ("placeholders ? $1 %s {0}", "SELECT * FROM entries WHERE title = ? -- \\' \" ;"),
        ("Ключ 🗝️ → 門", "café\tnaïve\r\nzero\u200bwidth \\N \x01 emoji 👍🏽"),
        ("long", "0123456789abcdef" * 640 + "\n end"),  # 10 kB
    ]
    raw = "<answer>[{\"op\": \"add\", \"title\": \"'); DROP TABLE operations; --\"}]</answer>"
    with ExperienceBank(None, embedder) as bank:
        ids = bank.apply([add(t, c) for t, c in texts], step=0, task="tâche'; --", source="s'--", raw=raw)
        for entry_id, (title, content) in zip(ids, texts):
            entry = bank.get(entry_id)
            assert (entry.title, entry.content, entry.task) == (title, content, "tâche'; --")
            assert entry.text == f"{title}\n{content}"
        assert len(bank.get(ids[3]).content) == 10245
        frame = bank.entries()
        assert list(zip(frame["title"], frame["content"])) == texts
        ops = bank.operations()
        assert ops["raw"].tolist() == [raw] * 4 and ops["title"].tolist() == [t for t, _ in texts]
        hits = bank.search([texts[2][1]], k=1, task="tâche'; --")
        assert hits[0][0].entry.content == texts[2][1]
        assert list(zip(bank.at_step(0)["title"], bank.at_step(0)["content"])) == texts


def test_retrieval_finds_the_semantically_closest_entry(embedder):
    entries = {
        "key": ("Locked doors", "Pick up the key first, walk next to the door and apply the key to unlock it."),
        "river": ("Crossing water", "Push a boulder into the river to build a bridge, then walk across."),
        "sokoban": ("Boxes and corners", "Never push a box into a corner: it can no longer reach a target."),
        "maze": ("Dead ends", "In a maze, follow one wall; backtrack as soon as you reach a dead end."),
    }
    with ExperienceBank(None, embedder) as bank:
        ids = dict(zip(entries, bank.apply([add(*e) for e in entries.values()], step=0, task="minihack")))
        (other,) = bank.apply([add(*entries["key"])], step=0, task="other")
        queries = {
            "key": "There is a locked door and a key on the floor. How do I get through?",
            "river": "How can I get to the other side of the water?",
            "sokoban": "I keep getting stuck after moving crates onto the goal squares.",
            "maze": "I am lost in a labyrinth of corridors.",
        }
        for exact in (False, True):
            results = bank.search(list(queries.values()), k=1, task="minihack", exact=exact)
            assert [hits[0].entry.id for hits in results] == [ids[name] for name in queries]
            assert all(0.2 < hits[0].score <= 1.0 for hits in results)
        assert bank.search([queries["key"]], k=1, task="other")[0][0].entry.id == other
        everything = bank.search([queries["river"]], k=10)[0]
        assert len(everything) == 5 and everything[0].entry.id == ids["river"]
        assert [h.score for h in everything] == sorted((h.score for h in everything), reverse=True)
        assert bank.search([queries["key"]], task="nobody") == [[]]
        assert bank.search([]) == []


def test_hnsw_agrees_with_exact_search(embedder, monkeypatch):
    rng = np.random.default_rng(4)
    n, n_queries = 2000, 200
    vectors, queries = unit_vectors(rng, n), unit_vectors(rng, n_queries)
    with ExperienceBank(None, embedder, index="hnsw") as bank:  # the default index is the exact in-memory one
        assert bank.vss_enabled
        fallbacks: list[int] = []  # queries answered by brute force although the index was asked
        exact_search = bank._exact_search
        monkeypatch.setattr(
            bank, "_exact_search", lambda v, k, task: fallbacks.append(len(v)) or exact_search(v, k, task)
        )
        for start in range(0, n, 250):  # ids interleave the two tasks in blocks
            bank.apply(
                [add(f"v{i}") for i in range(start, start + 250)],
                step=0,
                task="a" if start % 500 == 0 else "b",
                embeddings=vectors[start : start + 250],
            )
        task_of = np.array(["a" if (i // 250) % 2 == 0 else "b" for i in range(n)])
        live = np.ones(n, dtype=bool)

        def check(task: str | None) -> None:
            # the exact search is the oracle: first check it against numpy
            mask = live & ((task_of == task) if task else True)
            exact = bank.search_vectors(queries, k=5, task=task, exact=True)
            want = np.where(mask, queries @ vectors.T, -np.inf).argmax(axis=1) + 1  # ids start at 1
            assert [hits[0].entry.id for hits in exact] == want.tolist()
            fallbacks.clear()
            fast = bank.search_vectors(queries, k=5, task=task)
            assert sum(fallbacks) <= 0.05 * n_queries, "the HNSW index should answer almost every query"
            top1 = np.mean([f[0].entry.id == e[0].entry.id for f, e in zip(fast, exact)])
            top5 = np.mean([len({h.entry.id for h in f} & {h.entry.id for h in e}) / 5 for f, e in zip(fast, exact)])
            assert top1 >= 0.99 and top5 >= 0.97, (task, top1, top5)
            for query, hits in zip(queries, fast):
                assert len(hits) == 5
                assert all(mask[h.entry.id - 1] and not h.entry.deleted for h in hits)
                np.testing.assert_allclose(
                    [h.score for h in hits], [vectors[h.entry.id - 1] @ query for h in hits], atol=1e-5
                )

        check(None)
        check("a")
        dropped = rng.choice(n, size=800, replace=False)
        bank.apply([Write("discard", targets=tuple(int(i) + 1 for i in dropped))], step=1, task="a")
        live[dropped] = False
        check(None)
        check("b")

        # a tiny task: the index's candidates almost never contain it, so the search must fall back to exact
        rare = bank.apply([add("r0"), add("r1"), add("r2")], step=2, task="rare", embeddings=unit_vectors(rng, 3))
        fallbacks.clear()
        found = bank.search_vectors(queries[:10], k=5, task="rare")
        assert sum(fallbacks) == 10
        assert all(sorted(h.entry.id for h in hits) == rare for hits in found)
        assert top_ids(found) == top_ids(bank.search_vectors(queries[:10], k=5, task="rare", exact=True))


def test_hnsw_search_quality_survives_reopening_the_file(tmp_path, embedder):
    # The index's WITH (ef_search = ...) is not stored with it: a reopened bank searched with DuckDB's default
    # breadth (64), and top-1 agreement here fell from ~1.0 to ~0.89 (from ~0.89 to 0.51 at 20,000 entries).
    rng = np.random.default_rng(7)
    n, n_queries = 3000, 200
    vectors, queries = unit_vectors(rng, n), unit_vectors(rng, n_queries)
    want = ((queries @ vectors.T).argmax(axis=1) + 1).tolist()  # ids start at 1

    def top1_agreement(bank: ExperienceBank) -> float:
        return float(np.mean([hits[0].entry.id == w for hits, w in zip(bank.search_vectors(queries, k=1), want)]))

    def ef_search(bank: ExperienceBank) -> str | None:
        return bank._db().execute("SELECT value FROM duckdb_settings() WHERE name = 'hnsw_ef_search'").fetchone()[0]

    path = tmp_path / "bank.duckdb"
    with ExperienceBank(path, embedder, index="hnsw") as bank:  # the default index is the exact in-memory one
        assert bank.vss_enabled
        for start in range(0, n, 500):
            bank.apply(
                [add(f"v{i}") for i in range(start, start + 500)],
                step=0,
                task="t",
                embeddings=vectors[start : start + 500],
            )
        fresh = top1_agreement(bank)
    assert fresh >= 0.97, fresh
    with ExperienceBank(path, embedder, index="hnsw") as bank:
        reopened, setting = top1_agreement(bank), ef_search(bank)
    assert reopened >= fresh - 0.02, (fresh, reopened)
    assert f"ef_search = {setting}" in HNSW_OPTIONS, setting
    with ExperienceBank(path, embedder, ef_search=512, index="hnsw") as bank:  # an explicit override still wins
        assert ef_search(bank) == "512"


def test_bank_without_vss_searches_exactly(embedder):
    rng = np.random.default_rng(5)
    vectors = unit_vectors(rng, 300)
    with ExperienceBank(None, embedder, use_vss=False) as bank:
        assert not bank.vss_enabled
        bank.apply([add(f"v{i}") for i in range(300)], step=0, task="t", embeddings=vectors)
        queries = unit_vectors(rng, 20)
        got = [hits[0].entry.id for hits in bank.search_vectors(queries, k=1)]
        assert got == ((queries @ vectors.T).argmax(axis=1) + 1).tolist()
        np.testing.assert_allclose(
            [hits[0].score for hits in bank.search_vectors(queries, k=1)], (queries @ vectors.T).max(axis=1), atol=1e-5
        )


def test_concurrent_use_from_threads(embedder):
    rng = np.random.default_rng(6)
    vectors = unit_vectors(rng, 80)
    with ExperienceBank(None, embedder, capacity=1000) as bank:
        seed = bank.apply([add("seed")], step=0, task="t", embeddings=vectors[:1])

        def worker(w: int) -> None:
            for i in range(20):
                bank.apply([add(f"w{w}-{i}")], step=1, task="t", embeddings=vectors[w * 20 + i : w * 20 + i + 1])
                bank.record_uses(seed, [i % 2 == 0], step=1)
                assert bank.search_vectors(vectors[i : i + 1], k=1)[0]

        with ThreadPoolExecutor(4) as pool:
            for done in [pool.submit(worker, w) for w in range(4)]:
                done.result()
        assert len(bank) == 81
        assert (bank.get(seed[0]).uses, bank.get(seed[0]).successes) == (80, 40)
        assert bank.operations()["seq"].tolist() == list(range(1, 162))
        pd.testing.assert_frame_equal(bank.at_step(1), bank.entries())


def _still_works(bank: ExperienceBank) -> None:
    """A valid add and a search after a rejected input: the bank (and its DuckDB database) is intact."""
    (new,) = bank.apply([add("Crossing water", "Push a boulder into the river.")], step=2, task="t")
    assert bank.search(["how do I cross the river?"], k=1, task="t")[0][0].entry.id == new


BAD_INPUTS = {
    "surrogate in title": (lambda bank, seed: bank.apply([add("key \ud800")], step=1, task="t"), "bad_text"),
    "surrogate in content": (
        lambda bank, seed: bank.apply([add("key", "use it \udfff")], step=1, task="t"),
        "bad_text",
    ),
    "surrogate in task": (lambda bank, seed: bank.apply([add("key")], step=1, task="room\ud83d"), "bad_text"),
    "target id >= 2**31": (
        lambda bank, seed: bank.apply([Write("discard", targets=(2**31,))], step=1, task="t"),
        "missing_target",
    ),
    "update of id >= 2**63": (
        lambda bank, seed: bank.apply(
            [Write("update", targets=(seed, 2**63), entry=NewEntry("a", "b"))], step=1, task="t"
        ),
        "missing_target",
    ),
    "step >= 2**31 in apply": (lambda bank, seed: bank.apply([add("key")], step=2**31, task="t"), "bad_step"),
    "step NaN in apply": (lambda bank, seed: bank.apply([add("key")], step=float("nan"), task="t"), "bad_step"),
    "fractional step": (lambda bank, seed: bank.apply([add("key")], step=1.5, task="t"), "bad_step"),
    "step >= 2**31 in a rejection": (
        lambda bank, seed: bank.log_rejection(step=2**31, task="t", reason="bad_json", raw="{"), "bad_step"
    ),
    "step NaN in a rejection": (
        lambda bank, seed: bank.log_rejection(step=float("nan"), task="t", reason="bad_json", raw="{"), "bad_step"
    ),
    "step >= 2**31 in uses": (lambda bank, seed: bank.record_uses([seed], [True], step=2**31), "bad_step"),
    "step -inf in uses": (lambda bank, seed: bank.record_uses([seed], [True], step=float("-inf")), "bad_step"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_a_rejection_that_leaves_the_bank_usable(case, embedder):
    call, reason = BAD_INPUTS[case]
    with ExperienceBank(None, embedder) as bank:
        (seed,) = bank.apply([add("Locked doors", "Pick up the key first.")], step=0, task="t")
        entries, ops = bank.entries(include_deleted=True), bank.operations()
        with pytest.raises(BankWriteError) as caught:
            call(bank, seed)
        assert caught.value.reason == reason, str(caught.value)
        pd.testing.assert_frame_equal(bank.entries(include_deleted=True), entries)
        pd.testing.assert_frame_equal(bank.operations(), ops)
        _still_works(bank)


def test_unknown_ids_beyond_32_bits_are_missing_not_a_crash(embedder):
    with ExperienceBank(None, embedder) as bank:
        (seed,) = bank.apply([add("seed")], step=0, task="t")
        with pytest.raises(KeyError, match=str(2**31)):
            bank.record_uses([seed, 2**31], [True, True], step=1)
        with pytest.raises(KeyError, match=str(2**40)):
            bank.get(2**40)
        assert bank.get(seed).uses == 0
        _still_works(bank)


def test_lone_surrogates_in_logged_text_are_stored_escaped(embedder):
    """Extractor output is free text: a lone surrogate outside the entry texts is kept, escaped, in the log."""
    raw = "<think>\ud800</think><answer>[]</answer>"
    with ExperienceBank(None, embedder) as bank:
        bank.apply([add("key")], step=1, task="t", raw=raw, source="episode \udc00")
        bank.log_rejection(step=1, task="room\ud83d", reason="bad_text", raw=raw)
        ops = bank.operations()
        assert ops["raw"].tolist() == ["<think>\\ud800</think><answer>[]</answer>"] * 2
        assert ops["source"].tolist()[0] == "episode \\udc00"
        assert ops["task"].tolist() == ["t", "room\\ud83d"]
        with pytest.raises(ValueError, match="surrogate"):
            bank.search(["key"], task="room\ud83d")
        _still_works(bank)


_SECOND_PROCESS = """
import sys
from comprl.experience.bank import Embedder, ExperienceBank
from comprl.widgets import BankExplorer

class Sized(Embedder):
    dim = 384  # the file is never read, so no model needs loading

try:
    ExperienceBank(sys.argv[1], Sized())
except Exception as error:
    print(type(error).__name__, error)
with BankExplorer(sys.argv[1]) as explorer:
    print("TITLES", explorer.table(0)["title"].tolist())
"""


def test_a_bank_held_by_another_process_is_a_clear_error_with_a_read_only_way_in(tmp_path, embedder):
    path = tmp_path / "run" / "bank.duckdb"
    with ExperienceBank(path, embedder) as bank:
        bank.apply([add("Locked doors", "Pick up the key first.")], step=0, task="t")
        holder = json.loads(Path(f"{path}.holder").read_text())
        assert (holder["pid"], holder["host"]) == (os.getpid(), socket.gethostname())
        child = subprocess.run(
            [sys.executable, "-c", _SECOND_PROCESS, str(path)], capture_output=True, text=True, timeout=300
        )
    assert child.returncode == 0, child.stderr
    error, titles = child.stdout.strip().splitlines()
    assert error.startswith("BankLockedError") and issubclass(BankLockedError, RuntimeError)
    assert f"PID {os.getpid()}" in error and socket.gethostname() in error and "pytest" in error
    assert f"comprl.widgets.BankExplorer('{path}')" in error
    assert titles == "TITLES ['Locked doors']"
    assert not Path(f"{path}.holder").exists(), "closing the bank removes its holder file"


# ---------------------------------------------------------------------------------------------------------------
# Concurrency: readers share the bank, writers get it alone and go first
# ---------------------------------------------------------------------------------------------------------------

_WAIT = 20.0  # seconds an Event may take to be set before the test gives up (only ever reached on failure)


class NoModel(Embedder):
    """An embedder that never loads its model: these tests pass every embedding in."""

    dim = DIM


def _vector_of(title: str) -> np.ndarray:
    """A fixed unit embedding per title, so that a search hit's score can be checked against its entry."""
    return unit_vectors(np.random.default_rng(zlib.crc32(title.encode())), 1)[0]


def _embedded(writes: list[Write]) -> np.ndarray:
    vectors = [_vector_of(w.entry.title) for w in writes if w.entry is not None]
    return np.array(vectors, dtype=np.float32).reshape(len(vectors), DIM)


def test_concurrent_writers_and_readers_keep_the_bank_consistent(tmp_path):
    """8 threads applying random valid batches and 8 searching at once: no error anywhere, every hit is an entry
    as it was written (row and embedding agree: no torn read), and the live bank equals its replayed log."""
    path = tmp_path / "bank.duckdb"
    n_writers, n_readers, n_ops = 8, 8, 12
    start = threading.Barrier(n_writers + n_readers, timeout=_WAIT)
    hits_seen: list = []

    with ExperienceBank(path, NoModel()) as bank:
        bank.apply([add("seed")], step=0, task="t", embeddings=_embedded([add("seed")]))

        def writer(w: int) -> None:
            rng = np.random.default_rng(100 + w)
            mine: list[int] = []  # this writer's live entries: only it targets them, so every batch is valid
            start.wait()
            for i in range(n_ops):
                step = int(rng.integers(1, 6))
                kind = rng.choice(["add", "update", "discard", "use", "none"]) if mine else "add"
                if kind == "use":
                    bank.record_uses(mine[:2], [bool(rng.integers(2))] * len(mine[:2]), step=step)
                    continue
                writes: list[Write] = []
                if kind == "add":
                    writes = [add(f"w{w}-{i}-{j}") for j in range(int(rng.integers(1, 4)))]
                elif kind == "update":
                    targets = tuple(mine.pop(int(rng.integers(len(mine)))) for _ in range(min(len(mine), 2)))
                    writes = [Write("update", targets=targets, entry=NewEntry(f"w{w}-{i}-u", f"merges {targets}"))]
                elif kind == "discard":
                    writes = [Write("discard", targets=(mine.pop(0),))]
                mine += bank.apply(writes, step=step, task=f"task{w % 2}", embeddings=_embedded(writes))

        def reader(r: int) -> None:
            rng = np.random.default_rng(200 + r)
            start.wait()
            for i in range(n_ops):
                queries = unit_vectors(rng, int(rng.integers(1, 5)))
                task = [None, "task0", "task1"][i % 3]
                found = bank.search_vectors(queries, k=3, task=task, exact=bool(i % 2))
                hits_seen.extend((query, task, hit) for query, hits in zip(queries, found) for hit in hits)
                if i % 4 == 0:
                    assert not bank.entries().empty and not bank.operations().empty

        with ThreadPoolExecutor(n_writers + n_readers) as pool:
            futures = [pool.submit(writer, w) for w in range(n_writers)]
            futures += [pool.submit(reader, r) for r in range(n_readers)]
            for future in futures:
                future.result(timeout=120)

        stored = bank.entries(include_deleted=True).set_index("id")
        assert hits_seen, "the readers should have found entries"
        for query, task, hit in hits_seen:
            row = stored.loc[hit.entry.id]
            assert (hit.entry.title, hit.entry.content, hit.entry.task) == (row["title"], row["content"], row["task"])
            assert hit.entry.parents == row["parents"] and hit.entry.created_step == row["created_step"]
            assert not hit.entry.deleted and (task is None or hit.entry.task == task)
            assert hit.score == pytest.approx(float(_vector_of(hit.entry.title) @ query), abs=1e-4)
        ops = bank.operations()
        assert ops["seq"].tolist() == list(range(1, len(ops) + 1))
        assert ops["batch"].is_monotonic_increasing
        live = bank.entries()
        pd.testing.assert_frame_equal(bank.at_step(int(ops["step"].max())), live)
    with ExperienceBank(path, NoModel()) as bank:  # and all of it reached the file
        pd.testing.assert_frame_equal(bank.entries(), live)


class _Parked:
    """Makes one chosen thread's search stop inside the bank's read section until released."""

    def __init__(self, bank: ExperienceBank, monkeypatch) -> None:
        self.inside, self.release = threading.Event(), threading.Event()
        self.thread: int | None = None
        by_id = bank._entries_by_id

        def entries_by_id(ids):  # called by search_vectors while it holds the bank for reading
            if threading.get_ident() == self.thread:
                self.inside.set()
                assert self.release.wait(_WAIT), "the parked search was never released"
            return by_id(ids)

        monkeypatch.setattr(bank, "_entries_by_id", entries_by_id)

    def search(self, bank: ExperienceBank, vectors: np.ndarray) -> list:
        self.thread = threading.get_ident()
        return bank.search_vectors(vectors, k=1)


def test_a_search_does_not_wait_for_another_search(monkeypatch):
    rng = np.random.default_rng(8)
    vectors = unit_vectors(rng, 4)
    with ExperienceBank(None, NoModel()) as bank, ThreadPoolExecutor(2) as pool:
        ids = bank.apply([add(f"v{i}") for i in range(4)], step=0, task="t", embeddings=vectors)
        parked = _Parked(bank, monkeypatch)
        first = pool.submit(parked.search, bank, vectors[:1])
        try:
            assert parked.inside.wait(_WAIT), "the first search never reached the read section"
            second = pool.submit(bank.search_vectors, vectors[1:2], k=1)
            second_done = threading.Event()
            second.add_done_callback(lambda _: second_done.set())
            # while the first search still holds its read, the second one runs to the end
            assert second_done.wait(_WAIT), "a search waited for another search to finish"
            assert not first.done()
            assert top_ids(second.result()) == [[ids[1]]]
        finally:
            parked.release.set()
        assert top_ids(first.result(timeout=_WAIT)) == [[ids[0]]]


def test_a_waiting_write_goes_before_later_searches(monkeypatch):
    rng = np.random.default_rng(9)
    vectors = unit_vectors(rng, 3)
    with ExperienceBank(None, NoModel()) as bank, ThreadPoolExecutor(3) as pool:
        lock = bank._lock
        (old,) = bank.apply([add("old")], step=0, task="t", embeddings=vectors[:1])
        order: list[str] = []
        log = bank._log
        monkeypatch.setattr(bank, "_log", lambda ops, step: order.append("write") or log(ops, step))
        parked = _Parked(bank, monkeypatch)
        by_id = bank._entries_by_id
        monkeypatch.setattr(bank, "_entries_by_id", lambda ids: order.append("read") or by_id(ids))

        def waits(count: str) -> bool:
            with lock._cond:
                return lock._cond.wait_for(lambda: getattr(lock, count) == 1, timeout=_WAIT)

        first = pool.submit(parked.search, bank, vectors[1:2])
        try:
            assert parked.inside.wait(_WAIT), "the first search never reached the read section"
            write = pool.submit(bank.apply, [add("new")], step=1, task="t", embeddings=vectors[1:2])
            assert waits("_waiting_writers"), "the write should wait for the search in progress"
            later = pool.submit(bank.search_vectors, vectors[1:2], k=1)
            assert waits("_waiting_readers"), "a search arriving after a waiting write should wait too"
            assert not write.done() and not later.done() and order == ["read"]
        finally:
            parked.release.set()
        (new,) = write.result(timeout=_WAIT)
        assert top_ids(first.result(timeout=_WAIT)) == [[old]]  # it searched before the write
        assert top_ids(later.result(timeout=_WAIT)) == [[new]]  # it searched after the write
        assert order == ["read", "write", "read"]
