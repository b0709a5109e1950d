"""Recompute token log-probs with a forward pass (the trainers' side of the importance ratio)."""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Mapping, Sequence

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
    prefix: SharedPrefix | None = None,
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
        prefix: the tokens every row continues (:class:`SharedPrefix`, run once): the other arguments then hold
            what follows it (positions count from the prefix's end, ``choices`` too), and so does the result.

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
    inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}
    if prefix is not None:
        inputs.update(prefix.inputs(attention_mask))
    with _autocast(input_ids.device, autocast):
        logits = model(**inputs, logits_to_keep=keep).logits
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


def _autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


class SharedPrefix:
    """The keys and values of a token prefix that several sequences begin with, computed once for all of them.

    An update of a GRPO group trains K sequences that begin with the same prompt (the system prompt, the task and
    its first observation: ~300 of a cpu Room episode's ~500 tokens). Scored one by one, every sequence runs that
    prompt through the model again, forward and backward. Here the prefix runs once (``__init__``), each
    continuation attends to its keys and values (:meth:`inputs`, for :func:`token_logprobs`'s ``prefix``), and
    the gradients the continuations send to those keys and values are summed and sent back through the prefix
    once (:meth:`backward`): the loss and the gradients of scoring the whole sequences, up to float rounding
    (``tests/test_shared_prefix.py``), for the prefix's tokens once instead of K times.

    The model must keep a cache under gradients, so not with gradient checkpointing (transformers drops the cache
    in checkpointed layers) and only with full attention in every layer (a sliding window would crop the prefix):
    :func:`can_share_prefix` tells.
    """

    def __init__(
        self, model: Any, token_ids: Sequence[int], autocast: torch.dtype | None = None, grad: bool = True
    ) -> None:
        from transformers import DynamicCache

        device = next(model.parameters()).device
        self._model_config = model.config
        self.length = len(token_ids)
        cache = DynamicCache(config=model.config)
        with torch.set_grad_enabled(grad), _autocast(device, autocast):
            model(input_ids=torch.tensor([list(token_ids)], device=device), use_cache=True, logits_to_keep=1,
                  **{_cache_argument(type(model.config)): cache})
        self._computed = [(layer.keys, layer.values) for layer in cache.layers]
        """Each layer's keys and values ``[1, kv heads, length, head dim]``, in the prefix's graph when ``grad``."""
        self._leaves = [
            (keys.detach().requires_grad_(grad), values.detach().requires_grad_(grad))
            for keys, values in self._computed
        ]
        """The same tensors cut from that graph: the continuations' gradients gather in their ``.grad``."""

    def inputs(self, attention_mask: torch.Tensor) -> dict[str, Any]:
        """The model's keyword arguments for ``attention_mask.shape[0]`` continuations of the prefix: a cache that
        holds the prefix (one per call, since the model appends to it), and the attention mask over both."""
        from transformers import DynamicCache

        rows = attention_mask.shape[0]
        cache = DynamicCache(config=self._model_config)
        for layer, (keys, values) in enumerate(self._leaves):
            cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), layer)
        seen = torch.ones((rows, self.length), dtype=attention_mask.dtype, device=attention_mask.device)
        return {
            "attention_mask": torch.cat([seen, attention_mask], dim=1), "use_cache": True,
            _cache_argument(type(self._model_config)): cache,
        }

    def backward(self) -> None:
        """Send the gradients gathered from every continuation back through the prefix (once, after the last)."""
        pairs = [
            (computed, leaf.grad)
            for layer, leaves in zip(self._computed, self._leaves)
            for computed, leaf in zip(layer, leaves)
            if leaf.grad is not None and computed.requires_grad
        ]
        if pairs:
            torch.autograd.backward([computed for computed, _ in pairs], [grad for _, grad in pairs])
        self._computed = []


def can_share_prefix(model: Any) -> bool:
    """Whether :class:`SharedPrefix` computes exactly what scoring whole sequences does for ``model``: full
    attention in every layer, and no gradient checkpointing (which makes transformers drop the cache)."""
    config = model.config
    full = all(kind == "full_attention" for kind in (getattr(config, "layer_types", None) or ["full_attention"]))
    checkpointed = getattr(model, "is_activation_checkpointing", None)
    if checkpointed is None:
        checkpointed = getattr(model, "is_gradient_checkpointing", False)
    return full and getattr(config, "sliding_window", None) is None and not checkpointed


@functools.cache
def _cache_argument(config_class: type) -> str:
    """The keyword under which this transformers version's models of ``config_class`` take a KV cache: ``cache``
    (transformers 5.2x) or ``past_key_values`` (before it)."""
    from transformers import AutoModelForCausalLM

    model_class = AutoModelForCausalLM._model_mapping[config_class]
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"
