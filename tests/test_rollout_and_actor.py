"""Lockstep rollouts on the real Room env with the tiny model, and one GRPO step of the actor on them."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch


from conftest import make_rewarding_even_replies

from comprl.chat import ChatFormat
from comprl.config import make_config
from comprl.envs import make
from comprl.llm import HFEngine, load_model
from comprl.actor.rollout import EXPERIENCE_HEADING, RolloutConfig, run_episodes, summarize, system_prompt
from comprl.envs import mixture
from comprl import loop
from comprl.actor.trainer import ActorConfig, ActorTrainer

ROOM = "comprl/Room-Ultimate-5x5-v0"
ROLLOUT = RolloutConfig(max_new_tokens=6, temperature=1.0)


def _rollouts(engine, n=4, max_turns=3, seed=0, config=ROLLOUT, **kwargs):
    envs = [make(ROOM, max_turns=max_turns) for _ in range(n)]
    torch.manual_seed(seed)
    return run_episodes(engine, envs, [7] * n, config, groups=[i // 2 for i in range(n)], **kwargs)


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
        replies = tokenizer.decode(
            [tok for tok, m in zip(t.token_ids, t.action_mask) if m == 1], skip_special_tokens=True
        )
        assert replies == "".join(m["content"] for m in t.messages if m["role"] == "assistant")
    assert [t.group for t in trajectories] == [0, 0, 1, 1]


def test_context_limit_ends_the_episode_through_the_envs_truncation(tiny, tiny_engine):
    _, tokenizer = tiny
    env = make("comprl/ALFWorld-v0", max_turns=10)
    obs, info = env.reset(seed=7)
    first_prompt = ChatFormat.from_tokenizer(tokenizer).start(system_prompt(info["instruction"]), obs)
    # room for the first reply only: the second turn would outgrow the context
    config = dataclasses.replace(ROLLOUT, max_context_tokens=len(first_prompt) + ROLLOUT.max_new_tokens)
    torch.manual_seed(0)
    (cut,) = run_episodes(tiny_engine, [env], [7], config)
    assert cut.turns == 1 and cut.truncated and not cut.success
    assert cut.reward == env.unwrapped.unsolved_truncation_reward == -1.0  # ALFWorld's reward for running out
    assert cut.invalid_actions == 1  # the random reply; closing the episode is not counted as the actor's
    with pytest.raises(RuntimeError, match="no episode in progress"):
        env.step("<answer>look</answer>")


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


class _CallLog:
    """An engine that records which tasks each generate call served, around a real one."""

    def __init__(self, engine, tasks_of):
        self.engine, self.tasks_of, self.calls = engine, tasks_of, []
        self.tokenizer = engine.tokenizer

    def generate(self, prompts, params, sessions=None, choices=None):
        self.calls.append([self.tasks_of[tuple(p[:20])] for p in prompts])
        return self.engine.generate(prompts, params, sessions=sessions, choices=choices)

    def release(self, sessions):
        self.engine.release(sessions)


def test_a_mixture_turn_generates_each_task_in_its_own_batch_and_keeps_env_order(tiny_engine):
    fmt = ChatFormat.from_tokenizer(tiny_engine.tokenizer)
    ids = ["comprl/Room-Random-5x5-v0", "comprl/WebShop-Small-v0"] * 2
    envs = [make(env_id, max_turns=2) for env_id in ids]
    config = RolloutConfig(max_new_tokens=4)
    tasks_of = {}
    for env, env_id in zip(envs, ids):  # a prompt's opening tokens name its task (system prompt, then the task)
        obs, info = env.reset(seed=3)
        tasks_of[tuple(fmt.start(system_prompt(info["instruction"], None, 0), obs)[:20])] = env_id
    engine = _CallLog(tiny_engine, tasks_of)
    trajectories = run_episodes(engine, envs, [3] * 4, config)
    assert [t.env_id for t in trajectories] == ids
    assert engine.calls[:2] == [ids[0::2], ids[1::2]]  # the first turn: Room's two rows, then WebShop's two
    assert all(len(set(call)) == 1 for call in engine.calls)
    single = _CallLog(tiny_engine, tasks_of)
    alone = run_episodes(single, [make(ids[0], max_turns=2) for _ in range(2)], [3, 3], config)
    assert len(single.calls) == max(t.turns for t in alone)  # one task: one call per turn


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


def test_invalid_action_shaping_ranks_a_group_whose_returns_tie_by_how_many_replies_were_invalid(fresh):
    model, tokenizer, engine = fresh
    tied = _with_rewards(_rollouts(engine), [0.0] * 4)
    batch = [dataclasses.replace(t, group=0, invalid_actions=n) for t, n in zip(tied, [0, 1, 2, 3])]
    assert torch.equal(ActorTrainer(model, tokenizer.pad_token_id).advantages(batch), torch.zeros(4))
    shaped = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(invalid_action_reward=-0.1)).advantages(batch)
    assert shaped[0] > shaped[1] > shaped[2] > shaped[3] and abs(float(shaped.sum())) < 1e-5
    assert [t.reward for t in batch] == [0.0] * 4  # the logged returns stay the env's


def test_without_split_halves_one_group_spans_the_guided_and_free_halves(fresh):
    model, tokenizer, engine = fresh
    rollouts = _with_rewards(_rollouts(engine), [1.0, 1.0, 0.0, 1.0])
    batch = [dataclasses.replace(t, group=0, guided=k < 2) for k, t in enumerate(rollouts)]
    split = ActorTrainer(model, tokenizer.pad_token_id).advantages(batch)
    torch.testing.assert_close(split, torch.tensor([0.0, 0.0, -1.0, 1.0]))  # guided half ties; free half [0, 1]
    one_group = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(split_halves=False)).advantages(batch)
    # [1, 1, 0, 1] normalised together: mean 0.75, population std sqrt(3)/4
    torch.testing.assert_close(one_group, torch.tensor([1.0, 1.0, -3.0, 1.0]) / 3**0.5, atol=1e-5, rtol=1e-5)


def test_bad_actor_config_names_the_field():
    with pytest.raises(ValueError, match="aggregation"):
        ActorConfig(aggregation="sum")


def _optimised_weights(trainer):
    """(name, tensor) of every weight AdamW steps, in the model's parameter order."""
    names = [name for name, p in trainer.model.named_parameters() if p.requires_grad]
    return list(zip(names, (p for group in trainer.optimizer.param_groups for p in group["params"])))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_finetune_keeps_fp32_master_weights_so_small_steps_add_up(dtype):
    # AdamW moves each weight by about lr = 1e-6 per step, far below a bfloat16 weight's rounding step: stepping
    # bfloat16 weights in place loses most updates; fp32 masters keep them all.
    model, tokenizer = load_model("tiny-random", seed=1, dtype=dtype)
    batch = _with_rewards(_rollouts(HFEngine(model, tokenizer)), [1.0, 0.0, 0.0, 1.0])
    trainer = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(learning_rate=1e-6, micro_batch_size=4))
    layers = [(name, w) for name, w in _optimised_weights(trainer) if ".layers." in name]
    before = [w.detach().clone() for _, w in layers]
    for _ in range(10):
        trainer.step(batch)
    changed = sum(int((w != b).sum()) for (_, w), b in zip(layers, before))
    assert changed / sum(b.numel() for b in before) > 0.9
    params = dict(model.named_parameters())
    for name, master in layers:
        assert master.dtype == torch.float32 and params[name].dtype == dtype
        assert torch.equal(params[name], master.to(dtype))  # the model runs on the masters' rounded values


