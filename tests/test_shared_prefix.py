"""Shared prefixes in an update (``OptimConfig.shared_prefix_tokens``): sequences that begin with the same context run
it once, and the loss and gradients are those of scoring every sequence whole, up to float rounding."""

from __future__ import annotations

import functools
import random

import pytest
import torch

from comprl.config import ActorConfig, OptimConfig, make_config
from comprl.llm import load_model
from comprl.llm.scoring import can_share_prefix
from comprl.objectives import grpo_policy_loss
from comprl.policy_gradient import PackedSequence, PolicyGradientTrainer, shared_prefixes
from comprl.runs import NOT_COMPARED


class Trainer(PolicyGradientTrainer):
    """GRPO's loss, every sequence scored at temperature 1."""

    def __init__(self, model, pad_token_id: int, config: OptimConfig) -> None:
        super().__init__(
            model, pad_token_id, config, functools.partial(grpo_policy_loss, clip_eps=0.2, aggregation="token-mean")
        )

    def logprob_temperature(self, sequence) -> float:
        return 1.0


def _episode(prompt: list[int], turns: list[tuple[list[int], list[int]]], choices: bool = False) -> PackedSequence:
    """A prompt, then (reply, observation) turns: replies are the model's own tokens (behaviour log-prob -1.5),
    the first token of each reply constrained to three choices where ``choices``."""
    sequence = PackedSequence()
    sequence.extend(prompt)
    for reply, observation in turns:
        allowed = [(reply[0], reply[0] + 1, reply[0] + 2)] + [None] * (len(reply) - 1) if choices else ()
        sequence.extend(reply, [-1.5] * len(reply), allowed)
        sequence.extend(observation)
    return sequence


def _group(seed: int, members: int = 4, prompt_tokens: int = 80, choices: bool = False) -> list[PackedSequence]:
    """``members`` episodes of one prompt whose replies and observations differ (a GRPO group's rollouts)."""
    rng = random.Random(seed)
    prompt = [rng.randrange(100, 4000) for _ in range(prompt_tokens)]

    def tokens(n: int) -> list[int]:
        return [rng.randrange(100, 4000) for _ in range(n)]

    return [
        _episode(prompt, [(tokens(rng.randint(2, 4)), tokens(rng.randint(5, 20))) for _ in range(rng.randint(1, 3))],
                 choices)
        for _ in range(members)
    ]


def _loss_and_gradients(sequences, advantages, prefix_tokens: int, lora_rank: int, micro_batch_size: int,
                        autocast: str | None = None, dtype: torch.dtype = torch.float32, rounded: bool = False):
    """``rounded``: a float32 model whose weights are those of the bfloat16 one (the exact computation of it)."""
    model, tokenizer = load_model("tiny-random", seed=1, dtype=dtype)
    if rounded:
        for parameter in model.parameters():
            parameter.data = parameter.data.to(torch.bfloat16).float()
    torch.manual_seed(0)  # the same LoRA initialisation for every call
    config = OptimConfig(
        lora_rank=lora_rank, micro_batch_size=micro_batch_size, shared_prefix_tokens=prefix_tokens, autocast=autocast
    )
    trainer = Trainer(model, tokenizer.pad_token_id, config)
    for parameter in trainer.model.parameters():  # adapters as after training (peft starts B at zero)
        if parameter.requires_grad and lora_rank:
            torch.nn.init.normal_(parameter, std=0.02)
    trainer.model.train()
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer._accumulate(sequences, advantages, backward=True)["loss"]
    return loss, {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def _apart(grads: dict, reference: dict) -> float:
    """|grads - reference| / |reference|, every trained weight's gradient as one vector."""
    difference = sum(float((grads[n].float() - reference[n].float()).pow(2).sum()) for n in reference)
    return (difference / sum(float(g.float().pow(2).sum()) for g in reference.values())) ** 0.5


@pytest.mark.parametrize(
    "lora_rank, micro_batch_size, choices", [(4, 1, False), (4, 3, True), (0, 2, False)],
    ids=["lora-one-at-a-time", "lora-micro-batches-constrained", "full-fine-tune"],
)
def test_an_update_over_shared_prefixes_has_the_loss_and_gradients_of_whole_sequences(
    lora_rank, micro_batch_size, choices
):
    # two groups of 4 rollouts, one of them split into halves whose prompts differ after 40 tokens, and a lone one
    first, second = _group(1, choices=choices), _group(2, choices=choices)
    for sequence in second[2:]:
        sequence.token_ids[40:80] = list(range(500, 540))
    lone = _group(3, members=1, choices=choices)
    sequences = first + second + lone
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0, -1.0, 0.0, 1.0, 2.0])  # one with none: skipped
    plain_loss, plain = _loss_and_gradients(sequences, advantages, 0, lora_rank, micro_batch_size)
    shared_loss, shared = _loss_and_gradients(sequences, advantages, 16, lora_rank, micro_batch_size)
    assert shared_loss == pytest.approx(plain_loss, abs=1e-6)
    assert plain.keys() == shared.keys() and plain
    for name in plain:
        torch.testing.assert_close(shared[name], plain[name], atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("dtype, autocast", [(torch.bfloat16, None), (torch.float32, "bfloat16")],
                         ids=["bf16-weights", "fp32-under-autocast"])
def test_in_bfloat16_the_shared_prefix_moves_the_gradient_no_more_than_a_change_of_micro_batches(dtype, autocast):
    # bfloat16 rounds every arm; against the exact gradient (float32, the same weights) sharing a prefix rounds no
    # more than a change of micro-batches does
    sequences = _group(4) + _group(5)
    advantages = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.5, 0.5, -0.5, -0.5])
    exact = _loss_and_gradients(sequences, advantages, 0, 4, 1, dtype=torch.float32, rounded=dtype == torch.bfloat16)[1]
    whole = _loss_and_gradients(sequences, advantages, 0, 4, 1, autocast, dtype)[1]
    shared = _loss_and_gradients(sequences, advantages, 16, 4, 1, autocast, dtype)[1]
    batched = _loss_and_gradients(sequences, advantages, 0, 4, 2, autocast, dtype)[1]
    assert 0 < _apart(whole, exact) < 0.1  # bfloat16 rounding, not another gradient
    assert _apart(shared, exact) <= 1.5 * max(_apart(whole, exact), _apart(batched, exact))


