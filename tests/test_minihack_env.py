"""Behaviour of comprl's MiniHack text environments (the real nle/minihack game underneath)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("nle", reason="nle/minihack wheels exist only for Linux x86_64")

import comprl.envs  # noqa: E402
from comprl.envs import random_policy_success  # noqa: E402
from comprl.envs.base import extract_answer  # noqa: E402
from comprl.envs.minihack.env import MiniHackTextEnv  # noqa: E402
from comprl.envs.minihack.text import COMPASS_8  # noqa: E402
from comprl.envs.minihack.solvers import StairsSeeker  # noqa: E402

ROOM = "comprl/Room-Ultimate-5x5-v0"
MAZE = "comprl/MazeWalk-9x9-v0"
KEYROOM = "comprl/KeyRoom-Dark-S5-v0"
RIVER = "comprl/River-Narrow-v0"
INFO_KEYS = {"instruction", "success", "won", "invalid_action", "invalid_actions", "turn", "admissible_actions"}
ROOM_OBSERVATION_MAX_CHARS = 600
"""About 150 tokens: the observation budget for the 135M actor."""

TRAJECTORY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import comprl.envs
    seed, length = int(sys.argv[1]), int(sys.argv[2])
    env = comprl.envs.make("comprl/Room-Ultimate-5x5-v0", max_turns=length)
    observation, info = env.reset(seed=seed)
    words = info["admissible_actions"]
    observations = [observation]
    for index in np.random.default_rng(seed).integers(len(words), size=length):
        observation, _, terminated, truncated, _ = env.step(words[index])
        observations.append(observation)
        if terminated or truncated:
            break
    print(json.dumps(observations))
    """
)


def play(env_id: str, seed: int, actions: list[str], **kwargs) -> list[tuple[str, float, bool, bool]]:
    """Reset with `seed`, play `actions` until the episode ends; the first entry is the reset observation."""
    env = comprl.envs.make(env_id, **kwargs)
    observation, _ = env.reset(seed=seed)
    outcomes = [(observation, 0.0, False, False)]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        outcomes.append((observation, reward, terminated, truncated))
        if terminated or truncated:
            break
    env.close()
    return outcomes


def random_words(env_id: str, seed: int, length: int) -> list[str]:
    """`length` action words of `env_id` drawn with a seeded generator."""
    env = comprl.envs.make(env_id)
    _, info = env.reset(seed=0)
    words = info["admissible_actions"]
    return [words[index] for index in np.random.default_rng(seed).integers(len(words), size=length)]


def test_contract_reset_and_step_return_text_and_info_keys() -> None:
    env = comprl.envs.make(ROOM, max_turns=30)
    observation, info = env.reset(seed=123)
    assert isinstance(observation, str) and info.keys() >= INFO_KEYS
    assert "<answer>ACTION</answer>" in info["instruction"] and "north" in info["instruction"]
    assert env.unwrapped.instruction == info["instruction"]
    observation, reward, terminated, truncated, info = env.step("<answer>north</answer>")
    assert isinstance(observation, str) and reward in (0.0, 1.0)
    assert info["turn"] == 1 and info["invalid_action"] is False and info["won"] == info["success"]


def test_same_seed_gives_same_map_and_trajectory_in_one_process() -> None:
    actions = random_words(ROOM, seed=7, length=15)
    first = play(ROOM, 11, actions)
    env = comprl.envs.make(ROOM)  # One env reset twice with the same seed, after another episode.
    env.reset(seed=99)
    env.step("east")
    assert env.reset(seed=11)[0] == first[0][0]
    assert play(ROOM, 11, actions) == first


