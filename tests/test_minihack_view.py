"""The MiniHack text views: the official code's view against a re-implementation of its behaviour, on real NLE
states, and the vectorised language view of the full view against a square-by-square reading of the screen."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("nle", reason="nle/minihack wheels exist only for Linux x86_64")

import comprl.envs  # noqa: E402
from comprl.config import make_config  # noqa: E402
from comprl.envs.minihack import text  # noqa: E402
from comprl.envs.minihack.env import MiniHackTextEnv  # noqa: E402

FAMILIES = {
    "comprl/Room-Ultimate-5x5-v0": {"message", "chars_crop", "chars", "screen_descriptions"},
    "comprl/MazeWalk-9x9-v0": {"message", "blstats", "chars_crop", "chars", "inv_strs"},
    "comprl/KeyRoom-Dark-S5-v0": {"message", "chars_crop", "chars", "screen_descriptions"},
    "comprl/River-Narrow-v0": {"message", "chars_crop", "chars", "screen_descriptions"},
}
"""Our four paper families and the NLE keys whose parts the official view shows: the official Room config's
(glyphs, message, chars_crop, glyphs_crop, screen_descriptions, and chars the official env always adds) for
Room and for the tasks without an official config, the official MazeWalk config's (glyphs, blstats, message,
inv_strs, chars_crop, glyphs_crop, chars) for Maze."""
STATES_PER_FAMILY = 60


def decoded(row: np.ndarray, errors: str) -> str:
    return bytes(row.tolist()).decode("utf-8", errors).rstrip("\x00").strip()


def official_reference(observation: dict[str, np.ndarray]) -> str:
    """The official `_obs_to_text`'s behaviour, written from its description: each part present when its key is."""
    lines: list[str] = []
    if "message" in observation and decoded(observation["message"], "ignore"):
        lines.append("Message: " + decoded(observation["message"], "ignore"))
    if "blstats" in observation:
        stats = [int(value) for value in observation["blstats"]]
        time, hunger, level, condition = stats[20], stats[21], stats[24], stats[25]
        lines.append(f"Position: ({time}, {hunger})")
        lines.append(f"Health: {level}/{condition if condition > 0 else max(level, 1)}")
    if "chars_crop" in observation:
        crop = observation["chars_crop"].tolist()
        rows = ["".join(" " if code in (0, 32) else chr(code) for code in row) for row in crop]
        if any(row.strip() for row in rows):
            lines.append("\nDungeon view:")
            lines.append("\n".join(rows))
    meanings: dict[str, set[str]] = {}
    if "screen_descriptions" in observation:
        chars = observation["chars"].tolist()
        for y, row in enumerate(chars):
            for x, code in enumerate(row):
                description = decoded(observation["screen_descriptions"][y][x], "replace")
                if code not in (0, 32) and description:
                    meanings.setdefault(chr(code), set()).add(description)
    header = "The meaning of common symbols in the dungeon view is (same symbol may have different descriptions):\n"
    lines.append(header + "".join(f"{symbol}: {sorted(names)!r}\n" for symbol, names in meanings.items()))
    if "inv_strs" in observation:
        items = [decoded(row, "ignore") for row in observation["inv_strs"]]
        if any(items):
            lines.append("\nInventory:\n" + "\n".join(item for item in items if item))
    return "\n".join(lines)


def recorded_states(env_id: str, view: str, count: int):
    """`count` states of random play: (the env's observation without its action prompt, its MiniHackTextEnv)."""
    env = comprl.envs.make(env_id, view=view)
    game: MiniHackTextEnv = env.unwrapped
    game.action_prompt = False
    rng = np.random.default_rng(0)
    seed = 0
    observation, info = env.reset(seed=seed)
    for _ in range(count):
        yield observation, game
        observation, _, terminated, truncated, info = env.step(str(rng.choice(info["admissible_actions"])))
        if terminated or truncated:
            seed += 1
            observation, info = env.reset(seed=seed)
    env.close()


def test_official_view_matches_the_official_behaviour_byte_for_byte_on_recorded_states() -> None:
    agreeing = 0
    seen = {"meanings of a symbol": 0, "inventory": 0, "message": 0}
    for env_id, keys in FAMILIES.items():
        for observation, game in recorded_states(env_id, "official", STATES_PER_FAMILY):
            assert set(game.screen.official) == keys
            assert observation == official_reference(dict(game.screen.official)), env_id
            agreeing += 1
            seen["meanings of a symbol"] += "', '" in observation
            seen["inventory"] += "\nInventory:\n" in observation
            seen["message"] += observation.startswith("Message: ")
    assert agreeing == len(FAMILIES) * STATES_PER_FAMILY >= 200
    assert all(seen.values()), seen  # the states exercise every part of the view


