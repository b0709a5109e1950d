"""``import comprl`` registers the comprl/ ids with gymnasium, without loading torch."""

from __future__ import annotations

import subprocess
import sys


def test_import_comprl_registers_the_ids_without_torch():
    script = (
        "import sys, gymnasium, comprl\n"
        "env = gymnasium.make('comprl/Sokoban-6x6-2box-v0')\n"
        "observation, info = env.reset(seed=3)\n"
        "assert isinstance(observation, str) and observation.strip(), observation\n"
        "assert set(comprl.envs.ENV_IDS) <= set(gymnasium.registry), 'an id is missing'\n"
        "print('torch loaded' if 'torch' in sys.modules else 'no torch')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "no torch"
