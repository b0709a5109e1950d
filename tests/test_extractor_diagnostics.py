"""The per-step diagnostics that separate the two sides (issue 46): does the extractor write usable experience (its
replies valid, cut at the token cap, empty; the valid ones' length), and does the actor use it (guided minus free
success where the guided half was shown an entry; evaluation episodes actually shown one)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_rewarding_even_replies

import comprl
from comprl import loop, tracking
from comprl.actor.rollout import Trajectory
from comprl.chat import ChatFormat
from comprl.config import ExtractorConfig, make_config
from comprl.envs import mixture
from comprl.experience.bank import Embedder, ExperienceBank
from comprl.experience.extractor.track import ExperienceTrack, reply_rates
from comprl.experience.interface import Episode
from comprl.experience.manager import ExperienceManager
from comprl.kit.report import extractor_diagnostics
from comprl.llm import HFEngine, load_model
from comprl.ray_start import start_ray
from comprl.runs import AFTER_TRAINING, Run, load_metrics

ROOM = "comprl/Room-Ultimate-5x5-v0"
PREFIX = "Lesson:"
LESSON = (" keep", " left")
"""The reply the chain model writes after ``PREFIX``: two word tokens, then its EOS token."""
ROW_FRACTIONS = ("extractor_valid_fraction", "extractor_cut_fraction", "extractor_empty_fraction")
DIAGNOSTICS = (*ROW_FRACTIONS, "extractor_cut", "extractor_empty", "extractor_lesson_tokens", "guided_minus_free")


@pytest.fixture(scope="module")
def chain_engine():
    """The tiny random model rewired so that its greedy next token depends on the last token alone and follows
    fixed links: attention and MLP outputs zeroed (the last position's hidden state is its token's embedding), and
    an untied LM head whose only non-zero rows point ``PREFIX``'s last token at " keep", " keep" at " left",
    " left" at EOS, and the chat template's last token (an empty reply) at EOS."""
    model, tokenizer = load_model("tiny-random", seed=0)
    chat = ChatFormat.from_tokenizer(tokenizer)
    eos = tokenizer.eos_token_id
    keep, left = (chat.encode(word)[0] for word in LESSON)
    links = {chat.encode(PREFIX)[-1]: keep, keep: left, left: eos, chat.start("s", "u")[-1]: eos}
    assert len(links) == 4, "the linked tokens must differ"
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embeddings = model.get_input_embeddings().weight
        head = torch.zeros_like(embeddings)
        for source, target in links.items():
            head[target] = 100 * embeddings[source] / embeddings[source].norm()
    model.lm_head.weight = torch.nn.Parameter(head)
    model.config.tie_word_embeddings = False
    return HFEngine(model, tokenizer), (keep, left, eos)


@pytest.fixture()
def bank(tmp_path):
    with ExperienceBank(tmp_path / "bank.duckdb", Embedder()) as opened:
        yield opened


def room_episode(step: int) -> Episode:
    """A won Room episode of one turn."""
    messages = ({"role": "user", "content": "The stairs are west."}, {"role": "assistant", "content": "west"})
    return Episode(ROOM, 1, step, 0, "Reach the stairs down.", messages, True)


def distilled(engine: HFEngine, bank: ExperienceBank, cap: int, prefix: str) -> tuple[list[int], dict[str, float]]:
    """One greedy distillation of one episode with a ``cap``-token limit: the reply's tokens and the track's stats."""
    config = ExtractorConfig(style="note", max_new_tokens=cap, temperature=0.0, response_prefix=prefix)
    track = ExperienceTrack(engine, bank, config, task=ROOM)
    (sample,) = track.distill([room_episode(step=1)], step=1)
    reply = [t for t, generated in zip(sample.token_ids, sample.action_mask) if generated]
    return reply, track.take_stats()


def test_a_reply_whose_last_allowed_token_is_eos_is_not_cut(chain_engine, bank):
    engine, (keep, left, eos) = chain_engine
    reply, stats = distilled(engine, bank, cap=3, prefix=PREFIX)
    assert reply == [keep, left, eos]  # the EOS token is the cap's last token
    assert (stats["extractor_cut"], stats["extractor_valid"], stats["extractor_empty"]) == (0, 1, 0)
    assert stats["extractor_valid_tokens"] == 3
    assert bank.entries()["content"].tolist() == ["keep left"]


def test_a_reply_stopped_by_the_cap_before_its_eos_is_cut_even_when_valid(chain_engine, bank):
    engine, (keep, left, _) = chain_engine
    reply, stats = distilled(engine, bank, cap=2, prefix=PREFIX)
    assert reply == [keep, left]
    # a cut note still passes validation: the cut is counted apart from validity
    assert (stats["extractor_cut"], stats["extractor_valid"], stats["extractor_outputs"]) == (1, 1, 1)
    rates = reply_rates(stats)
    assert (rates["extractor_cut_fraction"], rates["extractor_valid_fraction"], rates["extractor_lesson_tokens"]) == (
        1.0, 1.0, 2.0
    )


