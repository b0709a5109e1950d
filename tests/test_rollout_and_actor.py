"""Lockstep rollouts on the real Room env with the tiny model, and one GRPO step of the actor on them."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from comprl.envs import make
from comprl.llm import HFEngine, load_model
from comprl.rollout import EXPERIENCE_HEADING, RolloutConfig, run_episodes, summarize
from comprl.trainers.actor import ActorConfig, ActorTrainer

ROOM = "comprl/Room-Ultimate-5x5-v0"
ROLLOUT = RolloutConfig(max_new_tokens=6, temperature=1.0)


def _rollouts(engine, n=4, max_turns=3, seed=0, **kwargs):
    envs = [make(ROOM, max_turns=max_turns) for _ in range(n)]
    torch.manual_seed(seed)
    return run_episodes(engine, envs, [7] * n, ROLLOUT, groups=[i // 2 for i in range(n)], **kwargs)


def test_trajectory_packs_one_sequence_with_only_model_tokens_masked(tiny, tiny_engine):
    _, tokenizer = tiny
    trajectories = _rollouts(tiny_engine)
    for t in trajectories:
        assert len(t.token_ids) == len(t.action_mask) == len(t.logprobs)
        assert t.turns == 3 and t.truncated  # random replies never win in 3 turns
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.action_mask) if m == 0)
        assert all(lp <= 0.0 for lp, m in zip(t.logprobs, t.action_mask) if m == 1)
        assert 0 < t.num_action_tokens <= 3 * ROLLOUT.max_new_tokens
        # every observation the actor read is context inside the one packed sequence
        context = tokenizer.decode([tok for tok, m in zip(t.token_ids, t.action_mask) if m == 0])
        for message in t.messages:
            if message["role"] in ("system", "user"):
                assert message["content"] in context
        # the replies are exactly the masked tokens, in order
        replies = tokenizer.decode([tok for tok, m in zip(t.token_ids, t.action_mask) if m == 1], skip_special_tokens=True)
        assert replies == "".join(m["content"] for m in t.messages if m["role"] == "assistant")
    assert [t.group for t in trajectories] == [0, 0, 1, 1]


def test_invalid_replies_are_counted_not_raised(tiny_engine):
    stats = summarize(_rollouts(tiny_engine, n=2))
    assert stats["episodes"] == 2 and stats["mean_episode_length"] == 3
    assert stats["invalid_action_rate"] > 0.5  # a random model rarely names a direction


def test_experience_enters_the_system_prompt_under_its_heading(tiny_engine):
    queries: list[str] = []

    def retrieve(batch):
        queries.extend(batch)
        return [SimpleNamespace(id=41, text="Walk diagonally first.")] + [None] * (len(batch) - 1)

    trajectories = _rollouts(tiny_engine, n=3, max_turns=1, guided=[True, False, True], retrieve=retrieve)
    assert len(queries) == 2 and all(q.startswith(trajectories[0].instruction) and "Map:" in q for q in queries)
    first, free, unlucky = trajectories
    assert first.guided and first.experience_ids == (41,) and EXPERIENCE_HEADING in first.messages[0]["content"]
    assert "Walk diagonally first." in first.messages[0]["content"]
    assert not free.guided and EXPERIENCE_HEADING not in free.messages[0]["content"]
    # guided but the bank had nothing: still in the guided half, with no heading
    assert unlucky.guided and unlucky.experience_ids == () and EXPERIENCE_HEADING not in unlucky.messages[0]["content"]


def test_guided_episodes_need_a_retriever(tiny_engine):
    with pytest.raises(ValueError, match="retrieve"):
        _rollouts(tiny_engine, n=2, guided=[True, False])


def test_same_seeds_give_the_same_rollouts(tiny_engine):
    a, b = _rollouts(tiny_engine, n=2, seed=5), _rollouts(tiny_engine, n=2, seed=5)
    assert [t.token_ids for t in a] == [t.token_ids for t in b]


def _with_rewards(trajectories, rewards):
    return [dataclasses.replace(t, reward=r, success=bool(r)) for t, r in zip(trajectories, rewards)]


@pytest.fixture()
def fresh():
    model, tokenizer = load_model("tiny-random", seed=1)
    return model, tokenizer, HFEngine(model, tokenizer)


def test_grpo_step_changes_the_weights_and_lowers_the_loss_on_the_same_batch(fresh):
    model, tokenizer, engine = fresh
    batch = _with_rewards(_rollouts(engine), [1.0, 0.0, 0.0, 1.0])
    trainer = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(learning_rate=1e-3, micro_batch_size=3))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    loss_before = trainer.loss(batch)
    metrics = trainer.step(batch)
    assert metrics["trained_sequences"] == 4 and metrics["grad_norm"] > 0
    assert abs(metrics["ratio_mean"] - 1.0) < 1e-3  # on-policy: behaviour log-probs equal the trainer's
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert trainer.loss(batch) < loss_before


def test_lora_step_trains_adapters_only(fresh):
    model, tokenizer, engine = fresh
    batch = _with_rewards(_rollouts(engine, n=2), [1.0, 0.0])
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(learning_rate=1e-3, lora_rank=4))
    trainer.step(batch)
    after = trainer.model.state_dict()
    lora = [k for k in after if "lora_" in k]
    assert lora and any(not torch.all(after[k] == 0) for k in lora if "lora_B" in k)
    for name, value in base.items():  # base weights untouched (peft prefixes the names)
        match = [k for k in after if k.endswith(name.replace(".weight", ".base_layer.weight")) or k.endswith(name)]
        assert torch.equal(after[match[0]], value), name


def test_groups_with_equal_rewards_give_no_update(fresh):
    model, tokenizer, engine = fresh
    batch = _with_rewards(_rollouts(engine), [0.0, 0.0, 1.0, 1.0])
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    metrics = ActorTrainer(model, tokenizer.pad_token_id).step(batch)
    assert metrics["trained_sequences"] == 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_bad_actor_config_names_the_field():
    with pytest.raises(ValueError, match="aggregation"):
        ActorConfig(aggregation="sum")
