"""The resource plan of a reproduction (``comprl reproduce --dry-run``): memory per model, the GPU placement of
the official code, the tokens one training step processes, and the step time they take at a measured throughput
(``benchmarks/rollout_throughput.py --json``)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from comprl.config import TRAINS_ACTOR, ExperimentConfig
from comprl.envs.mixture import task_name


PARAMETERS_B = {
    "Qwen/Qwen2.5-7B-Instruct": 7.62,
    "Qwen/Qwen3-4B-Thinking-2507": 4.02,
    "Qwen/Qwen3-4B-Instruct-2507": 4.02,
    "Qwen/Qwen3-4B": 4.02,
    "Qwen/Qwen3-30B-A3B-Instruct-2507": 30.5,
    "Qwen/Qwen3-Embedding-0.6B": 0.6,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54,
    "Qwen/Qwen3-1.7B": 1.7,
    "smollm2-135m": 0.135,
    "gemma3-270m": 0.27,
    "tiny-random": 0.001,
    "all-minilm-l6-v2": 0.023,
}
"""Parameter counts in billions (the model cards'), for the memory plan, and for scaling a throughput measured
with one model to another (:meth:`Throughput.rate`)."""

ACTIVE_PARAMETERS_B = {"Qwen/Qwen3-30B-A3B-Instruct-2507": 3.3}
"""Parameters a token passes through, where fewer than all (mixture-of-experts; the model card: 3.3B of 30.5B
activated): what a throughput scales with (:func:`compute_b`); memory still holds all of them."""

GPU_MEMORY_GB = 80
BYTES_TRAINED = 16
"""Per parameter of a fully fine-tuned model: bf16 weights and gradients, fp32 master copy and two Adam moments."""
BYTES_SERVED = 2
"""Per parameter of a bf16 copy that only generates (the rollout engine's, or an embedder)."""


def compute_b(model: str) -> float:
    """Billions of parameters one token passes through (NaN for a model of unknown size)."""
    return ACTIVE_PARAMETERS_B.get(model, PARAMETERS_B.get(model, math.nan))


def resource_plan(
    runs: Mapping[str, list[ExperimentConfig]] | list[ExperimentConfig],
    throughputs: Sequence["Throughput"] = (),
    elsewhere: Sequence["Throughput"] = (),
    profile: str = "PROFILE",
    searched: Path | None = None,
    copied: Mapping[str, Sequence[ExperimentConfig]] | None = None,
    recorded: Recorded | None = None,
    jobs: int = 1,
) -> str:
    """The plan of ``runs`` (notebook -> its configs, or a plain list): memory per model; for GPU profiles the GPU
    placement and count; the token budget of one step of the largest run; and, per measurement in
    ``throughputs``, the step times it implies, and per notebook plan, floor and the actual time ``recorded``
    (:func:`notebook_plan`; ``copied``: per notebook, the runs it copies instead of training; ``jobs``: runs at
    once on a CPU). Without a
    measurement it says so, mentions the measurements of another kind of device found (``elsewhere``) and names
    the command to measure."""
    runs = {"": list(runs)} if isinstance(runs, list) else dict(runs)
    configs = [config for its in runs.values() for config in its]
    if not configs:
        return "no training runs"
    parts = [memory_plan(configs)]
    if device_kind(configs) == "cuda":
        parts.append(placement_plan(configs))
    notebook, biggest = max(
        ((notebook, config) for notebook, its in runs.items() for config in its), key=lambda item: _size(item[1])
    )
    budget = step_budget(biggest)
    parts.append(budget_plan(biggest, budget, notebook))
    for throughput in throughputs:
        parts.append(time_plan(runs, biggest, budget, throughput, copied, recorded, jobs))
    if not throughputs:
        parts.append(no_measurement(configs, elsewhere, profile, THROUGHPUT_DIR if searched is None else searched))
    return "\n\n".join(parts)


def _size(config: ExperimentConfig) -> tuple[int, bool, bool]:
    """What makes a run the largest: rollouts over the run, then whether it has an extractor, then whether both
    learners train (so that the largest run shown is one with all the work of a step)."""
    both = TRAINS_ACTOR[config.method] and config.trains_extractor and not config.extractor.share_actor
    return config.mixture().size * config.group_size * config.steps, config.uses_experience, both


def memory_plan(configs: list[ExperimentConfig]) -> str:
    """Memory per model over ``configs`` (and GPUs, for GPU profiles): a fully fine-tuned model holds its training
    state and a bf16 generation copy, a LoRA-trained one and the embedder their bf16 weights; KV cache and
    activations come on top."""
    trained: dict[str, float] = {}
    for config in configs:
        for model, lora_rank in _learners(config):  # LoRA trains adapters of a few MB beside the frozen weights
            gb = _gb(model, BYTES_SERVED if lora_rank else BYTES_TRAINED + BYTES_SERVED)
            trained[model] = max(trained.get(model, 0), gb)
        if config.uses_experience:
            trained[config.bank.embedder] = _gb(config.bank.embedder, BYTES_SERVED)
    rows = []
    for model, gb in trained.items():
        size = "unknown size" if math.isnan(gb) else f"{gb:7.1f} GB"
        if device_kind(configs) == "cuda":
            gpus = "?" if math.isnan(gb) else str(max(1, math.ceil(gb / GPU_MEMORY_GB)))
            size += f"  >= {gpus} x {GPU_MEMORY_GB} GB GPU"
        rows.append(f"  {model:36s} {size}")
    return "\n".join([
        "memory per model (full fine-tune: training state + generation copy; LoRA: the bf16 weights; KV cache and "
        "activations extra):",
        *rows,
    ])


def _learners(config: ExperimentConfig) -> list[tuple[str, int]]:
    """(model, LoRA rank) of each model the run loads: the actor, and the extractor unless it is the actor or
    scripted (no model)."""
    learners = [(config.model, config.actor.lora_rank)]
    if config.uses_experience and not config.extractor.share_actor and not config.extractor.scripted:
        learners.append((config.extractor.model, config.extractor.lora_rank))
    return learners


def _gb(model: str, bytes_per_parameter: int) -> float:
    billions = PARAMETERS_B.get(model, math.nan)
    return billions * bytes_per_parameter


def device_kind(configs: Sequence[ExperimentConfig]) -> str:
    """``"cuda"`` when the runs need GPUs, else ``"cpu"``: the kind of measurement the plan looks for."""
    return "cuda" if any(c.requires_gpu or c.device == "cuda" for c in configs) else "cpu"


# GPU placement --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """Where one part of a run lives: GPU indices of the official config's ``device_mapping``."""

    role: str
    gpus: range
    what: str


PLACEMENT_SOURCE = "official config examples/singletask-agentic/single_task_complementaryrl.yaml, device_mapping"
GPUS_PER_NODE = 8
"""``num_gpus_per_node`` of the official config; PAPER.md: the official code runs on 16 GPUs, two such nodes."""
PLACEMENT: tuple[Placement, ...] = (
    Placement("actor", range(0, 8), "training (Megatron, tensor parallel 4) and generation (vLLM, prefix caching on) "
              "take turns on them"),
    Placement("extractor", range(8, 16), "training (Megatron, tensor parallel 4 x context parallel 2) and "
              "generation (vLLM, tensor parallel 4) take turns on them"),
    Placement("search", range(8, 12), "4 search workers, one GPU each, beside the extractor"),
    Placement("embedder", range(12, 14), "2 embedding workers (vLLM), one GPU each, beside the extractor"),
)
"""The official layout (2 nodes of 8 GPUs): each learner on a node of its own, training and generation colocated;
the bank's search and embedding workers share the extractor's node. The reference model the config also maps to
GPUs 0-7 is not counted: neither learner has a KL term."""


def placement_roles(config: ExperimentConfig) -> tuple[str, ...]:
    """The parts of :data:`PLACEMENT` a run has: the actor; with experience the bank's workers, and the extractor
    unless it shares the actor's weights or is scripted (no model)."""
    if not config.uses_experience:
        return ("actor",)
    return (
        ("actor", "search", "embedder")
        if config.extractor.share_actor or config.extractor.scripted
        else ("actor", "extractor", "search", "embedder")
    )


def run_gb(config: ExperimentConfig) -> float:
    """Memory of every model a run loads (:func:`memory_plan`'s per model), summed."""
    gb = sum(_gb(model, BYTES_SERVED if lora_rank else BYTES_TRAINED + BYTES_SERVED) for model, lora_rank in
             _learners(config))
    return gb + (_gb(config.bank.embedder, BYTES_SERVED) if config.uses_experience else 0.0)


def fits_one_gpu(config: ExperimentConfig) -> bool:
    """Whether all of a run's models fit one GPU (KV cache and activations aside): then it runs on that one GPU,
    its phases one after another, instead of the official 2-node placement (comprl's; the paper's 7B actor needs
    more than one GPU for its training state)."""
    return run_gb(config) <= GPU_MEMORY_GB


def learner_gpus(config: ExperimentConfig) -> dict[str, int]:
    """GPUs per learner: one shared GPU for a run that fits it (:func:`fits_one_gpu`), else the official group, or
    more where the model's training state does not fit in it."""
    if fits_one_gpu(config):
        return {role: 1 for role, _ in zip(("actor", "extractor"), _learners(config))}
    groups = {p.role: len(p.gpus) for p in PLACEMENT}
    out = {}
    for role, (model, lora_rank) in zip(("actor", "extractor"), _learners(config)):
        gb = _gb(model, BYTES_SERVED if lora_rank else BYTES_TRAINED + BYTES_SERVED)
        out[role] = max(groups[role], 0 if math.isnan(gb) else math.ceil(gb / GPU_MEMORY_GB))
    return out


def gpu_count(config: ExperimentConfig) -> int:
    """GPUs one run takes: one where its models fit it, else the official placement's (learners grown to fit their
    training state)."""
    if fits_one_gpu(config):
        return 1
    used = set().union(*(p.gpus for p in PLACEMENT if p.role in placement_roles(config)))
    groups = {p.role: len(p.gpus) for p in PLACEMENT}
    grown = sum(n - groups[role] for role, n in learner_gpus(config).items())
    return len(used) + grown


def placement_plan(configs: list[ExperimentConfig]) -> str:
    """The GPU placement of the runs and their GPU count: the official layout for runs that do not fit one GPU, one
    GPU for those that do."""
    lines = []
    single = [config for config in configs if fits_one_gpu(config)]
    if single:
        lines.append(
            f"GPU placement of {len(single)} runs whose models fit one {GPU_MEMORY_GB} GB GPU (at most "
            f"{max(map(run_gb, single)):.1f} GB): one GPU each; rollouts, updates and the extractor's calls take turns "
            "on it, one after another"
        )
    official = [config for config in configs if not fits_one_gpu(config)]
    lines += [_official_placement(official)] if official else []
    kinds: dict[tuple[int, str], int] = {}
    for config in configs:
        if fits_one_gpu(config):
            what = "one GPU, phases one after another"
        elif not config.uses_experience:
            what = "baseline: the actor's GPUs"
        elif config.extractor.share_actor:
            what = "the extractor is the actor: no extractor GPUs beyond the bank's workers"
        else:
            what = "actor, extractor and the bank's workers"
        key = (gpu_count(config), what)
        kinds[key] = kinds.get(key, 0) + 1
    for (gpus, what), n in sorted(kinds.items(), reverse=True):
        nodes = math.ceil(gpus / GPUS_PER_NODE)
        lines.append(f"  total: {gpus} GPU{'s' * (gpus > 1)} on {nodes} node{'s' if nodes > 1 else ''} for {n} runs "
                     f"({what})")
    lines.append(
        f"  the reproduction needs {max(gpus for gpus, _ in kinds)} GPUs at once (its runs go one after another)"
    )
    return "\n".join(lines)


def _official_placement(configs: list[ExperimentConfig]) -> str:
    """The official layout's lines for ``configs``, and a note for each model that outgrows its group."""
    models: dict[str, dict[str, float]] = {"actor": {}, "extractor": {}}
    for config in configs:
        for role, (model, lora_rank) in zip(("actor", "extractor"), _learners(config)):
            models[role][model] = _gb(model, BYTES_SERVED if lora_rank else BYTES_TRAINED + BYTES_SERVED)
    embedders = sorted({c.bank.embedder for c in configs if c.uses_experience})
    lines = [f"GPU placement ({PLACEMENT_SOURCE}; {GPUS_PER_NODE} GPUs per node):"]
    for part in PLACEMENT:
        span = f"GPUs {part.gpus.start}-{part.gpus.stop - 1}"
        if part.role in models:
            room = len(part.gpus) * GPU_MEMORY_GB
            held = ", ".join(f"{m} ({gb:.1f} of {room} GB)" for m, gb in models[part.role].items()) or "-"
            lines.append(f"  {part.role:10s} {span:11s} {held}: {part.what}")
        else:
            held = f"{', '.join(embedders)}: " if part.role == "embedder" else ""
            lines.append(f"  {part.role:10s} {span:11s} {held}{part.what}")
    for role, found in models.items():
        group = len(next(p.gpus for p in PLACEMENT if p.role == role))
        for model, gb in found.items():
            if not math.isnan(gb) and gb > group * GPU_MEMORY_GB:
                lines.append(f"  ! {model}: {gb:.1f} GB of training state needs {math.ceil(gb / GPU_MEMORY_GB)} GPUs, "
                             f"more than the {group} of the official {role} group; counted so")
    return "\n".join(lines)


# Token budget ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PromptTokens:
    """Prompt sizes of one env family in tokens, as :func:`measure_prompt_tokens` measured them."""

    first: int
    """The first prompt: chat framing, the system prompt (the task instruction) and the first observation (mean)."""
    per_turn: int
    """What each later turn appends after the reply: the turn's chat framing and the next observation (mean)."""
    distill: int
    """The extractor's distillation prompt for one episode (json style, no entry shown), its transcript at the
    6,000-character cap (the longest measured; with replies as long as the budget assumes, every one reaches it)."""


PROMPT_TOKENIZER = "smollm2-135m"
PROMPT_TOKENS: dict[str, PromptTokens] = {
    "comprl/Room-Ultimate-5x5-v0": PromptTokens(246, 137, 2317),
    "comprl/Room-Random-5x5-v0": PromptTokens(232, 123, 2277),
    "comprl/MazeWalk-9x9-v0": PromptTokens(232, 120, 2369),
    "comprl/KeyRoom-Dark-S5-v0": PromptTokens(294, 136, 2377),
    "comprl/River-Narrow-v0": PromptTokens(306, 175, 2328),
    "comprl/Room-Dark-Fixed-5x5-v0": PromptTokens(221, 114, 2294),
    "comprl/WebShop-Small-v0": PromptTokens(262, 92, 2620),
    "comprl/Sokoban-6x6-2box-v0": PromptTokens(248, 120, 3005),
    "comprl/ALFWorld-v0": PromptTokens(511, 193, 2796),
    "comprl/SWE-Lite-v0": PromptTokens(818, 126, 2669),
    # a one-move vault ends on its first valid move, so its only later turns follow invalid replies, which the
    # random mover never plays: per_turn is such a turn's size (an invalid reply's feedback, seeds 0-7), measured apart
    "comprl/Vault-v0": PromptTokens(115, 96, 558),
    "comprl/Vault-Code-v0": PromptTokens(130, 54, 623),
    "comprl/Vault-Fresh-v0": PromptTokens(114, 95, 557),
}
"""Per env id, measured by ``measure_prompt_tokens()``: 8 episodes each (seeds 0-7, default env options) of
uniformly random admissible actions under a 30-turn cap, tokenised with SmolLM2's tokenizer and chat template
(the paper's Qwen models have tokenizers and chat templates of their own: read these as estimates). The MiniHack
rows were measured again on 2026-12-08 with the seed's clock (`comprl.envs.minihack.env.CLOCKS`): before, a game's
first message, and so its first prompt, followed the day's moon.
``tests/test_reproduce.py`` re-measures some of them."""

VIEW_PROMPT_TOKENS: dict[tuple[str, str], PromptTokens] = {
    ("comprl/Room-Random-5x5-v0", "brief"): PromptTokens(164, 67, 2191),
    ("comprl/Room-Ultimate-5x5-v0", "brief"): PromptTokens(187, 76, 2228),
    ("comprl/MazeWalk-9x9-v0", "brief"): PromptTokens(166, 64, 2253),
    ("comprl/KeyRoom-Dark-S5-v0", "brief"): PromptTokens(229, 77, 2267),
    ("comprl/River-Narrow-v0", "brief"): PromptTokens(215, 94, 2270),
    ("comprl/Room-Dark-Fixed-5x5-v0", "brief"): PromptTokens(164, 62, 2243),
}
"""Per (env id, ``view`` env option), measured as :data:`PROMPT_TOKENS` with that view (``measure_prompt_tokens(ids,
options={"view": "brief"})`` for the MiniHack ids, 2026-12-08, with the seed's clock):
MiniHack's brief view, the cpu profile's for every MiniHack task, says in a line where the stairs (key, door) are."""


def prompt_tokens(config: ExperimentConfig, env_id: str) -> PromptTokens:
    """The prompt sizes of ``env_id`` as ``config`` plays it: its view's where measured, else the defaults'."""
    view = config.env_options.get(env_id, {}).get("view")
    return VIEW_PROMPT_TOKENS.get((env_id, view), PROMPT_TOKENS[env_id])


DISTILL_FRAMING = 360
"""The extractor's distillation prompt minus the episode it shows, in tokens: measured on 6-turn Room episodes (both
views, ``measure_prompt_tokens(max_turns=6)``: 924 - 570 and 1285 - 907 tokens of prompt and packed sequence), so
that a short episode's prompt is priced from its own sequence, a long one's at its measured cap
(:attr:`PromptTokens.distill`)."""

SHARED_TOKENS: dict[str, int] = {"entry": 274, "search_tool": 68, "refine": 452, "merge": 1757}
"""Prompt pieces not tied to an env, measured by ``measure_shared_tokens()`` with a longest-allowed entry (a
120-character title and a 1,000-character content of English prose): ``entry``, the experience section of a
guided prompt; ``search_tool``, the search_and_ask paragraph of the system prompt; ``refine``, the extractor's
search_and_ask prompt without the question; ``merge``, a merge prompt of 5 such entries."""


def measure_prompt_tokens(
    env_ids: Sequence[str] | None = None, episodes: int = 8, seed: int = 0, max_turns: int = 30,
    options: Mapping[str, Any] | None = None,
) -> dict[str, PromptTokens]:
    """Play ``episodes`` episodes of each env (seeds ``seed``...; uniformly random admissible actions; ``options``:
    env constructor keywords such as ``{"view": "brief"}``) and measure the prompt sizes of :class:`PromptTokens`
    with :data:`PROMPT_TOKENIZER` (how :data:`PROMPT_TOKENS` and :data:`VIEW_PROMPT_TOKENS` were made)."""
    import numpy as np

    from comprl.chat import ChatFormat
    from comprl.envs import ENV_IDS, make
    from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN
    from comprl.experience.extractor.prompts import ExtractorFormat, distill_messages
    from comprl.llm import load_tokenizer
    from comprl.actor.rollout import system_prompt

    tokenizer = load_tokenizer(PROMPT_TOKENIZER)
    chat = ChatFormat.from_tokenizer(tokenizer)
    table = {}
    for env_id in ENV_IDS if env_ids is None else env_ids:
        env = make(env_id, max_turns=max_turns, **(options or {}))
        rng = np.random.default_rng(seed)
        first: list[int] = []
        later: list[int] = []
        distill: list[int] = []
        try:
            for episode in range(episodes):
                obs, info = env.reset(seed=seed + episode)
                system = system_prompt(info["instruction"])
                first.append(len(chat.start(system, obs)))
                messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
                done = False
                while not done:
                    actions = info["admissible_actions"]
                    reply = f"{ANSWER_OPEN}{actions[rng.integers(len(actions))]}{ANSWER_CLOSE}"
                    messages.append({"role": "assistant", "content": reply})
                    obs, _, terminated, truncated, info = env.step(reply)
                    done = terminated or truncated
                    if not done:
                        later.append(len(chat.next_turn([], obs)))  # a reply cut by a stop string: no EOS
                        messages.append({"role": "user", "content": obs})
                prompt = distill_messages(info["instruction"], bool(info["success"]), messages, [], ExtractorFormat())
                distill.append(_chat_tokens(tokenizer, prompt))
        finally:
            env.close()
        table[env_id] = PromptTokens(round(float(np.mean(first))), round(float(np.mean(later or [0]))), max(distill))
    return table


@dataclass(frozen=True)
class _Entry:
    title: str
    content: str

    @property
    def text(self) -> str:
        return f"{self.title}\n{self.content}"


_PROSE = (
    "When the exit is out of sight, walk along the walls of the room until it shows up, then head straight for "
    "it; if a door is locked, find the key first, pick it up and apply it at the door. Do not repeat an action "
    "that changed nothing: try another direction instead. "
)


def measure_shared_tokens() -> dict[str, int]:
    """The prompt pieces of :data:`SHARED_TOKENS`, in :data:`PROMPT_TOKENIZER`'s tokens."""
    from comprl.experience.extractor.prompts import ExtractorFormat, merge_messages, refine_messages
    from comprl.llm import load_tokenizer
    from comprl.actor.rollout import system_prompt

    tokenizer = load_tokenizer(PROMPT_TOKENIZER)
    fmt = ExtractorFormat()
    prose = _PROSE * (fmt.max_content_chars // len(_PROSE) + 1)
    entry = _Entry(prose[: fmt.max_title_chars], prose[: fmt.max_content_chars])

    def tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    bare = tokens(system_prompt("Task."))
    return {
        "entry": tokens(system_prompt("Task.", entry.text)) - bare,
        "search_tool": tokens(system_prompt("Task.", None, 2)) - bare,
        "refine": _chat_tokens(tokenizer, refine_messages(entry, "", fmt)),
        "merge": _chat_tokens(tokenizer, merge_messages([entry] * fmt.merge_chunk, fmt)),
    }


def _chat_tokens(tokenizer: Any, messages: list[dict[str, str]]) -> int:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class TaskBudget:
    """One task of a step: its rollouts, and one episode's shape under the budget's assumptions (means over the
    guided and free halves)."""

    env_id: str
    rollouts: int
    turn_cap: int
    """Env turns plus search_and_ask turns an episode may take."""
    turns: float
    """Turns an episode plays: the cap, or fewer where its context would outgrow ``rollout.max_context_tokens``."""
    first: float
    per_turn: float
    reply: int
    sequence: float
    """The episode's final packed sequence: what the actor's update runs forward and backward."""
    prefill: float
    """Prompt tokens the engine computes for the task's rollouts: with a prefix cache, each turn's new ones."""
    context: float
    """Prompt tokens if every turn re-read the whole context (no prefix cache)."""
    decode: float
    asks: float
    """search_and_ask answers over the task's rollouts (one extractor call each)."""


@dataclass(frozen=True)
class StepBudget:
    """Tokens one training step moves, by phase (upper bounds under the assumptions of :func:`step_budget`)."""

    tasks: tuple[TaskBudget, ...]
    actor_train: float
    distill_calls: int
    distill_prompt: float
    refine_calls: float
    extractor_reply: int
    extractor_prefill: float
    extractor_decode: float
    extractor_train: float
    extractor_updates: float

    @property
    def rollouts(self) -> int:
        return sum(t.rollouts for t in self.tasks)

    @property
    def prefill(self) -> float:
        return sum(t.prefill for t in self.tasks)

    @property
    def context(self) -> float:
        return sum(t.context for t in self.tasks)

    @property
    def decode(self) -> float:
        return sum(t.decode for t in self.tasks)


BUDGET_ASSUMPTIONS = (
    "every reply is as long as its cap (rollout.max_new_tokens, extractor.max_new_tokens): an upper bound; with "
    "rollout.constrained_actions one forward pass samples a reply, the tokens the choice forces are computed with "
    "the next turn's prompt (the engine's jump_forward)",
    "an episode plays its turn cap unless its context would pass rollout.max_context_tokens (it is cut there)",
    "prompt sizes: measured per env family with SmolLM2's tokenizer (PROMPT_TOKENS, VIEW_PROMPT_TOKENS for a view "
    "env option; the Qwen tokenizers differ); a distillation prompt shows its episode (DISTILL_FRAMING + the "
    "episode's sequence), at most the measured one at the transcript's cap",
    "guided rollouts (half of each group) show one longest-allowed entry; a search_and_ask answer is one such entry",
    "the engine keeps each episode's prefix cache (official config: vLLM enable_prefix_caching), so a turn "
    "prefills only its new observation",
    "every trajectory is distilled (or extractor.distill_per_step of them) and every distillation becomes one "
    "CISPO sample once; the actor's update runs the rollouts with a non-zero advantage only (trained_share: "
    "1 - 2 / (k + 1) of groups of k, the halves' k/2 with actor.split_halves)",
    "not counted: merge passes (every extractor.merge_every steps; with a measurement, priced per 1,000 bank "
    "entries), embedding and search (paper: <= ~1 s per step); nor the update's shared prefixes "
    "(actor.shared_prefix_tokens: a group's or half's first prompt run once, not per rollout), which save fewer "
    "seconds than tokens (their attention is not shared): the update is priced as whole sequences",
    "evaluation: eval_episodes episodes per task and pass, shaped like the rollouts' (replies at the cap whatever "
    "eval_temperature; no search_and_ask), a guided one showing one entry; the passes comprl.evaluation plays "
    "(eval_passes): at step 0 the free pass once per notebook folder and evaluation key, the guided pass only where "
    "bank.init_from fills the bank (an empty bank's guided rows are the free ones); after the last step a free pass "
    "and, with experience, a guided one (the bank then answers)",
    "a notebook's runs go one after another, or --jobs N of them at once on a CPU, one core each (two runs of one "
    "evaluation key that start together both play its step-0 free pass: counted once)",
)


def step_budget(config: ExperimentConfig) -> StepBudget:
    """The tokens of one training step of ``config`` (see :data:`BUDGET_ASSUMPTIONS`)."""
    reply = config.rollout.max_new_tokens
    passes = decode_passes(config)
    uses = config.experience.search_and_ask_uses if config.uses_experience and config.experience.search_and_ask else 0
    halves = ((0.5, True), (0.5, False)) if config.uses_experience else ((1.0, False),)
    mixture = config.mixture()
    tasks = []
    for env_id, instances in mixture.batch.items():
        measured = prompt_tokens(config, env_id)
        rollouts = instances * config.group_size
        cap = mixture.turns(env_id) + uses
        per_turn = (mixture.turns(env_id) * measured.per_turn + uses * SHARED_TOKENS["entry"]) / cap
        base = measured.first + (SHARED_TOKENS["search_tool"] if uses else 0)
        shape = dict.fromkeys(("turns", "first", "sequence", "prefill", "context", "decode", "asks"), 0.0)
        for share, guided in halves:
            first = base + (SHARED_TOKENS["entry"] if guided else 0)
            turns, prefill, context, sequence = _episode(
                first, per_turn, reply, cap, config.rollout.max_context_tokens, passes
            )
            n = rollouts * share
            for key, value in (("turns", turns * share), ("first", first * share), ("sequence", sequence * share),
                               ("prefill", prefill * n), ("context", context * n), ("decode", turns * passes * n),
                               ("asks", min(uses, turns) * n)):
                shape[key] += value
        tasks.append(TaskBudget(env_id, rollouts, cap, shape["turns"], shape["first"], per_turn, reply,
                                shape["sequence"], shape["prefill"], shape["context"], shape["decode"], shape["asks"]))
    total = sum(t.rollouts for t in tasks)
    actor_train = (
        sum(t.sequence * t.rollouts for t in tasks) * config.actor.update_epochs * trained_share(config)
        if TRAINS_ACTOR[config.method]
        else 0.0
    )
    if not config.uses_experience:
        return StepBudget(tuple(tasks), actor_train, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0.0)
    extractor = config.extractor
    # the scripted extractor generates nothing: its lessons cost no extractor tokens
    calls = 0 if extractor.scripted else extractor.distill_per_step if 0 < extractor.distill_per_step < total else total
    distill_prompt = (
        sum(min(prompt_tokens(config, t.env_id).distill, DISTILL_FRAMING + t.sequence) * t.rollouts for t in tasks)
        / total
        + 0.5 * SHARED_TOKENS["entry"]
    )
    refine_calls = sum(t.asks for t in tasks)
    trains = config.trains_extractor
    return StepBudget(
        tasks=tuple(tasks),
        actor_train=actor_train,
        distill_calls=calls,
        distill_prompt=distill_prompt,
        refine_calls=refine_calls,
        extractor_reply=extractor.max_new_tokens,
        extractor_prefill=calls * distill_prompt + refine_calls * (SHARED_TOKENS["refine"] + reply),
        extractor_decode=(calls + refine_calls) * extractor.max_new_tokens,
        extractor_train=calls * (distill_prompt + extractor.max_new_tokens) * extractor.update_epochs
        if trains
        else 0.0,
        extractor_updates=calls / extractor.buffer_size if trains else 0.0,
    )


def decode_passes(config: ExperimentConfig) -> int:
    """Forward passes that sample one reply at its cap: one with constrained choice (the engine's jump_forward
    appends the tokens the choice forces without a pass), else one per token."""
    return 1 if config.rollout.constrained_actions else config.rollout.max_new_tokens


def trained_share(config: ExperimentConfig) -> float:
    """The expected share of rollouts the actor's update runs: those with a non-zero GRPO advantage (the trainer
    skips the others). A group of k binary outcomes is all equal with probability 2 / (k + 1) when its success rate
    is uniform on [0, 1] (the integral of p^k + (1 - p)^k); with ``actor.split_halves`` an experience method's
    advantages come from halves of k/2."""
    halves = config.uses_experience and config.actor.split_halves
    k = config.group_size // 2 if halves else config.group_size
    return 1 - 2 / (k + 1)


def _episode(
    first: float, per_turn: float, reply: int, turn_cap: int, context_cap: int, passes: int | None = None
) -> tuple[int, float, float, float]:
    """(turns, prefilled tokens with a prefix cache, prompt tokens without one, final sequence) of one episode whose
    every reply is ``reply`` tokens long, sampled in ``passes`` forward passes (default: one per token; the other
    tokens are computed with the next turn's prompt). As in :func:`comprl.actor.rollout.run_episodes`, turn t + 1 is
    played only if the sequence after it could still hold a whole reply: first + t * (reply + per_turn) + reply <=
    context_cap."""
    grow = reply + per_turn
    room = context_cap - reply - first
    turns = 1 if room < 0 else min(turn_cap, 1 + int(room // grow))
    forced = reply - (reply if passes is None else passes)
    prefill = first + (turns - 1) * (per_turn + forced)  # decoded tokens' keys/values come from decoding them
    context = turns * first + grow * turns * (turns - 1) / 2
    return turns, prefill, context, first + (turns - 1) * grow + reply


# Evaluation -----------------------------------------------------------------------------------------------------

def eval_tokens(config: ExperimentConfig, guided: bool) -> tuple[float, float]:
    """(prefilled, decoded) tokens of one evaluation pass of ``config``: ``eval_episodes`` episodes of every task,
    shaped like a rollout episode of :func:`step_budget` (its prompt sizes, reply cap and turn cap; evaluation has no
    search_and_ask), each guided one showing one longest-allowed entry."""
    mixture = config.mixture()
    reply = config.rollout.max_new_tokens
    passes = decode_passes(config)
    prefill = decode = 0.0
    for env_id in mixture.batch:
        measured = prompt_tokens(config, env_id)
        first = measured.first + (SHARED_TOKENS["entry"] if guided else 0)
        turns, tokens, _, _ = _episode(
            first, measured.per_turn, reply, mixture.turns(env_id), config.rollout.max_context_tokens, passes
        )
        prefill += tokens * config.eval_episodes
        decode += turns * passes * config.eval_episodes
    return prefill, decode


def eval_passes(configs: Sequence[ExperimentConfig]) -> list[tuple[int, int]]:
    """(experience-free passes, guided passes) that each of ``configs``, the runs one notebook trains into its folder
    one after another, plays, as :mod:`comprl.evaluation` decides: at step 0 the free pass is played by the first
    run of its evaluation key only (the others read its rows), and the guided pass only where the bank starts
    filled (``bank.init_from``; an empty bank answers nothing, and its guided rows are the free ones); after the
    last step, :attr:`~comprl.config.ExperimentConfig.last_eval_passes`."""
    from comprl.evaluation import shared_key

    seen: set[str] = set()
    out = []
    for config in configs:
        if not config.eval_episodes:
            out.append((0, 0))
            continue
        key = shared_key(config)
        first = key not in seen
        seen.add(key)
        free, guided = config.last_eval_passes
        out.append((int(first) + free, guided + (config.uses_experience and bool(config.bank.init_from))))
    return out


def eval_seconds(config: ExperimentConfig, passes: tuple[int, int], throughput: Throughput) -> float:
    """Seconds of ``passes`` (free, guided) evaluation passes of ``config`` on the actor's devices."""
    n = learner_devices(config, throughput)["actor"]
    seconds = 0.0
    for count, guided in zip(passes, (False, True)):
        if count:
            prefill, decode = eval_tokens(config, guided)
            seconds += count * (prefill / throughput.rate("prefill", config.model)
                                + decode / throughput.rate("decode", config.model)) / n
    return seconds


def budget_plan(config: ExperimentConfig, budget: StepBudget, notebook: str = "") -> str:
    """The token budget of one step of ``config``, task by task, with its assumptions."""
    where = f"{notebook}, " if notebook else ""
    lines = [
        f"token budget of one step, largest run ({where}{config.task}, {config.method}): {budget.rollouts} rollouts "
        f"x up to {max(t.turn_cap for t in budget.tasks)} turns per step, {config.steps} steps",
        f"  {'task':10s} {'rollouts':>8s} {'turns played / cap':>19s} {'first prompt':>13s} {'per turn':>9s} "
        f"{'reply':>6s} "
        f"{'final sequence':>15s}",
    ]
    for t in budget.tasks:
        lines.append(
            f"  {task_name(t.env_id):10s} {t.rollouts:8d} {f'{t.turns:g} / {t.turn_cap}':>19s} {t.first:13,.0f} "
            f"{t.per_turn:9,.0f} {t.reply:6d} {t.sequence:15,.0f}"
        )
    trains = "update (forward+backward) " + (
        _tokens(budget.actor_train) if budget.actor_train else "none (actor frozen)"
    )
    lines.append(
        f"  actor:     prefill {_tokens(budget.prefill)} tokens ({_tokens(budget.context)} if every turn re-read its "
        f"context), decode {_tokens(budget.decode)}, {trains}"
    )
    if budget.distill_calls:
        refine = f" + {budget.refine_calls:,.0f} search_and_ask answers" if budget.refine_calls else ""
        update = (
            (
                f"{budget.extractor_updates:g} CISPO updates of {config.extractor.buffer_size}: "
                f"{_tokens(budget.extractor_train)} forward+backward"
            )
            if budget.extractor_train
            else "no updates (extractor frozen)"
        )
        lines.append(
            f"  extractor: {budget.distill_calls:,} distillation calls of ~{budget.distill_prompt:,.0f} prompt + "
            f"{budget.extractor_reply:,} reply tokens{refine}: prefill {_tokens(budget.extractor_prefill)}, decode "
            f"{_tokens(budget.extractor_decode)}; {update}"
        )
    lines.append("  assumptions:")
    lines += [f"    - {text}" for text in BUDGET_ASSUMPTIONS]
    for env_id, options in config.env_options.items():
        if prompt_tokens(config, env_id) is not PROMPT_TOKENS[env_id]:
            continue  # its view's sizes are measured
        lines.append(
            f"    ! {task_name(env_id)} runs with env options {options}; "
            "its prompt sizes are measured with the defaults"
        )
    return "\n".join(lines)


MERGE_CHUNK = 5
"""Entries per merge call (paper: chunks of at most 5), for the merge line of the step time."""


def _tokens(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.2f}G"
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e4:
        return f"{n / 1e3:.0f}k"
    return f"{n:,.0f}"


# Throughput measurements and step time ----------------------------------------------------------------------------

THROUGHPUT_DIR = Path(__file__).resolve().parents[2] / "results" / "throughput"
"""Where ``benchmarks/rollout_throughput.py --json auto`` writes and ``--dry-run`` looks."""
THROUGHPUT_FORMAT = "comprl-throughput/1"
THROUGHPUT_FIELDS = (
    "format, device, device_kind (cpu or cuda), model, batch_size, prefill_tokens_per_s, decode_tokens_per_s; "
    "optional: parameters_b, train_tokens_per_s, train_model, train_parameters_b, dtype, measured_at, note"
)
MEASURE_COMMAND = (
    "python benchmarks/rollout_throughput.py --model {model} --train-model {train_model} --batch {batch} --json auto"
)
"""How to measure on a GPU: generation with the actor's own model at a batch like the paper's, and the update with
a model whose full fine-tune fits one GPU (a 7B one needs ~122 GB of training state), scaled by parameters."""
MEASURE_TRAIN_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


class ThroughputError(ValueError):
    """A throughput file that cannot be used; the message names the file and what is wrong with it."""


@dataclass(frozen=True)
class Throughput:
    """Measured tokens/s of one device (``benchmarks/rollout_throughput.py --json``)."""

    path: Path
    device: str
    device_kind: str
    """``cpu`` or ``cuda``."""
    model: str
    parameters_b: float
    """Billions of parameters of ``model``: the prefill and decode rates scale from it to another model."""
    batch_size: int
    """Sequences per forward pass in the prefill and decode measurements."""
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    train_tokens_per_s: float | None
    """Tokens through a full fine-tune's forward, backward and optimiser step per second (None: not measured)."""
    train_model: str
    train_parameters_b: float
    dtype: str
    measured_at: str
    note: str

    def rate(self, phase: str, model: str) -> float:
        """``phase`` (prefill, decode, train) tokens/s for ``model`` on one such device: the measured rate times
        measured parameters / the model's (1 for the measured model itself; NaN for a model of unknown size)."""
        measured, billions = (
            (self.train_model, self.train_parameters_b) if phase == "train" else (self.model, self.parameters_b)
        )
        value = getattr(self, f"{phase}_tokens_per_s")
        if value is None:
            return math.nan
        return value if model == measured else value * billions / compute_b(model)


def load_throughput(path: Path | str) -> Throughput:
    """Read and check a throughput file; :class:`ThroughputError` says which field is wrong and what is accepted."""
    path = Path(path)

    def fail(problem: str) -> ThroughputError:
        return ThroughputError(
            f"throughput file {path}: {problem}. A throughput file is a JSON object with {THROUGHPUT_FIELDS}; "
            "write one with: python benchmarks/rollout_throughput.py --json auto"
        )

    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise fail("no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise fail(f"unreadable ({err})") from None
    except json.JSONDecodeError as err:
        raise fail(f"not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise fail(f"expected a JSON object, got {type(data).__name__}")
    if data.get("format") != THROUGHPUT_FORMAT:
        raise fail(f"format={data.get('format')!r}; accepted: {THROUGHPUT_FORMAT!r}")

    def text(name: str, default: str | None = None) -> str:
        value = data.get(name, default)
        if not isinstance(value, str) or not value.strip():
            raise fail(f"{name}={value!r}: expected a non-empty string" + ("" if name in data else " (missing)"))
        return value

    def number(name: str, required: bool = True, integer: bool = False) -> float | None:
        if name not in data and not required:
            return None
        value = data.get(name)
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) or value <= 0:
            wanted = "a positive integer" if integer else "a positive number"
            raise fail(f"{name}={value!r}: expected {wanted}" + ("" if name in data else " (missing)"))
        return value

    kind = text("device_kind")
    if kind not in ("cpu", "cuda"):
        raise fail(f"device_kind={kind!r}; accepted: cpu, cuda")
    model = text("model")
    train_model = text("train_model", model)

    def billions(name: str, of: str) -> float:
        value = number(name, required=False)
        if value is None:
            value = PARAMETERS_B.get(of, math.nan)
            if math.isnan(value):
                raise fail(f"{name} is missing and {of!r} is not a model of known size (PARAMETERS_B)")
        return value

    return Throughput(
        path=path,
        device=text("device"),
        device_kind=kind,
        model=model,
        parameters_b=billions("parameters_b", model),
        batch_size=int(number("batch_size", integer=True)),
        prefill_tokens_per_s=number("prefill_tokens_per_s"),
        decode_tokens_per_s=number("decode_tokens_per_s"),
        train_tokens_per_s=number("train_tokens_per_s", required=False),
        train_model=train_model,
        train_parameters_b=billions("train_parameters_b", train_model),
        dtype=str(data.get("dtype", "?")),
        measured_at=str(data.get("measured_at", "?")),
        note=str(data.get("note", "")),
    )


def find_throughputs(folder: Path, kind: str) -> tuple[list[Throughput], list[Throughput]]:
    """The measurements in ``folder`` made on ``kind`` devices, and those made on others."""
    found = [load_throughput(path) for path in sorted(Path(folder).glob("*.json"))]
    return [t for t in found if t.device_kind == kind], [t for t in found if t.device_kind != kind]


def no_measurement(
    configs: list[ExperimentConfig], elsewhere: Sequence[Throughput], profile: str, searched: Path
) -> str:
    """What the plan says without a measurement for the runs' kind of device: that, and how to measure."""
    kind = device_kind(configs)
    device = "GPU" if kind == "cuda" else "CPU"
    lines = [f"expected step time: no throughput measurement for a {device} (none given with --throughput, none in "
             f"{_shown(searched)}/ made on a {device}), so no step time is estimated."]
    for throughput in elsewhere:
        lines.append(f"  found {_shown(throughput.path)}, measured on {throughput.device}: pass it with --throughput "
                     f"to see what that {throughput.device_kind.upper()} would take")
    biggest = max(configs, key=lambda c: c.mixture().size * c.group_size)
    command = MEASURE_COMMAND.format(
        model=biggest.model, train_model=MEASURE_TRAIN_MODEL if kind == "cuda" else biggest.model,
        batch=min(128, biggest.mixture().size * biggest.group_size),
    )
    lines += [
        f"  measure on the {device} you will use (writes results/throughput/<device>.json):",
        f"    {command}",
        f"  then: comprl reproduce --profile {profile} --dry-run "
        "--throughput results/throughput/<device>.json",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class StepTime:
    """Seconds of one step by phase on the measured device (NaN where a rate is missing)."""

    rollout: float
    actor_update: float
    extraction: float
    extractor_update: float
    step: float
    overlap: bool
    """True when the extractor's work runs beside the actor's (async manager, own GPUs): step = the longer side."""


def learner_devices(config: ExperimentConfig, throughput: Throughput) -> dict[str, int]:
    """Devices each learner's work is spread over: its GPUs in the placement for a GPU measurement (the rate is per
    GPU, and data parallel work scales with GPUs to first order); one for a CPU measurement."""
    if throughput.device_kind != "cuda":
        return {"actor": 1, "extractor": 1}
    gpus = learner_gpus(config)
    return {"actor": gpus["actor"], "extractor": gpus.get("extractor", gpus["actor"])}


def step_time(config: ExperimentConfig, budget: StepBudget, throughput: Throughput) -> StepTime:
    """Seconds per step: each phase's tokens over the rate of its model on its devices (:func:`learner_devices`)."""
    n = learner_devices(config, throughput)
    actor, extractor = config.model, config.model if config.extractor.share_actor else config.extractor.model

    def seconds(tokens: float, phase: str, model: str, role: str) -> float:
        return 0.0 if not tokens else tokens / (throughput.rate(phase, model) * n[role])

    rollout = seconds(budget.prefill, "prefill", actor, "actor") + seconds(budget.decode, "decode", actor, "actor")
    actor_update = seconds(budget.actor_train, "train", actor, "actor")
    extraction = (seconds(budget.extractor_prefill, "prefill", extractor, "extractor")
                  + seconds(budget.extractor_decode, "decode", extractor, "extractor"))
    extractor_update = seconds(budget.extractor_train, "train", extractor, "extractor")
    overlap = (
        config.uses_experience and config.experience.mode == "async" and not config.extractor.share_actor
        and not (throughput.device_kind == "cuda" and fits_one_gpu(config))  # one GPU: phases take turns
    )
    if overlap:
        step = max(rollout + actor_update, extraction + extractor_update)
    else:
        step = rollout + actor_update + extraction + extractor_update
    return StepTime(rollout, actor_update, extraction, extractor_update, step, overlap)


FAR_SCALE = 4.0
"""How much faster than the measured model a smaller one may be priced on a GPU before the plan says the first-order
scaling does not hold there (issue 43: SmolLM2-135M's steps on an H200 were launch-bound)."""


def time_plan(
    runs: Mapping[str, list[ExperimentConfig]], config: ExperimentConfig, budget: StepBudget, throughput: Throughput,
    copied: Mapping[str, Sequence[ExperimentConfig]] | None = None, recorded: Recorded | None = None, jobs: int = 1,
) -> str:
    """The step time of ``config`` (the largest run) from ``throughput``, with its formula, then per notebook
    (:func:`notebook_plan`, ``jobs`` runs at once)."""
    t = throughput
    measured = (
        f"  measured on {t.device}: {t.model} ({t.parameters_b:g} B) in {t.dtype}, batch {t.batch_size}, "
        f"{t.measured_at}: prefill {t.prefill_tokens_per_s:,.1f} tokens/s, decode {t.decode_tokens_per_s:,.1f} "
        "tokens/s, train "
        + (
            "not measured"
            if t.train_tokens_per_s is None
            else f"{t.train_tokens_per_s:,.1f} tokens/s ({t.train_model}, {t.train_parameters_b:g} B)"
        )
    )
    lines = [f"expected step time from {_shown(t.path)}:", measured]
    if t.note:
        lines.append(f"  note: {t.note}")
    kinds = device_kind([c for its in runs.values() for c in its])
    if t.device_kind != kinds:
        lines.append(
            f"  ! a {t.device_kind.upper()} measurement for runs on a {'GPU' if kinds == 'cuda' else 'CPU'}: the "
            f"times below are what this {t.device_kind.upper()} would take, not an estimate for the "
            f"{'GPUs' if kinds == 'cuda' else 'CPU'} the profile runs on"
        )
    n = learner_devices(config, t)
    extractor = config.model if config.extractor.share_actor else config.extractor.model
    generates = config.uses_experience and not config.extractor.scripted  # the scripted extractor is no model
    roles = [("actor", config.model)] + ([("extractor", extractor)] if generates else [])
    scale, far = [], []
    for role, model in roles:
        factor = t.rate("prefill", model) / t.prefill_tokens_per_s
        scale.append(f"{role} {model} x{factor:.3g}" if not math.isnan(factor) else f"{role} {model}: unknown size")
        far += [model] if factor > FAR_SCALE and t.device_kind == "cuda" else []
    lines.append(f"  rate of a model = measured rate x measured parameters / the model's active parameters (compute "
                 f"per token grows with them: first order; measure the model itself to drop this): {', '.join(scale)}")
    if far:
        lines.append(f"  ! {', '.join(dict.fromkeys(far))}: more than {FAR_SCALE:g}x smaller than the measured model; "
                     "on a GPU a small model's forward pass is bound by kernel launches, not by its parameters (a "
                     "135M model took ~90 ms per pass at batch 16 on an H200), so the times below are far too short: "
                     "measure the model itself")
    if t.device_kind == "cuda":
        lines.append(f"  devices: the placement's GPUs, actor {n['actor']}, extractor {n['extractor']}, each at the "
                     "measured per-GPU rate (data parallel: first order)")
    else:
        lines.append("  devices: 1 (a CPU measurement is not spread over the GPU placement)")
    if any(lora for _, lora in _learners(config)) and t.train_tokens_per_s is not None:
        lines.append("  the train rate is a full fine-tune's; LoRA learners skip the frozen weights' gradients and "
                     "optimiser step, so their updates take less than shown")
    if budget.rollouts > t.batch_size:
        lines.append(f"  decode was measured at batch {t.batch_size}; a step decodes up to {budget.rollouts} sequences "
                     "at once, where an engine that batches them (vLLM) reaches a higher rate: measure near that batch")
    took = step_time(config, budget, t)
    rate = {
        (phase, role): t.rate(phase, model) * n[role]
        for role, model in roles
        for phase in ("prefill", "decode", "train")
    }

    def term(tokens: float, phase: str, role: str) -> str:
        return f"{_tokens(tokens)} / {_rate(rate[(phase, role)])}"

    lines.append(
        f"  rollout          = prefill / prefill rate + decode / decode rate = "
        f"{term(budget.prefill, 'prefill', 'actor')} + {term(budget.decode, 'decode', 'actor')} "
        f"= {_duration(took.rollout)}"
    )
    if budget.actor_train:
        lines.append(
            f"  actor update     = update tokens / train rate = {term(budget.actor_train, 'train', 'actor')} = "
            f"{_duration(took.actor_update)}"
        )
    if generates:
        lines.append(f"  extraction       = prefill / prefill rate + decode / decode rate = "
                     f"{term(budget.extractor_prefill, 'prefill', 'extractor')} + "
                     f"{term(budget.extractor_decode, 'decode', 'extractor')} = {_duration(took.extraction)}")
        if budget.extractor_train:
            lines.append(f"  extractor update = update tokens / train rate = "
                         f"{term(budget.extractor_train, 'train', 'extractor')} = {_duration(took.extractor_update)}")
    parts = [
        name
        for name, tokens in (
            ("rollout", 1),
            ("actor update", budget.actor_train),
            ("extraction", generates),
            ("extractor update", budget.extractor_train),
        )
        if tokens
    ]
    if took.overlap:
        formula = (
            "max(rollout + actor update, extraction + extractor update) "
            "(experience.mode=async: the extractor works beside the actor)"
        )
    else:
        mode = (
            f"experience.mode={config.experience.mode}: one after another" if config.uses_experience else "no extractor"
        )
        formula = f"{' + '.join(parts)} ({mode})"
    lines.append(f"  step             = {formula} = {_duration(took.step)}"
                 + (" (updates not measured: a lower bound)" if t.train_tokens_per_s is None else ""))
    lines.append(f"  run              = {config.steps} steps x step = {_duration(config.steps * took.step)}")
    if config.eval_episodes:
        prefill, decode = eval_tokens(config, False)
        guided = f", guided {_duration(eval_seconds(config, (0, 1), t))}" if config.uses_experience else ""
        lines.append(
            f"  evaluation pass  = {config.eval_episodes} episodes x {len(budget.tasks)} tasks: prefill / prefill rate "
            f"+ decode / decode rate = {term(prefill, 'prefill', 'actor')} + {term(decode, 'decode', 'actor')} = "
            f"{_duration(eval_seconds(config, (1, 0), t))} free{guided}; a run plays at most two of each (step 0, "
            "after the last step): the passes played are counted per notebook"
        )
    if generates and config.extractor.merge_every:
        calls = 1000 / MERGE_CHUNK
        merge = (calls * SHARED_TOKENS["merge"] / rate[("prefill", "extractor")]
                 + calls * config.extractor.max_new_tokens / rate[("decode", "extractor")])
        lines.append(
            f"  merge pass every {config.extractor.merge_every} steps (not in the step): {_duration(merge)} per "
            f"1,000 bank entries ({calls:.0f} calls of ~{SHARED_TOKENS['merge']:,} prompt + "
            f"{config.extractor.max_new_tokens:,} reply tokens)"
        )
    lines += ["", notebook_plan(runs, t, copied or {}, recorded, jobs)]
    return "\n".join(lines)


@dataclass(frozen=True)
class Recorded:
    """The wall times a reproduction recorded (``results/<profile>/reproduce.json``, written by
    :func:`comprl.kit.reproduce.reproduce`)."""

    path: Path
    notebooks: Mapping[str, Mapping[str, Any]]
    """notebook -> its entry: ``seconds`` (summed over the calls that executed it), ``finished`` once it did,
    ``jobs`` (runs at once) where the notebook takes that parameter."""


def floor_throughput(throughput: Throughput) -> Throughput:
    """``throughput`` with every generated token at the raw batched forward rate (the measured prefill rate): an
    engine that decodes as fast as it prefills, the bound no engine beats on that device; updates keep the train
    rate (forward and backward)."""
    return dataclasses.replace(throughput, decode_tokens_per_s=throughput.prefill_tokens_per_s)


def run_seconds(config: ExperimentConfig, passes: tuple[int, int], throughput: Throughput) -> float:
    """Seconds of one run of ``config``: its steps, then its ``passes`` (free, guided) evaluation passes."""
    return config.steps * step_time(config, step_budget(config), throughput).step + eval_seconds(
        config, passes, throughput
    )


def notebook_plan(
    runs: Mapping[str, list[ExperimentConfig]], t: Throughput, copied: Mapping[str, Sequence[ExperimentConfig]],
    recorded: Recorded | None = None, jobs: int = 1,
) -> str:
    """Per notebook and in total: plan (training steps and the evaluation passes played, at the measured rates),
    floor (the same tokens at :func:`floor_throughput`'s rates) and, where ``recorded``, the actual wall time.
    ``copied``: per notebook, those of its runs it copies from an earlier notebook or a reference run (no time).
    ``jobs``: runs at once on a CPU, one core each (``comprl reproduce --jobs``); plan and floor are then the wall
    time of the runs started in plan order (:func:`comprl.kit.parallel.wall_seconds`). A GPU plan runs one after
    another: runs at once would share the GPU."""
    from comprl.kit.parallel import wall_seconds

    gpu = t.device_kind == "cuda"
    at_once = 1 if gpu else jobs
    floor = floor_throughput(t)
    seen = recorded.notebooks if recorded is not None else {}
    head = f"    {'notebook':20s} {'runs':>4s} {'copied':>6s} {'step':>10s} {'evaluation':>10s} {'plan':>10s} "
    how = "runs one after another" if at_once == 1 else f"{at_once} runs at once, one core each"
    lines = [
        f"  per notebook ({_shown(t.path)}; {how}; step: its largest run's):",
        head + f"{'floor':>10s}" + (f" {'GPUs':>4s} {'GPU-hours':>9s}" if gpu else "") + f" {'actual':>10s}",
    ]
    plan = low = actual = gpu_hours = 0.0
    unplanned = []
    for notebook, its in runs.items():
        entry = seen.get(notebook)
        spent = "-" if entry is None else f"{_duration(entry.get('seconds', 0.0)):>10s}" + (
            "" if entry.get("finished") else " so far (not finished)"
        ) + (f" ({entry['jobs']} runs at once)" if entry.get("jobs", 1) > 1 else "")
        actual += 0.0 if entry is None else entry.get("seconds", 0.0)
        if not its:
            if entry is not None:
                unplanned.append(notebook)
                blank = f"{'-':>10s} " * 4 + (f"{'-':>4s} {'-':>9s} " if gpu else "")
                lines.append(f"    {notebook:20s} {0:4d} {0:6d} {blank}{spent:>10s}")
            continue
        played = [c for c in its if c not in copied.get(notebook, ())]
        passes = eval_passes(played)
        evaluation = sum(eval_seconds(c, p, t) for c, p in zip(played, passes))
        wall = wall_seconds([run_seconds(c, p, t) for c, p in zip(played, passes)], at_once)
        bound = wall_seconds([run_seconds(c, p, floor) for c, p in zip(played, passes)], at_once)
        plan, low = plan + wall, low + bound
        largest = max(its, key=_size)
        used = ""
        if gpu:
            hours = sum(run_seconds(c, p, t) * gpu_count(c) for c, p in zip(played, passes)) / 3600
            gpu_hours += hours
            used = f" {max(gpu_count(c) for c in its):4d} {hours:9,.0f}"
        lines.append(
            f"    {notebook or 'runs':20s} {len(its):4d} {len(its) - len(played):6d} "
            f"{_duration(step_time(largest, step_budget(largest), t).step):>10s} {_duration(evaluation):>10s} "
            f"{_duration(wall):>10s} {_duration(bound):>10s}{used} {spent:>10s}"
        )
    lines.append(
        f"    {'whole reproduction':20s} {'':4s} {'':6s} {'':10s} {'':10s} {_duration(plan):>10s} {_duration(low):>10s}"
        + (f" {'':4s} {gpu_hours:9,.0f}" if gpu else "") + f" {_duration(actual) if seen else '-':>10s}"
    )
    lines += [
        "  plan:   steps x step time + the evaluation passes played (eval_passes), at the measured rates"
        + ("" if at_once == 1 else f"; the wall time of {at_once} runs at once, started in plan order, each on the "
           "first core to free up (evaluation: summed over the runs)"),
        f"  floor:  the plan's tokens (rollouts' prefill and decode, evaluation, extractor calls) at the raw batched "
        f"forward rate ({_rate(t.prefill_tokens_per_s)} tokens/s for {t.model}, scaled by parameters), updates' "
        "forward+backward at the train rate: no engine processes those tokens faster on this device; they are upper "
        "bounds (replies at their cap, every rollout in the update), so a run that processes fewer can take less",
        "  actual: " + (
            f"{_shown(recorded.path)}: wall time summed over the calls that ran the notebook (runs at once: compare "
            "with the plan for as many, --jobs)" if recorded is not None else "no reproduction recorded yet"
        ),
        "  copied: runs that an earlier notebook trains, or a finished reference run holds, are copied: no time",
    ]
    if unplanned:
        lines.append(f"  {', '.join(unplanned)}: no training runs, not planned; their actual time is in the total")
    return "\n".join(lines)


def _rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:,.0f}" if tokens_per_s >= 100 else f"{tokens_per_s:.3g}"


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "? (unknown model size)"
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size * (1 if unit in ("h", "min") else 2):
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.1f} s"


def _shown(path: Path) -> str:
    """A path relative to the repository when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(THROUGHPUT_DIR.parents[1]))
    except ValueError:
        return str(path)
