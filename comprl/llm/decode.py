"""comprl's decoding loop: batched sampling on a KV cache, with constrained choice and jump-forward of forced tokens.

:class:`comprl.llm.HFEngine` samples with this loop rather than ``transformers.generate`` for three things generate
cannot do:

* **Jump-forward of forced tokens.** Under constrained choice (:mod:`comprl.llm.choice`) most reply tokens are
  forced: one token is allowed, its probability is 1 and its log-prob exactly 0 (``</answer>`` after a Room
  move, the rest of a multi-token action once its first token is drawn). When every unfinished row's next token is
  forced the loop appends it without a forward pass; the forced tokens are fed with the next pass that must sample
  (several tokens per row at once), or never when the reply ends on them. Rows move in lockstep, so a pass is
  skipped only when *all* rows are forced; the sampled tokens' distributions and log-probs are unchanged, only the
  random stream moves on fewer draws.
* **One prefill for a group's shared prompt.** Rows with identical prompts (a GRPO group's first turn, when no
  session's kept prefix serves them) are prefilled once and their keys/values copied to every row of the group.
* **Behaviour log-probs as it samples.** Each step's log-prob is taken from that step's logits, so no
  ``[batch, steps, vocabulary]`` tensor of all logits is kept.

Sampling follows ``transformers``' multinomial sampling with the options :class:`comprl.llm.SamplingParams` has:
logits in float32, the constrained set applied, divided by the temperature, nucleus filtering when ``top_p < 1``,
one ``torch.multinomial`` draw per row (argmax at temperature 0). Finished rows are padded with ``pad_id``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Sequence

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from comprl.llm.choice import ReplyChoices, restrict


CACHE_ARGUMENT = "cache" if "cache" in {f.name for f in fields(CausalLMOutputWithPast)} else "past_key_values"
"""What a model's forward pass calls the KV cache, as an argument and in its output: ``cache`` since transformers
5.24, which warns at every call given the older ``past_key_values``."""


@dataclass
class Decoded:
    """What :func:`decode` returns."""

    tokens: torch.Tensor
    """``[batch, steps]`` sampled (or forced) tokens, ``pad_id`` after a row finished."""
    logprobs: torch.Tensor
    """``[batch, steps]`` behaviour log-probs (float32), renormalised over the allowed set where one applied."""
    cache: DynamicCache
    """The KV cache: the prompt's ``width`` columns, then the generated tokens fed back so far (the last sampled and
    any trailing forced ones are not)."""
    forward_passes: int
    """Forward passes run, the prompt's included."""
    shared_prompt_tokens: int
    """Prompt tokens not computed because an identical prompt of the batch was."""
    fed_tokens: int
    """Tokens the forward passes computed (pads and finished rows aside)."""


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """RoPE position of each column of a left-padded batch (pads get 1, as ``transformers.generate`` gives them)."""
    return (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)


def top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """``scores`` with the tokens outside the smallest set of mass ``>= top_p`` set to ``-inf`` (the likeliest
    token is always kept)."""
    ordered, order = torch.sort(scores, descending=False, dim=-1)
    cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1 - top_p
    drop[..., -1:] = False
    return scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


