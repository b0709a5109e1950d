"""The hf engine's own sampling loop: jump-forward of forced tokens, one prefill per shared prompt, merged adapters."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import pack

from comprl.chat import ChatFormat
from comprl.actor.rollout import RolloutConfig, run_episodes
from comprl.actor.trainer import ActorConfig, ActorTrainer
from comprl.envs import make
from comprl.llm import HFEngine, SamplingParams, load_model
from comprl.llm.decode import top_p_filter

ROOM = "comprl/Room-Ultimate-5x5-v0"
CONSTRAINED = RolloutConfig(max_new_tokens=16, temperature=1.0, constrained_actions=True)


def _rollout(engine, config=CONSTRAINED, n=6, seed=0):
    envs = [make(ROOM, max_turns=3) for _ in range(n)]
    torch.manual_seed(seed)
    return run_episodes(engine, envs, [5, 5, 5, 9, 9, 9], config, groups=[0, 0, 0, 1, 1, 1])


def test_forced_tokens_skip_their_forward_passes_and_greedy_replies_stay_the_same(sharp):
    model, tokenizer = sharp
    greedy = dataclasses.replace(CONSTRAINED, temperature=0.0)
    every, jumping = HFEngine(model, tokenizer, jump_forward=False), HFEngine(model, tokenizer)
    slow, fast = _rollout(every, greedy), _rollout(jumping, greedy)
    assert [t.token_ids for t in fast] == [t.token_ids for t in slow]
    flat = [lp for t in slow for lp in t.logprobs]
    assert [lp for t in fast for lp in t.logprobs] == pytest.approx(flat, abs=1e-4)
    assert jumping.stats["forward_passes"] < every.stats["forward_passes"] / 2
    forced = [t.logprobs[p] for t in fast for p, allowed in t.choices.items() if len(allowed) == 1]
    assert forced and all(lp == 0.0 for lp in forced)


def test_sampled_replies_with_jump_forward_have_the_trainers_log_probs(sharp, assert_logprobs_match_fresh_pass):
    model, tokenizer = sharp
    trajectories = _rollout(HFEngine(model, tokenizer))
    assert len({tuple(t.token_ids) for t in trajectories}) > 2
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, trajectories, 1.0)


def test_a_groups_shared_first_prompt_is_prefilled_once(sharp, assert_logprobs_match_fresh_pass):
    model, tokenizer = sharp
    engine = HFEngine(model, tokenizer)
    prompt = ChatFormat.from_tokenizer(tokenizer).start("You play a game.", "Say a word.")
    other = prompt[:-3] + prompt[-2:]
    torch.manual_seed(0)
    completions = engine.generate([prompt, other, prompt, prompt], SamplingParams(max_new_tokens=6))
    assert engine.stats["reused_prompt_tokens"] == 2 * len(prompt)
    assert engine.stats["computed_tokens"] < 2 * len(prompt) + 4 * 6
    sequences = pack([prompt, other, prompt, prompt], completions)
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, sequences, 1.0)


def test_top_p_keeps_the_smallest_set_of_that_mass():
    scores = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(top_p_filter(scores, 0.75))
    assert kept.tolist() == [[True, True, False, False]]
    assert torch.isfinite(top_p_filter(scores, 0.01)).sum() == 1  # the likeliest token always stays


def test_merged_adapters_sample_what_the_lora_model_computes_and_follow_its_updates(assert_logprobs_match_fresh_pass):
    model, tokenizer = load_model("tiny-random", seed=0)
    actor = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(learning_rate=1e-2, lora_rank=4))
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in actor.model.parameters():
            if parameter.requires_grad:
                parameter.normal_(std=0.2)
    merged = HFEngine(actor.model, tokenizer, adapter_dtype="merged")
    peft = HFEngine(actor.model, tokenizer, adapter_dtype="float32")
    assert not any("lora" in name for name, _ in merged._merged.model().named_parameters())
    greedy = dataclasses.replace(CONSTRAINED, temperature=0.0)
    assert [t.token_ids for t in _rollout(merged, greedy)] == [t.token_ids for t in _rollout(peft, greedy)]
    batch = [dataclasses.replace(t, reward=float(i % 2)) for i, t in enumerate(_rollout(merged))]
    actor.step(batch)  # updates the adapters in place; no sync_weights call: the copy sees the change itself
    after = _rollout(merged)
    assert_logprobs_match_fresh_pass(actor.model, tokenizer.pad_token_id, after, 1.0)
    assert [t.token_ids for t in _rollout(merged, greedy)] == [t.token_ids for t in _rollout(peft, greedy)]


def test_merging_a_model_without_adapters_generates_with_the_model_itself(sharp):
    model, tokenizer = sharp
    engine = HFEngine(model, tokenizer, adapter_dtype="merged")
    assert engine._merged is None and len(engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=2))) == 1