def test_a_reply_of_nothing_but_eos_is_empty_and_not_cut(chain_engine, bank):
    engine, (_, _, eos) = chain_engine
    reply, stats = distilled(engine, bank, cap=1, prefix="")
    assert reply == [eos]
    assert (stats["extractor_empty"], stats["extractor_cut"], stats["extractor_valid"]) == (1, 0, 0)
    assert stats["rejected_empty_text"] == 1
    rates = reply_rates(stats)
    assert rates["extractor_empty_fraction"] == 1.0 and math.isnan(rates["extractor_lesson_tokens"])


def test_an_evaluations_reading_takes_its_lookups_and_leaves_the_extractors_work_to_the_next(tmp_path):
    config = make_config("smoke", method="comp_rl", **{"experience.warmup": 0, "extractor.max_new_tokens": 12})
    manager = ExperienceManager(config, tmp_path / "bank.duckdb")  # sync: a submit is distilled before it returns
    manager.submit([room_episode(step=1)])
    manager.search(["Where are the stairs?"], [ROOM], record=False)
    lookups = manager.stats(searches_only=True)
    assert lookups["manager_search_queries"] == 1 and "extractor_outputs" not in lookups
    rest = manager.stats()
    assert rest["extractor_outputs"] == rest["manager_distilled"] == 1 and rest["manager_search_queries"] == 0
    manager.submit([room_episode(step=2)])
    report = manager.close()
    assert report["stats"]["extractor_outputs"] == 1, "close reads what was done since the last reading"
    assert manager.close() is report
    idle = ExperienceManager(config, tmp_path / "idle.duckdb")
    assert idle.close()["stats"] == {}, "nothing done, nothing to read"


def test_with_no_reply_since_the_last_row_the_fractions_are_nan_not_zero():
    assert all(math.isnan(v) for v in reply_rates({}).values())


def _trajectory(group: int, guided: bool, success: bool, shown: bool = True) -> Trajectory:
    return Trajectory(
        env_id=ROOM, seed=group, group=group, guided=guided, success=success,
        experience_ids=(7,) if guided and shown else (),
    )


def test_guided_minus_free_averages_the_groups_whose_guided_half_saw_an_entry():
    trajectories = [
        # group 0 saw an entry: guided 2/2, free 1/2 -> +0.5
        _trajectory(0, True, True), _trajectory(0, True, True),
        _trajectory(0, False, True), _trajectory(0, False, False),
        # group 1 saw an entry: guided 0/2, free 2/2 -> -1.0
        _trajectory(1, True, False), _trajectory(1, True, False),
        _trajectory(1, False, True), _trajectory(1, False, True),
        # group 2's guided half got nothing from the bank: left out
        _trajectory(2, True, True, shown=False), _trajectory(2, False, False),
    ]
    assert loop.guided_minus_free(trajectories) == pytest.approx(-0.25)
    assert math.isnan(loop.guided_minus_free(trajectories[8:]))
    # what the extractor's reward="over_free" subtracts, per group: group 3 has no free half
    assert loop.free_success([*trajectories, _trajectory(3, True, True)]) == {0: 0.5, 1: 1.0, 2: 0.0}


def test_the_diagnostics_stream_to_the_experience_group_of_a_tracker():
    for name in DIAGNOSTICS:
        assert tracking.tag("train", name) == f"experience/{name}"
    assert tracking.tag("train", "guided_success_rate") == "actor/guided_success_rate"


def check_rows(train, config) -> None:
    """The diagnostics of every training row are present and in range."""
    for name in DIAGNOSTICS:
        assert name in train.columns, name
    for name in ROW_FRACTIONS:
        assert train[name].dropna().between(0, 1).all(), name
    assert train["extractor_valid_fraction"].notna().any()
    assert (train["extractor_cut"] <= train["extractor_outputs"]).all()
    assert (train["extractor_empty"] <= train["extractor_rejected"]).all()
    lengths = train["extractor_lesson_tokens"].dropna()
    assert len(lengths) and lengths.between(1, config.extractor.max_new_tokens).all()
    assert train["guided_minus_free"].dropna().between(-1, 1).all()


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory, seeded_bank):
    """A smoke comp_rl run (in-process manager) whose guided halves see the seeded bank's Room lessons from step 1,
    on envs whose replies of even length win (so success differs within groups)."""
    patch = pytest.MonkeyPatch()
    patch.setattr(mixture, "make", make_rewarding_even_replies)
    config = make_config("smoke", method="comp_rl", steps=3, batch_instances=2, **{"bank.init_from": str(seeded_bank)})
    try:
        run = loop.run_experiment(config, output_dir=tmp_path_factory.mktemp("sync"), name="sync", progress=False)
    finally:
        patch.undo()
    return run, config


def test_a_sync_run_logs_the_diagnostics_in_range(sync_run):
    run, config = sync_run
    metrics = run.metrics()
    train = metrics[metrics["phase"] == "train"]
    assert len(train) == config.steps
    check_rows(train, config)
    assert train["guided_minus_free"].notna().all()  # every step's guided halves saw the seeded bank's entries
    # sync: every reply is counted in its own step's row, none is left for an after_training row
    assert set(metrics["phase"]) == {"train", "eval"}
    evals = metrics[metrics["phase"] == "eval"]
    # the seeded bank answers every evaluation query, before and after training
    assert evals["guided_with_entry"].tolist() == [config.eval_episodes] * 2


