"""Behaviour of the built-in Sokoban env, its reverse-play level generator and its solver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import comprl.envs
from comprl.envs.sokoban.env import BOX_ON_TARGET, SokobanTextEnv, render
from comprl.envs.sokoban.levels import generate_level
from comprl.envs.sokoban.puzzle import MOVES, Room, State, push_or_move
from comprl.envs.sokoban.solver import live_squares, solve

SOKOBAN = "comprl/Sokoban-6x6-2box-v0"
INFO_KEYS = {"instruction", "success", "won", "invalid_action", "invalid_actions", "turn", "admissible_actions"}
GENERATED_SEEDS = range(200)
"""Level seeds whose levels must all be solvable within the turn cap."""

FIRST_OBSERVATION_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.modules["nle"] = None  # Sokoban must not need the MiniHack packages.
    sys.modules["minihack"] = None
    import comprl.envs
    env = comprl.envs.make("comprl/Sokoban-6x6-2box-v0")
    observations = [env.reset(seed=int(seed))[0] for seed in sys.argv[1:]]
    print(json.dumps(observations))
    """
)


def parse_map(layout: str) -> tuple[Room, State]:
    """A room and position from a map in the env's own symbols (tests draw small rooms by hand)."""
    floor, targets, boxes, player = set(), set(), set(), None
    for row, line in enumerate(layout.strip().splitlines()):
        for column, symbol in enumerate(line.strip()):
            square = (row, column)
            if symbol != "#":
                floor.add(square)
            if symbol in "OS" + BOX_ON_TARGET:
                targets.add(square)
            if symbol in "X" + BOX_ON_TARGET:
                boxes.add(square)
            if symbol in "PS":
                player = square
    lines = layout.strip().splitlines()
    room = Room(len(lines), len(lines[0].strip()), frozenset(floor), frozenset(targets))
    return room, State(player, frozenset(boxes))


def play_to_end(env, actions) -> tuple[float, bool, bool, dict]:
    """Play `actions` until the episode ends; returns the last (reward, terminated, truncated, info)."""
    outcome = (0.0, False, False, {})
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        outcome = (reward, terminated, truncated, info)
        if terminated or truncated:
            break
    return outcome


def test_registered_id_builds_the_env_and_follows_the_contract() -> None:
    assert SOKOBAN in comprl.envs.ENV_IDS
    env = comprl.envs.make(SOKOBAN)
    assert isinstance(env.unwrapped, SokobanTextEnv)
    observation, info = env.reset(seed=0)
    assert info.keys() >= INFO_KEYS and info["admissible_actions"] == ["up", "down", "left", "right"]
    assert "<answer>ACTION</answer>" in info["instruction"] and "Up, Down, Left, Right" in info["instruction"]
    assert env.observation_space.contains(observation)
    observation, reward, terminated, truncated, info = env.step("<answer>Up</answer>")
    assert env.observation_space.contains(observation) and reward in (0.0, 1.0)
    assert info["turn"] == 1 and info["invalid_action"] is False


def test_observation_has_the_map_in_ragen_symbols_legend_and_action_line() -> None:
    env = comprl.envs.make(SOKOBAN)
    observation, _ = env.reset(seed=0)
    level = env.unwrapped.level
    map_text = render(level.room, level.start)
    lines = map_text.splitlines()
    assert len(lines) == 6 and all(len(line) == 6 for line in lines)
    assert set(lines[0] + lines[-1]) == {"#"} and all(line[0] == line[-1] == "#" for line in lines)
    assert map_text.count("X") == 2 and map_text.count("O") == 2 and map_text.count("P") == 1
    assert f"Map:\n{map_text}\n" in observation
    assert "Legend: # wall, _ floor, O target, X box, √ box on a target, P you, S you on a target" in observation
    assert "Boxes on targets: 0 of 2" in observation
    assert observation.splitlines()[-1].startswith("Your move? Answer as <answer>ACTION</answer>")


