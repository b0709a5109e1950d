"""The ``vllm`` generation engine: the same protocol as :class:`~comprl.llm.engine.HFEngine`, on a GPU with vLLM.

The paper's official code rolls its actor out with vLLM; this engine does the same inside the training process,
on the trainer's GPU ("colocated", like TRL's ``vllm_mode="colocate"``), and keeps vLLM's copy of the weights in
step with the trainer after every update (:meth:`VLLMEngine.sync_weights`).

What it promises, and how:

* **Behaviour log-probs are the trainer's.** Each sampled token comes with its log-prob under
  ``softmax(logits / T)``, the quantity :func:`comprl.llm.scoring.token_logprobs` recomputes. vLLM reports the
  log-probs of the *raw* logits unless it is built with ``logprobs_mode="processed_logprobs"``: then they are
  taken after its sampling transforms, the temperature among them from vLLM 0.10.2 on (TRL requires that release
  for the same reason), so this engine needs ``vllm>=0.10.2``. Greedy decoding (T = 0) reports log-probs at
  temperature 1, as :func:`~comprl.llm.engine.logprob_temperature` says.
* **Nothing hidden changes the distribution.** Every vLLM sampling option other than temperature and the token
  cap is set to its neutral value (:func:`vllm_sampling_kwargs`), and vLLM is told not to read the checkpoint's
  ``generation_config.json`` (``generation_config="vllm"``), whose defaults (Qwen2.5-Instruct ships
  ``repetition_penalty=1.05``, ``top_k=20``, ...) it would otherwise apply. ``top_p < 1`` is refused: vLLM's
  processed log-probs are then renormalised over the nucleus, the trainer's are not.
* **Stop strings** end a reply and are kept in it (``include_stop_str_in_output=True``); ``finish_reason`` is
  mapped to comprl's ``"eos"`` / ``"stop"`` / ``"length"``.
* **Multi-turn prompts** (token id lists that grow by a reply and an observation per turn) reuse their prefix's
  keys/values through vLLM's automatic prefix caching (``enable_prefix_caching=True``), so the ``sessions`` that
  :class:`~comprl.llm.engine.HFEngine` uses for its own cache are accepted and ignored, and :meth:`release` does
  nothing.
* **Weight sync.** The engine reads weights from the model the trainer updates in place
  (:class:`~comprl.policy_gradient.PolicyGradientTrainer`; in bfloat16 its weights are the fp32 masters rounded
  after each step).

  - Full fine-tune: vLLM starts from dummy weights and the trainer's weights are copied into its model under the
    base model's parameter names (``model.load_weights``, the call TRL's colocate mode makes), at start and on
    every :meth:`sync_weights`; then vLLM's prefix cache is reset (its keys/values came from the old weights).
  - LoRA (a peft model): the frozen base weights are written once to a scratch folder that vLLM loads at start
    (vLLM wraps the layers of a LoRA-enabled model, after which ``load_weights`` cannot address the base weights);
    every :meth:`sync_weights` saves the adapters to a new folder and generation goes on with a new
    ``LoRARequest`` (a new integer id), vLLM's path for serving a changed adapter.

Limits: one GPU (tensor parallel size 1), in the training process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set,
so that weights are handed to vLLM by reference, not pickled to another process); plain bf16/fp16/fp32 causal LMs
that vLLM implements (Llama, Qwen2, ...); no constrained choice (``rollout.constrained_actions`` needs the ``hf``
engine); recent vLLM releases reject temperatures above 2. With LoRA, vLLM runs the adapters in the base model's
dtype, where peft keeps them in fp32: log-probs then agree with the trainer's to bfloat16 rounding.
"""

from __future__ import annotations

import copy
import gc
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Hashable, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from comprl.llm.choice import ReplyChoices
from comprl.llm.engine import Completion, SamplingParams

logger = logging.getLogger(__name__)

MIN_VLLM_VERSION = (0, 10, 2)
"""The first vLLM whose ``logprobs_mode="processed_logprobs"`` includes the temperature (see the module doc)."""

VLLM_MIN_TEMPERATURE = 0.01
"""vLLM silently raises sampling temperatures in (0, 0.01) to 0.01; the engine refuses them instead."""

LORA_RANK_SLOTS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM accepts for ``max_lora_rank``; the engine takes the smallest that holds the adapter's rank."""

INSTALL_HINT = "pip install 'comprl[gpu]'  (in a checkout: pip install -e '.[gpu]')"