def test_the_report_reads_the_diagnostics_of_a_real_run(sync_run):
    run, config = sync_run
    metrics = load_metrics(run.path)
    table = extractor_diagnostics(metrics)
    assert table[["method", "env_id", "seeds"]].values.tolist() == [["comp_rl", config.task, 1]]
    (row,) = table.to_dict("records")
    train = metrics[metrics["phase"] == "train"]
    replies = train["extractor_outputs"].sum()
    assert row["replies"] == replies
    assert row["cut"] == pytest.approx(train["extractor_cut"].sum() / replies)
    assert row["valid"] == pytest.approx(train["extractor_valid"].sum() / replies)
    assert row["empty"] == pytest.approx(train["extractor_empty"].sum() / replies)
    assert row["lesson_tokens"] == pytest.approx(train["extractor_valid_tokens"].sum() / train["extractor_valid"].sum())
    assert row["guided_minus_free"] == pytest.approx(train["guided_minus_free"].mean())
    last = train[train["step"] == config.steps]  # the last quarter of 3 steps: step 3
    assert row["replies_last_quarter"] == last["extractor_outputs"].sum()
    assert row["cut_last_quarter"] == pytest.approx(last["extractor_cut"].sum() / last["extractor_outputs"].sum())


def test_the_report_leaves_out_methods_without_an_extractor(sync_run):
    run, _ = sync_run
    metrics = load_metrics(run.path)
    baseline = metrics.assign(method="baseline", run="b", extractor_outputs=np.nan)
    table = extractor_diagnostics(pd.concat([metrics, baseline], ignore_index=True))
    assert table["method"].tolist() == ["comp_rl"]
    assert extractor_diagnostics(baseline.drop(columns=["extractor_outputs"])).empty


@pytest.fixture(scope="module")
def async_run(tmp_path_factory):
    """A smoke comp_rl run of the 3-task mixture with the manager as a Ray actor (``experience.mode="async"``)."""
    ray = pytest.importorskip("ray")
    start_ray(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        config = make_config(
            "smoke", method="comp_rl", steps=2, tasks="3-task", batch_instances=1,
            **{"experience.mode": "async", "experience.fence": "flush"},
        )
        run = loop.run_experiment(config, output_dir=tmp_path_factory.mktemp("async"), name="async", progress=False)
    finally:
        ray.shutdown()
    return run, config


def test_an_async_mixture_run_over_ray_logs_the_diagnostics(async_run):
    run, config = async_run
    metrics = run.metrics()
    train = metrics[metrics["phase"] == "train"]
    check_rows(train, config)
    final = metrics[metrics["phase"] == "eval"].iloc[-1]
    per_task = [final[f"guided_{name}_with_entry"] for name in ("room", "webshop", "alfworld")]
    assert final["guided_with_entry"] == sum(per_task) and all(0 <= n <= config.eval_episodes for n in per_task)
    assert not extractor_diagnostics(load_metrics(run.path)).empty


def test_every_reply_of_an_async_run_is_counted_in_its_rows(async_run):
    """The extractor's work after the last training row (finished during the final evaluation and at shutdown)
    lands in the after_training row: the rows' sums equal the replies in the bank's operations log, where every
    extractor answer is one batch of rows (applied or rejected), whatever the rows said."""
    run, config = async_run
    metrics = run.metrics()
    counted = metrics[metrics["phase"].isin(["train", AFTER_TRAINING])]
    with ExperienceBank(run.bank_path, Embedder()) as bank:
        log = bank.operations()
    replies = log[log["origin"].isin(["distill", "merge"])]
    assert len(replies) and counted["extractor_outputs"].sum() == replies["batch"].nunique()
    assert counted["extractor_rejected"].sum() == (replies["op"] == "reject").sum()
    after = metrics[metrics["phase"] == AFTER_TRAINING]
    assert after["step"].tolist() == [config.steps]
    assert after["extractor_outputs"].sum() > 0  # the last step's merges, scheduled after its row was read
    assert after.filter(like="success_rate").isna().all().all()  # the experience side's columns alone
    table = extractor_diagnostics(load_metrics(run.path))
    assert table["replies"].tolist() == [replies["batch"].nunique()]


def test_resuming_after_the_last_checkpoint_drops_the_rows_logged_after_it(tmp_path):
    run = Run.create(tmp_path, make_config("smoke", method="comp_rl", steps=2), name="r")
    for step, phase in [(0, "eval"), (1, "train"), (2, "train"), (2, "eval"), (2, AFTER_TRAINING)]:
        run.log(step, phase, {"extractor_outputs": 1.0})
    run.rollback(2)
    assert run.metrics()[["step", "phase"]].values.tolist() == [[0, "eval"], [1, "train"], [2, "train"]]


def test_the_diagnostics_table_is_a_public_name_of_the_package():
    assert comprl.extractor_diagnostics is extractor_diagnostics and "extractor_diagnostics" in comprl.__all__
