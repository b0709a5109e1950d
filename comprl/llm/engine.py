"""Batched generation that returns what an RL trainer needs: completion token ids and behaviour log-probs.

Engines share one small protocol (:class:`GenerationEngine`) so that rollout code does not care whether tokens
come from transformers on a laptop CPU or from a GPU server. The behaviour log-prob of a sampled token is taken
under the temperature-scaled distribution ``softmax(logits / T)``, the same quantity the trainers recompute
(:func:`comprl.llm.scoring.token_logprobs`), so the importance ratio is exactly 1 on-policy.

:class:`HFEngine` can keep a per-episode *prefix KV cache* (pass ``sessions=`` to :meth:`HFEngine.generate`):
multi-turn prompts grow by one reply and one observation per turn, and re-prefilling the whole history every
turn dominates rollout time on a CPU; with the cache only the new tokens of each prompt are prefilled.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator, Protocol, Sequence

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase
from transformers.cache_utils import DynamicLayer

from comprl.config import ADAPTER_DTYPES
from comprl.llm.allocator import release_free_memory
from comprl.llm.choice import ReplyChoices
from comprl.llm.decode import CACHE_ARGUMENT, decode, positions
from comprl.llm.merged import MergedCopy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion per prompt."""

    max_new_tokens: int = 64
    """Cap on generated tokens per call; a completion that hits it has ``finish_reason == "length"``."""
    temperature: float = 1.0
    """Sampling temperature; 0 means greedy (log-probs are then reported at temperature 1). Paper: ~1.0."""
    top_p: float = 1.0
    """Nucleus sampling mass. Keep 1.0 for RL: log-probs are those of the untruncated tempered distribution."""
    stop: tuple[str, ...] = ()
    """Strings that end a completion (kept in it), e.g. ``("</answer>",)``."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def logprob_temperature(self) -> float:
        """The temperature under which behaviour log-probs are reported."""
        return logprob_temperature(self.temperature)


def logprob_temperature(temperature: float) -> float:
    """The temperature behaviour log-probs are taken at for a sampling temperature: itself, or 1 for greedy (0)."""
    return temperature if temperature > 0 else 1.0


@contextmanager
def _contiguous_head_input(model: PreTrainedModel) -> Iterator[None]:
    """For the duration, the LM head gets a contiguous input. In the first forward pass of ``generate`` transformers
    applies the head to the last position only, ``hidden[:, -1:, :]``, a strided view of a batch; torch's matmul
    does not fold such a 3-d input into one matrix product but broadcasts the head's weight over the batch, copying
    it once per row before a batched product, which dominates a multi-turn rollout's time on a CPU. The contiguous
    copy of the last positions is cheap and gives the same logits."""
    head = model.get_output_embeddings()
    hook = None
    if head is not None:
        hook = head.register_forward_pre_hook(lambda module, args: (args[0].contiguous(), *args[1:]))
    try:
        yield
    finally:
        if hook is not None:
            hook.remove()


@contextmanager
def _adapters_in_model_dtype(model: PreTrainedModel) -> Iterator[None]:
    """For the duration, a peft model's LoRA weights are held in the base model's dtype (bfloat16 beside a bfloat16
    base), as vLLM computes adapters; their float32 masters are put back afterwards, untouched. peft otherwise
    casts every layer's input to the adapters' float32 and multiplies there, which makes a CPU's prefill much slower
    than with bfloat16 adapters. No-op for a model without adapters, adapters already in the model's dtype, or a
    model loaded by unsloth (its own kernels pick their dtype). Generation never overlaps an update of the same
    model (the loop rolls out, then updates; the manager holds its engine lock for both), so the trainer never sees
    the cast copies."""
    dtype = model.get_input_embeddings().weight.dtype
    swapped = []
    if _has_lora(model):
        swapped = [(p, p.data) for name, p in model.named_parameters() if "lora_" in name and p.dtype != dtype]
    for parameter, master in swapped:
        parameter.data = master.to(dtype)
    try:
        yield
    finally:
        for parameter, master in swapped:
            parameter.data = master


def _has_lora(model: PreTrainedModel) -> bool:
    """Whether ``model`` carries peft adapters that comprl computes itself (unsloth's pick their own kernels)."""
    from comprl.llm.loading import loaded_by_unsloth

    return hasattr(model, "peft_config") and not loaded_by_unsloth(model)


@dataclass
class Completion:
    """One generated completion."""

    token_ids: list[int]
    """The sampled tokens, up to and including the EOS token or the token that completed a stop string."""
    logprobs: list[float]
    """Behaviour log-prob of each token in ``token_ids``."""
    text: str
    """``token_ids`` decoded, special tokens dropped."""
    finish_reason: str
    """``"eos"``, ``"stop"`` (a stop string) or ``"length"``."""
    choices: list[tuple[int, ...] | None] = field(default_factory=list)
    """With constrained choice: the allowed token ids at each token of ``token_ids`` (None where unconstrained),
    the set its log-prob is normalised over (:mod:`comprl.llm.choice`). Empty without it."""


class GenerationEngine(Protocol):
    """What rollout code needs from an inference backend."""

    tokenizer: PreTrainedTokenizerBase

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        sessions: Sequence[Hashable] | None = None,
        choices: Sequence[ReplyChoices | None] | None = None,
    ) -> list[Completion]:
        """One completion per prompt (prompts are token id lists).

        ``sessions`` (optional, one key per prompt) names the episode each prompt belongs to, so that an engine
        may reuse the work it did for that episode's previous, shorter prompt. Results do not depend on it.
        ``choices`` (optional, one per prompt, None for a free reply) restricts replies to admissible texts
        (:mod:`comprl.llm.choice`); behaviour log-probs are then normalised over the allowed tokens.
        """
        ...

    def release(self, sessions: Sequence[Hashable]) -> None:
        """Forget what is kept for these sessions (their episodes ended)."""
        ...

    def sync_weights(self) -> None:
        """Make generation use the trainer's latest weights; call it after every actor update."""
        ...


