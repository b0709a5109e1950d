"""What the actor (GRPO) and the extractor (CISPO) trainers share: optimiser set-up and micro-batched updates.

Both learners train on packed sequences (:class:`~comprl.actor.rollout.PackedSequence`: token ids, a mask of the
model's own tokens, behaviour log-probs) with one advantage per sequence; they differ only in the per-token loss
of :mod:`comprl.objectives` and in how advantages are computed.
"""

from __future__ import annotations

import random
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from transformers import PreTrainedModel

from comprl.llm.allocator import release_free_memory
from comprl.llm.loading import UNSLOTH_TARGET_MODULES, loaded_by_unsloth, unsloth_fast_language_model
from comprl.llm.scoring import SharedPrefix, can_share_prefix, token_logprobs
from comprl.config import OptimConfig

@dataclass(kw_only=True)
class PackedSequence:
    """A token sequence in which the model's own tokens are marked and carry their behaviour log-probs."""

    token_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    """1 for tokens the model generated, 0 for context (prompt, observations, response prefix)."""
    logprobs: list[float] = field(default_factory=list)
    """Behaviour log-prob per token (0.0 on context tokens)."""
    choices: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Constrained choice (:mod:`comprl.llm.choice`): position -> the token ids the model was restricted to there;
    those tokens' log-probs are normalised over that set. Empty for free text."""

    def extend(
        self,
        ids: Sequence[int],
        logprobs: Sequence[float] | None = None,
        choices: Sequence[tuple[int, ...] | None] = (),
    ) -> None:
        """Append context tokens (``logprobs is None``) or the model's own tokens with their log-probs (and, for
        a constrained reply, the allowed set of each token, None where it was free)."""
        start = len(self.token_ids)
        self.token_ids.extend(ids)
        self.action_mask.extend([0 if logprobs is None else 1] * len(ids))
        self.logprobs.extend([0.0] * len(ids) if logprobs is None else logprobs)
        self.choices.update({start + i: allowed for i, allowed in enumerate(choices) if allowed is not None})

    @property
    def num_action_tokens(self) -> int:
        return sum(self.action_mask)

    def after(self, length: int) -> PackedSequence:
        """What follows the first ``length`` tokens, positions counted from there (a :class:`SharedPrefix`'s
        continuation)."""
        return PackedSequence(
            token_ids=self.token_ids[length:], action_mask=self.action_mask[length:], logprobs=self.logprobs[length:],
            choices={position - length: allowed for position, allowed in self.choices.items() if position >= length},
        )


def shared_prefixes(sequences: Sequence[PackedSequence], min_tokens: int) -> list[tuple[int, list[int]]]:
    """The indices of ``sequences`` in groups that begin with the same context, each with the length of the prefix
    its members share: at least ``min_tokens``, and ending before any member's first own token has to be scored
    (so a continuation scores every own token itself); the sequences that share none with another come last, in
    one group of length 0 (``min_tokens`` 0: every sequence there).

    The groups are runs of the sequences sorted by their tokens, cut where they save the most prefix tokens,
    ``sum (members - 1) x length`` (a GRPO group splits into its guided and free halves, whose prompts differ after
    the system prompt, rather than sharing the system prompt alone)."""
    def shareable(sequence: PackedSequence) -> list[int]:
        first_own = sequence.action_mask.index(1) if 1 in sequence.action_mask else len(sequence.token_ids)
        return sequence.token_ids[: max(first_own - 1, 0)]

    heads = [shareable(s) for s in sequences]
    order = sorted((i for i in range(len(sequences)) if len(heads[i]) >= min_tokens > 0), key=lambda i: heads[i])

    def common(a: list[int], b: list[int]) -> int:
        n = 0
        for x, y in zip(a, b):
            if x != y:
                break
            n += 1
        return n

    adjacent = [common(heads[a], heads[b]) for a, b in zip(order, order[1:])]
    # best[j]: the most tokens saved by groups of order[:j]; cut[j]: where the last of those groups starts
    best, cut = [0] * (len(order) + 1), [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        best[end], cut[end], length = best[end - 1], end - 1, None
        for start in range(end - 2, -1, -1):
            length = adjacent[start] if length is None else min(length, adjacent[start])
            if length < min_tokens:
                break
            if best[start] + (end - start - 1) * length > best[end]:
                best[end], cut[end] = best[start] + (end - start - 1) * length, start
    groups, end = [], len(order)
    while end > 0:
        if end - cut[end] > 1:
            groups.append((min(adjacent[cut[end] : end - 1]), sorted(order[cut[end] : end])))
        end = cut[end]
    grouped = {i for _, members in groups for i in members}
    alone = [i for i in range(len(sequences)) if i not in grouped]
    return sorted(groups, key=lambda group: group[1][0]) + ([(0, alone)] if alone else [])


LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, float]]]
"""(logprobs, old_logprobs, advantages, mask) -> (loss, stats with clip_fraction, ratio_mean, approx_kl)."""


