"""Constrained choice: replies restricted to the env's admissible actions, with exact log-probs on both sides."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from comprl.envs import make
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN
from comprl.llm import HFEngine, load_model
from comprl.llm.choice import ReplyChoices, restrict
from comprl.actor.rollout import RolloutConfig, run_episodes
from comprl.actor.trainer import ActorConfig, ActorTrainer

ROOM = "comprl/Room-Ultimate-5x5-v0"
CONSTRAINED = RolloutConfig(max_new_tokens=16, temperature=1.0, constrained_actions=True)


def test_the_trie_allows_exactly_the_continuations_of_admissible_replies():
    choices = ReplyChoices.build([[1, 2, 3], [1, 4], [5]], free=[[6, 7]])
    assert choices.allowed([]) == (1, 5, 6)
    assert choices.allowed([1]) == (2, 4)
    assert choices.allowed([1, 2]) == (3,)
    assert choices.allowed([1, 2, 3]) is None  # complete: generation has stopped
    assert choices.allowed([6]) == (7,)
    assert choices.allowed([6, 7]) is None and choices.allowed([6, 7, 9, 9]) is None  # free after the branch
    assert choices.along([1, 4]) == [(1, 5, 6), (2, 4)]
    with pytest.raises(ValueError, match="at least one"):
        ReplyChoices.build([])


def test_a_free_branch_with_a_closing_is_closed_within_its_length():
    choices = ReplyChoices.build([[1, 2]], free=[[6, 7]], closing=[[8, 9]], free_length=6)
    assert choices.longest == 6
    assert choices.allowed([6, 7]) is None and choices.allowed([6, 7, 3]) is None  # two free tokens
    assert choices.allowed([6, 7, 3, 3]) == (8,) and choices.allowed([6, 7, 3, 3, 8]) == (9,)
    assert choices.along([6, 7, 3, 3, 8, 9]) == [(1, 6), (7,), None, None, (8,), (9,)]
    with pytest.raises(ValueError, match="free_length=4 leaves no free token"):
        ReplyChoices.build([[1, 2]], free=[[6, 7]], closing=[[8, 9]], free_length=4)


def test_restrict_keeps_allowed_logits_and_masks_the_rest():
    logits = torch.tensor([[0.5, 1.0, -2.0, 3.0]], requires_grad=True)
    masked = restrict(logits, [1, 2])
    assert masked[0, 1] == 1.0 and masked[0, 2] == -2.0 and torch.isinf(masked[0, [0, 3]]).all()
    torch.log_softmax(masked, -1)[0, 1].backward()
    assert logits.grad[0, [0, 3]].eq(0).all() and logits.grad[0, 1] > 0


@pytest.fixture()
def fresh():
    model, tokenizer = load_model("tiny-random", seed=1)
    return model, tokenizer, HFEngine(model, tokenizer)


def _constrained(engine, config=CONSTRAINED, n=4, max_turns=3, env_id=ROOM, seed=0):
    envs = [make(env_id, max_turns=max_turns) for _ in range(n)]
    torch.manual_seed(seed)
    return run_episodes(engine, envs, [7] * n, config, groups=[i // 2 for i in range(n)])


@pytest.mark.parametrize("prefix", ["", ANSWER_OPEN])
def test_a_random_model_constrained_to_admissible_replies_never_plays_an_invalid_action(fresh, prefix):
    _, _, engine = fresh
    trajectories = _constrained(engine, dataclasses.replace(CONSTRAINED, response_prefix=prefix))
    words = make(ROOM).unwrapped.action_words
    replies = [m["content"] for t in trajectories for m in t.messages if m["role"] == "assistant"]
    assert len(replies) == sum(t.turns for t in trajectories) >= 8 and all(t.invalid_actions == 0 for t in trajectories)
    assert all(r[: len(ANSWER_OPEN)] == ANSWER_OPEN and r.endswith(ANSWER_CLOSE) for r in replies)
    assert {r[len(ANSWER_OPEN) : -len(ANSWER_CLOSE)] for r in replies} <= set(words)
    assert len(set(replies)) > 2  # a random model spreads over the actions
    for t in trajectories:  # every reply token is recorded with the set it was drawn from, and is in it
        assert t.choices and all(
            t.action_mask[p] == 1 and t.token_ids[p] in allowed for p, allowed in t.choices.items()
        )


def test_constrained_log_probs_are_renormalised_and_the_trainer_recomputes_them(
    fresh, assert_logprobs_match_fresh_pass
):
    model, tokenizer, engine = fresh
    trajectories = _constrained(engine)
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, trajectories, 1.0)
    forced = [t.logprobs[p] for t in trajectories for p, allowed in t.choices.items() if len(allowed) == 1]
    chosen = [t.logprobs[p] for t in trajectories for p, allowed in t.choices.items() if len(allowed) > 1]
    assert forced and all(lp == 0.0 for lp in forced)  # "</answer>" after the action: no choice, probability 1
    # a random model puts ~1/vocab on any one token; renormalised over a handful of actions it is ~1/8
    assert chosen and min(chosen) > -6.0
    batch = [dataclasses.replace(t, reward=float(i % 2)) for i, t in enumerate(trajectories)]
    metrics = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(learning_rate=1e-3)).step(batch)
    assert metrics["trained_sequences"] == 4 and metrics["grad_norm"] > 0
    assert abs(metrics["ratio_mean"] - 1.0) < 1e-4 and metrics["clip_fraction"] == 0.0


def test_only_a_bracketed_placeholder_is_free_text(fresh):
    from comprl.chat import ChatFormat
    from comprl.actor.rollout import _Choices

    _, tokenizer, _ = fresh
    fmt = ChatFormat.from_tokenizer(tokenizer)
    choices = _Choices(fmt, ANSWER_OPEN, 12, False)(["search[<your query>]", "click[< prev]", "click[next >]"])
    assert len(choices.free) == 1  # WebShop's "< prev" button is an action, not a placeholder
    ((prefix, closing),) = choices.free.items()
    assert tokenizer.decode(list(prefix)) == "search[" and tokenizer.decode(list(closing)) == f"]{ANSWER_CLOSE}"
    prev = fmt.encode(f"click[< prev]{ANSWER_CLOSE}")  # a whole admissible reply: constrained to its last token
    assert all(choices.allowed(prev[:end]) is not None for end in range(len(prev)))


def test_a_placeholder_is_the_models_free_text_closed_into_a_valid_action(fresh):
    _, tokenizer, engine = fresh
    # a random model at a high temperature never closes its query on its own within 12 tokens
    config = dataclasses.replace(CONSTRAINED, max_new_tokens=12, temperature=2.0)
    trajectories = _constrained(engine, config, n=4, max_turns=2, env_id="comprl/WebShop-Small-v0")
    for trajectory in trajectories:
        reply = trajectory.messages[2]["content"]
        assert reply.startswith(f"{ANSWER_OPEN}search[") and reply.endswith(f"]{ANSWER_CLOSE}"), reply
        # a search, not an invalid action
        assert trajectory.invalid_actions == 0 and "Total results" in trajectory.messages[3]["content"]
        free = [p for p, m in enumerate(trajectory.action_mask) if m == 1 and p not in trajectory.choices]
        assert free  # the query itself is the model's free text
        assert trajectory.turns == 2 and 0 < trajectory.num_action_tokens <= 2 * 15  # a click on an item may pass 12


def test_constrained_choice_explains_a_reply_format_it_cannot_write(fresh):
    _, _, engine = fresh
    with pytest.raises(ValueError, match="response_prefix='Action: '"):
        _constrained(engine, dataclasses.replace(CONSTRAINED, response_prefix="Action: "))



def test_an_admissible_reply_longer_than_the_cap_is_decoded_whole(fresh):
    _, _, engine = fresh
    # "<answer>north</answer>" alone takes more than 3 tokens: every reply is still a whole admissible action
    trajectories = _constrained(engine, dataclasses.replace(CONSTRAINED, max_new_tokens=3))
    replies = [m["content"] for t in trajectories for m in t.messages if m["role"] == "assistant"]
    assert replies and all(r.endswith(ANSWER_CLOSE) for r in replies)
    assert all(t.invalid_actions == 0 for t in trajectories)
    assert sum(t.num_action_tokens for t in trajectories) > 3 * sum(t.turns for t in trajectories)
