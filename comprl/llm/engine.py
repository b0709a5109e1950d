"""Batched generation that returns what an RL trainer needs: completion token ids and behaviour log-probs.

Engines share one small protocol (:class:`GenerationEngine`) so that rollout code does not care whether tokens
come from transformers on a laptop CPU or from a GPU server. The behaviour log-prob of a sampled token is taken
under the temperature-scaled distribution ``softmax(logits / T)``, the same quantity the trainers recompute
(:func:`comprl.llm.scoring.token_logprobs`), so the importance ratio is exactly 1 on-policy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase


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
        return self.temperature if self.temperature > 0 else 1.0


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


class GenerationEngine(Protocol):
    """What rollout code needs from an inference backend."""

    tokenizer: PreTrainedTokenizerBase

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt (prompts are token id lists)."""
        ...

    def sync_weights(self) -> None:
        """Make generation use the trainer's latest weights (a no-op when they share the module)."""
        ...


@dataclass
class HFEngine:
    """Batched generation with ``transformers.generate`` (left padding); shares weights with the trainer.

    Args:
        model: a causal LM (a peft-wrapped model works too).
        tokenizer: its tokenizer; its pad token is used for left padding.
        max_batch_size: prompts per ``generate`` call; larger batches are split.
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_batch_size: int = 64
    stats: dict[str, float] = field(default_factory=lambda: {"generated_tokens": 0.0, "seconds": 0.0})

    def sync_weights(self) -> None:
        """Nothing to do: generation runs on the very module the trainer updates."""

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        out: list[Completion] = []
        for start in range(0, len(prompts), self.max_batch_size):
            out.extend(self._generate_batch(prompts[start : start + self.max_batch_size], params))
        return out

    def _generate_batch(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt must hold at least one token")
        device = next(self.model.parameters()).device
        pad_id = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        sampling = params.temperature > 0
        started = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        result = self.model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            max_new_tokens=params.max_new_tokens,
            do_sample=sampling,
            temperature=params.temperature if sampling else None,
            top_p=params.top_p if sampling else None,
            top_k=None,
            stop_strings=list(params.stop) or None,
            tokenizer=self.tokenizer if params.stop else None,
            pad_token_id=pad_id,
            eos_token_id=self.tokenizer.eos_token_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
        self.model.train(was_training)
        new_tokens = result.sequences[:, width:].cpu()
        logits = torch.stack(result.logits, dim=1).float().cpu()  # [B, new, V], raw (before temperature)
        logprobs = torch.log_softmax(logits / params.logprob_temperature, dim=-1)
        chosen = logprobs.gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
        completions = [self._finish(new_tokens[row].tolist(), chosen[row].tolist(), params) for row in range(len(prompts))]
        self.stats["generated_tokens"] += sum(len(c.token_ids) for c in completions)
        self.stats["seconds"] += time.perf_counter() - started
        return completions

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