def test_same_seed_gives_same_level_and_trajectory_in_one_process() -> None:
    env = comprl.envs.make(SOKOBAN)
    first, _ = env.reset(seed=11)
    trajectory = [env.step(move)[0] for move in ("up", "left", "down", "right")]
    env.reset(seed=5)
    env.step("left")
    assert env.reset(seed=11)[0] == first
    assert [env.step(move)[0] for move in ("up", "left", "down", "right")] == trajectory


def test_same_seed_gives_same_level_in_another_process_without_nle() -> None:
    seeds = [0, 1, 17, 123456789]
    result = subprocess.run(
        [sys.executable, "-c", FIRST_OBSERVATION_SCRIPT, *map(str, seeds)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONHASHSEED": "random"},  # a salted hash in the seeding would change levels
    )
    other_process = json.loads(result.stdout.strip().splitlines()[-1])
    env = comprl.envs.make(SOKOBAN)
    assert [env.reset(seed=seed)[0] for seed in seeds] == other_process


def test_different_seeds_give_different_levels() -> None:
    env = comprl.envs.make(SOKOBAN)
    assert len({env.reset(seed=seed)[0] for seed in range(10)}) >= 9


def test_reset_without_seed_draws_a_new_level_from_the_episode_stream() -> None:
    env = comprl.envs.make(SOKOBAN)
    first, _ = env.reset(seed=3)
    assert env.reset()[0] != first


@pytest.mark.parametrize(
    "action",
    ["", "   ", "x" * 10_000, "jump", "up down", "<answer>up</answer><answer>left", "<answer></answer>", "☺ up"],
    ids=["empty", "blank", "10kB", "unknown-word", "two-moves", "unclosed-tag", "empty-tags", "unicode"],
)
def test_invalid_action_gets_feedback_and_leaves_the_level_as_it_was(action: str) -> None:
    env = comprl.envs.make(SOKOBAN)
    before, _ = env.reset(seed=2)
    state = env.unwrapped.state
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith("Invalid action: '") and "Valid actions: up, down, left, right" in observation
    assert observation.endswith(before) and len(observation) < len(before) + 300
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["invalid_action"] is True and info["invalid_actions"] == 1 and info["turn"] == 1
    assert env.unwrapped.state == state


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Up", "up"),
        ("<answer>Left</answer>", "left"),
        ("I push it. <answer> RIGHT. </answer>", "right"),
        ("north", "up"),
        ("<answer>south</answer>", "down"),
        ("west", "left"),
        ("East", "right"),
        ("move down", "down"),
        ("push left", "left"),
        ("D", "down"),
    ],
)
def test_moves_are_parsed_in_any_case_and_with_compass_aliases(reply: str, expected: str) -> None:
    env = comprl.envs.make(SOKOBAN)
    assert env.unwrapped.parse_action(reply) == expected


def test_pushing_into_a_wall_or_another_box_moves_nothing() -> None:
    room, state = parse_map(
        """
        #######
        #PXX__#
        #X____#
        ###O_O#
        #######
        """
    )
    assert push_or_move(room, state, "right") is None  # a box with a box behind it
    assert push_or_move(room, state, "down") is None  # a box with a wall behind it
    assert push_or_move(room, state, "up") is None  # a wall
    assert push_or_move(room, state, "left") is None


def test_a_push_moves_the_box_one_square_and_the_player_into_its_place() -> None:
    room, state = parse_map(
        """
        ######
        #P_X_#
        #_OO_#
        ######
        """
    )
    state = push_or_move(room, state, "right")
    assert state == State((1, 2), frozenset({(1, 3)}))
    state = push_or_move(room, state, "right")
    assert state == State((1, 3), frozenset({(1, 4)}))


