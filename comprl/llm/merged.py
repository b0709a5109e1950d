"""A generation copy of a LoRA model with its adapters merged into the base weights (``adapter_dtype="merged"``).

peft computes every LoRA layer as ``base(x) + B(A(dropout(x))) * scaling``: two extra small matrix products per
layer and, with float32 adapters over bfloat16 weights, a cast of every input. Generation does not need them
separately: ``W + scaling * B @ A`` is one matrix. :class:`MergedCopy` keeps a plain copy of the base model (no peft
layers) whose LoRA targets hold that sum, computed in float32 and rounded once to the base dtype, as vLLM's merged
LoRA serving does. The trainer keeps its unmerged model and float32 masters; the copy is refreshed from them after
each update (:meth:`MergedCopy.model` re-merges when any adapter tensor changed since the last merge).
"""

from __future__ import annotations

import copy

import torch
from transformers import PreTrainedModel


class MergedCopy:
    """The merged generation copy of a peft LoRA model (plain LoRA on linear layers; no DoRA).

    It costs one more copy of the base weights in memory (on the model's device).
    """

    def __init__(self, model: PreTrainedModel) -> None:
        from peft.tuners.lora import LoraLayer

        base = model.get_base_model()
        self._layers = {name: module for name, module in base.named_modules() if isinstance(module, LoraLayer)}
        if not self._layers:
            raise ValueError(f"adapter_dtype='merged' needs a peft LoRA model; {type(model).__name__} has no LoRA")
        if any(any(module.use_dora.values()) for module in self._layers.values()):
            raise ValueError("adapter_dtype='merged' does not merge DoRA adapters; accepted: plain LoRA")
        self._copy = copy.deepcopy(base).eval()
        for name in self._layers:  # the copy's LoRA wrappers give way to the plain layers they wrap
            parent, _, child = name.rpartition(".")
            holder = self._copy.get_submodule(parent) if parent else self._copy
            setattr(holder, child, getattr(holder, child).base_layer)
        self._copy.requires_grad_(False)
        self._versions: tuple[int, ...] | None = None

    def _adapter_tensors(self) -> list[torch.Tensor]:
        return [
            p for module in self._layers.values() for p in (*module.lora_A.parameters(), *module.lora_B.parameters())
        ]

    def invalidate(self) -> None:
        """Merge again before the next use (the trained weights changed)."""
        self._versions = None

    @torch.no_grad()
    def model(self) -> PreTrainedModel:
        """The copy with the trained model's current adapters merged (merging first if they changed)."""
        versions = tuple(p._version for p in self._adapter_tensors())  # bumped by every in-place update
        if versions != self._versions:
            for name, module in self._layers.items():
                weight = module.base_layer.weight.float()
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        weight = weight + module.get_delta_weight(adapter).float()
                self._copy.get_submodule(name).weight.copy_(weight)
            self._versions = versions
        return self._copy
