"""The extractor trainer: credit from guided outcomes, the 64-sample buffer rule, and a real CISPO step on
tiny-random."""

from __future__ import annotations

import pytest
import torch
from conftest import pack

from comprl.llm import HFEngine, SamplingParams, load_model
from comprl.llm.scoring import token_logprobs
from comprl.experience.interface import Outcome
from comprl.experience.extractor.trainer import ExtractorConfig, ExtractorSample, ExtractorTrainer
from comprl.policy_gradient import pad_batch


@pytest.fixture()
def fresh():
    model, tokenizer = load_model("tiny-random", seed=3)
    return model, tokenizer, HFEngine(model, tokenizer)


def _samples(engine, n, step=1, temperature=1.0):
    """Real extractor-style samples: a prompt, and a reply sampled from the model with its behaviour log-probs."""
    prompts = [engine.tokenizer.encode(f"Trajectory {i}: the agent reached the stairs. Operations:") for i in range(n)]
    torch.manual_seed(0)
    completions = engine.generate(prompts, SamplingParams(max_new_tokens=6, temperature=temperature))
    return [
        ExtractorSample(
            kind="distill",
            step=step,
            entry_ids=(100 + i,),
            token_ids=s.token_ids,
            action_mask=s.action_mask,
            logprobs=s.logprobs,
        )
        for i, s in enumerate(pack(prompts, completions))
    ]


def _guided(entry_id, success):
    return Outcome(entry_id, success)


def test_rewards_are_the_mean_outcome_of_the_trajectories_that_used_the_entry(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2))
    a, b, c = _samples(engine, 3)
    trainer.add([a, b, c])
    assert trainer.ready == []
    credited = trainer.credit(
        [_guided(100, True), _guided(100, False), _guided(100, True), _guided(101, False)], step=2
    )
    assert credited == 4
    assert a.reward == pytest.approx(1 / 3) and b.reward == -1.0 and trainer.ready == [a, b]
    # an entry nobody wrote through this trainer (e.g. written before it existed) is ignored
    assert trainer.credit([_guided(999, True)], step=2) == 0


def test_over_free_rewards_subtract_the_free_half_of_the_episodes_group(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(reward="over_free"))
    a, b, c = _samples(engine, 3)
    trainer.add([a, b, c])
    # a: a win where the free half won 1 of 4 (+1 - (-0.5)) and a loss where it won all (-1 - 1); b: a win where
    # the free half won everything earns nothing; c: no free half, so the paper's outcome
    outcomes = [Outcome(100, True, 0.25), Outcome(100, False, 1.0), Outcome(101, True, 1.0), Outcome(102, False)]
    trainer.credit(outcomes, step=2)
    assert a.outcomes == [1.5, -2.0] and b.outcomes == [0.0] and c.outcomes == [-1.0]
    # the paper's reward ignores the free half
    paper = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig())
    d = _samples(engine, 1)[0]
    paper.add([d])
    paper.credit([Outcome(100, True, 0.25), Outcome(100, False, 1.0)], 2)
    assert d.outcomes == [1.0, -1.0]
    with pytest.raises(ValueError, match="extractor reward='relative'; accepted: outcome, over_free"):
        ExtractorConfig(reward="relative")


def test_uncredited_samples_are_dropped_after_max_pending_steps(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(max_pending_steps=3))
    old, new = _samples(engine, 1, step=1)[0], _samples(engine, 1, step=3)[0]
    new.entry_ids = (200,)
    trainer.add([old, new])
    trainer.credit([], step=3)
    assert trainer.pending == [old, new]
    trainer.credit([], step=4)
    assert trainer.pending == [new]
    assert trainer.credit([_guided(100, True)], step=4) == 0  # the dropped sample no longer collects credit


def test_outputs_that_wrote_nothing_wait_only_with_an_invalid_reward(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id)
    nothing, rejected = _samples(engine, 2)
    nothing.entry_ids = rejected.entry_ids = ()
    rejected.outcomes.append(-1.0)
    trainer.add([nothing, rejected])
    assert trainer.pending == [rejected] and trainer.ready == [rejected]


