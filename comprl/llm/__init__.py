"""Model loading and generation engines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from comprl.llm import allocator

allocator.apply()  # before torch's first CPU kernel and large allocation

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from comprl.accepted import ENGINES
from comprl.llm.engine import Completion, GenerationEngine, HFEngine, SamplingParams
from comprl.llm.loading import BUILTIN_MODELS, DTYPES, cache_dir, load_model, load_tokenizer, resolve_dtype
from comprl.llm.scoring import token_logprobs
from comprl.llm.vllm_engine import VLLMEngine

if TYPE_CHECKING:
    from comprl.config import ExperimentConfig

def make_engine(config: ExperimentConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> GenerationEngine:
    """The actor's generation engine that ``config.rollout.engine`` names, over ``model``: the trainer's model
    (updated in place by :class:`~comprl.policy.PolicyTrainer`, LoRA adapters included), whose weights the engine
    takes up on ``sync_weights()``."""
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
    "token_logprobs",
]