def require_vllm() -> Any:
    """Import vLLM for the ``vllm`` engine, with errors that say what to install or which engine to use instead."""
    if importlib.util.find_spec("vllm") is None:
        raise ImportError(
            "rollout.engine='vllm' needs vLLM, which is not installed: "
            f"{INSTALL_HINT}. It runs on CUDA GPUs only; elsewhere use rollout.engine='hf'."
        )
    if not torch.cuda.is_available():
        raise RuntimeError(
            "rollout.engine='vllm' needs a CUDA GPU (none found); use rollout.engine='hf' on this machine "
            "(the 'cpu' and 'smoke' profiles do)"
        )
    from packaging.version import Version

    found = importlib.metadata.version("vllm")
    if Version(found).release[:3] < MIN_VLLM_VERSION:
        needed = ".".join(map(str, MIN_VLLM_VERSION))
        raise ImportError(
            f"rollout.engine='vllm' needs vllm>={needed} (found {found}): earlier releases report log-probs "
            f"before the temperature is applied. Upgrade: pip install -U 'vllm>={needed}'"
        )
    import vllm

    return vllm


def vllm_sampling_kwargs(params: SamplingParams, eos_token_id: int | None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for ``params``: one reply per prompt, the same temperature
    and token cap as the trainer's, the sampled token's log-prob, stop strings kept in the reply, a stop at the
    tokenizer's EOS token (kept too), and every other option at its neutral value (written out, so that no
    default of a vLLM release can change the distribution the log-probs describe).

    Raises:
        ValueError: for ``top_p < 1`` (vLLM's processed log-probs are renormalised over the nucleus, the
            trainer's are not) and for temperatures in (0, 0.01) (vLLM raises those to 0.01 without saying so).
    """
    if params.top_p < 1:
        raise ValueError(
            f"top_p={params.top_p}: the vllm engine needs top_p=1 (vLLM's log-probs would be renormalised over the "
            "nucleus, while the trainer recomputes them over the whole vocabulary); use rollout.engine='hf'"
        )
    if 0 < params.temperature < VLLM_MIN_TEMPERATURE:
        raise ValueError(
            f"temperature={params.temperature}: vLLM samples at {VLLM_MIN_TEMPERATURE} at least; accepted: 0 "
            f"(greedy) or >= {VLLM_MIN_TEMPERATURE}"
        )
    return {
        "n": 1,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": 1.0,
        "top_k": -1,  # all tokens (-1 is accepted by every vLLM release; newer ones also take 0)
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "logit_bias": None,
        "allowed_token_ids": None,
        "bad_words": None,
        "min_tokens": 0,
        "ignore_eos": False,
        "seed": None,  # the engine's generator; a per-request seed would not change the distribution either
        "stop": list(params.stop),
        "stop_token_ids": [] if eos_token_id is None else [eos_token_id],
        "include_stop_str_in_output": True,
        "detokenize": True,  # stop strings are matched on the text
        "skip_special_tokens": True,
        "logprobs": 0,  # the sampled token's log-prob only
    }


def refuse_choices(choices: Sequence[ReplyChoices | None] | None) -> None:
    """Constrained choice is the ``hf`` engine's alone: fail clearly when a reply is restricted."""
    if choices is not None and any(choice is not None for choice in choices):
        raise ValueError(
            "constrained choice (rollout.constrained_actions=True) is not supported by the vllm engine; "
            "use rollout.engine='hf' with it, or set rollout.constrained_actions=False"
        )


def finish_reason(reason: str | None, stop_reason: int | str | None) -> str:
    """comprl's ``finish_reason`` for vLLM's: ``"length"`` at the token cap, ``"stop"`` at a stop string (vLLM's
    ``stop_reason`` is then that string), ``"eos"`` at the EOS token or a stop token id."""
    if reason == "length":
        return "length"
    if reason == "stop":
        return "stop" if isinstance(stop_reason, str) else "eos"
    raise RuntimeError(f"vLLM ended a request with finish_reason={reason!r} (stop_reason={stop_reason!r})")


def is_lora(model: PreTrainedModel) -> bool:
    """Whether ``model`` is a peft model (the trainers' LoRA setting)."""
    from peft import PeftModel

    return isinstance(model, PeftModel)


def base_weights(model: PreTrainedModel) -> list[tuple[str, torch.Tensor]]:
    """The base model's weights of ``model`` under the names of a plain checkpoint (what vLLM's ``load_weights``
    expects), as views of the model's own tensors (nothing is copied).

    A plain model's names are its own. For a peft model the ``base_model.model.`` prefix and the ``.base_layer``
    of wrapped layers are dropped and the adapters' weights left out (as TRL does before handing weights to
    vLLM), so that the names are the base model's. Tied weights appear once (``named_parameters`` dedupes them).
    """
    lora = is_lora(model)
    weights = []
    for name, param in model.named_parameters():
        if lora:
            if ".lora_" in name or "original_module" in name:
                continue
            name = (
                name.removeprefix("base_model.model.")
                .replace(".base_layer", "")
                .replace("modules_to_save.default.", "")
            )
        weights.append((name.replace("_checkpoint_wrapped_module.", ""), param.detach()))
    return weights


def write_checkpoint(
    folder: str | Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, with_weights: bool
) -> Path:
    """Write what vLLM reads to start: the base model's ``config.json`` (with its architecture named), the
    tokenizer, and with ``with_weights`` the base weights (:func:`base_weights`) as ``model.safetensors``.
    No ``generation_config.json`` is written."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = model.get_base_model() if is_lora(model) else model
    config = copy.deepcopy(base.config)
    config.architectures = [type(base).__name__]  # unset on a model built from a config (tiny-random)
    config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if with_weights:
        tensors = {name: tensor.contiguous() for name, tensor in base_weights(model)}
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def lora_rank_slot(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of ``rank``."""
    for slot in LORA_RANK_SLOTS:
        if slot >= rank:
            return slot
    raise ValueError(f"LoRA rank {rank}: vLLM serves ranks up to {LORA_RANK_SLOTS[-1]}")


class VLLMEngine:
    """Batched generation with vLLM, colocated with the trainer on its GPU; see the module doc.

    Args:
        model: the trainer's model (a peft model with LoRA), on a CUDA device; the engine reads its weights at
            start and on every :meth:`sync_weights`, and never changes them.
        tokenizer: its tokenizer (written beside the config for vLLM, which stops at its EOS token).
        gpu_memory_utilization: share of the GPU's memory vLLM may take for its weights and KV cache, beside the
            trainer (``RolloutConfig.vllm_gpu_memory``).
        seed: vLLM's sampling seed.
        max_model_len: longest prompt + reply in tokens; None: the model's own context length.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        gpu_memory_utilization: float = 0.3,
        seed: int = 0,
        max_model_len: int | None = None,
    ) -> None:
        vllm = require_vllm()
        from vllm.lora.request import LoRARequest

        self.model = model
        self.tokenizer = tokenizer
        self.stats: dict[str, float] = dict.fromkeys(
            ("generated_tokens", "prompt_tokens", "reused_prompt_tokens", "seconds"), 0.0
        )
        """Running totals as :attr:`HFEngine.stats <comprl.llm.engine.HFEngine.stats>` keeps them;
        ``reused_prompt_tokens`` are the prompt tokens vLLM served from its prefix cache."""
        self._sampling_params = vllm.SamplingParams
        self._lora_request_type = LoRARequest
        self._lora = is_lora(model)
        self._scratch = tempfile.TemporaryDirectory(prefix="comprl-vllm-")
        self._adapter_id = 0
        self._adapter_folder: Path | None = None
        self._lora_request: Any = None
        base = model.get_base_model() if self._lora else model
        folder = write_checkpoint(Path(self._scratch.name) / "base", model, tokenizer, with_weights=self._lora)
        if self._lora:
            rank = max(config.r for config in model.peft_config.values())
            options: dict[str, Any] = {"enable_lora": True, "max_lora_rank": lora_rank_slot(rank), "max_loras": 1}
        else:
            options = {"load_format": "dummy"}  # the trainer's weights are copied in below
        # In-process engine core: weights reach vLLM's model by reference through apply_model, not pickled.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self.llm = vllm.LLM(
            model=str(folder),
            tokenizer=str(folder),
            dtype=str(base.dtype).removeprefix("torch."),
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            tensor_parallel_size=1,
            enable_prefix_caching=True,
            generation_config="vllm",  # never the checkpoint's sampling defaults
            logprobs_mode="processed_logprobs",  # log-probs of softmax(logits / T), not of the raw logits
            **options,
        )
        self._check_in_process()
        if self._lora:
            self._new_adapter()
        else:
            self._push_weights(check=True)

    def sync_weights(self) -> None:
        """Give vLLM the trainer's current weights (call after every actor update): the adapters under a new
        ``LoRARequest`` with LoRA, else every weight copied into vLLM's model; then drop the prefix cache."""
        if self._lora:
            self._new_adapter()
        else:
            self._push_weights()
        self.clear_cache()

    def release(self, sessions: Sequence[Hashable]) -> None:
        """Nothing to do: vLLM's prefix cache keeps and evicts prefixes by itself."""

    def clear_cache(self) -> None:
        """Drop vLLM's prefix cache."""
        if self.llm.reset_prefix_cache() is False:
            logger.warning("vLLM did not reset its prefix cache (requests were running)")

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        sessions: Sequence[Hashable] | None = None,
        choices: Sequence[ReplyChoices | None] | None = None,
    ) -> list[Completion]:
        """One completion per prompt (token id lists), as
        :meth:`HFEngine.generate <comprl.llm.engine.HFEngine.generate>`.

        Args:
            prompts: the prompts, each at least one token.
            params: how to sample (``top_p`` must be 1).
            sessions: accepted and ignored (vLLM's prefix cache reuses shared prefixes by itself).
            choices: must be None or all None: constrained choice is not supported by this engine.
        """
        refuse_choices(choices)
        if any(len(prompt) == 0 for prompt in prompts):
            raise ValueError("every prompt must hold at least one token")
        if not prompts:
            return []
        sampling = self._sampling_params(**vllm_sampling_kwargs(params, self.tokenizer.eos_token_id))
        started = time.perf_counter()
        outputs = self.llm.generate(
            [{"prompt_token_ids": [int(token) for token in prompt]} for prompt in prompts],
            sampling_params=sampling,
            use_tqdm=False,
            lora_request=self._lora_request,
        )
        completions = [self._completion(output) for output in outputs]
        self.stats["seconds"] += time.perf_counter() - started
        self.stats["prompt_tokens"] += sum(len(prompt) for prompt in prompts)
        self.stats["reused_prompt_tokens"] += sum(
            int(getattr(output, "num_cached_tokens", 0) or 0) for output in outputs
        )
        self.stats["generated_tokens"] += sum(len(c.token_ids) for c in completions)
        return completions

    def close(self) -> None:
        """Shut vLLM down and free its GPU memory (another engine can start in this process afterwards)."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            engine_core = getattr(llm.llm_engine, "engine_core", None)
            if engine_core is not None and hasattr(engine_core, "shutdown"):
                engine_core.shutdown()
            del llm, engine_core
            gc.collect()
            try:
                from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

                cleanup_dist_env_and_memory()
            except ImportError:
                torch.cuda.empty_cache()
        self._scratch.cleanup()

    def _check_in_process(self) -> None:
        """Weights are handed to vLLM's model by reference, which needs its engine core in this process."""
        try:
            from vllm.v1.engine.core_client import MPClient
        except ImportError:
            return
        if isinstance(getattr(self.llm.llm_engine, "engine_core", None), MPClient):
            raise RuntimeError(
                "vLLM started its engine core in another process, but the vllm engine hands weights to it within "
                "this one: set VLLM_ENABLE_V1_MULTIPROCESSING=0 in the environment before vLLM is first imported"
            )

    def _completion(self, output: Any) -> Completion:
        sample = output.outputs[0]
        tokens = [int(token) for token in sample.token_ids]
        if sample.logprobs is None or len(sample.logprobs) != len(tokens):
            raise RuntimeError(
                f"vLLM returned {0 if sample.logprobs is None else len(sample.logprobs)} log-probs for "
                f"{len(tokens)} tokens"
            )
        logprobs = [float(step[token].logprob) for step, token in zip(sample.logprobs, tokens)]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return Completion(tokens, logprobs, text, finish_reason(sample.finish_reason, sample.stop_reason))

    def _push_weights(self, check: bool = False) -> None:
        """Copy the trainer's weights into vLLM's model (in this process; no copy on the way). With ``check``,
        fail if a weight of vLLM's model was not among them (it would keep its dummy values)."""
        weights = base_weights(self.model)
        loaded = self.llm.apply_model(lambda module: module.load_weights(weights))[0]
        if check and loaded is not None:
            expected = self.llm.apply_model(lambda module: {name for name, _ in module.named_parameters()})[0]
            missing = sorted(expected - set(loaded))
            if missing:
                raise RuntimeError(
                    f"vLLM's {type(self.model).__name__} has weights the trainer's model did not provide: {missing[:5]}"
                )

    def _new_adapter(self) -> None:
        """Save the trainer's adapters to a new folder and generate with them under a new LoRA id from now on."""
        self._adapter_id += 1
        folder = Path(self._scratch.name) / f"adapter-{self._adapter_id}"
        self.model.save_pretrained(folder)  # peft: adapter_config.json and the adapters' weights only
        previous, self._adapter_folder = self._adapter_folder, folder
        self._lora_request = self._lora_request_type(
            lora_name=f"actor-{self._adapter_id}", lora_int_id=self._adapter_id, lora_path=str(folder)
        )
        if previous is not None:  # never requested again
            shutil.rmtree(previous, ignore_errors=True)