@torch.no_grad()
def decode(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cache: DynamicCache | None,
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    logprob_temperature: float,
    choices: Sequence[ReplyChoices | None] | None,
    eos_id: int,
    pad_id: int,
    stopped: Callable[[list[int]], bool],
    jump_forward: bool = True,
    cache_alike: bool = True,
) -> Decoded:
    """Sample up to ``max_new_tokens`` tokens for each row of a left-padded batch.

    Args:
        model: the causal LM (in eval mode).
        input_ids, attention_mask: ``[batch, width]`` left-padded prompts, on the model's device.
        cache: keys/values of the first ``cache.get_seq_length()`` columns (a kept prefix), or None.
        max_new_tokens, temperature, top_p: as in :class:`comprl.llm.SamplingParams`.
        logprob_temperature: the temperature behaviour log-probs are taken at.
        choices: per row, the admissible replies (None: free).
        eos_id, pad_id: the end token, and the pad that follows a finished row.
        stopped: whether a row's generated tokens so far complete a stop string.
        jump_forward: skip forward passes while every unfinished row's next token is forced.
        cache_alike: rows with identical ``input_ids`` hold identical ``cache`` columns (true without a cache, or
            when every row's cached columns come from one shared prefix), so identical rows may be prefilled once.
    """
    batch = input_ids.shape[0]
    device = input_ids.device
    choices = list(choices) if choices is not None else [None] * batch
    cache = DynamicCache() if cache is None else cache
    start = cache.get_seq_length()
    mask = attention_mask
    generated: list[list[int]] = [[] for _ in range(batch)]
    tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long)
    logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32)
    finished = [False] * batch
    pending = input_ids[:, start:]  # columns fed with the next forward pass
    passes = shared_tokens = fed_tokens = 0

    for step in range(max_new_tokens):
        allowed = [
            None if done or choice is None else choice.allowed(row)
            for done, choice, row in zip(finished, choices, generated)
        ]
        forced = all(finished[r] or (allowed[r] is not None and len(allowed[r]) == 1) for r in range(batch))
        if jump_forward and forced:
            chosen = [pad_id if finished[r] else allowed[r][0] for r in range(batch)]
            step_logprobs = [0.0] * batch
        else:
            fed, row_mask, shared = pending, mask, None
            if passes == 0 and cache_alike:  # rows with the same prompt are prefilled once
                keys = [tuple(row.tolist()) for row in input_ids]
                first = {key: row for row, key in reversed(list(enumerate(keys)))}
                if len(first) < batch:
                    unique = sorted(set(first.values()))
                    shared = torch.tensor([unique.index(first[key]) for key in keys], device=device)
                    fed, row_mask = pending[unique], mask[unique]
                    shared_tokens = int(mask[:, -fed.shape[1] :].sum() - row_mask[:, -fed.shape[1] :].sum())
                    if start:
                        cache.reorder_cache(torch.tensor(unique, device=device))
            out = model(
                input_ids=fed,
                attention_mask=row_mask,
                position_ids=positions(row_mask)[:, -fed.shape[1] :],
                use_cache=True,
                logits_to_keep=1,
                **{CACHE_ARGUMENT: cache},
            )
            passes += 1
            fed_tokens += int(row_mask[:, -fed.shape[1] :].sum())
            logits = out.logits[:, -1].float()
            cache = getattr(out, CACHE_ARGUMENT)
            del out
            if shared is not None:
                cache.reorder_cache(shared)
                logits = logits[shared]
            chosen, step_logprobs = _sample(logits, allowed, finished, temperature, top_p, logprob_temperature, pad_id)
            pending = pending[:, :0]
        column = torch.tensor(chosen, dtype=torch.long, device=device)[:, None]
        pending = torch.cat([pending, column], dim=1)
        mask = torch.cat([mask, torch.tensor([[int(not done)] for done in finished], device=device)], dim=1)
        tokens[:, step] = torch.tensor(chosen)
        logprobs[:, step] = torch.tensor(step_logprobs)
        for r in range(batch):
            if not finished[r]:
                generated[r].append(chosen[r])
                finished[r] = chosen[r] == eos_id or stopped(generated[r])
        if all(finished):
            tokens, logprobs = tokens[:, : step + 1], logprobs[:, : step + 1]
            break
    return Decoded(tokens, logprobs, cache, passes, shared_tokens, fed_tokens)


def _sample(
    logits: torch.Tensor,
    allowed: list[tuple[int, ...] | None],
    finished: list[bool],
    temperature: float,
    top_p: float,
    logprob_temperature: float,
    pad_id: int,
) -> tuple[list[int], list[float]]:
    """One token per row from ``[batch, vocabulary]`` float32 logits, and its behaviour log-prob."""
    scores = logits.clone()
    for row, keep in enumerate(allowed):
        if keep is not None:
            scores[row] = restrict(scores[row], keep)
    if temperature > 0:
        scores = scores / temperature
        if top_p < 1:
            scores = top_p_filter(scores, top_p)
        drawn = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
    else:
        drawn = scores.argmax(dim=-1)
    chosen = drawn.tolist()
    # the log-prob under softmax(logits / T), renormalised over the allowed set where one applies
    masked = torch.stack([restrict(row, keep) if keep is not None else row for row, keep in zip(logits, allowed)])
    behaviour = torch.log_softmax(masked / logprob_temperature, dim=-1).gather(1, drawn[:, None]).squeeze(1).tolist()
    return (
        [pad_id if done else token for done, token in zip(finished, chosen)],
        [0.0 if done else value for done, value in zip(finished, behaviour)],
    )
