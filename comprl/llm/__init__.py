"""Model loading and generation engines."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# oneDNN, behind torch's CPU matrix products, keeps a compiled kernel per shape it meets (up to 1,024 by default),
# and a rollout's shapes change every turn: 64 kernels bound that memory without slowing the steps. oneDNN reads this
# once, at its first kernel: set it before any CPU matrix product to take another value.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from comprl.config import ENGINES
from comprl.llm.engine import Completion, GenerationEngine, HFEngine, SamplingParams
from comprl.llm.loading import (
    BUILTIN_MODELS,
    DTYPES,
    cache_dir,
    load_model,
    load_tokenizer,
    resolve_dtype,
    sharing_weights,
)
from comprl.llm.scoring import token_logprobs
from comprl.llm.vllm_engine import VLLMEngine

if TYPE_CHECKING:
    from comprl.config import ExperimentConfig


def make_engine(
    config: ExperimentConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> GenerationEngine:
    """The actor's generation engine that ``config.rollout.engine`` names, over ``model``: the trainer's model
    (updated in place by :class:`~comprl.policy_gradient.PolicyGradientTrainer`, LoRA adapters included), whose
    weights the engine takes up on ``sync_weights()``."""
    engine = config.rollout.engine
    if engine == "hf":
        return HFEngine(model, tokenizer, adapter_dtype=config.actor.generation_adapter_dtype)
    if engine == "vllm":
        return VLLMEngine(model, tokenizer, gpu_memory_utilization=config.rollout.vllm_gpu_memory, seed=config.seed)
    raise ValueError(f"rollout.engine={engine!r}; accepted: {', '.join(ENGINES)}")


__all__ = [
    "BUILTIN_MODELS",
    "Completion",
    "DTYPES",
    "ENGINES",
    "GenerationEngine",
    "HFEngine",
    "SamplingParams",
    "VLLMEngine",
    "cache_dir",
    "load_model",
    "load_tokenizer",
    "make_engine",
    "resolve_dtype",
    "sharing_weights",
    "token_logprobs",
]
