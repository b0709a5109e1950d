"""Task mixtures: the paper's presets hold the right envs, and every step's instances are reproducible."""

from __future__ import annotations

from collections import Counter

import pytest

from comprl.envs import ENV_IDS, make
from comprl.envs.mixture import MIXTURES, TaskMixture, preset


def test_presets_produce_the_papers_task_mix():
    three = preset("3-task")
    assert set(three.env_ids) == {"comprl/Room-Ultimate-5x5-v0", "comprl/WebShop-Small-v0", "comprl/ALFWorld-v0"}
    assert three.size == 384  # paper: total batch 384 = 128 per task
    assert Counter(i.env_id for i in three.instances(seed=0, step=1)) == {e: 128 for e in three.env_ids}
    six = preset("6-task", per_task=4)
    assert set(six.env_ids) == set(three.env_ids) | {"comprl/MazeWalk-9x9-v0", "comprl/KeyRoom-Dark-S5-v0", "comprl/Sokoban-6x6-2box-v0"}
    assert "comprl/River-Narrow-v0" not in six.env_ids and set(MIXTURES["6-task"]) <= set(ENV_IDS)


def test_instances_depend_only_on_seed_and_step():
    mixture = TaskMixture({"comprl/Sokoban-6x6-2box-v0": 3, "comprl/WebShop-Small-v0": 2})
    a, b = mixture.instances(seed=7, step=2), mixture.instances(seed=7, step=2)
    assert a == b and [i.env_id for i in a] == ["comprl/Sokoban-6x6-2box-v0"] * 3 + ["comprl/WebShop-Small-v0"] * 2
    assert a != mixture.instances(seed=7, step=3) and all(0 <= i.seed < 1_000_000 for i in a)


def test_every_instance_of_a_mixture_resets_its_env():
    for instance in TaskMixture({"comprl/Sokoban-6x6-2box-v0": 2, "comprl/ALFWorld-v0": 2}).instances(seed=0, step=1):
        obs, info = make(instance.env_id).reset(seed=instance.seed)
        assert obs and info["instruction"]


@pytest.mark.parametrize("batch, match", [({}, "at least one"), ({"comprl/Nope-v0": 1}, "unknown env id"), ({"comprl/ALFWorld-v0": 0}, "integer >= 1")])
def test_bad_mixtures_are_rejected_with_the_bad_value(batch, match):
    with pytest.raises(ValueError, match=match):
        TaskMixture(batch)
    with pytest.raises(ValueError, match="unknown mixture"):
        preset("9-task")
