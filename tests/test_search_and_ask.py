"""The search_and_ask tool in lockstep rollouts: real tiny model, real envs, scripted questions.

A random model never writes the tool's tags, so :class:`ScriptedEngine` writes chosen replies itself; every
other reply is sampled by the real engine, and the written ones are cut and scored the way a real engine would.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import gymnasium as gym
import pytest
import torch

from comprl.chat import ChatFormat
from comprl.envs import make
from comprl.experience.interface import SEARCH_CLOSE, SEARCH_OPEN
from comprl.llm import HFEngine, token_logprobs
from comprl.llm.engine import Completion, SamplingParams
from comprl.actor.rollout import (
    NO_MATCH,
    SEARCH_RESULTS,
    RolloutConfig,
    Session,
    run_episodes,
    search_query,
    summarize,
    system_prompt,
)

ROOM = "comprl/Room-Ultimate-5x5-v0"
ALFWORLD = "comprl/ALFWorld-v0"
ROLLOUT = RolloutConfig(max_new_tokens=32, temperature=1.0)


def question(text: str) -> str:
    return f"{SEARCH_OPEN}{text}{SEARCH_CLOSE}"


@dataclass
class ScriptedEngine:
    """The real engine, except for the replies the test writes itself.

    ``script[(episode, reply)]`` is the text that episode ``episode`` (its env's position) writes as its reply
    number ``reply`` (0-based). As in a real engine, it ends after the first stop string the rollout asked for
    and after ``max_new_tokens`` tokens, and its tokens are scored by the real model at the sampling temperature,
    so the trajectory holds genuine behaviour log-probs. Every other reply is sampled by ``engine``. ``params``
    records the sampling parameters of every call.
    """

    engine: HFEngine
    script: dict[tuple[int, int], str]
    params: list[SamplingParams] = field(default_factory=list)
    _replies: dict[int, int] = field(default_factory=dict)

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    def generate(self, prompts, params: SamplingParams, sessions: Sequence[Session], choices=None) -> list[Completion]:
        self.params.append(params)
        out: list[Completion | None] = [None] * len(prompts)
        sampled = []
        for row, (prompt, key) in enumerate(zip(prompts, sessions)):
            episode = key.index  # the rollout's session key knows its env's position
            reply = self._replies.get(episode, 0)
            self._replies[episode] = reply + 1
            if (episode, reply) in self.script:
                out[row] = self._written(prompt, self.script[episode, reply], params)
            else:
                sampled.append(row)
        if sampled:
            real = self.engine.generate([prompts[r] for r in sampled], params, [sessions[r] for r in sampled])
            for row, completion in zip(sampled, real):
                out[row] = completion
        return out

    def _written(self, prompt: Sequence[int], text: str, params: SamplingParams) -> Completion:
        ends = [text.index(stop) + len(stop) for stop in params.stop if stop in text]
        cut = text[: min(ends)] if ends else text
        ids = self.tokenizer(cut, add_special_tokens=False)["input_ids"][: params.max_new_tokens]
        sequence = torch.tensor([list(prompt) + ids])
        scored = torch.zeros_like(sequence)
        scored[0, len(prompt) :] = 1
        with torch.no_grad():
            logprobs = token_logprobs(
                self.engine.model, sequence, torch.ones_like(sequence), scored, params.logprob_temperature
            )
        written = self.tokenizer.decode(ids, skip_special_tokens=True)
        finish = "stop" if any(written.endswith(stop) for stop in params.stop) else "length"
        return Completion(ids, logprobs[0, len(prompt) :].tolist(), written, finish)

    def release(self, sessions) -> None:
        self.engine.release(sessions)

    def sync_weights(self) -> None:
        self.engine.sync_weights()


class Recorded(gym.Wrapper):
    """The real env, keeping each action it played and the turn number it reported after it."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps: list[tuple[str, int]] = []

    def step(self, action):
        result = self.env.step(action)
        self.steps.append((action, result[4]["turn"]))
        return result


@dataclass
class Asker:
    """Answers questions from a fixed text (None: the bank has nothing) and records every call."""

    answer: str | None = "Walk east along the wall, then take the stairs."
    calls: list[tuple[str, str]] = field(default_factory=list)
    turn_of_call: list[int] = field(default_factory=list)
    engine: ScriptedEngine | None = None

    def __call__(self, query: str, task: str) -> str | None:
        self.calls.append((query, task))
        self.turn_of_call.append(len(self.engine.params) if self.engine else 0)
        return self.answer


def play(tiny_engine, script, env_ids=(ROOM,), max_turns=3, config=ROLLOUT, asker=None, **kwargs):
    envs = [Recorded(make(env_id, max_turns=max_turns)) for env_id in env_ids]
    engine = ScriptedEngine(tiny_engine, script)
    asker = Asker() if asker is None else asker
    asker.engine = engine
    torch.manual_seed(0)
    trajectories = run_episodes(engine, envs, [7] * len(envs), config, ask=asker, **kwargs)
    return trajectories, envs, engine, asker


def runs(tokenizer, trajectory) -> list[tuple[int, str]]:
    """The packed sequence as maximal runs of equal action mask, each decoded: (mask, text)."""
    out: list[tuple[int, list[int]]] = []
    for token, mask in zip(trajectory.token_ids, trajectory.action_mask):
        if out and out[-1][0] == mask:
            out[-1][1].append(token)
        else:
            out.append((mask, [token]))
    return [(mask, tokenizer.decode(ids, skip_special_tokens=True)) for mask, ids in out]


def test_a_question_is_answered_in_the_next_user_message_as_context_without_stepping_the_env(tiny_engine):
    asked = question("where is the goal?")
    (t,), (env,), _, asker = play(tiny_engine, {(0, 0): asked + " <answer>north</answer>"})
    assert asker.calls == [("where is the goal?", ROOM)]
    assert t.messages[2] == {"role": "assistant", "content": asked}  # cut at the closing tag
    results = SEARCH_RESULTS + asker.answer
    assert t.messages[3] == {"role": "user", "content": results}
    # the env played only the three sampled replies, and its turn counter saw nothing of the question
    assert [turn for _, turn in env.steps] == [1, 2, 3] and asked not in [action for action, _ in env.steps]
    assert (t.asks, t.turns, t.truncated) == (1, 3, True)
    assert sum(m["role"] == "assistant" for m in t.messages) == 4
    # the question is an action like any reply; the answer is context
    pieces = runs(tiny_engine.tokenizer, t)
    actions = [text for mask, text in pieces if mask == 1]
    assert actions == [m["content"] for m in t.messages if m["role"] == "assistant"]
    assert actions[0] == asked
    assert results in pieces[pieces.index((1, asked)) + 1][1]
    assert not any("Search results" in text for text in actions)


def test_the_closing_tag_stops_generation_and_the_prompt_explains_the_tool_only_when_ask_is_given(tiny_engine):
    (t,), _, engine, _ = play(tiny_engine, {}, max_turns=2, ask_uses=3)
    assert all(p.stop == ("</answer>", SEARCH_CLOSE) for p in engine.params) and len(engine.params) == 2
    system = t.messages[0]["content"]
    assert system.startswith(t.instruction) and f"{SEARCH_OPEN}your question{SEARCH_CLOSE}" in system
    assert "at most 3 times" in system and system == system_prompt(t.instruction, None, 3)

    plain = ScriptedEngine(tiny_engine, {})
    (free,) = run_episodes(plain, [make(ROOM, max_turns=1)], [7], ROLLOUT)
    assert plain.params[0].stop == ("</answer>",)
    assert free.messages[0]["content"] == free.instruction and free.asks == 0


def test_a_question_past_the_limit_is_played_in_the_env_as_an_invalid_action(tiny_engine):
    script = {(0, 0): question("first?"), (0, 1): question("second?"), (0, 2): question("third?")}
    (t,), (env,), _, asker = play(tiny_engine, script, max_turns=2, ask_uses=2)
    assert asker.calls == [("first?", ROOM), ("second?", ROOM)]
    assert t.asks == 2 and env.steps[0] == (question("third?"), 1)
    assert t.messages[7]["role"] == "user" and t.messages[7]["content"].startswith("Invalid action")
    assert t.invalid_actions >= 1 and t.turns == 2 and len(env.steps) == 2
    assert [m["content"] for m in t.messages[3:6:2]] == [SEARCH_RESULTS + asker.answer] * 2


def test_questions_of_one_turn_each_reach_ask_with_their_env_id_and_are_counted(tiny_engine):
    script = {(0, 0): question("where is the goal?"), (1, 0): question("where is the mug?")}
    trajectories, _, _, asker = play(tiny_engine, script, env_ids=(ROOM, ALFWORLD, ROOM), max_turns=1)
    assert asker.calls == [("where is the goal?", ROOM), ("where is the mug?", ALFWORLD)]
    # both asked once the first turn was generated (a call per task: Room's rows, then ALFWorld's), before the next
    assert asker.turn_of_call == [2, 2]
    assert [t.asks for t in trajectories] == [1, 1, 0] and [t.turns for t in trajectories] == [1, 1, 1]
    assert summarize(trajectories)["search_and_ask_per_episode"] == pytest.approx(2 / 3)
    assert summarize(trajectories)["mean_episode_length"] == 1  # tool turns are not env turns


def test_an_empty_bank_is_said_plainly(tiny_engine):
    (t,), _, _, asker = play(tiny_engine, {(0, 0): question("help?")}, max_turns=1, asker=Asker(answer=None))
    assert asker.calls == [("help?", ROOM)]
    assert t.messages[3] == {"role": "user", "content": SEARCH_RESULTS + NO_MATCH}


def test_the_opening_tag_may_come_from_the_response_prefix(tiny_engine):
    config = dataclasses.replace(ROLLOUT, response_prefix=SEARCH_OPEN)
    (t,), (env,), _, asker = play(
        tiny_engine, {(0, 0): f"where is the goal?{SEARCH_CLOSE}"}, max_turns=2, config=config
    )
    assert asker.calls == [("where is the goal?", ROOM)] and t.asks == 1
    assert t.messages[2]["content"] == question("where is the goal?")
    # the sampled replies open the tag (prefix) but never close it: they are played as actions
    assert len(env.steps) == 2 and all(action.startswith(SEARCH_OPEN) for action, _ in env.steps)
    actions = [text for mask, text in runs(tiny_engine.tokenizer, t) if mask == 1]
    assert actions == [m["content"][len(SEARCH_OPEN) :] for m in t.messages if m["role"] == "assistant"]


def test_an_unclosed_question_is_played_as_an_action(tiny_engine):
    cut_off = f"{SEARCH_OPEN}where is the"
    (t,), (env,), _, asker = play(tiny_engine, {(0, 0): cut_off}, max_turns=1)
    assert asker.calls == [] and t.asks == 0
    assert env.steps == [(cut_off, 1)] and t.invalid_actions == 1


def test_tool_turns_still_count_against_the_context_limit(tiny):
    _, tokenizer = tiny
    env = make(ROOM, max_turns=5)
    obs, info = env.reset(seed=7)
    first_prompt = ChatFormat.from_tokenizer(tokenizer).start(system_prompt(info["instruction"], None, 2), obs)
    config = dataclasses.replace(ROLLOUT, max_context_tokens=len(first_prompt) + ROLLOUT.max_new_tokens)
    (t,), (played,), _, asker = play(HFEngine(*tiny), {(0, 0): question("help?")}, max_turns=5, config=config)
    assert asker.calls == [("help?", ROOM)]
    assert (t.asks, t.turns, t.truncated) == (1, 0, True) and played.steps == []
    assert t.messages[-1]["role"] == "assistant"  # the answer did not fit, so it was never shown
    with pytest.raises(RuntimeError, match="no episode in progress"):
        played.step("<answer>north</answer>")


def test_trajectories_with_tool_turns_hold_the_logprobs_of_a_fresh_pass(
    tiny, tiny_engine, assert_logprobs_match_fresh_pass
):
    model, tokenizer = tiny
    script = {(0, 0): question("where?"), (0, 2): question("and now?"), (1, 1): question("which way?")}
    trajectories, _, _, asker = play(tiny_engine, script, env_ids=(ROOM, ROOM), max_turns=3)
    assert [t.asks for t in trajectories] == [2, 1] and len(asker.calls) == 3
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, trajectories, ROLLOUT.temperature)


def test_ask_needs_at_least_one_use(tiny_engine):
    with pytest.raises(ValueError, match="ask_uses"):
        play(tiny_engine, {}, ask_uses=0)


@pytest.mark.parametrize(
    "reply, expected",
    [
        (question(" where is the key? "), "where is the key?"),
        (f"I will ask. {question('why?')}", "why?"),
        (f"{SEARCH_OPEN}draft {question('final?')} rest", "final?"),  # the last opening before the closing tag
        (question(""), ""),
        (f"{SEARCH_OPEN}unclosed", None),
        (f"stray{SEARCH_CLOSE}", None),
        ("<answer>north</answer>", None),
    ],
)
def test_search_query_reads_the_question_between_the_tags(reply, expected):
    assert search_query(reply) == expected