def test_no_update_until_the_buffer_is_full_then_cispo_moves_logprobs_by_advantage(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=4, learning_rate=1e-3))
    samples = _samples(engine, 5)
    trainer.add(samples)
    trainer.credit([_guided(100, True), _guided(101, False), _guided(102, True)], step=2)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert trainer.maybe_step() is None  # 3 of 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())

    trainer.credit([_guided(103, False), _guided(104, True)], step=2)
    batch = trainer.ready[:4]
    padded = pad_batch(batch, tokenizer.pad_token_id)

    def mean_logprob():
        with torch.no_grad():
            lp = token_logprobs(model, padded["input_ids"], padded["attention_mask"], padded["action_mask"], 1.0)
        return (lp * padded["action_mask"]).sum(1) / padded["action_mask"].sum(1)

    start = mean_logprob()
    metrics = trainer.maybe_step()
    assert metrics is not None and metrics["trained_sequences"] == 4
    assert metrics["reward_mean"] == pytest.approx(0.0)  # +1, -1, +1, -1
    assert abs(metrics["ratio_mean"] - 1.0) < 1e-3  # on-policy: behaviour log-probs equal the trainer's
    # one step up the CISPO objective raises log-probs of the +1 samples relative to the -1 ones
    change = mean_logprob() - start
    assert float((torch.tensor([1.0, -1.0, 1.0, -1.0]) * change).sum()) > 0
    assert trainer.pending == [samples[4]]  # the trained samples leave the buffer, the fifth stays


@pytest.mark.parametrize("temperature", [0.7, 0.0])
def test_extractor_is_scored_at_its_sampling_temperature_greedy_at_one(fresh, temperature):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2, temperature=temperature))
    good, bad = _samples(engine, 2, temperature=temperature)
    good.outcomes.append(1.0)
    bad.outcomes.append(-1.0)
    trainer.add([good, bad])
    metrics = trainer.maybe_step()
    assert metrics is not None and metrics["trained_sequences"] == 2
    assert abs(metrics["ratio_mean"] - 1.0) < 1e-3  # no NaN at temperature 0: greedy replies are scored at 1


def test_config_rejects_unknown_style():
    with pytest.raises(ValueError, match="style"):
        ExtractorConfig(style="yaml")


def test_config_rejects_a_capacity_below_the_batch():
    with pytest.raises(ValueError, match="buffer_capacity"):
        ExtractorConfig(buffer_size=8, buffer_capacity=4)
    assert ExtractorConfig(buffer_size=8, buffer_capacity=0).buffer_capacity == 0  # 0 = no limit


def _credit_and_step(trainer, outcomes, step=2):
    trainer.credit([_guided(e, s) for e, s in outcomes], step=step)
    return trainer.maybe_step()


def test_reused_samples_are_weighted_by_times_trained_and_zero_within_the_cooldown_on_real_updates(fresh):
    """Five real updates; a second model replays them with the advantages (r - mean r) * w written out, and ends
    with the same weights, while a replay with every w = 1 does not."""
    model, tokenizer, engine = fresh
    config = ExtractorConfig(buffer_size=2, learning_rate=1e-3, cooldown=1)
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, config)
    a, b, c, d = _samples(engine, 4)  # entries 100..103
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer.add([a, b, c, d])
    w2, w3 = 2**-0.5, 3**-0.5
    plan = [  # (outcomes, the batch, its rewards, its weights)
        ([(100, True), (101, False)], [a, b], [1, -1], [1, 1]),
        ([(100, True), (102, False)], [a, c], [1, -1], [0, 1]),  # a was trained in the update just before
        ([(100, False), (103, True)], [a, d], [-1, 1], [w2, 1]),  # a trained once (the cooldown one does not count)
        ([(101, True), (102, False)], [b, c], [1, -1], [w2, w2]),
        ([(100, True), (103, False)], [a, d], [1, -1], [w3, w2]),
    ]
    for outcomes, batch, rewards, weights in plan:
        assert trainer.ready == []
        metrics = _credit_and_step(trainer, outcomes)
        advantages = [(r - sum(rewards) / 2) * w for r, w in zip(rewards, weights)]
        assert metrics is not None and metrics["updates"] == 1
        assert metrics["weight_mean"] == pytest.approx(sum(weights) / 2)
        assert metrics["advantage_abs_mean"] == pytest.approx(sum(abs(x) for x in advantages) / 2)
        assert metrics["trained_sequences"] == sum(x != 0 for x in advantages)  # a zero weight trains nothing
    assert (a.times_trained, b.times_trained, c.times_trained, d.times_trained) == (3, 2, 2, 2)
    assert trainer.updates == 5 and a.last_update == 5 and b.last_update == 4

    def replay(unweighted):
        copy, _ = load_model("tiny-random", seed=3)
        assert all(torch.equal(start[k], v) for k, v in copy.state_dict().items())
        reference = ExtractorTrainer(copy, tokenizer.pad_token_id, config)
        for _, batch, rewards, weights in plan:
            weights = [1.0] * len(weights) if unweighted else weights
            advantages = torch.tensor([(r - sum(rewards) / 2) * w for r, w in zip(rewards, weights)])
            reference.update(batch, advantages)
        return copy.state_dict()

    trained = model.state_dict()
    weighted, unweighted = replay(False), replay(True)
    assert all(torch.allclose(trained[k], weighted[k], atol=1e-6) for k in trained)
    assert not all(torch.allclose(trained[k], unweighted[k], atol=1e-4) for k in trained)


