"""Lockstep rollouts: many text-env episodes advanced together, one batched generation call per turn.

Each episode becomes one :class:`Trajectory` holding a single packed token sequence (system prompt, observations
and the model's replies), an action mask that marks the model's own tokens (the only ones trained on) and the
behaviour log-probs of those tokens. Trainers use the ids as they are and never re-tokenise text.

With the optional search_and_ask tool (``ask=``), a reply that holds a question inside
``<knowledge_search_and_ask>...</knowledge_search_and_ask>`` is answered by the experience side instead of being
played in the env: the answer is the next observation, context like any other, and the env's turn cap is untouched.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import gymnasium as gym

from comprl import console
from comprl.chat import ChatFormat
from comprl.config import RolloutConfig
from comprl.experience.interface import SEARCH_CLOSE, SEARCH_OPEN, Episode
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN
from comprl.llm.choice import ReplyChoices
from comprl.llm.engine import Completion, GenerationEngine, SamplingParams
from comprl.policy_gradient import PackedSequence

EXPERIENCE_HEADING = "## Experience from earlier episodes"
SEARCH_RESULTS = "Search results: "
"""Start of the observation that answers a search_and_ask question (the official code's wording)."""
NO_MATCH = "nothing in the experience bank matches this question."
"""What follows :data:`SEARCH_RESULTS` when the bank has no entry for the task."""


class Experience(Protocol):
    """An experience entry as the actor sees it (``comprl.experience.bank.Entry`` is one)."""

    id: int
    text: str


Retriever = Callable[[Sequence[str]], Sequence["Experience | None"]]
"""Maps one query per guided episode (its instruction and first observation) to an entry, or ``None``."""

Asker = Callable[[str, str], "str | None"]
"""search_and_ask: maps (the actor's question, the env id as task) to the rewritten entry, or ``None`` when the
bank has nothing for that task (``ExperienceManager.search_and_ask``)."""


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
    asks: int = 0
    """search_and_ask questions answered by the experience side (tool turns, not counted in ``turns``)."""

    def episode(self, step: int) -> Episode:
        """What the experience side is told about it (:meth:`comprl.experience.ExperienceManager.submit`)."""
        return Episode(
            self.env_id, self.seed, step, self.index, self.instruction, tuple(self.messages), self.success,
            self.guided, self.experience_ids,
        )


def system_prompt(instruction: str, experience: str | None = None, search_uses: int = 0) -> str:
    """The actor's system prompt: the task instruction, then (when ``search_uses`` > 0) how to use the
    search_and_ask tool, then an experience entry under a fixed heading."""
    parts = [instruction]
    if search_uses > 0:
        parts.append(
            "You may consult the experience bank (lessons from earlier episodes) instead of acting: write "
            f"{SEARCH_OPEN}your question{SEARCH_CLOSE} and the answer comes back as the next message, without "
            f"using up a turn. You can ask at most {search_uses} times in this episode."
        )
    if experience is not None:
        parts.append(f"{EXPERIENCE_HEADING}\n{experience}")
    return "\n\n".join(parts)


def env_id(env: gym.Env) -> str:
    """The id an episode of ``env`` is recorded under: its registered id, else its class name."""
    return env.spec.id if env.spec else type(env).__name__


def retrieval_query(observation: str, info: dict) -> str:
    """What a guided episode asks the bank: its instruction and its first observation."""
    return f"{info['instruction']}\n{observation}"


def search_query(reply: str) -> str | None:
    """The question of a search_and_ask call in ``reply`` (stripped), or None when the reply makes no call.

    A call is an opening tag closed later in the reply; the question is the text between the first closing tag
    and the last opening tag before it (generation stops at the closing tag, so nothing of note follows it).
    """
    close = reply.find(SEARCH_CLOSE)
    start = reply.rfind(SEARCH_OPEN, 0, close) if close >= 0 else -1
    return None if start < 0 else reply[start + len(SEARCH_OPEN) : close].strip()


PLACEHOLDER = re.compile(r"\[<[^<>\[\]]+>\]")
"""A placeholder the model fills in, ``[<your query>]``; WebShop's ``click[< prev]`` is a plain action."""


@dataclass
class _Choices:
    """Constrained choice for a rollout: the admissible replies of each action list, tokenised once."""

    fmt: ChatFormat
    response_prefix: str
    max_new_tokens: int
    ask: bool
    cache: dict[tuple[str, ...], ReplyChoices] = field(default_factory=dict)

    def __call__(self, admissible: Sequence[str]) -> ReplyChoices:
        key = tuple(admissible)
        if key not in self.cache:
            replies, free, closing = [], [], []
            if self.ask:
                free.append(self.fmt.encode(SEARCH_OPEN))
                closing.append(self.fmt.encode(SEARCH_CLOSE))
            for action in admissible:
                text = self._strip_prefix(f"{ANSWER_OPEN}{action}{ANSWER_CLOSE}")
                placeholder = PLACEHOLDER.search(text)  # WebShop's search[<your query>]: the query is free text
                if placeholder is not None:
                    free.append(self.fmt.encode(text[: placeholder.start() + 1]))
                    closing.append(self.fmt.encode(text[placeholder.end() - 1 :]))
                    continue
                replies.append(self.fmt.encode(text))
            # free text gets the reply cap, and at least a few tokens when its branch alone fills the cap
            length = max([self.max_new_tokens, *(len(f) + len(c) + 4 for f, c in zip(free, closing))])
            self.cache[key] = ReplyChoices.build(replies, free, closing, length)
        return self.cache[key]

    def _strip_prefix(self, reply: str) -> str:
        if not reply.startswith(self.response_prefix):
            raise ValueError(
                f"constrained choice writes {ANSWER_OPEN}ACTION{ANSWER_CLOSE} replies; response_prefix="
                f"{self.response_prefix!r} is not a prefix of them (accepted: '' or a prefix of {ANSWER_OPEN!r})"
            )
        return reply[len(self.response_prefix) :]


@dataclass(eq=False)
class Session:
    """The engine's session key of one episode of a :func:`run_episodes` call: equal only to itself, so episodes of
    two calls never share a cached prefix; ``index`` is the episode's position in the call's envs."""

    index: int


def sampling_params(config: RolloutConfig) -> SamplingParams:
    """How the actor samples a reply in rollouts and evaluations."""
    return SamplingParams(max_new_tokens=config.max_new_tokens, temperature=config.temperature, stop=config.stop)


def run_episodes(
    engine: GenerationEngine,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    config: RolloutConfig,
    *,
    groups: Sequence[int] | None = None,
    guided: Sequence[bool] | None = None,
    retrieve: Retriever | None = None,
    ask: Asker | None = None,
    ask_uses: int = 2,
    show_entries: bool = True,
    progress: bool = False,
) -> list[Trajectory]:
    """Play one episode in each env, all in lockstep, and return the trajectories in env order.

    Args:
        engine: generation backend (its tokenizer's chat template frames the conversation).
        envs: text envs (``comprl.envs.make``); each is reset with its seed. Their ``max_turns`` cap ends episodes;
            one that outgrows ``config.max_context_tokens`` ends through the same truncation (``TextEnv.truncate``).
        seeds: one env seed per env (rollouts of one task instance share a seed).
        config: sampling and formatting. With ``config.constrained_actions`` each reply is restricted to the
            actions the env lists in ``info["admissible_actions"]`` that turn (free while an env lists none; the
            search_and_ask tag, when on, opens a free branch).
        groups: GRPO group index per env (default: one group per env).
        guided: which episodes are experience-guided (default none). Their first observation, after the
            instruction, is the query ``retrieve`` answers, in one batched call; the entry it returns enters the
            system prompt under :data:`EXPERIENCE_HEADING`.
        retrieve: the bank lookup for guided episodes (required when any episode is guided).
        ask: the search_and_ask tool (default off). When given, the system prompt explains the tool and its
            closing tag ends a reply (it joins ``config.stop``). A reply that asks a question (:func:`search_query`)
            is not played: ``ask(question, env id)`` is called and its answer, after :data:`SEARCH_RESULTS`, is the
            next observation, as context. Such tool turns leave the env's turn cap alone (``Trajectory.turns``
            counts env steps only) but not the context limit. Calls are made one question at a time, in env order.
        ask_uses: questions answered per episode (paper: 2); a further question is played in the env as an
            action (an invalid one, which the env answers with its feedback).
        show_entries: False keeps retrieved entries out of the prompts (``ExperienceConfig.blind``); the
            trajectories still record them.
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
    if ask is not None and ask_uses < 1:
        raise ValueError(f"ask_uses={ask_uses!r}: must be >= 1 when ask is given (pass ask=None to turn the tool off)")
    sampling = sampling_params(config)
    if ask is not None and SEARCH_CLOSE not in sampling.stop:
        sampling = dataclasses.replace(sampling, stop=(*sampling.stop, SEARCH_CLOSE))
    context = _Context(ChatFormat.from_tokenizer(engine.tokenizer), config, sampling, 0 if ask is None else ask_uses)
    choose = None
    if config.constrained_actions:
        choose = _Choices(context.fmt, config.response_prefix, sampling.max_new_tokens, ask is not None)

    # the envs' side: reset each env with its seed, and ask the bank once for every guided episode
    starts = [env.reset(seed=int(seed)) for env, seed in zip(envs, seeds)]
    queried = [i for i in range(n) if guided[i]]
    found = list(retrieve([retrieval_query(*starts[i]) for i in queried])) if queried else []
    if len(found) != len(queried):
        raise ValueError(f"retrieve returned {len(found)} results for {len(queried)} queries")
    entries: list[Experience | None] = [None] * n
    for i, entry in zip(queried, found):
        entries[i] = entry
    episodes = zip(envs, seeds, groups, guided, entries, starts)
    trajectories = [
        context.open(i, env, int(seed), group, is_guided, entry, start, show_entries)
        for i, (env, seed, group, is_guided, entry, start) in enumerate(episodes)
    ]
    admissible = [info.get("admissible_actions", []) for _, info in starts]

    # the turn loop: the model replies to every active episode at once, then each reply is played
    sessions = [Session(i) for i in range(n)]  # lets the engine keep an episode's KV cache from turn to turn
    active = list(range(n))
    bar = console.progress(desc="rollout turns", unit="turn", disable=not progress, leave=False)
    while active:
        choices = None if choose is None else [choose(admissible[i]) if admissible[i] else None for i in active]
        # an admissible reply longer than the cap (a WebShop item id) is decoded whole, never cut into an invalid
        # one; a free one (a WebShop query) is closed within the cap
        longest = max((c.longest for c in choices or () if c is not None), default=0)
        turn = sampling if longest <= sampling.max_new_tokens else dataclasses.replace(sampling, max_new_tokens=longest)
        completions = _generate_by_task(engine, trajectories, active, turn, sessions, choices)
        still_active = []
        for i, completion in zip(active, completions):
            if context.play(trajectories[i], envs[i], completion, ask, admissible, i):
                still_active.append(i)
        engine.release([sessions[i] for i in active if i not in still_active])
        active = still_active
        bar.update(1)
    bar.close()
    return trajectories


@dataclass
class _Context:
    """The conversation side of a rollout: what each episode's prompt holds, and what happens to a reply (played
    in the env, or answered by the search_and_ask tool), turned into the episode's tokens and transcript."""

    fmt: ChatFormat
    config: RolloutConfig
    sampling: SamplingParams
    search_uses: int
    """search_and_ask questions answered per episode (0: the tool is off)."""

    def __post_init__(self) -> None:
        self.prefix_ids = self.fmt.encode(self.config.response_prefix) if self.config.response_prefix else []

    def open(
        self, index: int, env: gym.Env, seed: int, group: int, guided: bool, entry: Experience | None,
        start: tuple[str, dict], show_entry: bool,
    ) -> Trajectory:
        """An episode's trajectory up to its first reply: system prompt (with the entry shown, if any) and the
        first observation."""
        obs, info = start
        text = None if entry is None else entry.text
        system = system_prompt(info["instruction"], text if show_entry else None, self.search_uses)
        traj = Trajectory(
            env_id(env), seed, group, guided, text,
            () if entry is None else (int(entry.id),), info["instruction"], index,
            temperature=self.sampling.logprob_temperature,
        )
        traj.messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
        traj.extend(self.fmt.start(system, obs) + self.prefix_ids)
        return traj

    def play(
        self, traj: Trajectory, env: gym.Env, completion: Completion, ask: Asker | None,
        admissible: list[list[str]], i: int,
    ) -> bool:
        """Append a reply to its episode and answer it: the tool answers a question (while the episode has uses
        left), the env plays anything else. Returns whether the episode goes on (not ended, and its next turn
        still fits the context)."""
        traj.extend(completion.token_ids, completion.logprobs, completion.choices)
        action = self.config.response_prefix + completion.text
        traj.messages.append({"role": "assistant", "content": action})
        question = search_query(action) if ask is not None and traj.asks < self.search_uses else None
        if question is not None:
            traj.asks += 1
            obs = SEARCH_RESULTS + (ask(question, traj.env_id) or NO_MATCH)
        else:
            obs, reward, terminated, truncated, info = env.step(action)
            admissible[i] = info.get("admissible_actions", [])
            traj.reward += float(reward)
            traj.turns += 1
            traj.success = bool(info.get("success", False))
            traj.invalid_actions = int(info.get("invalid_actions", traj.invalid_actions))
            if terminated or truncated:
                traj.truncated = bool(truncated and not terminated)
                return False
        next_ids = self.fmt.next_turn(completion.token_ids, obs) + self.prefix_ids
        if len(traj.token_ids) + len(next_ids) + self.sampling.max_new_tokens > self.config.max_context_tokens:
            _, reward, _, _, info = env.unwrapped.truncate("The conversation no longer fits the context.")
            traj.reward += reward
            traj.success = bool(info.get("success", False))
            traj.truncated = True
            return False
        traj.messages.append({"role": "user", "content": obs})
        traj.extend(next_ids)
        return True


