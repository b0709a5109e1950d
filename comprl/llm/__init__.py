"""Model loading and generation engines."""

from comprl.llm.engine import Completion, GenerationEngine, HFEngine, SamplingParams
from comprl.llm.loading import BUILTIN_MODELS, cache_dir, load_model, load_tokenizer
from comprl.llm.scoring import token_logprobs

__all__ = [
    "BUILTIN_MODELS",
    "Completion",
    "GenerationEngine",
    "HFEngine",
    "SamplingParams",
    "cache_dir",
    "load_model",
    "load_tokenizer",
    "token_logprobs",
]
