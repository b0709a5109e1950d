"""`TextEnv`: the gymnasium base class shared by every comprl text environment.

The actor is a language model, so both the observation and the action are plain text. A subclass plays the
game; this class owns what every text environment has in common:

- the episode cap (`max_turns`, default 30: the paper's per-trajectory action limit), which sets
  ``truncated=True``;
- parsing the model's raw reply into one of the environment's action words (`parse_action`);
- answering an unparseable reply with feedback instead of stepping the game, and counting it;
- the `info` keys the rollout code relies on: ``instruction``, ``success``, ``won``, ``invalid_action``,
  ``invalid_actions``, ``turn`` and ``admissible_actions``.

A subclass implements `instruction`, `action_words`, `_reset_game`, `_play` and `_observe`, and may extend
`action_aliases`.
"""

from __future__ import annotations

import abc
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import gymnasium
import numpy as np
from gymnasium import spaces

T = TypeVar("T")

DEFAULT_MAX_TURNS = 30
"""Actions per episode; the paper caps every trajectory at 30 actions in its multi-task configuration."""

MAX_TEXT_LENGTH = 100_000
"""`max_length` of the observation and action `Text` spaces: far above any real prompt or reply."""

TEXT_CHARSET = string.printable
"""Printable ASCII plus whitespace (newlines included): the alphabet of observations and actions."""

EVAL_SEED_OFFSET = 1_000_000
"""The seed convention every comprl env shares: training seeds are below this, evaluation seeds at or above it.
Envs with a held-out split (WebShop test goals, ALFWorld's out-of-distribution set) map evaluation seeds to it."""

ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
_QUOTES = "\"'`"
_TRAILING_PUNCTUATION = ".,;:!?"
_FEEDBACK_SNIPPET_CHARS = 40


_OPEN_TAG = re.compile(re.escape(ANSWER_OPEN), re.IGNORECASE)
_CLOSE_TAG = re.compile(re.escape(ANSWER_CLOSE), re.IGNORECASE)


def answer_span(text: str) -> str | None:
    """Return the raw text of a model reply's answer, or None when its answer tags are malformed.

    The content of the last ``<answer>...</answer>`` pair is used when the reply has answer tags, otherwise
    the whole reply. A last ``<answer>`` left unclosed, or a ``</answer>`` with no opening tag, is
    malformed. Tags are matched case-insensitively.
    """
    opens = list(_OPEN_TAG.finditer(text))
    if not opens:
        return None if _CLOSE_TAG.search(text) else text
    last = opens[-1]
    close = _CLOSE_TAG.search(text, last.end())
    if close is None:
        return None
    return text[last.end() : close.start()]


def extract_answer(text: str) -> str | None:
    """`answer_span` normalised by `normalize_action`, or None when the answer tags are malformed."""
    span = answer_span(text)
    return None if span is None else normalize_action(span)


def normalize_action(text: str) -> str:
    """Lowercase, collapse whitespace, and strip surrounding quotes/backticks and trailing punctuation."""
    previous = None
    while previous != text:
        previous = text
        text = text.strip().strip(_QUOTES).rstrip(_TRAILING_PUNCTUATION)
    return " ".join(text.lower().split())


def seed_split(split: str, seed: int | None, eval_split: str) -> tuple[str, int | None]:
    """Apply the seed convention to an env's ``split`` argument: ``"auto"`` sends evaluation seeds (from
    `EVAL_SEED_OFFSET` on) to `eval_split`, without the offset, and other seeds to ``"train"``; any other
    split is kept with the seed as given."""
    if split != "auto":
        return split, seed
    if seed is not None and seed >= EVAL_SEED_OFFSET:
        return eval_split, seed - EVAL_SEED_OFFSET
    return "train", seed


def choose_by_seed(pool: Sequence[T], seed: int | None, rng: np.random.Generator) -> T:
    """Item ``seed mod len(pool)`` of `pool`, or one drawn from `rng` when there is no seed."""
    return pool[int(rng.integers(len(pool))) if seed is None else seed % len(pool)]


def printable_snippet(text: str, limit: int = _FEEDBACK_SNIPPET_CHARS) -> str:
    """The first `limit` characters of `text` on one line, with anything outside printable ASCII as '?'."""
    one_line = " ".join(text.split())[:limit]
    return "".join(char if char in TEXT_CHARSET else "?" for char in one_line)


@dataclass(frozen=True)
class GameStep:
    """What a subclass reports after playing one valid action."""

    observation: str
    """The text the actor reads next."""
    reward: float
    """Reward for this action (comprl's envs use the paper's binary scheme: 1.0 on success, else 0.0)."""
    terminated: bool
    """True when the game ended: goal reached, death, or the game otherwise over."""
    success: bool
    """True once the episode's goal has been reached."""