def _generate_by_task(
    engine: GenerationEngine,
    trajectories: Sequence[Trajectory],
    active: Sequence[int],
    params: SamplingParams,
    sessions: Sequence[Session],
    choices: Sequence[ReplyChoices | None] | None,
) -> list[Completion]:
    """One turn's replies for the ``active`` episodes, in their order, one ``generate`` call per task.

    A batch is left padded to its longest prompt and prefills, for every row, the longest uncached suffix. In a
    mixture the tasks' prompts differ by thousands of tokens (a WebShop results page against a Room map), so one
    shared batch would pad every row to the longest and recompute what the prefix cache holds."""
    rows: dict[str, list[int]] = {}
    for position, i in enumerate(active):
        rows.setdefault(trajectories[i].env_id, []).append(position)
    completions: list[Completion | None] = [None] * len(active)
    for positions in rows.values():
        done = engine.generate(
            [trajectories[active[p]].token_ids for p in positions], params,
            sessions=[sessions[active[p]] for p in positions],
            choices=None if choices is None else [choices[p] for p in positions],
        )
        for p, completion in zip(positions, done):
            completions[p] = completion
    return completions


def summarize(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Per-batch episode metrics a researcher plots: success, return, length, invalid actions, tool use."""
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
        "search_and_ask_per_episode": sum(t.asks for t in trajectories) / n,
    }