def test_without_reuse_a_trained_sample_is_forgotten_and_weights_stay_one(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2, reuse_samples=False))
    a, b, c = _samples(engine, 3)
    trainer.add([a, b, c])
    assert _credit_and_step(trainer, [(100, True), (101, False)])["weight_mean"] == 1.0
    assert trainer.credit([_guided(100, True), _guided(101, True)], step=3) == 0  # their entries earn them nothing now
    assert trainer.ready == [] and trainer.pending == [c]
    # with reuse (the default) the same outcomes bring both back, at weight 0 right after their training
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2))
    a, b = _samples(engine, 2)
    trainer.add([a, b])
    _credit_and_step(trainer, [(100, True), (101, False)])
    assert trainer.credit([_guided(100, True), _guided(101, True)], step=3) == 2 and trainer.ready == [a, b]
    assert a.outcomes == [1.0]  # rewarded by the outcomes since its training only
    assert trainer.maybe_step()["weight_mean"] == 0.0


def test_the_buffer_keeps_the_newest_rewarded_samples_up_to_its_capacity(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2, buffer_capacity=3))
    a, b, c, d, e = _samples(engine, 5)
    trainer.add([a, b, c, d, e])
    trainer.credit(
        [_guided(100, True), _guided(101, False), _guided(102, True), _guided(101, True), _guided(103, False)], step=2
    )
    # a entered first and was pushed out by d, untrained; b's second outcome did not move it
    assert trainer.ready == [b, c, d] and a.outcomes == [] and b.reward == 0.0
    assert trainer.pending == [e, b, c, d]
    # a is still linked to its entry (reuse): a new outcome brings it back, at the end, pushing out b
    trainer.credit([_guided(100, False)], step=3)
    assert trainer.ready == [c, d, a] and b.outcomes == []
    metrics = trainer.maybe_step()
    assert metrics["updates"] == 1 and trainer.ready == [a] and c.times_trained == d.times_trained == 1
    assert a.times_trained == b.times_trained == 0


def test_an_unbounded_buffer_trains_as_many_batches_as_are_ready_in_one_call(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2, buffer_capacity=0))
    samples = _samples(engine, 5)
    trainer.add(samples)
    trainer.credit([_guided(100 + i, i % 2 == 0) for i in range(5)], step=2)
    assert trainer.ready == samples
    metrics = trainer.maybe_step()
    assert metrics["updates"] == 2 and trainer.updates == 2 and trainer.ready == [samples[4]]
    assert metrics["trained_sequences"] == 2.0  # per update, averaged
    assert trainer.maybe_step() is None


def test_one_call_may_mix_an_update_that_trains_nothing_with_one_that_does(fresh):
    # the first batch's rewards are equal (advantages 0: no gradient, no grad_norm), the second's differ
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2, buffer_capacity=0))
    samples = _samples(engine, 4)
    trainer.add(samples)
    trainer.credit([_guided(100 + i, success) for i, success in enumerate([True, True, True, False])], step=2)
    metrics = trainer.maybe_step()
    assert metrics["updates"] == 2 and metrics["trained_sequences"] == 1.0  # 0 and 2, averaged
    assert metrics["grad_norm"] > 0  # over the updates that took a gradient


def test_credit_alone_triggers_training_without_an_actor_step(fresh):
    """Two updates within one actor step: each ``credit`` that completes a batch is followed by its update."""
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2))
    samples = _samples(engine, 4)
    trainer.add(samples)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert _credit_and_step(trainer, [(100, True)], step=5) is None
    assert _credit_and_step(trainer, [(101, False)], step=5)["updates"] == 1
    assert not all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert _credit_and_step(trainer, [(102, True), (103, False)], step=5)["updates"] == 1
    assert trainer.updates == 2
    # an output whose reward is known at once (a rejected one) can complete a batch through ``add`` alone
    (rejected,) = _samples(engine, 1)
    rejected.entry_ids, rejected.outcomes = (), [-1.0]
    trainer.add([rejected])
    assert trainer.maybe_step() is None
    trainer.credit([_guided(100, True)], step=5)  # sample 0 returns (reuse), past its cooldown
    metrics = trainer.maybe_step()
    assert metrics["updates"] == 1 and metrics["weight_mean"] == pytest.approx((1 + 2**-0.5) / 2)


