"""Profiles, overrides and the command line reject bad input with a message naming it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from comprl import make_config
from comprl import cli
from comprl.cli import main, parse_value
from comprl.config import METHODS, PROFILES, ExperimentConfig
from comprl.envs import make
from comprl.runs import Run
from comprl.trainers.actor import ActorConfig


def test_profiles_differ_in_scale_and_model():
    assert PROFILES["smoke"].model == "tiny-random"
    assert PROFILES["cpu"].model == "smollm2-135m"
    assert PROFILES["paper"].requires_gpu and PROFILES["paper"].actor.learning_rate == 1e-6


def test_overrides_flat_and_dotted():
    config = make_config("smoke", steps=5, **{"actor.learning_rate": 3e-5})
    assert config.steps == 5 and config.actor.learning_rate == 3e-5
    assert make_config("smoke", steps=None).steps == PROFILES["smoke"].steps  # None keeps the profile value


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"profile": "laptop"}, "unknown profile 'laptop'; accepted: smoke, cpu, paper"),
        ({"profile": "smoke", "stepz": 3}, "unknown config field 'stepz'"),
        ({"profile": "smoke", "actor.lr": 1.0}, r"unknown field\(s\) \['lr'\] of actor"),
        ({"profile": "smoke", "method": "magic"}, "method='magic'; accepted: baseline"),
        ({"profile": "smoke", "steps": "ten"}, "steps='ten'"),
        ({"profile": "smoke", "env_id": "comprl/Nope-v0"}, "unknown env id 'comprl/Nope-v0'"),
        ({"profile": "smoke", "method": "comp_rl", "group_size": 2}, r"group_size=2 with method='comp_rl'.*>= 4"),
        ({"profile": "smoke", "method": "static", "group_size": 3}, r"group_size=3 with method='static'.*>= 4"),
        ({"profile": "smoke", "rollout.temperature": -0.5}, r"temperature=-0.5.*>= 0"),
        ({"profile": "smoke", "actor.temperature": 0.7}, r"actor.temperature.*rollout.temperature"),
    ],
)
def test_bad_config_values_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_config(**kwargs)


def test_config_round_trips_through_json():
    config = make_config("cpu", steps=3)
    assert ExperimentConfig.from_dict(json.loads(config.to_json())) == config


def test_every_profile_runs_every_method():
    for profile in PROFILES:
        for method in METHODS:
            make_config(profile, method=method)
    assert make_config("smoke", method="baseline", group_size=2).group_size == 2  # no halves without experience


def test_one_temperature_for_rollouts_and_the_actors_log_probs():
    assert not hasattr(ActorConfig(), "temperature")
    assert make_config("smoke", **{"rollout.temperature": 0.0}).rollout.temperature == 0.0  # greedy is accepted


def test_configs_recorded_with_an_actor_temperature_still_load():
    recorded = json.loads(make_config("cpu").to_json())
    recorded["actor"]["temperature"] = recorded["rollout"]["temperature"]  # what runs wrote before it was one field
    assert ExperimentConfig.from_dict(recorded) == make_config("cpu")


def test_configs_recorded_before_the_generation_adapter_dtype_load_as_they_ran_and_resume_only_as_such(tmp_path):
    recorded = make_config("cpu").to_dict()
    for part in ("actor", "extractor"):
        del recorded[part]["generation_adapter_dtype"]
    config = ExperimentConfig.from_dict(recorded)  # those runs generated through peft's float32 adapters
    assert (config.actor.generation_adapter_dtype, config.extractor.generation_adapter_dtype) == ("float32", "float32")
    assert make_config("cpu").actor.generation_adapter_dtype == "model"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps(recorded))
    with pytest.raises(ValueError, match="cannot resume.*generation_adapter_dtype"):
        Run.create(tmp_path, make_config("cpu"), name="old", resume=True)
    as_it_ran = {f"{part}.generation_adapter_dtype": "float32" for part in ("actor", "extractor")}
    assert Run.create(tmp_path, make_config("cpu", **as_it_ran), name="old", resume=True).config() == config


def test_unknown_env_id_lists_accepted_ids():
    with pytest.raises(ValueError, match="Room-Ultimate-5x5"):
        make("comprl/Nope-v0")


def test_cli_rejects_unknown_notebook_profile_and_parameter(capsys):
    with pytest.raises(SystemExit, match="unknown notebook 'nope'; available: 01_single_task"):
        main(["run", "nope"])
    with pytest.raises(SystemExit, match="unknown profile 'huge'"):
        main(["run", "01_single_task", "--profile", "huge"])
    with pytest.raises(SystemExit, match=r"unknown parameter\(s\) \['stepz'\] for 01_single_task; accepted: env_id"):
        main(["run", "01_single_task", "-p", "stepz", "3"])


def test_cli_parameter_values_are_python_literals_or_strings():
    assert parse_value("[0, 1]") == [0, 1] and parse_value("None") is None
    assert parse_value("comprl/Room-Ultimate-5x5-v0") == "comprl/Room-Ultimate-5x5-v0"


def test_cli_folder_parameters_are_taken_from_the_callers_directory_not_the_notebooks(tmp_path, monkeypatch):
    executed = {}
    monkeypatch.setattr(cli, "run_notebook", lambda name, profile, params, out, resume: executed.update(params) or tmp_path)
    monkeypatch.chdir(tmp_path)
    main(["run", "01_single_task", "-p", "reuse", '["results/a", "/abs/b"]', "-p", "reference_dir", "ref", "-p", "seeds", "[0]"])
    assert executed == {"reuse": [str(tmp_path / "results" / "a"), "/abs/b"], "reference_dir": str(tmp_path / "ref"), "seeds": [0]}


def test_cli_resume_continues_the_newest_output_folder_of_that_notebook_and_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "REPO_ROOT", tmp_path)
    notebook = cli.notebook_path("01_single_task")
    with pytest.raises(SystemExit, match="no earlier run of 01_single_task with profile cpu"):
        cli.latest_output(notebook, "cpu")
    for name in ("01_single_task_cpu_20261101-000000", "01_single_task_cpu_20261122-093000", "01_single_task_smoke_20261123-000000"):
        (tmp_path / "results" / name).mkdir(parents=True)
    assert cli.latest_output(notebook, "cpu").name == "01_single_task_cpu_20261122-093000"


def test_the_command_and_the_configs_load_without_torch():
    # the papermill process of `comprl run` sits beside its kernel for the whole run: it must stay small
    code = "import sys, comprl.cli, comprl.config, comprl.reproduce; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
