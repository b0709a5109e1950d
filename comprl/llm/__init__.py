"""Model loading and generation engines."""

from comprl.llm.engine import Completion, GenerationEngine, HFEngine, SamplingParams
from comprl.llm.loading import BUILTIN_MODELS, DTYPES, cache_dir, load_model, load_tokenizer, resolve_dtype
from comprl.llm.scoring import token_logprobs

__all__ = [
    "BUILTIN_MODELS",
    "Completion",
    "DTYPES",
    "GenerationEngine",
    "HFEngine",
    "SamplingParams",
    "cache_dir",
    "load_model",
    "load_tokenizer",
    "resolve_dtype",
    "token_logprobs",
]
