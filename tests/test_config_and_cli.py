"""Profiles, overrides and the command line reject bad input with a message naming it."""

from __future__ import annotations

import json

import pytest

from comprl import make_config
from comprl.cli import main, parse_value
from comprl.config import PROFILES, ExperimentConfig
from comprl.envs import make


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
    ],
)
def test_bad_config_values_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_config(**kwargs)


def test_config_round_trips_through_json():
    config = make_config("cpu", steps=3)
    assert ExperimentConfig.from_dict(json.loads(config.to_json())) == config


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
