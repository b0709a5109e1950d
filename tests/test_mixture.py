"""Task mixtures: the paper's presets hold the right envs, every step's instances are reproducible, and the
experiment loop trains one actor, one extractor and one bank on several tasks at once."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from comprl import make_config, run_experiment
from comprl.envs import ENV_IDS, make
from comprl.envs.mixture import MIXTURES, TASK_NAMES, TaskMixture, preset
from comprl.experience.bank import NewEntry, Write
from comprl.experience.manager import ExperienceManager
from comprl.loop import StepLayout, make_envs

ROOM, WEBSHOP, ALFWORLD = MIXTURES["3-task"]
REPO = Path(__file__).resolve().parents[1]


def test_presets_produce_the_papers_task_mix():
    three = preset("3-task")
    assert set(three.env_ids) == {"comprl/Room-Ultimate-5x5-v0", "comprl/WebShop-Small-v0", "comprl/ALFWorld-v0"}
    assert three.size == 384  # paper: total batch 384 = 128 per task
    assert Counter(i.env_id for i in three.instances(seed=0, step=1)) == {e: 128 for e in three.env_ids}
    six = preset("6-task", per_task=4)
    assert set(six.env_ids) == set(three.env_ids) | {
        "comprl/MazeWalk-9x9-v0",
        "comprl/KeyRoom-Dark-S5-v0",
        "comprl/Sokoban-6x6-2box-v0",
    }
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


@pytest.mark.parametrize(
    "batch, match",
    [({}, "at least one"), ({"comprl/Nope-v0": 1}, "unknown env id"), ({"comprl/ALFWorld-v0": 0}, "integer >= 1")],
)
def test_bad_mixtures_are_rejected_with_the_bad_value(batch, match):
    with pytest.raises(ValueError, match=match):
        TaskMixture(batch)
    with pytest.raises(ValueError, match="unknown mixture"):
        preset("9-task")


def test_a_single_task_run_is_the_mixture_of_its_one_task():
    config = make_config("smoke", batch_instances=3, group_size=4, max_turns=5)
    assert config.mixture() == TaskMixture({config.env_id: 3}, {config.env_id: 5})
    seeds = StepLayout(config, make_envs(config)).seeds(step=2)
    assert len(seeds) == 12 and len(set(seeds)) == 3 and seeds[:4] == [seeds[0]] * 4  # a group shares its instance
    assert set(TASK_NAMES) == set(ENV_IDS) and len(set(TASK_NAMES.values())) == len(ENV_IDS)


def test_multi_task_configs_take_presets_and_per_task_sizes_and_reject_strays():
    config = make_config("smoke", tasks="3-task", task_batch={WEBSHOP: 2}, task_turns={ALFWORLD: 7})
    mixture = config.mixture()
    assert (
        mixture.batch == {ROOM: 1, WEBSHOP: 2, ALFWORLD: 1}
        and mixture.turns(ALFWORLD) == 7
        and mixture.turns(ROOM) == 3
    )
    assert config.task == "room+webshop+alfworld"
    assert [env.unwrapped.max_turns for env in mixture.make_envs(ALFWORLD, 1)] == [7]
    with pytest.raises(ValueError, match="not trained on"):
        make_config("smoke", task_batch={WEBSHOP: 2})
    with pytest.raises(ValueError, match="accepted a preset"):
        make_config("smoke", tasks="4-task")
    with pytest.raises(ValueError, match="unknown env id"):
        make_config("smoke", tasks=[ROOM, "comprl/Nope-v0"])


def test_turn_caps_may_name_tasks_a_run_does_not_play_but_no_unknown_env_or_cap_below_one():
    config = make_config("smoke", task_turns={WEBSHOP: 6, ALFWORLD: 10})
    assert config.mixture().max_turns == {ROOM: 3}  # a single-task Room run keeps its own cap
    assert make_config("smoke", tasks="3-task", task_turns={WEBSHOP: 6}).mixture().turns(WEBSHOP) == 6
    with pytest.raises(ValueError, match=r"task_turns: unknown env id 'comprl/Nope-v0'; accepted: comprl/"):
        make_config("smoke", task_turns={"comprl/Nope-v0": 6})
    with pytest.raises(ValueError, match=r"task_turns\['comprl/WebShop-Small-v0'\]=0: accepted: a turn cap >= 1"):
        make_config("smoke", task_turns={WEBSHOP: 0})


def _turn_caps_csv() -> dict[str, list[dict[str, str]]]:
    """results/design/turn_caps.csv (benchmarks/turn_caps.py) by env id, caps in increasing order."""
    rows: dict[str, list[dict[str, str]]] = {}
    with open(REPO / "results" / "design" / "turn_caps.csv", newline="") as file:
        for row in csv.DictReader(file):
            rows.setdefault(row["env_id"], []).append(row)
    return {env_id: sorted(its, key=lambda row: int(row["cap"])) for env_id, its in rows.items()}


def test_every_cpu_turn_cap_is_the_smallest_within_which_the_expert_wins_nine_games_in_ten():
    measured = _turn_caps_csv()
    caps = make_config("cpu").task_turns
    assert set(caps) == set(measured)  # every measured task has its cap
    for env_id, rows in measured.items():
        smallest = next(int(row["cap"]) for row in rows if float(row["expert_success"]) >= 0.9)
        assert caps[env_id] == smallest, env_id


def test_the_laptop_mixture_holds_tasks_a_random_policy_wins_within_their_cpu_caps():
    measured = _turn_caps_csv()
    config = make_config("cpu", tasks="laptop-2")
    for env_id in config.task_ids:
        cap = config.mixture().turns(env_id)
        random_success = next(float(row["random_success"]) for row in measured[env_id] if int(row["cap"]) == cap)
        assert random_success >= 0.15, env_id
    assert config.task_ids == (config.env_id, ROOM)  # the single-task runs' lit Room and the paper's dark one
    lit = MIXTURES["3-task-lit"]
    assert lit[0] == config.env_id and lit[1:] == MIXTURES["3-task"][1:]  # the paper's 3 tasks, the lit Room in front
    for env_id in ("comprl/WebShop-Small-v0", "comprl/ALFWorld-v0", "comprl/KeyRoom-Dark-S5-v0"):
        assert float(measured[env_id][-1]["random_success"]) == 0.0  # why they are left out of laptop-2


def test_each_guided_query_is_answered_from_its_own_tasks_entries(tmp_path):
    manager = ExperienceManager(
        make_config("smoke", method="comp_rl", **{"experience.warmup": 0}), tmp_path / "bank.duckdb"
    )
    try:
        for task in (ROOM, WEBSHOP, ALFWORLD):
            manager.bank.apply([Write("add", entry=NewEntry(f"{task} lesson", "a lesson"))], step=0, task=task)
        tasks = [WEBSHOP, ROOM, ALFWORLD, ROOM, WEBSHOP]
        found = manager.search([f"query {i}" for i in range(5)], tasks, seeds=[1, 2, 3, 4, 5])
        assert [entry.task for entry in found] == tasks
        assert manager.stats()["manager_embedding_calls"] == 1  # one batch for the three tasks
    finally:
        manager.close()


def test_the_loop_trains_one_actor_and_one_bank_on_three_tasks(tmp_path):
    config = make_config(
        "smoke", method="comp_rl", tasks="3-task", task_turns={WEBSHOP: 4}, eval_episodes=2, **{"experience.warmup": 0}
    )
    run = run_experiment(config, tmp_path, name="three", progress=False)
    metrics = run.metrics()
    train, evals = metrics[metrics.phase == "train"], metrics[metrics.phase == "eval"]
    assert list(train.episodes) == [12.0, 12.0]  # one instance of each task, rolled out 4 times
    for name in ("room", "webshop", "alfworld"):
        assert list(train[f"{name}_episodes"]) == [4.0, 4.0] and list(evals[f"{name}_episodes"]) == [2.0, 2.0]
        assert evals[f"guided_{name}_success_rate"].notna().all()  # evaluated with experience too, task by task
    assert list(train.webshop_mean_episode_length) == [4.0, 4.0]  # WebShop's own turn cap
    assert (train.alfworld_mean_return < 0).all()  # ALFWorld's -1 for a failure, alone in its column
    with duckdb.connect(str(run.bank_path), read_only=True) as con:
        written = {task for (task,) in con.execute("SELECT DISTINCT task FROM entries").fetchall()}
    assert written == {ROOM, WEBSHOP, ALFWORLD}  # one bank, distilled into task by task