def test_actor_scores_trajectories_at_the_temperature_they_were_sampled_at(fresh):
    model, tokenizer, engine = fresh
    batch = _with_rewards(_rollouts(engine, config=dataclasses.replace(ROLLOUT, temperature=0.5)), [1.0, 0.0, 0.0, 1.0])
    assert all(t.temperature == 0.5 for t in batch)
    metrics = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(learning_rate=1e-3)).step(batch)
    assert metrics["trained_sequences"] == 4 and abs(metrics["ratio_mean"] - 1.0) < 1e-3


def test_greedy_rollouts_are_scored_at_temperature_one(fresh, assert_logprobs_match_fresh_pass):
    model, tokenizer, engine = fresh
    batch = _with_rewards(_rollouts(engine, config=dataclasses.replace(ROLLOUT, temperature=0.0)), [1.0, 0.0, 0.0, 1.0])
    assert all(t.temperature == 1.0 for t in batch)
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, batch, 1.0)
    metrics = ActorTrainer(model, tokenizer.pad_token_id).step(batch)
    assert metrics["trained_sequences"] == 4 and abs(metrics["ratio_mean"] - 1.0) < 1e-3
    assert all(v == v for v in metrics.values())  # no NaN


def test_a_smoke_comp_rl_step_takes_an_actor_gradient(tmp_path, monkeypatch):
    monkeypatch.setattr(mixture, "make", make_rewarding_even_replies)
    rows = []
    config = make_config("smoke", method="comp_rl", steps=1, eval_episodes=0)
    loop.run_experiment(config, tmp_path, name="smoke", progress=False, callback=lambda step, m, phase: rows.append(m))
    (train,) = rows
    assert train["actor_advantage_abs_mean"] > 0 and train["actor_trained_sequences"] > 0
