"""Environment throughput: steps/s of every comprl env under a random valid policy, and for MiniHack the cost
of the text interface against raw NLE stepping of the same task, measured side by side in one run; then the
cost per state of each MiniHack text view on recorded states of the paper's four families.

    python benchmarks/env_throughput.py               # 2,000 steps per env, 200 states per family
    python benchmarks/env_throughput.py --steps 300   # quicker
    python benchmarks/env_throughput.py --steps 0     # the views only

The random policy picks uniformly among ``info["admissible_actions"]`` (episodes restart with the next seed when
they end); SWE-lite's admissible actions are tool names, so there it picks uniformly among four valid calls
(list the files, run the tests, view a random source file, submit), and runs at most 200 steps. The MiniHack ratio
compares our text env with gymnasium's raw ``MiniHack-*`` env taking random
actions from the same action set, so it is the price of rendering the text view and parsing the reply.

The views table times, per recorded state (random play, min over rounds that alternate the functions, so every
column sees the same load): the official view, the full and brief views, the full view's "You see" lines
alone (the language view), and an oracle for them. BALROG's nle-language-wrapper (C++, 19-29 us per state
where the issue measured it) does not install here: its only PyPI release is a source archive that builds its
own copy of NLE 0.9.0 with cmake, bison and flex. The oracle is the least NumPy work that yields the lines'
content (every described square's name, distance and 16-wind direction, each ray's first stop), without
ordering, grouping or text; ``lines / oracle`` is what the language view costs beyond it.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import gymnasium
import numpy as np

from comprl.envs import ENV_IDS, make
from comprl.envs.minihack import text
from comprl.envs.minihack.env import MiniHackTextEnv, MiniHackScreen
from comprl.envs.minihack.official_view import official_text


SWE_ID = "comprl/SWE-Lite-v0"
SWE_MAX_STEPS = 200


def swe_call(env: gymnasium.Env, rng: random.Random) -> str:
    """A random valid SWE-lite tool call."""
    files = sorted(str(path.relative_to(env.unwrapped.workspace)) for path in env.unwrapped.workspace.rglob("*.py"))
    calls = [
        {"name": "bash", "arguments": {"command": "ls -R"}},
        {"name": "bash", "arguments": {"command": "python -m pytest -q"}},
        {"name": "str_replace_editor", "arguments": {"command": "view", "path": f"/repo/{rng.choice(files)}"}},
        {"name": "submit", "arguments": {}},
    ]
    return json.dumps(rng.choice(calls))


def text_steps_per_second(env_id: str, steps: int, seed: int = 0) -> float:
    """Steps/s of a comprl env under a random policy over its admissible actions."""
    env = make(env_id, max_turns=30)
    rng = random.Random(seed)
    episode = seed
    _, info = env.reset(seed=episode)
    steps = min(steps, SWE_MAX_STEPS) if env_id == SWE_ID else steps
    started = time.perf_counter()
    for _ in range(steps):
        action = swe_call(env, rng) if env_id == SWE_ID else rng.choice(info["admissible_actions"])
        _, _, terminated, truncated, info = env.step(f"<answer>{action}</answer>")
        if terminated or truncated:
            episode += 1
            _, info = env.reset(seed=episode)
    return steps / (time.perf_counter() - started)


def raw_minihack_steps_per_second(env_id: str, steps: int, seed: int = 0) -> float | None:
    """Steps/s of the underlying MiniHack env with random actions from the text env's action set (None: not
    MiniHack)."""
    text_env = make(env_id).unwrapped
    if not isinstance(text_env, MiniHackTextEnv):
        return None
    game = gymnasium.make(text_env.task.minihack_id, actions=text_env._nle_actions, disable_env_checker=True)
    rng = random.Random(seed)
    game.reset(seed=seed)
    started = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = game.step(rng.randrange(len(text_env._nle_actions)))
        if terminated or truncated:
            game.reset()
    return steps / (time.perf_counter() - started)


VIEW_FAMILIES = ("comprl/Room-Ultimate-5x5-v0", "comprl/MazeWalk-9x9-v0", "comprl/KeyRoom-Dark-S5-v0",
                 "comprl/River-Narrow-v0")


def recorded_screens(env_id: str, count: int, seed: int = 0) -> list[MiniHackScreen]:
    """`count` screens of random play (with the official view's arrays)."""
    env = make(env_id, view="official")
    rng = random.Random(seed)
    screens, episode = [], seed
    _, info = env.reset(seed=episode)
    while len(screens) < count:
        screens.append(env.unwrapped.screen)
        _, _, terminated, truncated, info = env.step(rng.choice(info["admissible_actions"]))
        if terminated or truncated:
            episode += 1
            _, info = env.reset(seed=episode)
    env.close()
    return screens


ORACLE_FLOOR = np.array([text.is_floor(glyph) for glyph in range(len(text.GLYPH_NAMES))])
ORACLE_DESCRIBED = ~ORACLE_FLOOR & ~np.array(
    [text.is_wall(glyph) or text.is_dark_area(glyph) for glyph in range(len(text.GLYPH_NAMES))]
)
ORACLE_RAY_DX = np.array([dx for _, dx, _ in text.COMPASS_8])[:, None] * np.arange(1, text.RAY_LENGTH + 1)
ORACLE_RAY_DY = np.array([dy for _, _, dy in text.COMPASS_8])[:, None] * np.arange(1, text.RAY_LENGTH + 1)


def oracle_sightings(glyphs: np.ndarray, agent_x: int, agent_y: int) -> tuple[np.ndarray, ...]:
    """The content of the "You see" lines in plain NumPy: the described squares' names, distances and 16-wind
    directions; each ray's first square that is not floor and whether it is on the screen."""
    described = ORACLE_DESCRIBED[glyphs]
    described[agent_y, agent_x] = False
    ys, xs = np.nonzero(described)
    dx, dy = xs - agent_x, ys - agent_y
    winds = np.round(np.degrees(np.arctan2(-dy, dx)) / 22.5).astype(int) % 16
    ray_x, ray_y = agent_x + ORACLE_RAY_DX, agent_y + ORACLE_RAY_DY
    inside = (ray_x >= 0) & (ray_x < text.COLUMNS) & (ray_y >= 0) & (ray_y < text.ROWS)
    met = glyphs[ray_y.clip(0, text.ROWS - 1), ray_x.clip(0, text.COLUMNS - 1)]
    first = np.argmax(~inside | ~ORACLE_FLOOR[met], axis=1)
    rays = np.arange(len(text.COMPASS_8))
    distances = np.maximum(np.abs(dx), np.abs(dy))
    return text.GLYPH_NAMES[glyphs[ys, xs]], distances, winds, met[rays, first], inside[rays, first]


def view_costs(screens: list[MiniHackScreen], rounds: int = 7) -> dict[str, float]:
    """Microseconds per state of each view, the min over `rounds` rounds that alternate the views."""
    views = {
        "official": lambda s: official_text(s.official),
        "full": lambda s: text.render_screen(s.glyphs, s.chars, s.agent_x, s.agent_y, s.message),
        "brief": lambda s: text.render_screen(s.glyphs, s.chars, s.agent_x, s.agent_y, s.message, brief=True),
        "lines": lambda s: text.describe_surroundings(s.glyphs, s.agent_x, s.agent_y),
        "oracle": lambda s: oracle_sightings(s.glyphs, s.agent_x, s.agent_y),
    }
    best = dict.fromkeys(views, float("inf"))
    for _ in range(rounds):
        for name, view in views.items():
            started = time.perf_counter()
            for screen in screens:
                view(screen)
            best[name] = min(best[name], (time.perf_counter() - started) / len(screens) * 1e6)
    return best


def throughput_table(steps: int) -> None:
    """Steps/s of every env, and for MiniHack against raw NLE."""
    print(f"{'env':32s} {'text steps/s':>13s} {'raw NLE steps/s':>16s} {'raw / text':>11s}")
    for env_id in ENV_IDS:
        text_rate = text_steps_per_second(env_id, steps)
        raw = raw_minihack_steps_per_second(env_id, steps)
        if raw is None:
            print(f"{env_id:32s} {text_rate:13.0f} {'-':>16s} {'-':>11s}")
        else:
            print(f"{env_id:32s} {text_rate:13.0f} {raw:16.0f} {raw / text_rate:10.1f}x")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--states", type=int, default=200, help="recorded states per family for the views table")
    args = parser.parse_args()
    if args.steps:
        throughput_table(args.steps)
    print(f"\n{'us per state':28s} {'official':>9s} {'full':>7s} {'brief':>7s} {'lines':>7s} {'oracle':>7s} "
          f"{'lines / oracle':>15s}")
    for env_id in VIEW_FAMILIES:
        cost = view_costs(recorded_screens(env_id, args.states))
        print(f"{env_id:28s} {cost['official']:9.1f} {cost['full']:7.1f} {cost['brief']:7.1f} {cost['lines']:7.1f} "
              f"{cost['oracle']:7.1f} {cost['lines'] / cost['oracle']:14.2f}x")


if __name__ == "__main__":
    main()