def test_same_seed_gives_same_trajectory_across_processes() -> None:
    seed, length = 5, 12
    result = subprocess.run(
        [sys.executable, "-c", TRAJECTORY_SCRIPT, str(seed), str(length)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    other_process = json.loads(result.stdout.strip().splitlines()[-1])
    actions = random_words(ROOM, seed=seed, length=length)  # The words the script draws.
    this_process = [observation for observation, *_ in play(ROOM, seed, actions, max_turns=length)]
    assert this_process == other_process


def test_different_seeds_give_different_games() -> None:
    actions = ["north", "east", "south", "west"]
    trajectories = {tuple(outcome[0] for outcome in play(ROOM, seed, actions)) for seed in range(6)}
    assert len(trajectories) > 1


def moons(clock: str, seeds: range) -> list[str]:
    """The moon each seed's game opens under, as NetHack's first message names it ("" when it names none)."""
    env = comprl.envs.make("comprl/KeyRoom-Dark-S5-v0", view="brief", clock=clock)
    return [next((m for m in ("New moon", "Full moon") if m in env.reset(seed=seed)[0]), "") for seed in seeds]


def test_the_moon_follows_the_seed_not_the_day_unless_the_host_clock_is_asked_for() -> None:
    # with the seed's clock 48 games open under both moons and none, whatever the date, and a seed again opens the
    # same way; with the host's every game shares today's moon, so at most one of the two is ever named
    by_seed = moons("seed", range(48))
    assert {"New moon", "Full moon", ""} == set(by_seed)
    assert moons("seed", range(48)) == by_seed
    assert len(set(moons("host", range(48))) - {""}) <= 1
    with pytest.raises(ValueError, match="unknown MiniHack clock 'wall'; accepted: seed, host"):
        comprl.envs.make("comprl/KeyRoom-Dark-S5-v0", clock="wall")


@pytest.mark.parametrize(
    "action",
    [
        "",
        "   ",
        "fly to the moon",
        "north east",
        "x" * 10_000,
        "<answer>north</answer><answer>south",
        "north</answer>",
        "<answer></answer>",
        "\u263a north",
    ],
    ids=[
        "empty",
        "blank",
        "nonsense",
        "two-directions",
        "10kB",
        "unclosed-tag",
        "stray-close",
        "empty-tags",
        "unicode",
    ],
)
def test_invalid_action_gets_feedback_is_counted_and_does_not_advance_the_game(action: str) -> None:
    env = comprl.envs.make(ROOM)
    before, _ = env.reset(seed=3)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith("Invalid action: '") and "Valid actions: north, east" in observation
    assert observation.endswith(before) and len(observation) < len(before) + 300
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["invalid_action"] is True and info["invalid_actions"] == 1 and info["turn"] == 1
    assert env.observation_space.contains(observation)
    # Game time did not pass: the same valid move afterwards gives what it gives right after reset.
    after_invalid = env.step("south")[0]
    assert after_invalid == play(ROOM, 3, ["south"])[1][0]


def test_invalid_actions_are_counted_and_still_use_up_turns() -> None:
    env = comprl.envs.make(ROOM, max_turns=3)
    env.reset(seed=4)
    env.step("dance")
    env.step("<answer>jump</answer>")
    _, _, terminated, truncated, info = env.step("nowhere")
    assert info["invalid_actions"] == 3 and info["turn"] == 3
    assert truncated and not terminated


def test_stepping_after_the_episode_ended_asks_for_reset() -> None:
    env = comprl.envs.make(ROOM, max_turns=1)
    env.reset(seed=0)
    env.step("north")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("south")
    assert isinstance(env.reset(seed=0)[0], str)


def test_non_string_action_raises_type_error() -> None:
    env = comprl.envs.make(ROOM)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="str"):
        env.step(0)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("<answer>north</answer>", "north"),
        ("I will go up. <answer> North. </answer>", "north"),
        ("<answer>east</answer> no, better: <ANSWER>`West`!</ANSWER>", "west"),
        ('"southeast"', "southeast"),
        ("NE", "northeast"),
        ("move s", "south"),
    ],
)
def test_reply_is_parsed_from_last_answer_tag_or_whole_text(reply: str, expected: str) -> None:
    env = comprl.envs.make(ROOM)
    assert env.unwrapped.parse_action(reply) == expected


def test_unclosed_last_answer_tag_is_malformed() -> None:
    assert extract_answer("<answer>north</answer><answer>south") is None
    assert extract_answer("<answer>north</answer> then <answer>south</answer>") == "south"


def test_max_turns_truncates_the_episode() -> None:
    outcomes = play(ROOM, 8, ["north", "south"] * 10, max_turns=4)
    assert len(outcomes) <= 5
    assert outcomes[-1][2] or outcomes[-1][3]