@dataclass
class _Prefix:
    """What the engine keeps for one session, or for a prompt prefix several rows share: token ids and their
    keys/values in every layer."""

    ids: tuple[int, ...]
    kv: list[torch.Tensor | None]
    """Per layer ``[2 (key, value), kv_heads, len(ids), head_dim]`` on the model's device; a session's layer is set
    to None once it has been copied into a batch cache, so that its memory goes as the batch's comes."""
    shared: bool = False
    """A shared prefix, kept for later calls until the weights change (its layers are never set to None)."""


SHARED_PREFIX_MIN = 32
"""The shortest prompt prefix the engine prefills once for several distinct prompts (a task's system prompt and
instructions); a shorter one saves less than the extra forward pass costs."""
SHARED_PREFIXES_KEPT = 8
"""How many shared prefixes the engine keeps (the most recently used): one per task of a mixture and per prompt
kind (actor, evaluation, extractor)."""


@dataclass
class HFEngine:
    """Batched generation with ``transformers.generate`` (left padding); shares weights with the trainer.

    Sampling follows :class:`SamplingParams` alone: the model's own ``generation_config`` (a repetition penalty,
    top-k, ... shipped with the checkpoint) is set aside during each call, as the log-probs know nothing of it.

    Prefix KV cache (opt-in): pass ``sessions=`` (one hashable key per prompt, e.g. the episode index) to
    :meth:`generate`. The engine then keeps, per key, the token ids of that row's prompt and completion (all but
    the last sampled token) together with their per-layer keys/values. When the next prompt of the same key
    extends those ids (the usual multi-turn case: previous prompt + reply + new observation), only the new suffix
    is prefilled; otherwise that row is prefilled in full. Completions and log-probs equal those without the
    cache up to float rounding. Kept caches live on the model's device and take ``2 * layers * kv_heads *
    head_dim`` numbers per token, so:

    * call :meth:`release` with the keys of episodes that ended (or :meth:`clear_cache` after a rollout batch);
    * call :meth:`sync_weights` after every actor update: kept keys/values were computed with the old weights and
      are stale afterwards. It drops them all. (A rollout batch never spans an update, so the caches used within
      one episode are consistent.)

    The cache needs a model whose transformers cache is made of plain full-attention ``DynamicLayer`` s (Llama,
    SmolLM2, Qwen2, ... also peft-wrapped); for other models ``sessions`` is ignored (with a warning).

    Args:
        model: a causal LM (a peft-wrapped model works too).
        tokenizer: its tokenizer; its pad token is used for left padding.
        max_batch_size: prompts per ``generate`` call; larger batches are split.
        adapter_dtype: a peft model's LoRA adapters during generation: ``"model"`` computes them in the base
            model's dtype (:func:`_adapters_in_model_dtype`; behaviour log-probs then differ from the trainer's
            float32-adapter recomputation by bfloat16 rounding, as vLLM's do), ``"float32"`` in peft's float32,
            ``"merged"`` generates with a copy of the model whose adapters are merged into its weights
            (:mod:`comprl.llm.merged`; fastest, one more copy of the base weights in memory).
        shared_prefix, jump_forward: see the fields.
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_batch_size: int = 64
    adapter_dtype: str = "model"
    shared_prefix: bool = True
    """Prefill a prompt prefix that several distinct prompts share once (a task's system prompt and instructions:
    the first turn of every group, every evaluation chunk, every extractor call) and keep its keys/values until the
    weights change (:meth:`_shared_prefixes`). The same distributions; the keys/values are computed in another
    batch shape, so they can differ from a full prefill's by rounding."""
    shared_prefix_prompts: int = 8
    """The fewest distinct prompts that must share a prefix no kept one serves before it is prefilled on its own (a
    prefix already kept serves any number). Ours, measured on 2 quiet CPU cores with SmolLM2-135M: the extra pass
    made a training step's 4 distinct prompts (groups of 4) 0.89x as fast, an evaluation chunk's 16 distinct
    prompts 1.12x faster; 8 sits between."""
    jump_forward: bool = True
    """Skip the forward pass of a step at which every unfinished row's next token is forced by constrained choice
    (:mod:`comprl.llm.decode`): the same distributions and log-probs with fewer passes; the random stream differs
    from a loop that runs every pass, so a fixed seed samples other replies with it than without."""
    stats: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(
            (
                "generated_tokens", "prompt_tokens", "reused_prompt_tokens", "computed_tokens", "forward_passes",
                "seconds",
            ),
            0.0,
        )
    )
    """Running totals: ``generated_tokens``, ``prompt_tokens``, ``reused_prompt_tokens`` (prompt tokens whose
    keys/values were not computed for their row: kept from the session's previous turn with ``sessions=``, or
    copied from an identical prompt in the same batch), ``computed_tokens`` (tokens the forward passes computed:
    prompts' uncached suffixes and generated tokens fed back, pads aside), ``forward_passes``, ``seconds``."""
    _prefixes: dict[Hashable, _Prefix] = field(default_factory=dict, init=False, repr=False)
    _shared: dict[tuple[int, ...], _Prefix] = field(default_factory=dict, init=False, repr=False)
    _shared_weights: tuple[int, ...] = field(default=(), init=False, repr=False)
    _prefix_supported: bool = field(default=True, init=False, repr=False)
    _merged: MergedCopy | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.adapter_dtype not in ADAPTER_DTYPES:
            raise ValueError(f"adapter_dtype={self.adapter_dtype!r}; accepted: {', '.join(ADAPTER_DTYPES)}")
        if self.shared_prefix_prompts < 2:
            raise ValueError(
                f"shared_prefix_prompts={self.shared_prefix_prompts}; accepted: an integer >= 2 (a prefix is shared "
                "by at least two distinct prompts)"
            )
        if self.adapter_dtype == "merged" and _has_lora(self.model):
            self._merged = MergedCopy(self.model)

    def sync_weights(self) -> None:
        """Call after every actor update: drops the prefix cache, whose keys/values were computed with the old
        weights, and marks a merged generation copy for merging again (it also re-merges by itself when it sees an
        adapter tensor changed in place)."""
        self.clear_cache()
        if self._merged is not None:
            self._merged.invalidate()

    def release(self, sessions: Sequence[Hashable]) -> None:
        """Drop the prefix caches of these sessions (unknown keys are ignored)."""
        for key in sessions:
            self._prefixes.pop(key, None)

    def clear_cache(self) -> None:
        """Drop every prefix cache, the shared prefixes' too."""
        self._prefixes.clear()
        self._shared.clear()

    @property
    def cached_sessions(self) -> frozenset[Hashable]:
        """Keys of the sessions whose prefix keys/values are kept."""
        return frozenset(self._prefixes)

    @property
    def cached_tokens(self) -> int:
        """Tokens whose keys/values are kept, over all sessions."""
        return sum(len(p.ids) for p in self._prefixes.values())

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        sessions: Sequence[Hashable] | None = None,
        choices: Sequence[ReplyChoices | None] | None = None,
    ) -> list[Completion]:
        """One completion per prompt (token id lists).

        Args:
            prompts: the prompts, each at least one token.
            params: how to sample.
            sessions: optional key per prompt (distinct within a call) that enables the prefix KV cache for it;
                ``None`` generates without touching the cache.
            choices: optional admissible replies per prompt (None: a free reply); see :mod:`comprl.llm.choice`.
        """
        if sessions is not None:
            sessions = list(sessions)
            if len(sessions) != len(prompts):
                raise ValueError(f"got {len(sessions)} sessions for {len(prompts)} prompts")
            if len(set(sessions)) != len(sessions):
                raise ValueError("session keys must be distinct within one generate call")
        if choices is not None and len(choices) != len(prompts):
            raise ValueError(f"got {len(choices)} choices for {len(prompts)} prompts")
        if choices is not None and any(c is not None for c in choices) and params.top_p < 1:
            raise ValueError(
                f"top_p={params.top_p}: constrained choice needs top_p=1 (its log-probs renormalise the tempered "
                "distribution)"
            )
        out: list[Completion] = []
        for start in range(0, len(prompts), self.max_batch_size):
            stop = start + self.max_batch_size
            out.extend(
                self._generate_batch(
                    prompts[start:stop], params, None if sessions is None else sessions[start:stop],
                    None if choices is None else choices[start:stop],
                )
            )
        return out

    def _take_prefixes(self, prompts: Sequence[Sequence[int]], sessions: Sequence[Hashable]) -> list[_Prefix | None]:
        """Pop each session's kept prefix; keep it for the row only if it is a prefix of the new prompt."""
        found: list[_Prefix | None] = []
        for prompt, key in zip(prompts, sessions):
            prefix = self._prefixes.pop(key, None)  # replaced after this call; a stale one is freed at once
            if prefix is not None and not (
                len(prefix.ids) <= len(prompt) and tuple(prompt[: len(prefix.ids)]) == prefix.ids
            ):
                prefix = None
            found.append(prefix)
        return found

    @staticmethod
    def _past_key_values(
        prefixes: list[_Prefix | None], reuse: list[int], width: int, device: torch.device
    ) -> DynamicCache:
        """A batch cache of ``width`` columns holding each row's first ``reuse[row]`` keys/values right-aligned
        (columns to their left are zeros, masked out by the attention mask). Built a layer at a time, each prefix's
        layer dropped once copied: the kept prefixes and the batch never both hold all layers."""
        first = next(p.kv for p, n in zip(prefixes, reuse) if n > 0)
        (_, heads, _, head_dim), dtype, count = first[0].shape, first[0].dtype, len(first)
        del first
        layers = []
        for layer in range(count):
            kv = torch.zeros((2, len(prefixes), heads, width, head_dim), dtype=dtype, device=device)
            for row, (prefix, n) in enumerate(zip(prefixes, reuse)):
                if n > 0:
                    kv[:, row, :, width - n :] = prefix.kv[layer][:, :, :n]
                if prefix is not None and not prefix.shared:
                    prefix.kv[layer] = None
            layers.append((kv[0], kv[1]))
        return DynamicCache(ddp_cache_data=layers)

    def _keep_prefixes(
        self,
        cache: DynamicCache,
        sessions: Sequence[Hashable],
        prompts: Sequence[Sequence[int]],
        completions: list[Completion],
        width: int,
    ) -> None:
        """Store each row's valid keys/values (its prompt, then its reply up to the tokens whose keys/values were
        computed) under its session key, a layer at a time, each batch layer released once copied (the caller holds
        no other reference to the cache)."""
        layers = cache.layers
        if any(type(layer) is not DynamicLayer for layer in layers):
            logger.warning(
                "prefix KV cache disabled: %s's cache is not made of plain DynamicLayers", type(self.model).__name__
            )
            self._prefix_supported = False
            return
        columns = cache.get_seq_length()  # the prompt's width, then the generated tokens fed back so far
        spans = []
        for prompt, completion in zip(prompts, completions):
            begin = width - len(prompt)
            ids = (tuple(prompt) + tuple(completion.token_ids))[: max(columns - begin, 0)]
            spans.append((begin, begin + len(ids), ids))
        kept = {key: _Prefix(ids, []) for key, (_, _, ids) in zip(sessions, spans) if ids}
        for layer in layers:
            for row, ((begin, end, _), key) in enumerate(zip(spans, sessions)):
                if key in kept:
                    kept[key].kv.append(torch.stack((layer.keys[row, :, begin:end], layer.values[row, :, begin:end])))
            layer.keys = layer.values = None  # this layer's batch memory goes now, not after the last layer
        self._prefixes.update(kept)

    def _batch_cache(
        self,
        model: PreTrainedModel,
        prompts: Sequence[Sequence[int]],
        sessions: Sequence[Hashable] | None,
        width: int,
        device: torch.device,
    ) -> tuple[DynamicCache | None, bool]:
        """The batch's starting KV cache from the kept prefixes (None: none serves), and whether rows with equal
        prompts start from equal cache columns (no session's prefix in it), so that :func:`decode` may prefill
        them once.

        Layout: rows stay left padded to ``width``; the last ``fresh`` columns (the longest uncached suffix) are
        computed for every row, and the first ``width - fresh`` come from kept keys/values (each row's cached
        prefix right-aligned, left pads masked). A row whose suffix is shorter recomputes a few cached tokens.
        Position ids come from the attention mask, so RoPE positions are each row's true positions. A row takes its
        session's prefix (``sessions=``), else a shared prefix (:meth:`_shared_prefixes`)."""
        if not self._prefix_supported:
            return None, True
        found = self._take_prefixes(prompts, sessions) if sessions is not None else [None] * len(prompts)
        alike = all(prefix is None for prefix in found)
        if self.shared_prefix:
            shared = self._shared_prefixes(model, [p for p, f in zip(prompts, found) if f is None], device)
            found = [f if f is not None else shared.pop(0) for f in found]
        prefixes = found
        cached = [min(len(p.ids), len(prompt) - 1) if p else 0 for p, prompt in zip(prefixes, prompts)]
        fresh = max(len(prompt) - n for prompt, n in zip(prompts, cached))
        reuse = [max(len(prompt) - fresh, 0) for prompt in prompts]
        self.stats["reused_prompt_tokens"] += sum(reuse)
        if not any(reuse):
            return None, True
        return self._past_key_values(prefixes, reuse, width - fresh, device), alike

    def _shared_prefixes(
        self, model: PreTrainedModel, prompts: Sequence[Sequence[int]], device: torch.device
    ) -> list[_Prefix | None]:
        """Per prompt, a kept prefix it shares with other prompts, or None.

        Prompts that agree on their first :data:`SHARED_PREFIX_MIN` tokens form a group; a group of at least
        :attr:`shared_prefix_prompts` distinct prompts that no kept shared prefix serves gets its longest common
        prefix (at most all but the shortest prompt's last token) prefilled once, in one forward pass for all such
        groups, and kept (up to :data:`SHARED_PREFIXES_KEPT`, the least recently used dropped) until the weights
        change: an in-place update of any trained tensor drops them, :meth:`sync_weights` or not. A smaller group
        is still served by a kept prefix."""
        weights = tuple(p._version for p in self.model.parameters() if p.requires_grad)
        if weights != self._shared_weights:
            self._shared.clear()
            self._shared_weights = weights
        groups: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
        for prompt in prompts:
            if len(prompt) > SHARED_PREFIX_MIN:
                groups.setdefault(tuple(prompt[:SHARED_PREFIX_MIN]), set()).add(tuple(prompt))
        missing = []
        for members in groups.values():
            if len(members) >= self.shared_prefix_prompts and not any(self._serving(m) for m in members):
                common = min(len(os.path.commonprefix(list(members))), min(map(len, members)) - 1)
                if common >= SHARED_PREFIX_MIN:
                    missing.append(tuple(next(iter(members))[:common]))
        if missing:
            self._prefill_shared(model, missing, device)
        return [self._serving(prompt) for prompt in prompts]

    def _serving(self, prompt: Sequence[int]) -> _Prefix | None:
        """The longest kept shared prefix of ``prompt`` shorter than it (marked as just used), or None."""
        serving = [p for ids, p in self._shared.items() if len(ids) < len(prompt) and tuple(prompt[: len(ids)]) == ids]
        best = max(serving, key=lambda p: len(p.ids), default=None)
        if best is not None:
            self._shared[best.ids] = self._shared.pop(best.ids)  # most recently used last
        return best

    def _prefill_shared(self, model: PreTrainedModel, prefixes: list[tuple[int, ...]], device: torch.device) -> None:
        """Compute and keep the keys/values of ``prefixes`` in one left-padded forward pass."""
        width = max(map(len, prefixes))
        ids = torch.full((len(prefixes), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, prefix in enumerate(prefixes):
            ids[row, width - len(prefix) :] = torch.tensor(prefix)
            mask[row, width - len(prefix) :] = 1
        mask = mask.to(device)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask,
            position_ids=positions(mask),
            use_cache=True,
            logits_to_keep=1,
            **{CACHE_ARGUMENT: DynamicCache()},
        )
        layers = getattr(out, CACHE_ARGUMENT).layers
        self.stats["computed_tokens"] += sum(map(len, prefixes))
        self.stats["forward_passes"] += 1
        if any(type(layer) is not DynamicLayer for layer in layers):
            return  # _keep_prefixes reports and disables the cache at the end of this call
        for row, prefix in enumerate(prefixes):
            kv = [torch.stack((layer.keys[row, :, width - len(prefix) :], layer.values[row, :, width - len(prefix) :]))
                  for layer in layers]
            self._shared[prefix] = _Prefix(prefix, kv, shared=True)
        while len(self._shared) > SHARED_PREFIXES_KEPT:
            self._shared.pop(next(iter(self._shared)))

    def _generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        sessions: Sequence[Hashable] | None = None,
        choices: Sequence[ReplyChoices | None] | None = None,
    ) -> list[Completion]:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt must hold at least one token")
        model = self.model if self._merged is None else self._merged.model()
        device = next(model.parameters()).device
        pad_id = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1

        self.stats["prompt_tokens"] += sum(len(p) for p in prompts)
        started = time.perf_counter()
        was_training = model.training
        model.eval()
        adapters = _adapters_in_model_dtype(model) if self.adapter_dtype == "model" else nullcontext()
        try:
            with _contiguous_head_input(model), adapters:
                past_key_values, alike = self._batch_cache(model, prompts, sessions, width, device)
                decoded = decode(
                    model,
                    input_ids.to(device),
                    attention_mask.to(device),
                    past_key_values,
                    max_new_tokens=params.max_new_tokens,
                    temperature=params.temperature,
                    top_p=params.top_p,
                    logprob_temperature=params.logprob_temperature,
                    choices=choices,
                    eos_id=self.tokenizer.eos_token_id,
                    pad_id=pad_id,
                    stopped=self._stopped(params.stop),
                    jump_forward=self.jump_forward,
                    cache_alike=alike,
                )
        finally:
            model.train(was_training)
        del past_key_values
        completions = [
            self._finish(decoded.tokens[row].tolist(), decoded.logprobs[row].tolist(), params)
            for row in range(len(prompts))
        ]
        for completion, choice in zip(completions, choices or [None] * len(prompts)):
            if choice is not None:
                completion.choices = choice.along(completion.token_ids)
        if sessions is not None and self._prefix_supported:
            self._keep_prefixes(decoded.cache, sessions, prompts, completions, width)
        passes = decoded.forward_passes
        self.stats["computed_tokens"] += decoded.fed_tokens
        self.stats["reused_prompt_tokens"] += decoded.shared_prompt_tokens
        del decoded
        release_free_memory()  # this batch's cache, freed into the heap
        self.stats["generated_tokens"] += sum(len(c.token_ids) for c in completions)
        self.stats["forward_passes"] += passes
        self.stats["seconds"] += time.perf_counter() - started
        return completions

    def _stopped(self, stop: tuple[str, ...]) -> Callable[[list[int]], bool]:
        """Whether tokens generated so far complete one of the ``stop`` strings (as :meth:`_finish` cuts them)."""
        if not stop:
            return lambda tokens: False
        decode_text = self.tokenizer.decode
        return lambda tokens: any(s in decode_text(tokens, skip_special_tokens=True) for s in stop)

    def _finish(self, tokens: list[int], logprobs: list[float], params: SamplingParams) -> Completion:
        """Cut a padded row after its EOS token or the token that completed a stop string."""
        eos = self.tokenizer.eos_token_id
        end, reason = len(tokens), "length"
        for i, token in enumerate(tokens):
            if token == eos:
                end, reason = i + 1, "eos"
                break
            if params.stop:
                text = self.tokenizer.decode(tokens[: i + 1], skip_special_tokens=True)
                if any(stop in text for stop in params.stop):
                    end, reason = i + 1, "stop"
                    break
        kept = tokens[:end]
        return Completion(kept, logprobs[:end], self.tokenizer.decode(kept, skip_special_tokens=True), reason)