def test_maze_official_view_prints_time_and_hunger_as_position() -> None:
    env = comprl.envs.make("comprl/MazeWalk-9x9-v0", view="official")
    env.reset(seed=3)
    game: MiniHackTextEnv = env.unwrapped
    for word in ["north", "east", "south", "west"] * 5:  # until game time has passed
        observation = env.step(word)[0]
        blstats = game.screen.official["blstats"]
        if blstats[20] > 1:
            break
    # NLE's time and hunger state, level number and condition, where the official code means x, y, hp and max hp
    assert blstats[20] > 1 and (blstats[0], blstats[1]) == (game.screen.agent_x, game.screen.agent_y)
    assert f"Position: ({blstats[20]}, {blstats[21]})\nHealth: {blstats[24]}/" in observation


def test_only_the_official_view_requests_the_official_observation_keys() -> None:
    for view in ("full", "brief", "official"):
        game: MiniHackTextEnv = comprl.envs.make("comprl/Room-Ultimate-5x5-v0", view=view).unwrapped
        requested = set(game._game.observation_space.spaces)
        assert ({"chars_crop", "screen_descriptions"} <= requested) == (view == "official"), view
    with pytest.raises(ValueError, match="accepted: full, brief, official"):
        comprl.envs.make("comprl/Room-Ultimate-5x5-v0", view="balrog")


def test_paper_profile_reads_the_official_view_and_the_cpu_profile_the_brief_one() -> None:
    paper, cpu = make_config("paper"), make_config("cpu")
    assert paper.env_options[paper.env_id] == {"view": "official"}
    assert all(paper.env_options[env_id] == {"view": "official"} for env_id in FAMILIES)
    # every MiniHack task, so that the lit Room of the single-task runs and the dark Room of the mixtures read alike
    assert cpu.env_options == {env_id: {"view": "brief"} for env_id in (cpu.env_id, *FAMILIES)}


def square_by_square_sightings(glyphs: np.ndarray, x0: int, y0: int) -> list[str]:
    """The full view's "You see" lines read one square at a time (the language view's rules, loops only)."""
    sightings = []
    for y in range(glyphs.shape[0]):
        for x in range(glyphs.shape[1]):
            glyph = int(glyphs[y, x])
            if (x, y) == (x0, y0) or text.is_floor(glyph) or text.is_wall(glyph) or text.is_dark_area(glyph):
                continue
            dx, dy = x - x0, y - y0
            countable = bool(text.nethack.glyph_is_monster(glyph) or text.nethack.glyph_is_object(glyph))
            direction = text.WINDS_16[round(math.degrees(math.atan2(-dy, dx)) / 22.5) % 16]
            sightings.append((text.GLYPH_NAMES[glyph], max(abs(dx), abs(dy)), direction, countable))
    rays = []
    for name, dx, dy in text.COMPASS_8:
        for step in range(1, text.RAY_LENGTH + 1):
            x, y = x0 + dx * step, y0 + dy * step
            if not (0 <= x < glyphs.shape[1] and 0 <= y < glyphs.shape[0]) or not text.is_floor(int(glyphs[y, x])):
                if 0 <= x < glyphs.shape[1] and 0 <= y < glyphs.shape[0]:
                    glyph = int(glyphs[y, x])
                    if text.is_wall(glyph):
                        rays.append(("wall", step, name, False))
                    elif text.is_dark_area(glyph):
                        rays.append(("dark area", step, name, False))
                break
    clockwise = ["north", "north-northeast", "northeast", "east-northeast", "east", "east-southeast", "southeast",
                 "south-southeast", "south", "south-southwest", "southwest", "west-southwest", "west",
                 "west-northwest", "northwest", "north-northwest"]

    def lines(items):
        groups: dict = {}
        for name, distance, direction, countable in sorted(items, key=lambda s: (s[1], clockwise.index(s[2]), s[0])):
            groups.setdefault((name, text.distance_word(distance), countable), []).append(direction)
        out = []
        for (name, word, countable), directions in groups.items():
            plural = countable and any(directions.count(d) > 1 for d in directions)
            label = text.pluralize(name) if plural else name
            out.append(f"{label} {word} {text.join_words(list(dict.fromkeys(directions)))}")
        return out

    return lines(sightings) + lines([r for r in rays if r[0] == "wall"]) + lines([r for r in rays if r[0] != "wall"])


def test_vectorised_language_view_equals_a_square_by_square_reading_of_the_screen() -> None:
    compared = 0
    for env_id in FAMILIES:
        for _, game in recorded_states(env_id, "full", 40):
            screen = game.screen
            expected = square_by_square_sightings(screen.glyphs, screen.agent_x, screen.agent_y)
            assert text.describe_surroundings(screen.glyphs, screen.agent_x, screen.agent_y) == expected
            compared += 1
    assert compared == 160
