"""comprl/Room-Dark-Fixed-5x5-v0: stairs fixed in the dark room's south-east corner, hidden until adjacent, and the
check that a lesson states where they are (`comprl.envs.minihack.hidden`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import comprl.envs
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.envs.minihack.hidden import (
    FIXED_STAIRS,
    ROOM_ORIGIN_ON_SCREEN,
    ROOM_SIZE,
    TURN_CAP,
    CornerWalker,
    states_secret,
)

ENV_ID = "comprl/Room-Dark-Fixed-5x5-v0"
REPO = Path(__file__).resolve().parents[1]
SEEDS = (0, 1, 2, 3, 4, 5, 777, 31_337, EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + 1, EVAL_SEED_OFFSET + 2)
"""Training seeds and held-out ones."""
STAIRS_ON_SCREEN = (ROOM_ORIGIN_ON_SCREEN[0] + FIXED_STAIRS[0], ROOM_ORIGIN_ON_SCREEN[1] + FIXED_STAIRS[1])
needs_nle = pytest.mark.skipif(
    importlib.util.find_spec("nle") is None, reason="nle/minihack wheels exist only for Linux x86_64"
)


@pytest.mark.parametrize(
    "text",
    [
        "The stairs are in the south-east corner of the room.",
        "Go SOUTHEAST until you hit the wall, then east, then south.",
        "stairs: south east corner",
        "The exit is always at the bottom right.",
        "Head to the lower-right corner.",
        "<answer>se</answer>",
    ],
)
def test_a_lesson_naming_the_south_east_corner_alone_states_the_secret(text: str) -> None:
    assert states_secret(0, text) and states_secret(EVAL_SEED_OFFSET + 5, text)
    assert comprl.envs.lesson_states_secret(ENV_ID, 12, text) is True


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Task:",
        "Explore the room to find the stairs.",
        "The stairs are in the north-east corner.",
        "The stairs are south-east or north-west of the start.",
        "Move south, then east.",
        "stairs down very near east-southeast",
        "stairs down near south-southeast",
        "Use the stairs when you see them.",
        "top left",
    ],
)
def test_a_lesson_naming_no_corner_or_another_corner_does_not(text: str) -> None:
    assert not states_secret(0, text)
    assert comprl.envs.lesson_states_secret(ENV_ID, 0, text) is False


def test_the_check_is_registered_without_importing_nle() -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import comprl.envs
        assert comprl.envs.lesson_states_secret({ENV_ID!r}, 1, "southeast corner") is True
        print("nle" in sys.modules, "minihack" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]


def walk_to_the_corner(env, seed: int) -> tuple[tuple[int, int], set[tuple[int, int]], dict]:
    """Play `CornerWalker` on `seed`: the start square, the screen squares where the stairs were seen, the last
    info."""
    game = env.unwrapped
    observation, info = env.reset(seed=seed)
    start = (game.screen.agent_x, game.screen.agent_y)
    walker, seen, done = CornerWalker(), set(), False
    while not done:
        seen |= {(int(x), int(y)) for y, x in zip(*(game.screen.chars == ord(">")).nonzero())}
        observation, _, terminated, truncated, info = env.step(walker.act(observation))
        done = terminated or truncated
    return start, seen, info


@needs_nle
def test_the_stairs_stand_in_the_same_corner_for_training_and_held_out_seeds_and_walking_there_wins() -> None:
    env = comprl.envs.make(ENV_ID, max_turns=TURN_CAP, view="brief")
    for seed in SEEDS:
        _, seen, info = walk_to_the_corner(env, seed)
        assert seen == {STAIRS_ON_SCREEN}, seed
        assert info["success"] and info["turn"] <= 6, seed
    env.close()


@needs_nle
def test_the_start_varies_with_the_seed_stays_in_the_room_and_is_never_the_stairs() -> None:
    env = comprl.envs.make(ENV_ID, max_turns=TURN_CAP)
    starts = []
    for seed in SEEDS:
        env.reset(seed=seed)
        x, y = env.unwrapped.screen.agent_x, env.unwrapped.screen.agent_y
        room_square = (x - ROOM_ORIGIN_ON_SCREEN[0], y - ROOM_ORIGIN_ON_SCREEN[1])
        assert 0 <= room_square[0] < ROOM_SIZE and 0 <= room_square[1] < ROOM_SIZE, (seed, room_square)
        assert room_square != FIXED_STAIRS, seed
        starts.append(room_square)
    assert len(set(starts)) >= 5
    env.reset(seed=SEEDS[3])  # the same seed, the same start
    screen = env.unwrapped.screen
    assert (screen.agent_x - ROOM_ORIGIN_ON_SCREEN[0], screen.agent_y - ROOM_ORIGIN_ON_SCREEN[1]) == starts[3]
    env.close()


@needs_nle
@pytest.mark.parametrize("view", ["brief", "full", "official"])
def test_the_first_observation_shows_the_stairs_only_when_they_are_adjacent(view: str) -> None:
    env = comprl.envs.make(ENV_ID, max_turns=TURN_CAP, view=view)
    hidden = adjacent = 0
    for seed in range(40):
        observation, info = env.reset(seed=seed)
        x, y = env.unwrapped.screen.agent_x, env.unwrapped.screen.agent_y
        distance = max(abs(x - STAIRS_ON_SCREEN[0]), abs(y - STAIRS_ON_SCREEN[1]))
        shown = "stairs down" in observation or ">" in observation.split("Your move?")[0]
        assert shown == (distance == 1), (seed, distance, observation)
        hidden += distance > 1
        adjacent += distance == 1
    assert hidden and adjacent  # both cases met
    goal = info["instruction"].split("Actions:")[0].lower()  # the rest lists the eight moves
    assert "stairs" in goal and not any(word in goal for word in ("corner", "south", "east", "bottom", "right"))
    env.close()


@needs_nle
def test_a_random_mover_rarely_wins_within_the_turn_cap() -> None:
    assert comprl.envs.random_policy_success(ENV_ID, max_turns=TURN_CAP, episodes=40) < 0.25


@needs_nle
def test_the_benchmark_table_counts_a_win_within_each_cap_from_one_episode() -> None:
    spec = importlib.util.spec_from_file_location("hidden_room", REPO / "benchmarks" / "hidden_room.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.success_table(seeds=6, caps=(1, 6))
    assert set(table) == {"random", "seeker", "corner walker", "always SE"}
    assert table["corner walker"][1] == 1.0  # within 6 moves from any start
    for shares in table.values():
        assert 0.0 <= shares[0] <= shares[1] <= 1.0