def _merge_sample(engine, entry_ids, parent_ids):
    (sample,) = _samples(engine, 1)
    sample.kind, sample.entry_ids, sample.parent_ids = "merge", entry_ids, parent_ids
    return sample


def test_credit_reaches_the_writers_of_merged_entries_through_a_chain_of_merges(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=8, reuse_samples=False))
    d1, d2, d3 = _samples(engine, 3)
    d1.entry_ids, d2.entry_ids, d3.entry_ids = (1, 2), (3,), (4,)
    m1 = _merge_sample(engine, (10, 11), ((1, 2), ()))  # 10 merges 1 and 2 (both d1's); 11 is a plain add
    m2 = _merge_sample(engine, (20,), ((10, 3),))  # 20 merges 10 and 3: two levels above 1 and 2
    trainer.add([d1, d2, d3, m1, m2])
    # 20's outcome reaches m2, m1, d1 (once, though it wrote both of 10's parents) and d2; never d3
    assert trainer.credit([_guided(20, True)], step=2) == 4
    assert (m2.outcomes, m1.outcomes, d1.outcomes, d2.outcomes, d3.outcomes) == ([1.0], [1.0], [1.0], [1.0], [])
    assert trainer.credit([_guided(11, False)], step=2) == 1 and m1.outcomes == [1.0, -1.0]  # 11 has no parents
    assert trainer.credit([_guided(10, False)], step=2) == 2 and d2.outcomes == [1.0]  # 10 is below 20, not above
    # the chain survives a writer on it being forgotten: m1 trained (no reuse), 20 still reaches d1 and d2
    trainer._forget([m1])
    assert trainer.credit([_guided(20, False)], step=2) == 3 and d1.outcomes == [1.0, -1.0, -1.0]


def test_without_credit_parents_only_the_writer_of_the_entry_shown_is_credited(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(credit_parents=False))
    (d1,) = _samples(engine, 1)
    d1.entry_ids = (1,)
    m1 = _merge_sample(engine, (10,), ((1,),))
    trainer.add([d1, m1])
    assert trainer.credit([_guided(10, True)], step=2) == 1 and m1.outcomes == [1.0] and d1.outcomes == []


def test_parent_links_are_dropped_once_no_writer_above_them_is_held(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(max_pending_steps=3))
    (d1,) = _samples(engine, 1, step=1)
    d1.entry_ids = (1,)
    m1 = _merge_sample(engine, (10,), ((1,),))
    m1.step = 3
    m2 = _merge_sample(engine, (20,), ((999,),))  # replaced an entry nobody here wrote: nothing to link to
    m2.step = 3
    trainer.add([d1, m1, m2])
    assert trainer._parents == {10: (1,)}
    trainer.credit([], step=4)  # d1 is stale
    assert trainer.pending == [m1, m2] and trainer._parents == {}


def test_a_trained_sample_is_kept_for_reuse_only_while_its_entries_are_used(fresh):
    model, tokenizer, engine = fresh
    trainer = ExtractorTrainer(model, tokenizer.pad_token_id, ExtractorConfig(buffer_size=2, max_pending_steps=3))
    a, b = _samples(engine, 2)
    trainer.add([a, b])
    _credit_and_step(trainer, [(100, True), (101, False)], step=2)
    trainer.credit([_guided(100, True)], step=4)  # a returns; b's last outcome was at step 2
    assert trainer.ready == [a]
    trainer.credit([], step=5)
    assert trainer.credit([_guided(101, True)], step=5) == 0  # b was forgotten at step 5 = 2 + max_pending_steps
    assert trainer.credit([_guided(100, True)], step=5) == 1


def test_a_merge_reply_records_the_ids_each_new_entry_replaced(tmp_path, fresh):
    from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
    from comprl.experience.extractor.track import ExperienceTrack

    _, tokenizer, engine = fresh
    bank = ExperienceBank(tmp_path / "bank.duckdb", Embedder())
    try:
        track = ExperienceTrack(engine, bank, ExtractorConfig(style="lines"), task="t")
        ids = bank.apply([Write("add", entry=NewEntry(f"L{i}", f"Lesson {i}.")) for i in range(3)], step=0, task="t")
        raw = "<answer>\nADD New :: A new lesson.\nUPDATE 0,2 Both :: Lessons 0 and 2.\n</answer>"
        sample = track.apply_output(ExtractorSample(kind="distill", step=1), raw, ids, step=1, source="s")
        assert len(sample.entry_ids) == 2 and sample.parent_ids == ((), (ids[0], ids[2]))
    finally:
        bank.close()