def test_blocked_moves_in_the_env_keep_the_map_and_say_so() -> None:
    env = comprl.envs.make(SOKOBAN)
    env.reset(seed=0)
    game: SokobanTextEnv = env.unwrapped
    room = game.level.room
    blocked = next(move for move in MOVES if push_or_move(room, game.state, move) is None)
    before = render(room, game.state)
    observation, reward, terminated, truncated, info = env.step(blocked)
    assert render(room, game.state) == before and "blocked, nothing moved" in observation
    assert (reward, terminated, info["invalid_action"]) == (0.0, False, False)


def test_win_is_detected_with_reward_one_and_termination() -> None:
    env = comprl.envs.make(SOKOBAN)
    env.reset(seed=4)
    reward, terminated, truncated, info = play_to_end(env, env.unwrapped.level.solution)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["success"] and info["won"]


def test_win_on_the_last_allowed_turn_counts_as_success_not_truncation() -> None:
    env = comprl.envs.make(SOKOBAN)
    env.reset(seed=4)
    solution = env.unwrapped.level.solution
    env = comprl.envs.make(SOKOBAN, max_turns=len(solution))
    env.reset(seed=4)
    assert play_to_end(env, solution)[:3] == (1.0, True, False)


def test_turn_cap_truncates_without_reward() -> None:
    env = comprl.envs.make(SOKOBAN, max_turns=3)
    env.reset(seed=0)
    reward, terminated, truncated, info = play_to_end(env, ["left", "right"] * 5)
    assert (reward, terminated, truncated) == (0.0, False, True) and not info["success"]


def test_solver_finds_a_shortest_solution_and_knows_dead_squares() -> None:
    room, state = parse_map(
        """
        ######
        #P___#
        #_X__#
        #_O__#
        ######
        """
    )
    assert solve(room, state) == ("right", "down")
    assert solve(room, state, max_moves=1) is None
    live = live_squares(room)
    assert (2, 2) in live and (3, 2) in live
    assert (1, 1) not in live and (3, 4) not in live  # corners without a target


def test_solver_reports_a_deadlocked_level_as_unsolvable() -> None:
    room, state = parse_map(
        """
        #####
        #X_P#
        #O__#
        #####
        """
    )
    assert solve(room, state) is None


def test_every_generated_level_is_solvable_within_the_turn_cap_and_not_trivial() -> None:
    for seed in GENERATED_SEEDS:
        level = generate_level(seed)
        assert level.start.boxes.isdisjoint(level.room.targets)
        assert len(level.start.boxes) == len(level.room.targets) == 2
        assert 4 <= len(level.solution) <= 30
        assert solve(level.room, level.start, max_moves=30) is not None
        state = level.start
        for move in level.solution:
            state = push_or_move(level.room, state, move)
            assert state is not None
        assert state.is_solved(level.room)


def test_replaying_the_solver_plan_in_the_env_wins_on_fifty_seeds() -> None:
    env = comprl.envs.make(SOKOBAN, max_turns=30)
    wins = 0
    for seed in range(50):
        env.reset(seed=seed)
        game: SokobanTextEnv = env.unwrapped
        plan = solve(game.level.room, game.state, max_moves=30)
        assert plan is not None
        replies = [f"<answer>{move.capitalize()}</answer>" for move in plan]
        reward, terminated, truncated, info = play_to_end(env, replies)
        wins += info["success"] and reward == 1.0 and terminated and not truncated
    assert wins == 50


def test_generator_rejects_bad_arguments_with_the_value_in_the_message() -> None:
    with pytest.raises(ValueError, match="-1"):
        generate_level(-1)
    with pytest.raises(ValueError, match="size must be >= 4"):
        generate_level(0, size=3)
    with pytest.raises(ValueError, match="num_boxes"):
        generate_level(0, num_boxes=0)


def test_unknown_task_names_it_and_lists_accepted() -> None:
    with pytest.raises(ValueError, match="'7x7'.*6x6-2box"):
        SokobanTextEnv(task="7x7")
