"""Lockstep rollouts: many text-env episodes advanced together, one batched generation call per turn.

Each episode becomes one :class:`Trajectory` holding a single packed token sequence (system prompt, observations
and the model's replies), an action mask that marks the model's own tokens (the only ones trained on) and the
behaviour log-probs of those tokens. Trainers use the ids as they are and never re-tokenise text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import gymnasium as gym
from tqdm.auto import tqdm

from comprl.chat import ChatFormat
from comprl.config import RolloutConfig
from comprl.experience.episode import Episode
from comprl.llm.engine import GenerationEngine
from comprl.policy import PackedSequence

EXPERIENCE_HEADING = "## Experience from earlier episodes"


class Experience(Protocol):
    """An experience entry as the actor sees it (``comprl.experience.bank.Entry`` is one)."""

    id: int
    text: str


Retriever = Callable[[Sequence[str]], Sequence["Experience | None"]]
"""Maps one query per guided episode (its instruction and first observation) to an entry, or ``None``."""


@dataclass
class Trajectory(PackedSequence):
    """One finished episode."""

    env_id: str
    seed: int
    group: int
    """Index of the task instance this rollout belongs to (its GRPO group)."""
    guided: bool = False
    """Whether this rollout belongs to the experience-guided half of its group (it asked the bank for an entry)."""
    experience: str | None = None
    """The experience text shown to the actor, if the bank returned one."""
    experience_ids: tuple[int, ...] = ()
    """Bank ids of the entries shown to the actor."""
    instruction: str = ""
    """The task instruction (the goal the extractor is told about)."""
    index: int = 0
    """Position in its rollout batch (with the step, it names the trajectory in the bank's operations log)."""
    temperature: float = 1.0
    """Temperature of the behaviour log-probs: the sampling temperature, or 1 for greedy decoding."""
    messages: list[dict[str, str]] = field(default_factory=list)
    """A readable transcript: system, then alternating user (observation) and assistant (reply) messages."""
    reward: float = 0.0
    success: bool = False
    turns: int = 0
    invalid_actions: int = 0
    truncated: bool = False

    def episode(self, step: int) -> Episode:
        """What the experience side is told about it (:meth:`comprl.experience.ExperienceManager.submit`)."""
        return Episode(
            self.env_id, self.seed, step, self.index, self.instruction, tuple(self.messages), self.success,
            self.guided, self.experience_ids,
        )


def system_prompt(instruction: str, experience: str | None = None) -> str:
    """The actor's system prompt: the task instruction, plus an experience entry under a fixed heading."""
    if experience is None:
        return instruction
    return f"{instruction}\n\n{EXPERIENCE_HEADING}\n{experience}"


def run_episodes(
    engine: GenerationEngine,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    config: RolloutConfig,
    *,
    groups: Sequence[int] | None = None,
    guided: Sequence[bool] | None = None,
    retrieve: Retriever | None = None,
    progress: bool = False,
) -> list[Trajectory]:
    """Play one episode in each env, all in lockstep, and return the trajectories in env order.

    Args:
        engine: generation backend (its tokenizer's chat template frames the conversation).
        envs: text envs (``comprl.envs.make``); each is reset with its seed. Their ``max_turns`` cap ends episodes;
            one that outgrows ``config.max_context_tokens`` ends through the same truncation (``TextEnv.truncate``).
        seeds: one env seed per env (rollouts of one task instance share a seed).
        config: sampling and formatting.
        groups: GRPO group index per env (default: one group per env).
        guided: which episodes are experience-guided (default none). Their first observation, after the
            instruction, is the query ``retrieve`` answers, in one batched call; the entry it returns enters the
            system prompt under :data:`EXPERIENCE_HEADING`.
        retrieve: the bank lookup for guided episodes (required when any episode is guided).
        progress: show a per-turn progress bar.
    """
    n = len(envs)
    if len(seeds) != n:
        raise ValueError(f"got {len(seeds)} seeds for {n} envs")
    groups = list(range(n)) if groups is None else list(groups)
    guided = [False] * n if guided is None else [bool(g) for g in guided]
    if len(groups) != n or len(guided) != n:
        raise ValueError("groups and guided must have one entry per env")
    if any(guided) and retrieve is None:
        raise ValueError("guided episodes need a retrieve function")
    fmt = ChatFormat.from_tokenizer(engine.tokenizer)
    prefix_ids = fmt.encode(config.response_prefix) if config.response_prefix else []
    sampling = config.sampling()

    starts = [env.reset(seed=int(seed)) for env, seed in zip(envs, seeds)]
    queried = [i for i in range(n) if guided[i]]
    found = list(retrieve([f"{starts[i][1]['instruction']}\n{starts[i][0]}" for i in queried])) if queried else []
    if len(found) != len(queried):
        raise ValueError(f"retrieve returned {len(found)} results for {len(queried)} queries")
    experiences: list[Experience | None] = [None] * n
    for i, entry in zip(queried, found):
        experiences[i] = entry
    trajectories: list[Trajectory] = []
    for env, seed, group, is_guided, experience, (obs, info) in zip(envs, seeds, groups, guided, experiences, starts):
        text = None if experience is None else experience.text
        system = system_prompt(info["instruction"], text)
        traj = Trajectory(
            env.spec.id if env.spec else type(env).__name__, int(seed), group, is_guided, text,
            () if experience is None else (int(experience.id),), info["instruction"], len(trajectories),
            temperature=sampling.logprob_temperature,
        )
        traj.messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
        traj.extend(fmt.start(system, obs) + prefix_ids)
        trajectories.append(traj)

    # One session key per episode lets the engine reuse the episode's KV cache from turn to turn.
    sessions = [object() for _ in range(n)]
    active = list(range(n))
    bar = tqdm(desc="rollout turns", unit="turn", disable=not progress, leave=False)
    while active:
        completions = engine.generate(
            [trajectories[i].token_ids for i in active], sampling, sessions=[sessions[i] for i in active]
        )
        still_active = []
        for i, completion in zip(active, completions):
            traj = trajectories[i]
            traj.extend(completion.token_ids, completion.logprobs)
            action = config.response_prefix + completion.text
            traj.messages.append({"role": "assistant", "content": action})
            obs, reward, terminated, truncated, info = envs[i].step(action)
            traj.reward += float(reward)
            traj.turns += 1
            traj.success = bool(info.get("success", False))
            traj.invalid_actions = int(info.get("invalid_actions", traj.invalid_actions))
            if terminated or truncated:
                traj.truncated = bool(truncated and not terminated)
                continue
            next_ids = fmt.next_turn(completion.token_ids, obs) + prefix_ids
            if len(traj.token_ids) + len(next_ids) + sampling.max_new_tokens > config.max_context_tokens:
                _, reward, _, _, info = envs[i].unwrapped.truncate("The conversation no longer fits the context.")
                traj.reward += reward
                traj.success = bool(info.get("success", False))
                traj.truncated = True
                continue
            traj.messages.append({"role": "user", "content": obs})
            traj.extend(next_ids)
            still_active.append(i)
        engine.release([sessions[i] for i in active if i not in still_active])
        active = still_active
        bar.update(1)
    bar.close()
    return trajectories


def summarize(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Per-batch episode metrics a researcher plots: success, return, length, invalid actions."""
    n = max(len(trajectories), 1)
    turns = sum(t.turns for t in trajectories)
    return {
        "episodes": float(len(trajectories)),
        "success_rate": sum(t.success for t in trajectories) / n,
        "mean_return": sum(t.reward for t in trajectories) / n,
        "mean_episode_length": turns / n,
        "invalid_action_rate": sum(t.invalid_actions for t in trajectories) / max(turns, 1),
        "mean_sequence_tokens": sum(len(t.token_ids) for t in trajectories) / n,
        "mean_action_tokens": sum(t.num_action_tokens for t in trajectories) / n,
    }
