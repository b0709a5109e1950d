"""The extractor trainer: credit from guided outcomes, the 64-sample buffer rule, and a real CISPO step on tiny-random."""

from __future__ import annotations

import pytest
import torch
from conftest import pack

from comprl.llm import HFEngine, SamplingParams, load_model
from comprl.llm.scoring import token_logprobs
from comprl.experience.episode import Outcome
from comprl.experience.trainer import ExtractorConfig, ExtractorSample, ExtractorTrainer
from comprl.policy import pad_batch


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
        ExtractorSample(kind="distill", step=step, entry_ids=(100 + i,), token_ids=s.token_ids, action_mask=s.action_mask, logprobs=s.logprobs)
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
    credited = trainer.credit([_guided(100, True), _guided(100, False), _guided(100, True), _guided(101, False)], step=2)
    assert credited == 4
    assert a.reward == pytest.approx(1 / 3) and b.reward == -1.0 and trainer.ready == [a, b]
    # an entry nobody wrote through this trainer (e.g. written before it existed) is ignored
    assert trainer.credit([_guided(999, True)], step=2) == 0


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