def pad_batch(sequences: Sequence[PackedSequence], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad packed sequences into ``input_ids``, ``attention_mask``, ``action_mask``, ``old_logprobs``."""
    width = max(len(s.token_ids) for s in sequences)
    shape = (len(sequences), width)
    batch = {
        "input_ids": torch.full(shape, pad_id, dtype=torch.long),
        "attention_mask": torch.zeros(shape, dtype=torch.long),
        "action_mask": torch.zeros(shape, dtype=torch.float32),
        "old_logprobs": torch.zeros(shape, dtype=torch.float32),
    }
    for row, s in enumerate(sequences):
        n = len(s.token_ids)
        batch["input_ids"][row, :n] = torch.tensor(s.token_ids)
        batch["attention_mask"][row, :n] = 1
        batch["action_mask"][row, :n] = torch.tensor(s.action_mask, dtype=torch.float32)
        batch["old_logprobs"][row, :n] = torch.tensor(s.logprobs, dtype=torch.float32)
    return batch


def _set_up(model: PreTrainedModel, config: OptimConfig) -> PreTrainedModel:
    """The model to train: with LoRA adapters injected when ``lora_rank > 0`` (by peft, or by unsloth for
    ``backend="unsloth"``), and gradient checkpointing on when asked."""
    if config.backend == "unsloth":
        model = _unsloth_lora(model, config)
    else:
        if config.lora_rank > 0:
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(
                r=config.lora_rank, lora_alpha=config.lora_alpha, target_modules="all-linear", lora_dropout=0.0
            )
            with warnings.catch_warnings():  # peft reads an attribute transformers has deprecated
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                model = get_peft_model(model, lora)
        if config.gradient_checkpointing:
            if hasattr(model, "activation_checkpointing_enable"):  # the name since transformers 5.x
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _unsloth_lora(model: PreTrainedModel, config: OptimConfig) -> PreTrainedModel:
    """LoRA adapters through ``FastLanguageModel.get_peft_model`` (its fused LoRA kernels), with unsloth's own
    gradient checkpointing (``"unsloth"``: activations offloaded to CPU memory; plain recomputation for models
    prepared for sequences under 512 tokens) instead of transformers'."""
    fast_language_model = unsloth_fast_language_model(next(model.parameters()).device)
    if not loaded_by_unsloth(model):
        raise ValueError(
            "backend='unsloth' adds LoRA adapters to a model unsloth loaded: load it with "
            "comprl.llm.load_model(name, backend='unsloth') (or FastLanguageModel.from_pretrained)"
        )
    # get_peft_model reseeds Python's, numpy's and torch's global generators with its random_state: draw that from
    # torch's generator (as peft's adapter initialisation would) and leave every generator as it was otherwise.
    random_state = int(torch.randint(2**31 - 1, ()).item())
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
        model = fast_language_model.get_peft_model(
            model,
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            lora_dropout=0.0,
            bias="none",
            target_modules=list(UNSLOTH_TARGET_MODULES),
            use_gradient_checkpointing="unsloth" if config.gradient_checkpointing else False,
            random_state=random_state,
        )
    random.setstate(python_state)
    np.random.set_state(numpy_state)
    return model


class PolicyGradientTrainer:
    """A policy-gradient learner over packed sequences; subclasses supply the loss, the advantages and the
    temperature each sequence's behaviour log-probs were taken at (:meth:`logprob_temperature`).

    The model is trained in place (with LoRA adapters injected into it when ``lora_rank > 0``), so a
    :class:`~comprl.llm.HFEngine` holding the same model generates with the new weights at once (after
    ``engine.sync_weights()`` drops its KV cache).

    Trainable weights in low precision (bfloat16/float16 full fine-tuning) get fp32 master copies, which AdamW
    steps; the model's weights are the masters rounded after every step. Stepped in place, a bfloat16 weight
    would lose most of AdamW's small steps (at the paper's lr 1e-6) to rounding.

    ``config.autocast="bfloat16"``: the trainer's forward passes run under bfloat16 autocast, so fp32 weights (LoRA
    adapters, a float32 model) compute in bfloat16, while log-softmax, ratios, the loss, the gradients AdamW
    reads, the masters and AdamW's state stay fp32. Checkpointed layers recompute under the same autocast (torch's
    checkpoint records it).
    ``config.backend="unsloth"``: the adapters come from unsloth's ``FastLanguageModel.get_peft_model``.

    ``weights_of``: another trainer whose weights this one trains too (two objectives on one model, e.g.
    ``ExtractorConfig.share_actor``): ``model`` must be that trainer's model, already set up (its LoRA adapters,
    gradient checkpointing and autocast; this ``config``'s are not applied), the fp32 masters are that trainer's, and
    only the AdamW state is this trainer's own. Updates must not overlap (one process, one at a time).
    """

    def __init__(
        self, model: PreTrainedModel, pad_token_id: int, config: OptimConfig, loss_fn: LossFn,
        weights_of: PolicyGradientTrainer | None = None,
    ) -> None:
        self.config = config
        self.pad_token_id = pad_token_id
        self.loss_fn = loss_fn
        self.autocast: torch.dtype | None
        """The dtype the trainer's forward passes autocast to (None: each weight's own dtype); with ``weights_of``,
        that trainer's."""
        if weights_of is None:
            model = _set_up(model, config)
            params = [p for p in model.parameters() if p.requires_grad]
            self._masters = [p if p.dtype == torch.float32 else p.detach().float() for p in params]
            # (model weight, its fp32 master) for each trainable weight held in low precision
            self._low_precision = [(p, m) for p, m in zip(params, self._masters) if m is not p]
            self.autocast = None if config.autocast is None else getattr(torch, config.autocast)
        elif model is not weights_of.model:
            raise ValueError("weights_of: model must be that trainer's own (set-up) model, weights_of.model")
        else:
            self._masters, self._low_precision = weights_of._masters, weights_of._low_precision
            self.autocast = weights_of.autocast
        self.model = model
        self.prefix_tokens = config.shared_prefix_tokens if can_share_prefix(model) and config.backend == "hf" else 0
        """The ``shared_prefix_tokens`` this trainer applies: 0 where its model cannot share a prefix, and with the
        unsloth backend (whose patched forward passes are not checked with a cache)."""
        self.optimizer = torch.optim.AdamW(self._masters, lr=config.learning_rate, weight_decay=config.weight_decay)

    def logprob_temperature(self, sequence: PackedSequence) -> float:
        """The temperature ``sequence``'s behaviour log-probs were taken at; its log-probs are recomputed there."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs to continue training exactly: the trainable weights by name (LoRA adapters, or
        every weight of a full fine-tune) in fp32 (the masters), and the optimiser's state."""
        names = [name for name, p in self.model.named_parameters() if p.requires_grad]
        return {
            "weights": {name: master.detach().clone() for name, master in zip(names, self._masters)},
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into a trainer built on the same base model and config."""
        self.load_weights(state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Set the trainable weights (and their masters) by name, e.g. a finished run's exported adapters."""
        names = [name for name, p in self.model.named_parameters() if p.requires_grad]
        if sorted(names) != sorted(weights):
            missing, extra = sorted(set(names) - set(weights)), sorted(set(weights) - set(names))
            raise ValueError(
                f"weights do not fit this model's trainable weights: missing {missing[:3]}, unexpected {extra[:3]}"
            )
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.no_grad():
            for name, param, master in zip(names, params, self._masters):
                master.copy_(weights[name])
                if param is not master:
                    param.copy_(master)

    def update(self, sequences: Sequence[PackedSequence], advantages: torch.Tensor) -> dict[str, float]:
        """Run ``update_epochs`` optimiser steps on one batch with the given per-sequence advantages."""
        started = time.perf_counter()
        metrics: dict[str, float] = {}
        self.model.train()
        for _ in range(self.config.update_epochs):
            self.model.zero_grad(set_to_none=True)
            metrics = self._accumulate(sequences, advantages, backward=True)
            if metrics["trained_sequences"] > 0:
                for param, master in self._low_precision:
                    master.grad = None if param.grad is None else param.grad.float()
                metrics["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self._masters, self.config.max_grad_norm))
                self.optimizer.step()
                with torch.no_grad():
                    for param, master in self._low_precision:
                        param.copy_(master)
        self.model.eval()
        release_free_memory()  # the update's activations and gradients, freed into the heap
        metrics["advantage_abs_mean"] = float(advantages.abs().mean()) if len(advantages) else 0.0
        metrics["update_seconds"] = time.perf_counter() - started
        return metrics

    @torch.no_grad()
    def evaluate_loss(self, sequences: Sequence[PackedSequence], advantages: torch.Tensor) -> float:
        """The loss of a batch under the current weights (no update)."""
        return self._accumulate(sequences, advantages, backward=False)["loss"]

    def _accumulate(
        self, sequences: Sequence[PackedSequence], advantages: torch.Tensor, backward: bool
    ) -> dict[str, float]:
        """Loss over the batch, micro-batch by micro-batch, weighted so the total equals the batch aggregate.

        Sequences with zero advantage contribute nothing to the objective or its gradient, so they are skipped
        (they still count in the aggregation denominators). Sequences that begin with the same context (at least
        :attr:`prefix_tokens` tokens: a GRPO group's prompt) run it through the model once (:class:`SharedPrefix`),
        each micro-batch scoring only what follows.
        """
        token_mean = self.config.aggregation == "token-mean"
        denominator = sum(s.num_action_tokens for s in sequences) if token_mean else sum(
            s.num_action_tokens > 0 for s in sequences
        )
        chosen = [i for i, s in enumerate(sequences) if advantages[i] != 0 and s.num_action_tokens > 0]
        totals = {"loss": 0.0, "clip_fraction": 0.0, "ratio_mean": 0.0, "approx_kl": 0.0}
        trained_tokens = 0
        device = next(self.model.parameters()).device
        for length, members in shared_prefixes([sequences[i] for i in chosen], self.prefix_tokens):
            group = [chosen[m] for m in members]
            prefix = SharedPrefix(
                self.model, sequences[group[0]].token_ids[:length], self.autocast, grad=backward
            ) if length else None
            for start in range(0, len(group), self.config.micro_batch_size):
                rows = group[start : start + self.config.micro_batch_size]
                parts = [sequences[i].after(length) for i in rows]  # the whole sequences where length is 0
                batch = {k: v.to(device) for k, v in pad_batch(parts, self.pad_token_id).items()}
                temperatures = torch.tensor([self.logprob_temperature(sequences[i]) for i in rows], device=device)
                with torch.set_grad_enabled(backward):
                    logprobs = token_logprobs(
                        self.model, batch["input_ids"], batch["attention_mask"], batch["action_mask"], temperatures,
                        choices=[part.choices for part in parts], autocast=self.autocast, prefix=prefix,
                    )
                    loss, stats = self.loss_fn(
                        logprobs, batch["old_logprobs"], advantages[rows].to(device), batch["action_mask"]
                    )
                    tokens = int(batch["action_mask"].sum())
                    weight = (tokens if token_mean else len(rows)) / max(denominator, 1)
                    if backward:
                        (loss * weight).backward()
                totals["loss"] += loss.item() * weight
                for key in ("clip_fraction", "ratio_mean", "approx_kl"):
                    totals[key] += stats[key] * tokens
                trained_tokens += tokens
            if prefix is not None and backward:
                prefix.backward()  # the prefix's share of every member's gradient, through it once
        for key in ("clip_fraction", "ratio_mean", "approx_kl"):
            totals[key] = totals[key] / trained_tokens if trained_tokens else 0.0
        totals["trained_sequences"] = float(len(chosen))
        totals["trained_tokens"] = float(trained_tokens)
        return totals