def test_room_observation_is_compact_and_has_all_parts() -> None:
    env = comprl.envs.make(ROOM)
    observation, _ = env.reset(seed=1)
    longest = len(observation)
    for word in random_words(ROOM, seed=1, length=15):
        observation, _, terminated, truncated, _ = env.step(word)
        if terminated or truncated:
            break
        for part in ("Message: ", "You see:", "Map:", "Legend: @ you"):
            assert part in observation
        longest = max(longest, len(observation))
    assert longest <= ROOM_OBSERVATION_MAX_CHARS


def test_scripted_explorer_wins_room_ultimate_on_most_seeds() -> None:
    wins = 0
    for seed in range(10):
        env = comprl.envs.make(ROOM, max_turns=30)
        env.reset(seed=seed)
        agent = StairsSeeker()
        reward, terminated, truncated, info = 0.0, False, False, {}
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(f"<answer>{agent.act(env.unwrapped)}</answer>")
        assert reward == (1.0 if info["success"] else 0.0)
        wins += info["success"]
    assert wins >= 8


def test_lit_room_shows_the_stairs_at_once_and_a_walker_reaches_them_within_six_turns() -> None:
    # the cpu profile's learnable Room: everything the actor needs is in the first observation
    for seed in range(10):
        env = comprl.envs.make("comprl/Room-Random-5x5-v0", max_turns=6)
        observation, _ = env.reset(seed=seed)
        assert "stairs down" in observation and ">" in observation
        agent = StairsSeeker()
        terminated = truncated = False
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(f"<answer>{agent.act(env.unwrapped)}</answer>")
        assert info["success"], f"seed {seed}"


def test_scripted_agent_wins_keyroom_with_pick_up_and_apply_key() -> None:
    env = comprl.envs.make(KEYROOM, max_turns=30)
    env.reset(seed=2)
    agent = StairsSeeker()
    played, terminated, truncated, info = [], False, False, {}
    while not (terminated or truncated):
        played.append(agent.act(env.unwrapped))
        observation, _, terminated, truncated, info = env.step(played[-1])
        if played[-1].startswith("apply key"):
            assert "You succeed in unlocking the door." in observation
    assert info["success"]
    assert "pick up" in played and any(word.startswith("apply key") for word in played)


def boulder_in_line(chars: np.ndarray, x: int, y: int, dx: int, dy: int) -> int | None:
    """Steps from (x, y) to a boulder in line behind free floor, or None (what is behind it is unseen)."""
    line = "".join(chr(chars[y + step * dy, x + step * dx]) for step in range(1, 5))
    distance = line.find("`") + 1
    return distance if distance and line[: distance - 1] == "." * (distance - 1) else None


def test_walking_into_a_boulder_pushes_it() -> None:
    env = comprl.envs.make(RIVER)
    game: MiniHackTextEnv = env.unwrapped
    for seed in range(20):
        env.reset(seed=seed)
        x, y = game.screen.agent_x, game.screen.agent_y
        for direction, dx, dy in COMPASS_8:
            distance = boulder_in_line(game.screen.chars, x, y, dx, dy)
            if distance is None:
                continue
            for _ in range(distance):
                observation = env.step(direction)[0]
            if "in vain" in observation:  # Something unseen behind the boulder blocks it.
                break
            assert (game.screen.agent_x, game.screen.agent_y) == (x + distance * dx, y + distance * dy)
            assert chr(game.screen.chars[y + (distance + 1) * dy, x + (distance + 1) * dx]) == "`"
            return
    pytest.fail("no seed in range(20) starts with a pushable boulder in line with the agent")


def test_scripted_agent_bridges_river_narrow_with_boulders() -> None:
    """The planner's actions never depend on the cap, so one 100-turn episode per seed also says whether the
    seed is won within the paper's 30 turns. The bounds leave one seed of slack below what the planner wins on
    these seeds; its losses at 30 turns are levels whose boulders lie too far from the river, or a boulder that
    sank (NetHack fills the water 9 times in 10)."""
    wins = wins_within_paper_cap = 0
    for seed in range(20):
        env = comprl.envs.make(RIVER, max_turns=100)
        env.reset(seed=seed)
        agent = StairsSeeker()
        pushed_in, reward, terminated, truncated, info = False, 0.0, False, False, {}
        while not (terminated or truncated):
            observation, reward, terminated, truncated, info = env.step(agent.act(env.unwrapped))
            pushed_in = pushed_in or "into the water" in observation
        env.close()
        assert reward == (1.0 if info["success"] else 0.0)
        assert pushed_in or not info["success"]  # The river is never crossed without filling it.
        wins += info["success"]
        wins_within_paper_cap += info["success"] and info["turn"] <= 30
    assert wins >= 18 and wins_within_paper_cap >= 9


