"""benchmarks/turn_caps.py: expert and random success per turn cap, read off one episode played with the largest cap."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _turn_caps():
    spec = importlib.util.spec_from_file_location("turn_caps", REPO / "benchmarks" / "turn_caps.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def test_the_expert_wins_within_a_generous_cap_and_success_never_falls_as_the_cap_grows():
    turn_caps = _turn_caps()
    result = turn_caps.measure("comprl/Sokoban-6x6-2box-v0", seeds=2, caps=(30,))
    assert result.seeds == 2
    assert result.success(30) == 1.0  # every level has a solution of at most 30 moves, which the solver finds
    for policy in ("expert", "random"):
        successes = [result.success(cap, policy) for cap in range(1, 31)]
        assert successes == sorted(successes)
    with pytest.raises(ValueError, match="outside the measured"):
        result.success(31)


def test_an_episode_played_with_a_smaller_cap_wins_on_the_same_turn_or_not_at_all():
    pytest.importorskip("nle", reason="nle/minihack wheels exist only for Linux x86_64")
    turn_caps = _turn_caps()
    env_id, cap = "comprl/Room-Random-5x5-v0", 3
    long = turn_caps.measure(env_id, seeds=4, caps=(cap, 30))
    short = turn_caps.measure(env_id, seeds=4, caps=(cap,))
    for policy in ("expert_turns", "random_turns"):
        cut = tuple(turn if turn is not None and turn <= cap else None for turn in getattr(long, policy))
        assert cut == getattr(short, policy)
    # not vacuous: some episode of the long run is won after the short cap
    assert any(turn is not None and turn > cap for turn in (*long.expert_turns, *long.random_turns))
    assert long.success(cap) == short.success(cap) and long.success(cap, "random") == short.success(cap, "random")


def test_an_unknown_task_is_refused_naming_the_accepted_ones():
    with pytest.raises(ValueError, match="accepted: comprl/Room-Ultimate-5x5-v0"):
        _turn_caps().measure("comprl/SWE-Lite-v0", seeds=1, caps=(3,))
