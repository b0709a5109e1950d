"""Recompute token log-probs with a forward pass (the trainers' side of the importance ratio)."""

from __future__ import annotations

import contextlib
from typing import Mapping, Sequence

import torch
from transformers import PreTrainedModel

from comprl.llm.choice import choice_logprob


def token_logprobs(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    choices: Sequence[Mapping[int, Sequence[int]]] | None = None,
    autocast: torch.dtype | None = None,
) -> torch.Tensor:
    """Log-probs ``log softmax(logits / T)`` of each token given its prefix, on right-padded sequences.

    Only positions where ``loss_mask`` is 1 are computed (the LM head runs on those rows only, which saves most
    of its cost when observations dominate the sequence); other entries are 0.

    Args:
        input_ids, attention_mask, loss_mask: ``[B, L]``, right padded; ``loss_mask[b, t] = 1`` when token ``t``
            is one the policy generated (``t >= 1``).
        temperature: the temperature the behaviour log-probs were taken at (> 0; greedy replies are scored at 1,
            see :func:`comprl.llm.engine.logprob_temperature`), one for the batch or a ``[B]`` tensor, one per row.
        choices: constrained choice (:mod:`comprl.llm.choice`), one mapping per row: position -> the token ids
            that token was drawn from; its log-prob is normalised over them, as the engine's was.
        autocast: run the model's forward pass (only it) under ``torch.autocast(<its device type>, autocast)``,
            e.g. ``torch.bfloat16``; the log-softmax over its logits runs in float32 either way.

    Returns:
        ``[B, L]`` log-probs aligned with ``input_ids`` (entry ``t`` scores token ``t``).
    """
    if loss_mask[:, 0].any():
        raise ValueError("loss_mask[:, 0] must be 0: the first token has no prefix to score it")
    temperature = torch.as_tensor(temperature, dtype=torch.float32, device=input_ids.device)
    if (temperature <= 0).any():
        raise ValueError(
            f"temperature={temperature.tolist()}: log-probs need a temperature > 0 "
            "(greedy replies, decoded at temperature 0, are scored at 1)"
        )
    # Token t is predicted by the hidden state at t-1: keep only those positions.
    keep = torch.nonzero(loss_mask[:, 1:].any(dim=0), as_tuple=False).squeeze(-1)
    out = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    if keep.numel() == 0:
        return out
    mixed = contextlib.nullcontext() if autocast is None else torch.autocast(input_ids.device.type, dtype=autocast)
    with mixed:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False).logits
    if logits.shape[1] != keep.numel():  # a model that ignores a tensor logits_to_keep (unsloth's) returns [B, L, V]
        logits = logits[:, keep]
    # logits: [B, K, V], in the forward's dtype (bfloat16 under autocast); log-softmax in float32
    logprobs = torch.log_softmax(logits.float() / temperature.reshape(-1, 1, 1), dim=-1)
    targets = input_ids[:, keep + 1]
    out[:, keep + 1] = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    column = {int(t) + 1: k for k, t in enumerate(keep.tolist())}  # scored position -> its index in `keep`
    row_temperatures = temperature.reshape(-1).expand(input_ids.shape[0])
    for row, row_choices in enumerate(choices or ()):
        for position, allowed in row_choices.items():
            out[row, position] = choice_logprob(
                logits[row, column[position]], allowed, input_ids[row, position], row_temperatures[row]
            )
    return out * loss_mask