class TextEnv(gymnasium.Env[str, str], abc.ABC):
    """A gymnasium environment whose observations and actions are text (see the module docstring).

    `step` accepts any string, never raises on its content, and raises `TypeError` for a non-string action.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    unsolved_truncation_reward: float | None = None
    """When set, the reward of the step that truncates an unsolved episode (ALFWorld gives -1.0)."""

    def __init__(self, max_turns: int = DEFAULT_MAX_TURNS, action_prompt: bool = True) -> None:
        """Create the env; `max_turns` actions (valid or not) end the episode with ``truncated=True``.

        With `action_prompt`, every observation of a running episode ends with a line that asks for the next
        action and restates the reply format: small models follow the last instruction they read far more
        reliably than one in the system prompt.
        """
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self.action_prompt = action_prompt
        self.observation_space = spaces.Text(max_length=MAX_TEXT_LENGTH, min_length=0, charset=TEXT_CHARSET)
        self.action_space = spaces.Text(max_length=MAX_TEXT_LENGTH, min_length=0, charset=TEXT_CHARSET)
        self._turn = 0
        self._invalid_actions = 0
        self._success = False
        self._episode_active = False
        self._seed: int | None = None
        self._options: Mapping[str, Any] = {}

    @property
    @abc.abstractmethod
    def instruction(self) -> str:
        """The task description for the system prompt: goal, action words and reply format."""

    @property
    @abc.abstractmethod
    def action_words(self) -> tuple[str, ...]:
        """The canonical action words, as listed in `info["admissible_actions"]`."""

    @property
    def action_aliases(self) -> Mapping[str, str]:
        """Other accepted spellings (already normalised), each mapped to its canonical action word."""
        return {}

    def describe_actions(self) -> str:
        """The action list shown in invalid-action feedback; subclasses may summarise long lists."""
        return ", ".join(self.action_words)

    def invalid_feedback(self, reply: str) -> str:
        """The text that answers a reply `parse_action` rejected; subclasses may say more precisely why."""
        return (
            f"Invalid action: '{printable_snippet(reply)}'. Valid actions: {self.describe_actions()}. "
            f"Reply with {ANSWER_OPEN}ACTION{ANSWER_CLOSE}."
        )

    @abc.abstractmethod
    def _reset_game(self) -> str:
        """Start a new game, seeded from `self.np_random`, and return the first observation text."""

    @abc.abstractmethod
    def _play(self, action_word: str) -> GameStep:
        """Play one canonical action word in the game."""

    @abc.abstractmethod
    def _observe(self) -> str:
        """The current observation text, without stepping the game."""

    def parse_action(self, text: str) -> str | None:
        """Map a raw model reply to a canonical action word, or None when it names no valid action."""
        candidate = extract_answer(text)
        if candidate is None:
            return None
        if candidate in self.action_words:
            return candidate
        return self.action_aliases.get(candidate)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode; the same `seed` always gives the same game and the same trajectories.

        `_reset_game` finds `seed` and `options` (never None) in ``self._seed`` and ``self._options``.
        """
        super().reset(seed=seed, options=options)
        self._seed, self._options = seed, options or {}
        self._turn = 0
        self._invalid_actions = 0
        self._success = False
        observation = self._reset_game()
        self._episode_active = True
        return self._prompted(observation), self._info(invalid_action=False)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Play the model's raw reply `action`; an invalid reply costs a turn but leaves the game as it is."""
        if not isinstance(action, str):
            raise TypeError(f"action must be the model's reply as a str, got {type(action).__name__}")
        if not self._episode_active:
            raise RuntimeError("no episode in progress: call reset() first (also after an episode ends)")
        self._turn += 1
        action_word = self.parse_action(action)
        invalid_action = action_word is None
        if action_word is None:
            self._invalid_actions += 1
            outcome = GameStep(f"{self.invalid_feedback(action)}\n{self._observe()}", 0.0, False, self._success)
        else:
            outcome = self._play(action_word)
        self._success = self._success or outcome.success
        truncated = not outcome.terminated and self._turn >= self.max_turns
        observation, reward = outcome.observation, outcome.reward
        if truncated:
            observation, reward = self._truncation(observation, reward)
        self._episode_active = not (outcome.terminated or truncated)
        observation = self._prompted(observation) if self._episode_active else observation
        return observation, reward, outcome.terminated, truncated, self._info(invalid_action)

    def truncate(self, reason: str) -> tuple[str, float, bool, bool, dict]:
        """End the running episode now, as its turn cap would, without playing an action (a trainer calls this
        when the conversation no longer fits its context). Returns what `step` returns, with ``truncated=True``
        and the env's truncation outcome (ALFWorld: -1 when unsolved; SWE-lite grades the work)."""
        if not self._episode_active:
            raise RuntimeError("no episode in progress: call reset() first (also after an episode ends)")
        observation, reward = self._truncation(reason, 0.0)
        self._episode_active = False
        return observation, reward, False, True, self._info(invalid_action=False)

    def _truncation(self, observation: str, reward: float) -> tuple[str, float]:
        """The last observation and reward of an episode cut short (turn cap or `truncate`): the step's own, or
        `unsolved_truncation_reward` when set and unsolved. Envs that finish such episodes their way override it."""
        if not self._success and self.unsolved_truncation_reward is not None:
            reward = self.unsolved_truncation_reward
        return observation, reward

    def _prompted(self, observation: str) -> str:
        """The observation followed by the action prompt line (when `action_prompt` is on)."""
        if not self.action_prompt:
            return observation
        return (
            f"{observation}\nYour move? Answer as {ANSWER_OPEN}ACTION{ANSWER_CLOSE}, "
            f"where ACTION is one of: {self.describe_actions()}."
        )

    def _info(self, invalid_action: bool) -> dict[str, Any]:
        """The info dict returned by `reset` and `step`."""
        return {
            "instruction": self.instruction,
            "success": self._success,
            "won": self._success,
            "invalid_action": invalid_action,
            "invalid_actions": self._invalid_actions,
            "turn": self._turn,
            "admissible_actions": list(self.action_words),
        }