@pytest.mark.parametrize("env_id", [MAZE, KEYROOM, RIVER])
def test_other_tasks_play_twenty_random_valid_actions(env_id: str) -> None:
    env = comprl.envs.make(env_id)
    observation, info = env.reset(seed=0)
    assert isinstance(observation, str) and "Map:" in observation
    for word in random_words(env_id, seed=1, length=20):
        assert word in info["admissible_actions"]
        observation, reward, terminated, truncated, info = env.step(word)
        assert isinstance(observation, str) and observation and reward in (0.0, 1.0)
        assert info.keys() >= INFO_KEYS and not info["invalid_action"]
        if terminated or truncated:
            observation, info = env.reset()


def test_unknown_env_id_names_it_and_lists_accepted_ids() -> None:
    with pytest.raises(ValueError, match="comprl/Room-5x5-v9") as error:
        comprl.envs.make("comprl/Room-5x5-v9")
    assert all(env_id in str(error.value) for env_id in comprl.envs.ENV_IDS)


def test_without_nle_the_package_imports_and_minihack_envs_explain_the_platform() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["nle"] = None  # as on a platform without nle/minihack wheels
        sys.modules["minihack"] = None
        import comprl.envs
        assert "comprl/Room-Ultimate-5x5-v0" in comprl.envs.ENV_IDS
        try:
            comprl.envs.make("comprl/Room-Ultimate-5x5-v0")
        except ImportError as error:
            print(error)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert "Linux x86_64" in result.stdout


def test_a_random_policy_is_the_floor_and_reproducible():
    # Room at 6 turns: a uniformly random mover finds the stairs in some episodes, never in all
    rate = random_policy_success("comprl/Room-Ultimate-5x5-v0", max_turns=6, episodes=40)
    assert 0.0 < rate < 0.5
    assert random_policy_success("comprl/Room-Ultimate-5x5-v0", max_turns=6, episodes=40) == rate
    # more turns, more luck
    assert random_policy_success("comprl/Room-Ultimate-5x5-v0", max_turns=30, episodes=40) > rate


def test_brief_view_keeps_what_is_in_view_and_drops_walls_dark_area_and_map() -> None:
    full, brief = (comprl.envs.make("comprl/Room-Random-5x5-v0", max_turns=6, view=v) for v in ("full", "brief"))
    (full_obs, full_info), (brief_obs, brief_info) = full.reset(seed=3), brief.reset(seed=3)
    stairs = [line for line in full_obs.splitlines() if line.startswith("stairs down")]
    assert stairs and stairs[0] in brief_obs.splitlines()  # the same words for what is in view
    assert "dark area" in full_obs and "Map:" in full_obs
    assert "dark area" not in brief_obs and "Map:" not in brief_obs and "Legend" not in brief_obs
    assert len(brief_obs) < 0.6 * len(full_obs)
    assert "map" in full_info["instruction"] and "map" not in brief_info["instruction"]
    # the same game underneath: the same moves reach the same places
    assert (
        full.step("<answer>east</answer>")[0].splitlines()[2] == brief.step("<answer>east</answer>")[0].splitlines()[2]
    )
    with pytest.raises(ValueError, match="accepted: full, brief"):
        comprl.envs.make(ROOM, view="short")


def test_a_finished_run_leaves_nothing_of_itself_alive_when_it_was_the_first_to_import_minihack():
    # minihack.wiki keeps an ImportError whose traceback holds the importing frames, and with them a run's models
    script = textwrap.dedent(
        """
        import gc, sys, tempfile, types
        from comprl.config import make_config
        from comprl.loop import run_experiment
        assert "minihack" not in sys.modules
        with tempfile.TemporaryDirectory() as folder:
            run_experiment(make_config("smoke", method="baseline", steps=1), folder, name="run", progress=False)
        assert "minihack" in sys.modules
        gc.collect()
        alive = [f for f in gc.get_objects() if isinstance(f, types.FrameType) and f.f_code.co_name == "run_experiment"]
        print("frames of run_experiment alive:", len(alive))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "frames of run_experiment alive: 0" in done.stdout
