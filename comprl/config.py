"""Experiment configuration as dataclasses, and the three profiles (smoke, cpu, paper) that scale it.

A profile is a complete :class:`ExperimentConfig`; :func:`make_config` takes one and applies overrides, flat
(``steps=4``) or dotted for nested fields (``**{"actor.learning_rate": 1e-5}``), rejecting unknown names.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from comprl.envs import ENV_IDS
from comprl.rollout import RolloutConfig
from comprl.trainers.actor import ActorConfig
from comprl.trainers.extractor import ExtractorConfig

METHODS: tuple[str, ...] = ("baseline", "comp_rl", "static", "exp_only")
"""The paper's experiment variants, all one loop configured differently:

- ``baseline``: GRPO actor, no experience, no extractor.
- ``comp_rl``: Complementary RL: the actor and the extractor both learn; rollouts split into guided/free halves.
- ``static``: the extractor writes the bank but never trains.
- ``exp_only``: the actor is frozen; only the extractor learns.
"""
TRAINS_ACTOR = {"baseline": True, "comp_rl": True, "static": True, "exp_only": False}
TRAINS_EXTRACTOR = {"baseline": False, "comp_rl": True, "static": False, "exp_only": True}


@dataclass(frozen=True)
class BankConfig:
    """The experience bank and how the actor queries it."""

    embedder: str = "all-minilm-l6-v2"
    """Sentence embedder: the offline MiniLM wheel, or a sentence-transformers id/path (paper: Qwen3-Embedding-0.6B)."""
    capacity: int = 20_000
    """Live entries kept; the oldest are evicted first beyond this (official code: 20,000)."""
    candidates: int = 16
    """Nearest entries the diversity re-ranking chooses the shown one from; one entry is shown per guided
    episode (paper: top-1; official code oversamples 16 candidates per shown entry)."""
    diversity_lambda: float = 0.4
    """Re-ranking: score = similarity - lambda * log(1 + uses) - 1[already shown in this batch] (paper: 0.4)."""
    use_vss: bool = True
    """Search through DuckDB's vss HNSW index; False = exact cosine search."""
    init_from: str | None = None
    """Start from a copy of this bank file (e.g. an earlier run's ``bank.duckdb``) instead of an empty bank."""


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
    eval_episodes: int = 32
    """Held-out episodes evaluated before and after training (0 = no evaluation)."""
    eval_temperature: float = 1.0
    """Sampling temperature of evaluation episodes."""
    seed: int = 0
    """Seed for model init (tiny-random), sampling and the training task instances."""
    device: str = "auto"
    """``cpu``, ``cuda`` or ``auto`` (cuda when available)."""
    dtype: str = "float32"
    """Parameter dtype: ``float32`` (CPU) or ``bfloat16`` (GPU). In low precision the trainers keep fp32 master
    copies of the weights they fully fine-tune (:class:`~comprl.trainers.policy.PolicyTrainer`)."""
    requires_gpu: bool = False
    """Refuse to run without CUDA (the ``paper`` profile)."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling and prompt formatting of the actor's turns."""
    actor: ActorConfig = field(default_factory=ActorConfig)
    """GRPO optimisation of the actor."""
    extractor: ExtractorConfig = field(default_factory=ExtractorConfig)
    """The experience extractor (unused by ``baseline``)."""
    bank: BankConfig = field(default_factory=BankConfig)
    """The experience bank (unused by ``baseline``)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r}; accepted: {', '.join(METHODS)}")
        for name in ("steps", "batch_instances", "group_size", "max_turns", "eval_episodes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name in ("steps", "eval_episodes") else 1):
                raise ValueError(f"{name}={value!r}: expected a non-negative integer (>= 1 for counts of things)")
        if self.env_id not in ENV_IDS:
            raise ValueError(f"unknown env id {self.env_id!r}; accepted: {', '.join(ENV_IDS)}")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype={self.dtype!r}; accepted: float32, bfloat16, float16")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device={self.device!r}; accepted: auto, cpu, cuda")
        if self.uses_experience and self.group_size < 4:
            raise ValueError(
                f"group_size={self.group_size} with method={self.method!r}: methods with experience split each group "
                "into guided and free halves whose advantages are normalised separately (paper Eq. 5), and a half of "
                "one rollout always has advantage 0; accepted: group_size >= 4 (or method='baseline')"
            )
        if self.eval_temperature < 0:
            raise ValueError(f"eval_temperature={self.eval_temperature!r}; accepted: >= 0 (0 = greedy decoding)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentConfig":
        data = dict(data)
        data["rollout"] = RolloutConfig(**{**data.get("rollout", {}), "stop": tuple(data.get("rollout", {}).get("stop", ("</answer>",)))})
        # runs recorded before rollout.temperature became the actor's one temperature also wrote actor.temperature
        data["actor"] = ActorConfig(**{k: v for k, v in data.get("actor", {}).items() if k != "temperature"})
        data["extractor"] = ExtractorConfig(**data.get("extractor", {}))
        data["bank"] = BankConfig(**data.get("bank", {}))
        return cls(**data)

    @property
    def uses_experience(self) -> bool:
        """Whether this method has a bank and an extractor (every method but ``baseline``)."""
        return self.method != "baseline"


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
        device="cpu",
        rollout=RolloutConfig(max_new_tokens=8),
        actor=ActorConfig(learning_rate=1e-4, micro_batch_size=4),
        extractor=ExtractorConfig(
            model="tiny-random", style="note", max_new_tokens=16, learning_rate=1e-4, buffer_size=2,
            invalid_reward=-1.0, merge_every=2, micro_batch_size=4,
        ),
    ),
    # SmolLM2-135M-Instruct from the offline wheel; small batches and short episodes so a 2-core laptop
    # finishes in minutes. LoRA with a larger learning rate than the paper's full fine-tune of a 7B model.
    "cpu": ExperimentConfig(
        model="smollm2-135m",
        steps=4,
        batch_instances=2,
        group_size=4,
        max_turns=6,
        eval_episodes=8,
        eval_temperature=0.7,
        device="cpu",
        # At temperature 1.0 the 4-bit SmolLM2-135M writes no valid action (0/16 first replies on Room);
        # at 0.7, with "<answer>" pre-filled, about half of them are valid.
        rollout=RolloutConfig(max_new_tokens=12, temperature=0.7, response_prefix="<answer>"),
        actor=ActorConfig(learning_rate=1e-4, lora_rank=16, micro_batch_size=2),
        # The same 135M model as extractor. It follows neither operation grammar (0 of 24 valid json/lines
        # answers in our test), so it writes one plain-text lesson per call ("note" style); empty ones earn -1.
        # A small buffer so it trains within a short run; half the trajectories distilled per step.
        extractor=ExtractorConfig(
            model="smollm2-135m", style="note", max_new_tokens=48, temperature=0.7, learning_rate=1e-4,
            lora_rank=16, micro_batch_size=2, buffer_size=2, invalid_reward=-1.0, distill_per_step=4, merge_every=2,
        ),
    ),
    # The paper's single-task setting (actor Qwen2.5-7B-Instruct, 128 rollouts per step, lr 1e-6, clip 0.2).
    "paper": ExperimentConfig(
        model="Qwen/Qwen2.5-7B-Instruct",
        steps=128,
        batch_instances=16,
        group_size=8,
        max_turns=30,
        eval_episodes=128,
        device="cuda",
        dtype="bfloat16",
        requires_gpu=True,
        rollout=RolloutConfig(max_new_tokens=512),
        actor=ActorConfig(learning_rate=1e-6, micro_batch_size=4),
        extractor=ExtractorConfig(model="Qwen/Qwen3-4B-Thinking-2507", max_new_tokens=2048, learning_rate=1e-6),
        bank=BankConfig(embedder="Qwen/Qwen3-Embedding-0.6B"),
    ),
}


NESTED = ("rollout", "actor", "extractor", "bank")
"""Fields of :class:`ExperimentConfig` that are configs themselves (overridden as ``"actor.learning_rate"``)."""

MOVED = {"actor.temperature": "rollout.temperature"}
"""Fields that are gone, and the field that now holds what they set (the actor scores its rollouts at the
temperature they were sampled at)."""


def make_config(profile: str = "smoke", **overrides: Any) -> ExperimentConfig:
    """The named profile with ``overrides`` applied (``None`` values are ignored, so notebook defaults work)."""
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
            raise ValueError(f"unknown config field {key!r}; accepted: {', '.join(fields)} (nested as {'.X / '.join(NESTED)}.X)")
        if sub:
            nested.setdefault(head, {})[sub] = value
        else:
            top[key] = value
    for head, values in nested.items():
        part = getattr(config, head)
        names = {f.name for f in dataclasses.fields(part)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)} of {head}; accepted: {', '.join(sorted(names))}")
        top[head] = dataclasses.replace(part, **values)
    return dataclasses.replace(config, **top)
