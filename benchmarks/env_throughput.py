"""Environment throughput: steps/s of every comprl env under a random valid policy, and for MiniHack the cost
of the text interface against raw NLE stepping of the same task, measured side by side in one run.

    python benchmarks/env_throughput.py               # 2,000 steps per env
    python benchmarks/env_throughput.py --steps 300   # quicker

The random policy picks uniformly among ``info["admissible_actions"]`` (episodes restart with the next seed when
they end); SWE-lite's admissible actions are tool names, so there it picks uniformly among four valid calls
(list the files, run the tests, view a random source file, submit), and runs at most 200 steps. The MiniHack ratio
compares our text env with gymnasium's raw ``MiniHack-*`` env taking random
actions from the same action set, so it is the price of rendering the text view and parsing the reply.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import gymnasium

from comprl.envs import ENV_IDS, make
from comprl.envs.minihack.env import MiniHackTextEnv


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'env':32s} {'text steps/s':>13s} {'raw NLE steps/s':>16s} {'raw / text':>11s}")
    for env_id in ENV_IDS:
        text = text_steps_per_second(env_id, args.steps)
        raw = raw_minihack_steps_per_second(env_id, args.steps)
        if raw is None:
            print(f"{env_id:32s} {text:13.0f} {'-':>16s} {'-':>11s}")
        else:
            print(f"{env_id:32s} {text:13.0f} {raw:16.0f} {raw / text:10.1f}x")


if __name__ == "__main__":
    main()
