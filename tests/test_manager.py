"""The experience manager: the interface in both hosts, batching, re-ranking, the background track's reliability.

Every manager here is real: the tiny random extractor generates, MiniLM embeds, a DuckDB file stores the bank.
``background=True`` runs the same threads the Ray-hosted manager runs in its own process.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pandas as pd
import pytest
import torch

from comprl.config import make_config
from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
from comprl.experience.interface import Episode, Outcome
from comprl.experience.manager import ExperienceManager, queue_path
from comprl.llm import HFEngine, load_model, sharing_weights
from comprl.actor.trainer import ActorTrainer

ROOM = "comprl/Room-Ultimate-5x5-v0"
MAZE = "comprl/MazeWalk-9x9-v0"


def config(**overrides):
    base = {"method": "comp_rl", "experience.warmup": 0, "extractor.max_new_tokens": 12}
    return make_config("smoke", **{**base, **overrides})


def episode(i: int, step: int = 1, task: str = ROOM, seed: int | None = None, success: bool = False) -> Episode:
    messages = (
        {"role": "system", "content": "Reach the stairs down, shown as >."},
        {"role": "user", "content": f"You see a room; the stairs are {i % 4 + 1} squares east."},
        {"role": "assistant", "content": "<answer>east</answer>"},
    )
    return Episode(task, seed if seed is not None else i, step, i, "Reach the stairs down.", messages, success)


def add(bank: ExperienceBank, titles, task=ROOM, step=0) -> list[int]:
    return bank.apply([Write("add", entry=NewEntry(t, f"content of {t}")) for t in titles], step=step, task=task)


@pytest.fixture()
def sync_manager(tmp_path):
    manager = ExperienceManager(config(), tmp_path / "bank.duckdb")
    yield manager
    manager.close()


def test_sync_submit_distils_before_returning_and_every_reply_is_accounted_for(sync_manager):
    assert sync_manager.search(["anything"], [ROOM]) == [None]  # empty bank
    sync_manager.submit([episode(i) for i in range(3)])
    stats = sync_manager.stats()
    assert stats["manager_distilled"] == 3 and stats["extractor_outputs"] == 3
    assert stats["extractor_valid"] + stats["extractor_rejected"] == 3
    assert stats["bank_size"] == len(sync_manager.bank) == stats["bank_writes_applied"]
    log = sync_manager.bank.operations()
    assert set(log["source"].dropna()) <= {f"step1/episode{i}/seed{i}" for i in range(3)}


def test_queries_are_batched_with_one_embedding_call_per_batch(tmp_path):
    manager = ExperienceManager(config(**{"experience.query_batch": 4}), tmp_path / "bank.duckdb")
    add(manager.bank, [f"lesson {i}" for i in range(8)])
    calls = []
    encode = manager.bank.embedder.encode
    manager.bank.embedder.encode = lambda texts: calls.append(len(texts)) or encode(texts)
    found = manager.search([f"query {i}" for i in range(10)], [ROOM] * 10)
    assert calls == [4, 4, 2] and all(e is not None for e in found)
    stats = manager.stats()
    assert stats["manager_search_batches"] == 3 and stats["manager_embedding_calls"] == 3
    manager.close()


def test_background_batcher_flushes_at_the_batch_size_and_after_the_wait(tmp_path):
    manager = ExperienceManager(
        config(**{"experience.query_batch": 8, "experience.query_wait_ms": 50.0}),
        tmp_path / "bank.duckdb",
        background=True,
    )
    add(manager.bank, ["a", "b", "c"])
    sizes = []
    encode = manager.bank.embedder.encode
    manager.bank.embedder.encode = lambda texts: sizes.append(len(texts)) or encode(texts)
    threads = [threading.Thread(target=manager.search, args=([f"q{i}"], [ROOM])) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    manager.search([f"many {i}" for i in range(20)], [ROOM] * 20)
    assert sum(sizes) == 23 and max(sizes) <= 8
    assert sizes.count(8) >= 2, f"a 20-query call fills batches of 8: {sizes}"
    manager.close()


def test_one_entry_per_task_instance_and_evaluation_does_not_record(tmp_path):
    manager = ExperienceManager(config(), tmp_path / "bank.duckdb")
    add(manager.bank, [f"lesson {i}" for i in range(6)])
    shown = manager.search(["same start"] * 4 + ["other start"] * 2, [ROOM] * 6, seeds=[5, 5, 5, 5, 9, 9])
    assert len({e.id for e in shown[:4]}) == 1 and len({e.id for e in shown[4:]}) == 1
    # evaluation: independent of chunking, and it leaves no recency behind
    queries, seeds = [f"eval {i}" for i in range(6)], list(range(100, 106))
    whole = manager.search(queries, [ROOM] * 6, seeds=seeds, record=False)
    chunked = manager.search(queries[:2], [ROOM] * 2, seeds=seeds[:2], record=False) + manager.search(
        queries[2:], [ROOM] * 4, seeds=seeds[2:], record=False
    )
    assert [e.id for e in whole] == [e.id for e in chunked]
    manager.close()


def test_official_reranking_penalises_recent_retrievals_and_forgets_them_after_the_window(tmp_path):
    now = [0.0]
    manager = ExperienceManager(
        config(**{"bank.dropout": 0.0}), tmp_path / "bank.duckdb", clock=lambda: now[0]
    )
    add(manager.bank, ["open the door with the key", "walk east to the stairs", "pick up the gold"])
    first = manager.search(["walk east to the stairs"], [ROOM])[0]
    assert first.title == "walk east to the stairs"
    second = manager.search(["walk east to the stairs"], [ROOM])[0]
    assert second.id != first.id, "a top-1 retrieved within the window ranks below the next candidate"
    now[0] += 301.0  # outside the 300 s window
    assert manager.search(["walk east to the stairs"], [ROOM])[0].id == first.id
    manager.close()


def test_batch_reranking_and_the_popularity_penalty(tmp_path):
    manager = ExperienceManager(config(**{"bank.rerank": "batch"}), tmp_path / "bank.duckdb")
    ids = add(manager.bank, ["walk east to the stairs", "walk east then south to the stairs"])
    shown = manager.search(["walk east to the stairs", "walk east to the stairs"], [ROOM] * 2)
    assert {e.id for e in shown} == set(ids), "within one batch the second query sees another entry"
    manager.bank.record_uses([ids[0]] * 50, [False] * 50, step=1)  # lambda*log1p(50) = 1.57 outweighs similarity
    assert manager.search(["walk east to the stairs"], [ROOM])[0].id == ids[1]
    manager.close()


def test_an_instance_never_sees_an_entry_distilled_from_its_own_seed(tmp_path):
    manager = ExperienceManager(config(**{"bank.exclude_own_seed": True}), tmp_path / "bank.duckdb")
    manager.submit([episode(0, seed=42), episode(1, seed=42)])
    assert len(manager.bank) > 0
    assert manager.search(["reach the stairs"], [ROOM], seeds=[42]) == [None]
    assert manager.search(["reach the stairs"], [ROOM], seeds=[7])[0] is not None
    manager.close()


def test_the_similarity_gate_shows_nothing_rather_than_a_far_entry(tmp_path):
    config_ = config(**{"bank.min_similarity": 0.6})
    manager = ExperienceManager(config_, tmp_path / "bank.duckdb")
    add(manager.bank, ["walk east to the stairs", "pick up the gold coins"])
    near, far = manager.search(["walk east to the stairs", "bake bread in a clay oven"], [ROOM] * 2, record=False)
    assert near is not None and near.title == "walk east to the stairs"
    assert far is None, "no entry is within the gate: the episode plays free"
    ungated = ExperienceManager(config(), tmp_path / "other.duckdb")
    add(ungated.bank, ["walk east to the stairs", "pick up the gold coins"])
    assert ungated.search(["bake bread in a clay oven"], [ROOM], record=False)[0] is not None  # the paper's: nearest
    for value in (1.5, -2.0):
        with pytest.raises(ValueError, match="min_similarity.*accepted: None or a cosine in"):
            config(**{"bank.min_similarity": value})
    manager.close()
    ungated.close()


def test_the_warmup_gate_holds_the_guided_half_until_the_bank_has_enough_entries(tmp_path):
    manager = ExperienceManager(config(**{"experience.warmup": 3}), tmp_path / "bank.duckdb")
    add(manager.bank, ["a", "b"])
    assert manager.search(["a"], [ROOM]) == [None] and manager.stats()["manager_search_gated"] == 1
    add(manager.bank, ["c"])
    assert manager.search(["a"], [ROOM])[0] is not None
    manager.close()


def test_tasks_share_one_bank_and_search_within_their_own(tmp_path):
    manager = ExperienceManager(config(), tmp_path / "bank.duckdb")
    add(manager.bank, ["room lesson"], task=ROOM)
    add(manager.bank, ["maze lesson"], task=MAZE)
    assert manager.search(["lesson"], [MAZE])[0].title == "maze lesson"
    manager.submit([episode(0, task=MAZE)])
    tasks = set(manager.bank.operations().dropna(subset=["source"])["task"])
    assert tasks == {MAZE}
    manager.close()


def test_credit_trains_the_extractor_on_its_own_schedule(tmp_path):
    manager = ExperienceManager(
        config(**{"extractor.invalid_reward": None, "extractor.buffer_size": 2}), tmp_path / "bank.duckdb"
    )
    manager.submit([episode(i) for i in range(4)])
    written = [int(i) for i in manager.bank.entries()["id"]]
    assert written, "the tiny extractor's notes are valid additions"
    manager.stats()
    manager.credit([Outcome(e, s) for e, s in zip(written[:2], (True, False))], step=2)
    stats = manager.stats()
    assert stats["extractor_updates"] >= 1 and "extractor_loss" in stats
    assert manager.bank.get(written[0]).uses == 1
    manager.close()


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_with_shared_weights_an_extractor_update_changes_the_actors_weights(tmp_path, lora_rank):
    shared = config(**{
        "extractor.share_actor": True, "extractor.invalid_reward": None, "extractor.buffer_size": 2,
        "actor.lora_rank": lora_rank, "extractor.lora_rank": lora_rank,
    })
    model, tokenizer = load_model(shared.model, seed=0)
    actor = ActorTrainer(model, tokenizer.pad_token_id, shared.actor)
    manager = ExperienceManager(
        shared, tmp_path / "bank.duckdb", actor=actor, actor_engine=HFEngine(actor.model, tokenizer)
    )
    assert manager.trainer.model is actor.model and manager.engine.model is actor.model  # no model of its own
    trained = [name for name, p in actor.model.named_parameters() if p.requires_grad]
    assert all("lora_" in name for name in trained) == (lora_rank > 0)  # the actor's one adapter, not a second
    assert manager.trainer.optimizer is not actor.optimizer  # each objective has its own AdamW state
    before = {name: p.detach().clone() for name, p in actor.model.named_parameters()}
    manager.submit([episode(i) for i in range(4)])
    written = [int(i) for i in manager.bank.entries()["id"]]
    manager.credit([Outcome(e, s) for e, s in zip(written[:2], (True, False))], step=2)
    assert manager.stats()["extractor_updates"] >= 1
    changed = {name for name, p in actor.model.named_parameters() if not torch.equal(before[name], p)}
    assert changed and changed <= set(trained)
    manager.close()


def test_the_extractor_starts_from_its_own_seed_and_leaves_the_callers_generator_alone(tmp_path):
    lora = config(**{"extractor.lora_rank": 4})
    adapters = []
    for caller_seed in (1, 2):
        torch.manual_seed(caller_seed)
        state = torch.get_rng_state()
        manager = ExperienceManager(lora, tmp_path / f"bank{caller_seed}.duckdb")
        assert torch.equal(torch.get_rng_state(), state)  # a sync manager leaves the actor's sampling as it was
        adapters.append({n: p.detach().clone() for n, p in manager.trainer.model.named_parameters() if "lora_A" in n})
        manager.close()
    assert adapters[0] and adapters[0].keys() == adapters[1].keys()
    assert all(
        torch.equal(adapters[0][n], adapters[1][n]) for n in adapters[0]
    )  # the seed alone, not the caller's state


def test_shared_weights_are_refused_where_they_cannot_be_shared(tmp_path):
    shared = {"extractor.share_actor": True}
    with pytest.raises(ValueError, match="needs experience.mode='sync'"):
        config(**shared, **{"experience.mode": "async"})
    with pytest.raises(ValueError, match="method='exp_only' freezes the actor"):
        config(**shared, method="exp_only")
    with pytest.raises(ValueError, match="pass the actor's trainer and engine"):
        ExperienceManager(config(**shared), tmp_path / "bank.duckdb")
    model, tokenizer = load_model("tiny-random", seed=0)
    actor = ActorTrainer(model, tokenizer.pad_token_id)
    with pytest.raises(ValueError, match="which this config leaves off"):
        ExperienceManager(config(), tmp_path / "bank.duckdb", actor=actor, actor_engine=HFEngine(model, tokenizer))


def test_the_extractor_shares_the_actors_frozen_base_only_where_results_cannot_change():
    cpu = make_config("cpu", method="comp_rl")
    assert cpu.extractor_shares_base  # SmolLM2 twice, both LoRA, in-process
    assert make_config("cpu", method="exp_only", **{"extractor.lora_rank": 16}).extractor_shares_base  # a frozen actor
    for unshared in (
        {"extractor.share_base": False},
        {"experience.mode": "async"},  # the manager in another process
        {"actor.lora_rank": 0},  # a full fine-tune trains the base
        {"extractor.lora_rank": 0},
        {"extractor.model": "tiny-random"},
        {"extractor.share_actor": True},  # one model, not two
    ):
        assert not make_config("cpu", method="comp_rl", **unshared).extractor_shares_base, unshared
    assert not make_config("cpu", method="baseline").extractor_shares_base
    assert not config(
        **{"actor.lora_rank": 4, "extractor.lora_rank": 4}
    ).extractor_shares_base  # tiny-random: seeded apart


def test_a_run_whose_extractor_shares_the_actors_base_logs_what_a_run_with_two_copies_logs(tmp_path, monkeypatch):
    from conftest import make_rewarding_even_replies

    from comprl.envs import mixture
    from comprl.llm import load_tokenizer
    from comprl import loop

    model, _ = load_model("tiny-random", seed=0)  # saved, so that actor and extractor load the same weights
    model.save_pretrained(tmp_path / "model")
    load_tokenizer("tiny-random").save_pretrained(tmp_path / "model")
    monkeypatch.setattr(mixture, "make", make_rewarding_even_replies)  # non-zero advantages: both models train
    shared = []
    monkeypatch.setattr(loop, "sharing_weights", lambda m: shared.append(m) or sharing_weights(m))

    def rows(share: bool):
        run = loop.run_experiment(
            config(
                **{
                    "model": str(tmp_path / "model"),
                    "extractor.model": str(tmp_path / "model"),
                    "steps": 3,
                    "eval_episodes": 2,
                    "actor.lora_rank": 4,
                    "extractor.lora_rank": 4,
                    "extractor.share_base": share,
                    "extractor.buffer_size": 2,
                    "extractor.invalid_reward": None,
                }
            ),
            tmp_path / f"runs_{share}",  # folders of their own: each plays its step-0 evaluation
            name=f"share_{share}",
            progress=False,
        )
        metrics = run.metrics()
        return metrics[[c for c in metrics.columns if not any(t in c for t in ("seconds", "per_second", "_ms_"))]]

    separate = rows(False)
    assert shared == []
    together = rows(True)
    assert len(shared) == 1
    assert separate["actor_trained_sequences"].sum() > 0 and separate["extractor_updates"].max() > 0
    pd.testing.assert_frame_equal(separate, together)


def test_backpressure_with_a_slow_extractor_keeps_submit_fast_and_counts_what_it_drops(tmp_path):
    slow = config(**{"experience.queue_size": 4, "experience.distill_batch": 1, "extractor.max_new_tokens": 48})
    manager = ExperienceManager(slow, tmp_path / "bank.duckdb", background=True)
    for step in range(1, 6):
        manager.submit([episode(i, step=step) for i in range(4)])  # 20 episodes, a queue of 4
    first = manager.stats()
    assert first["manager_submitted"] == 20 and first["manager_queue"] <= 4
    assert first["manager_dropped"] >= 20 - 4 - first.get("manager_distilled", 0) - 1
    report = manager.close()
    total = report["stats"].get("manager_distilled", 0) + first.get("manager_distilled", 0)  # the rest: at close
    assert report["drained"] <= 4 and report["error"] is None
    assert total + first["manager_dropped"] == 20, "every submitted episode was distilled or counted as dropped"


def test_flush_fence_then_step_done(tmp_path):
    manager = ExperienceManager(config(**{"experience.fence": "flush"}), tmp_path / "bank.duckdb", background=True)
    manager.submit([episode(i) for i in range(3)])
    manager.fence()  # waits until the three are distilled, then suspends the extractor
    assert manager.stats()["manager_distilled"] == 3
    manager.submit([episode(9)])
    time.sleep(0.3)
    assert manager.stats().get("manager_distilled", 0) == 0, "suspended until the step is done"
    manager.step_done(1)
    assert manager.flush(timeout=60) and manager.stats()["manager_distilled"] == 1
    manager.close()


def test_persisted_queue_is_picked_up_by_the_next_manager(tmp_path):
    path = tmp_path / "bank.duckdb"
    manager = ExperienceManager(config(**{"experience.shutdown": "persist"}), path, background=True)
    manager.fence()  # suspended: nothing gets distilled
    manager.submit([episode(i) for i in range(3)])
    report = manager.close()
    assert report["persisted"] == 3 and queue_path(path).is_file()
    again = ExperienceManager(config(), path)
    assert again.stats()["manager_restored"] == 3 and not queue_path(path).exists()
    assert len(again.bank.operations().dropna(subset=["source"])) >= 3
    again.close()


def test_shutdown_in_the_middle_of_a_merge_leaves_a_consistent_bank(tmp_path):
    manager = ExperienceManager(
        config(**{"extractor.merge_every": 1, "extractor.max_new_tokens": 32}),
        tmp_path / "bank.duckdb",
        background=True,
    )
    add(manager.bank, [f"lesson {i}" for i in range(12)])
    manager.step_done(1)  # schedules a merge pass over 12 entries
    time.sleep(0.2)
    report = manager.close()
    assert report["error"] is None
    with ExperienceBank(tmp_path / "bank.duckdb", manager.bank.embedder) as bank:
        live = bank.entries()
        replay = bank.at_step(int(bank.operations()["step"].max()))
        assert live[["id", "title", "content"]].equals(replay[["id", "title", "content"]])


def test_sixteen_threads_through_the_manager(tmp_path):
    """8 writers (4 apply random valid op lists, 4 submit episodes) and 8 readers through the batched path."""
    manager = ExperienceManager(config(**{"experience.query_batch": 4}), tmp_path / "bank.duckdb", background=True)
    add(manager.bank, [f"seed lesson {i}" for i in range(4)])
    errors: list[BaseException] = []
    ops = {"writes": 0, "searches": 0, "submits": 0}
    seen: list = []
    stop = time.monotonic() + 8.0

    def guard(fn):
        def run(k):
            try:
                fn(k)
            except BaseException as error:  # noqa: BLE001 - collected and asserted below
                errors.append(error)
        return run

    @guard
    def writer(k: int) -> None:
        rng = random.Random(k)
        while time.monotonic() < stop:
            live = [int(i) for i in manager.bank.entries()["id"]]
            n = rng.randint(0, 99999)
            write = Write("add", entry=NewEntry(f"writer{k}-{n}", f"body writer{k}-{n}"))
            if live and rng.random() < 0.3:
                write = Write(
                    "update", targets=(rng.choice(live),), entry=NewEntry(f"writer{k}-{n}", f"body writer{k}-{n}")
                )
            elif live and rng.random() < 0.2:
                write = Write("discard", targets=(rng.choice(live),))
            try:
                manager.bank.apply([write], step=1, task=ROOM, source=f"writer{k}")
            except ValueError:  # a target another writer deleted first: rejected whole, by design
                pass
            ops["writes"] += 1

    @guard
    def submitter(k: int) -> None:
        while time.monotonic() < stop:
            manager.submit([episode(k * 1000 + ops["submits"])])
            ops["submits"] += 1
            time.sleep(0.5)

    @guard
    def reader(k: int) -> None:
        while time.monotonic() < stop:
            for entry in manager.search([f"lesson {k}", f"writer{k}"], [ROOM] * 2, seeds=[k, k + 100]):
                if entry is not None:
                    seen.append(entry)
            ops["searches"] += 2

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    threads += [threading.Thread(target=submitter, args=(k,)) for k in range(4)]
    threads += [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report = manager.close()
    assert errors == [] and report["error"] is None
    assert ops["writes"] > 20 and ops["searches"] > 20 and ops["submits"] > 4, ops
    with ExperienceBank(tmp_path / "bank.duckdb", manager.bank.embedder) as bank:
        every = bank.entries(include_deleted=True).set_index("id")
        for entry in seen:  # no torn read: every shown entry is a row as it was written
            assert (every.loc[entry.id, "title"], every.loc[entry.id, "content"]) == (entry.title, entry.content)
            if entry.title.startswith("writer"):
                assert entry.content == f"body {entry.title}"
        live = bank.entries()
        replay = bank.at_step(int(bank.operations()["step"].max()))
        assert live[["id", "title", "content", "uses"]].equals(replay[["id", "title", "content", "uses"]])
    print(f"16 threads, 8 s: {ops}")


class KnownSize(Embedder):
    """MiniLM's name and size without loading it: the writes below bring their own vectors."""

    dim = 384


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write

    class KnownSize(Embedder):
        dim = 384

    bank = ExperienceBank(sys.argv[1], KnownSize())
    rng = np.random.default_rng(int(sys.argv[2]))
    n = 0
    while True:
        n += 1
        vector = rng.normal(size=(1, 384)).astype("float32")
        (entry_id,) = bank.apply(
            [Write("add", entry=NewEntry(f"t{n}", f"c{n}"))], step=n, task="comprl/Room-Ultimate-5x5-v0",
            embeddings=vector,
        )
        print(entry_id, flush=True)
    """
)


def test_acknowledged_writes_survive_sigkill(tmp_path):
    """A writer killed with SIGKILL mid-stream, ten times: every write it acknowledged is there after reopening."""
    path = tmp_path / "bank.duckdb"
    rng = random.Random(0)
    acknowledged: list[int] = []
    for round in range(10):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(round)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(rng.randint(1, 30)):
            acknowledged.append(int(child.stdout.readline()))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with ExperienceBank(path, KnownSize()) as bank:  # reopens after the crash (the holder file is stale)
            ids = set(bank.entries()["id"])
        missing = set(acknowledged) - ids
        assert not missing, f"round {round}: acknowledged ids lost: {sorted(missing)}"
    assert len(acknowledged) >= 10


def test_close_reports_every_dropped_episode_although_stats_took_the_counts(tmp_path):
    settings = {"experience.queue_size": 2, "experience.shutdown": "persist"}
    manager = ExperienceManager(config(**settings), tmp_path / "bank.duckdb", background=True)
    manager.fence()  # suspended: nothing is distilled, the queue stays full
    manager.submit([episode(i) for i in range(5)])
    assert manager.stats()["manager_dropped"] == 3  # per interval, as the loop logs it
    manager.submit([episode(i, step=2) for i in range(5)])
    report = manager.close()
    assert report["dropped"] == 8 and report["persisted"] == 2


@pytest.mark.parametrize("bound", [1, 3])
def test_merges_waiting_for_a_busy_extractor_never_exceed_the_bound(tmp_path, bound):
    settings = {"extractor.merge_every": 1, "experience.max_pending_merges": bound}
    manager = ExperienceManager(config(**settings), tmp_path / "bank.duckdb", background=True)
    add(manager.bank, ["lesson a", "lesson b", "lesson c"])
    with manager._engine_lock:  # the extractor is busy: merges wait
        for step in range(1, 61):
            manager.step_done(step)
            assert len(manager._merges) <= bound
    assert manager.flush(timeout=120)
    stats = manager.stats()
    assert stats["manager_merges"] + stats["manager_merges_coalesced"] == 60 and stats["manager_merges"] <= bound + 1
    assert manager.close()["error"] is None