def test_groups_are_cut_where_they_save_the_most_prefix_tokens():
    first, second = _group(1), _group(2)
    for sequence in first[2:]:  # the second half of the first group: the same first 40 tokens, then others
        sequence.token_ids[40:80] = list(range(500, 540))
    lone = _group(3, members=1)
    sequences = [first[0], second[0], first[2], lone[0], first[1], second[1], first[3], second[2], second[3]]
    groups = shared_prefixes(sequences, min_tokens=16)
    # the halves of the first group apart (79 tokens each), not all four on their first 40; the prompt's last token
    # stays with the continuations, whose first reply token it predicts
    assert groups == [(79, [0, 4]), (79, [1, 5, 7, 8]), (79, [2, 6]), (0, [3])]
    assert shared_prefixes(sequences, min_tokens=80) == [(0, list(range(9)))]
    assert shared_prefixes(sequences, min_tokens=0) == [(0, list(range(9)))]


def test_a_prefix_never_covers_an_own_token_or_its_predecessor():
    a, b = _group(6, members=2, prompt_tokens=30)
    b.token_ids[:] = a.token_ids[:]  # identical episodes, own tokens included
    b.action_mask[:], b.logprobs[:] = a.action_mask[:], a.logprobs[:]
    [(length, members)] = shared_prefixes([a, b], min_tokens=8)
    assert members == [0, 1] and length == a.action_mask.index(1) - 1 == 29


def test_prefixes_are_shared_only_when_asked_and_checkpointing_switches_it_off():
    for profile in ("smoke", "cpu", "gpu", "paper"):
        config = make_config(profile)
        assert config.actor.shared_prefix_tokens == config.extractor.shared_prefix_tokens == 0
    model, _ = load_model("tiny-random", seed=1)
    assert can_share_prefix(model)
    assert Trainer(model, 0, OptimConfig(lora_rank=4, shared_prefix_tokens=64)).prefix_tokens == 64
    model, _ = load_model("tiny-random", seed=1)
    checkpointed = OptimConfig(lora_rank=4, shared_prefix_tokens=64, gradient_checkpointing=True)
    assert Trainer(model, 0, checkpointed).prefix_tokens == 0
    assert {"actor.shared_prefix_tokens", "extractor.shared_prefix_tokens"} <= NOT_COMPARED


def test_a_negative_prefix_length_is_rejected_naming_the_field():
    with pytest.raises(ValueError, match="shared_prefix_tokens=-1; accepted: 0"):
        ActorConfig(shared_prefix_tokens=-1)
