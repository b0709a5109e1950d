"""Profiles, overrides and the command line reject bad input with a message naming it."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys

import nbformat
import pytest
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

from comprl import make_config
from comprl.kit import cli, notebook_runner
from comprl.kit.cli import main
from comprl.kit.notebook_runner import check_parameters, declared_parameters, notebook_path, parse_value
from comprl.config import EXTRACTOR_SIZES, METHODS, PROFILES, ExperimentConfig, RolloutConfig
from comprl.envs import make
from comprl.runs import Run
from comprl.actor.trainer import ActorConfig


def test_profiles_differ_in_scale_and_model():
    assert PROFILES["smoke"].model == "tiny-random"
    assert PROFILES["cpu"].model == "smollm2-135m"
    assert PROFILES["paper"].requires_gpu and PROFILES["paper"].actor.learning_rate == 1e-6


def test_the_gpu_profile_is_the_papers_setting_for_one_gpu_with_smaller_lora_trained_models():
    gpu, paper = PROFILES["gpu"], PROFILES["paper"]
    assert gpu.requires_gpu and gpu.device == "cuda" and gpu.dtype == "bfloat16"
    # the paper's task settings: K = 8, 30 turns, the official MiniHack view and retrieval protocol, free text
    same = ("env_id", "group_size", "max_turns", "env_options", "bank")
    assert {name: getattr(gpu, name) for name in same} == {name: getattr(paper, name) for name in same}
    assert not gpu.rollout.constrained_actions and gpu.actor.lora_rank == gpu.extractor.lora_rank == 32
    assert gpu.mixture().size * gpu.group_size == 32 and gpu.steps == 56
    # Qwen3-1.7B (and 4B, notebook 03) in non-thinking mode: the empty think block its template writes for it
    assert gpu.extractor.model == EXTRACTOR_SIZES["gpu"]["Qwen3-1.7B"]
    assert gpu.extractor.response_prefix == "<think>\n\n</think>\n\n"


def test_overrides_flat_and_dotted():
    config = make_config("smoke", steps=5, **{"actor.learning_rate": 3e-5})
    assert config.steps == 5 and config.actor.learning_rate == 3e-5
    assert make_config("smoke", steps=None).steps == PROFILES["smoke"].steps  # None keeps the profile value


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"profile": "laptop"}, "unknown profile 'laptop'; accepted: smoke, cpu, gpu, paper"),
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


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"seed": "("}, r"^seed='\(' is of type str; accepted: int \(not bool or float\)$"),
        ({"seed": 1.5}, r"^seed=1.5 is of type float; accepted: int"),
        ({"seed": True}, r"^seed=True is of type bool; accepted: int"),
        ({"actor.learning_rate": "1e-4"}, r"^actor.learning_rate='1e-4' is of type str; accepted: float or int \("),
        ({"extractor.cooldown": 1.0}, r"^extractor.cooldown=1.0 is of type float; accepted: int"),
        ({"rollout.response_prefix": 1}, r"^rollout.response_prefix=1 is of type int; accepted: str$"),
        ({"rollout.stop": ["</answer>", 0]}, r"^rollout.stop=\('</answer>', 0\) is of type tuple; accepted: tuple\["),
        ({"bank.init_from": 3}, r"^bank.init_from=3 is of type int; accepted: str \| None$"),
        ({"task_batch": {"a": 2.0}}, r"^task_batch=\{'a': 2.0\} is of type dict; accepted: dict\[str, int\]$"),
        ({"extractor.invalid_reward": "-1"}, r"^extractor.invalid_reward='-1' is of type str; accepted: float \| None"),
    ],
)
def test_config_values_of_another_type_than_the_fields_are_refused_when_the_config_is_made(overrides, message):
    with pytest.raises(ValueError, match=message):
        make_config("smoke", **overrides)


def test_a_config_made_directly_names_its_field_with_the_experiment_configs_path():
    with pytest.raises(ValueError, match=r"^rollout.temperature='hot' is of type str; accepted: float or int"):
        RolloutConfig(temperature="hot")
    with pytest.raises(ValueError, match=r"^actor.lora_rank=False is of type bool; accepted: int"):
        ActorConfig(lora_rank=False)


def test_float_fields_take_ints_and_tuple_fields_take_lists():
    overrides = {"actor.learning_rate": 0, "rollout.stop": ["</answer>", "\n"], "experience.manager_cores": [0]}
    config = make_config("smoke", eval_temperature=1, **overrides)
    assert (config.eval_temperature, config.actor.learning_rate) == (1, 0)
    assert (config.rollout.stop, config.experience.manager_cores) == (("</answer>", "\n"), (0,))  # as declared


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
    assert make_config("cpu").actor.generation_adapter_dtype == "merged"
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


def test_cli_run_help_lists_every_notebook_and_its_parameters_with_types_and_defaults(capsys):
    from comprl.kit.notebook_runner import NOTEBOOKS

    with pytest.raises(SystemExit) as exited:
        main(["run", "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert "--profile" in shown
    for notebook in sorted(NOTEBOOKS.glob("0*.ipynb")):
        assert f"\n  {notebook.stem}\n" in shown
    assert "    seeds: list of int = [0]  one run per seed and method" in shown  # 01's, read from the notebook


def test_an_executed_notebook_names_repository_paths_relative_to_the_repository(tmp_path):
    import json

    from comprl.kit.notebook_runner import REPO_ROOT, repository_relative

    root = str(REPO_ROOT)
    executed = tmp_path / "01_single_task.ipynb"
    executed.write_text(json.dumps({
        "metadata": {"papermill": {"input_path": f"{root}/notebooks/01_single_task.ipynb", "cwd": root}},
        "cells": [{"source": [f'output_dir = "{root}/results/cpu/01_single_task"\n'], "outputs": [
            {"text": [f"copied from {root}/results/reference/x_seed0\n", "elsewhere: /tmp/other/run\n"]}]}],
    }))
    repository_relative(executed)
    got = json.loads(executed.read_text())
    assert got["metadata"]["papermill"] == {"input_path": "notebooks/01_single_task.ipynb", "cwd": "."}
    assert got["cells"][0]["source"] == ['output_dir = "results/cpu/01_single_task"\n']
    assert got["cells"][0]["outputs"][0]["text"] == [
        "copied from results/reference/x_seed0\n", "elsewhere: /tmp/other/run\n"  # outside the repository: kept
    ]


def test_cli_parameter_values_are_json_else_python_literals_else_strings():
    assert parse_value("[0, 1]") == [0, 1] and parse_value("None") is None
    assert parse_value("comprl/Room-Ultimate-5x5-v0") == "comprl/Room-Ultimate-5x5-v0"
    assert parse_value('{"experience.search_and_ask": true, "bank.init_from": null}') == {
        "experience.search_and_ask": True, "bank.init_from": None
    }
    assert parse_value("{'a': False}") == {"a": False} and parse_value('"4"') == "4" and parse_value("1e-5") == 1e-5


def _code_that_touches(marker):
    """Text that ends a double-quoted string early and then runs ``touch marker``."""
    return f'" + str(__import__("os").system("touch {marker}")) + "'


def test_cli_refuses_the_tuple_that_ran_code_in_the_kernel_before_any_kernel_starts(tmp_path):
    marker, out = tmp_path / "ran", tmp_path / "out"
    exploit = f"('{_code_that_touches(marker)}',)"  # papermill wrote a tuple as str(value) between double quotes
    with pytest.raises(SystemExit, match=r"parameter env_id=\(.*\) is of type tuple; accepted: None, True/False"):
        main(["run", "01_single_task", "--output-dir", str(out), "-p", "env_id", exploit])
    assert not marker.exists() and not out.exists()


def _tiny_notebook(folder):
    """A notebook with a parameters cell like the paper notebooks' and a cell that writes what it was given."""
    kernel = {"name": "python3", "language": "python", "display_name": "Python 3"}
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": kernel})
    parameters = """profile = "smoke"
output_dir = "out"
env_id = None
seeds = [0]
rate = 0.5
resume = True
jobs = 1
overrides = {}
note = None"""
    given = """import json, pathlib
given = dict(env_id=env_id, seeds=seeds, rate=rate, resume=resume, jobs=jobs, overrides=overrides, note=note)
pathlib.Path(output_dir, "given.json").write_text(json.dumps(given))"""
    notebook.cells = [
        nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}), nbformat.v4.new_code_cell(given)
    ]
    nbformat.write(notebook, folder / "tiny.ipynb")
    return folder / "tiny.ipynb"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("seeds", "(0, 1)", r"parameter seeds=\(0, 1\): \(0, 1\) is of type tuple; accepted: None, True/False, an int"),
        ("seeds", "{0, 1}", r"seeds=\{0, 1\}: \{0, 1\} is of type set;"),
        ("env_id", "b'x'", r"env_id=b'x': b'x' is of type bytes;"),
        ("seeds", "[0, 1j]", r"seeds=\[0, 1j\]: 1j is of type complex;"),
        ("seeds", "[NaN]", r"seeds=\[nan\]: nan is of type float; accepted: .*a finite float"),
        ("overrides", "{1: 2}", r"overrides=\{1: 2\}: the dict key 1 is not a str;"),
        ("resume", "yes", r"parameter resume='yes' is of type str; tiny declares resume = True: accepted: bool$"),
        ("jobs", "2.5", r"parameter jobs=2.5 is of type float; tiny declares jobs = 1: accepted: int$"),
        ("jobs", "true", r"parameter jobs=True is of type bool; tiny declares jobs = 1: accepted: int$"),
        ("rate", '"0.5"', r"parameter rate='0.5' is of type str; tiny declares rate = 0.5: accepted: float or int$"),
        ("seeds", '["0"]', r"seeds=\['0'\] is of type list; tiny declares seeds = \[0\]: accepted: list of int$"),
        ("stepz", "1", r"unknown parameter\(s\) \['stepz'\] for tiny; accepted: profile, output_dir, env_id, seeds"),
    ],
)
def test_cli_refuses_values_not_json_like_or_not_of_the_declared_type_before_the_kernel(tmp_path, name, text, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=message):
        main(["run", str(_tiny_notebook(tmp_path)), "--output-dir", str(out), "-p", name, text])
    assert not out.exists()  # refused before the output folder is made and a kernel started


def test_cli_hands_accepted_values_to_the_notebook_as_given_and_strings_stay_strings(tmp_path):
    marker, out = tmp_path / "ran", tmp_path / "out"
    hostile = _code_that_touches(marker)
    overrides = {hostile: ['\\"', "'''", '"""\n' + hostile, "é\u2028\x00"]}
    main([
        "run", str(_tiny_notebook(tmp_path)), "--output-dir", str(out), "-p", "note", hostile, "-p", "seeds", "[]",
        "-p", "rate", "1", "-p", "resume", "false", "-p", "overrides", json.dumps(overrides),
    ])
    given = json.loads((out / "given.json").read_text())
    assert given == {
        "env_id": None, "seeds": [], "rate": 1, "resume": False, "jobs": 1, "overrides": overrides, "note": hostile
    }
    assert not marker.exists()


def test_every_value_papermill_writes_into_a_paper_notebook_is_a_plain_literal(tmp_path):
    marker = tmp_path / "ran"
    notebook = notebook_path("01_single_task")
    params = {
        "reference_dir": _code_that_touches(marker), "seeds": [0, 2**70],
        "overrides": {'a"b': {"c": [None, True, 1e-300, -0.0, "\\" + _code_that_touches(marker)]}},
    }
    check_parameters(notebook, params)
    cells = parameterize_notebook(load_notebook_node(str(notebook)), params).cells  # as papermill's execution does
    [injected] = [cell for cell in cells if "injected-parameters" in cell.metadata.tags]
    assigned = {}
    for statement in ast.parse(injected.source).body:
        assert isinstance(statement, ast.Assign), ast.dump(statement)
        assigned[statement.targets[0].id] = ast.literal_eval(statement.value)  # raises unless a plain literal
    assert assigned == params
    subprocess.run([sys.executable, "-c", injected.source], check=True)  # and run, in a fresh Python
    assert not marker.exists()


def test_the_paper_notebooks_defaults_and_the_reproductions_parameters_are_accepted(tmp_path):
    from comprl.kit.reproduce import STEPS

    for step in STEPS:
        notebook = notebook_path(step.notebook)
        check_parameters(notebook, declared_parameters(notebook))
        for profile in PROFILES:
            check_parameters(notebook, step.params(profile, tmp_path))


def _make_command(target: str) -> tuple[str, dict]:
    """The notebook and the papermill parameters of the ``comprl run`` line ``make -n <target>`` prints."""
    root = notebook_path("01_single_task").parent.parent
    printed = subprocess.run(["make", "-n", target], cwd=root, capture_output=True, text=True, check=True).stdout
    [command] = [line for line in printed.replace("\\\n", " ").splitlines() if "comprl run" in line]
    words = shlex.split(command)
    assert words[words.index("run") + 2 : words.index("run") + 4] == ["--profile", "cpu"]
    params = {words[i + 1]: parse_value(words[i + 2]) for i, word in enumerate(words) if word == "-p"}
    return words[words.index("run") + 1], params


def test_make_demos_command_runs_notebook_07s_positive_control_with_accepted_parameters():
    notebook, params = _make_command("demo")
    assert notebook == "07_mechanism"
    check_parameters(notebook_path(notebook), params)
    assert list(params["arms"]) == ["scripted"] and params["stage_a_banks"] == ["correct"]
    from comprl.kit.plans import mechanism

    [config] = mechanism("cpu", params["arms"], steps=params["steps"], seeds=params["seeds"],
                         overrides=params["overrides"]).configs.values()
    assert config.extractor.model == "scripted" and config.env_id == "comprl/Vault-v0"
    assert config.eval_episodes == params["stage_a_episodes"] >= 128  # n enough for an interval beyond the noise


def test_make_demo_rooms_command_gives_notebook_01_accepted_parameters_and_a_cpu_config_with_halves_of_4():
    notebook, params = _make_command("demo-room")
    assert notebook == "01_single_task"
    check_parameters(notebook_path(notebook), params)
    config = make_config("cpu", **params["overrides"])
    assert config.group_size == 8 and config.extractor.distill_per_step <= config.batch_instances * 8
    assert params["steps"] < config.steps and config.eval_episodes < PROFILES["cpu"].eval_episodes


def test_cli_folder_parameters_are_taken_from_the_callers_directory_not_the_notebooks(tmp_path, monkeypatch):
    executed = {}
    monkeypatch.setattr(
        cli, "run_notebook", lambda name, profile, params, out, resume: executed.update(params) or tmp_path
    )
    monkeypatch.chdir(tmp_path)
    main(
        [
            "run",
            "01_single_task",
            "-p",
            "reuse",
            '["results/a", "/abs/b"]',
            "-p",
            "reference_dir",
            "ref",
            "-p",
            "seeds",
            "[0]",
        ]
    )
    assert executed == {
        "reuse": [str(tmp_path / "results" / "a"), "/abs/b"],
        "reference_dir": str(tmp_path / "ref"),
        "seeds": [0],
    }


def _checkpointed(run_folder):
    """A run folder holding a checkpoint after step 2, written by the training loop's writer."""
    from comprl import checkpoint

    writer = checkpoint.Writer(run_folder)
    writer.save(2, None, None)
    writer.wait()


def test_cli_resume_continues_the_newest_folder_of_that_notebook_and_profile_with_a_checkpoint(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(notebook_runner, "REPO_ROOT", tmp_path)
    notebook = notebook_runner.notebook_path("01_single_task")
    results = tmp_path / "results"
    for name in (
        "cpu-20261101-000000/01_single_task/comp_rl_seed0",
        "cpu-20261122-093000/01_single_task/comp_rl_seed1",
        "cpu-20261123-000000/02_multitask/comp_rl_seed0",
        "smoke-20261124-000000/01_single_task/comp_rl_seed0",
        "cpu/01_single_task/comp_rl_seed0",  # the reproduction's set: --resume continues `comprl run`'s own
    ):
        _checkpointed(results / name)
    (results / "cpu-20261125-000000/01_single_task").mkdir(parents=True)  # a command refused before training
    (results / "cpu-20261126-000000/01_single_task/comp_rl_seed0").mkdir(parents=True)  # no checkpoint yet
    found = notebook_runner.latest_output(notebook, "cpu")
    assert found == results / "cpu-20261122-093000" / "01_single_task"
    assert capsys.readouterr().err == (
        f"comprl: --resume continues {found} (runs with a checkpoint: comp_rl_seed1); newer without a checkpoint: "
        "cpu-20261126-000000\n"
    )
    killed_between_renames = results / "cpu-20261125-000000/01_single_task/runs/comp_rl_seed0"
    _checkpointed(killed_between_renames)
    (killed_between_renames / "checkpoint").rename(killed_between_renames / "checkpoint.old")
    assert notebook_runner.latest_output(notebook, "cpu") == results / "cpu-20261125-000000" / "01_single_task"
    (results / "gpu-20261127-000000/01_single_task").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no run of 01_single_task with profile gpu .* has a checkpoint to continue"):
        notebook_runner.latest_output(notebook, "gpu")
    made = notebook_runner.new_output(notebook, "cpu")
    assert made.parent.parent == tmp_path / "results" and made.parent.name.startswith("cpu-2")
    assert made.name == notebook.stem


@pytest.fixture
def executed(monkeypatch):
    """The parameters of every notebook papermill was asked to execute; none is (no kernel starts)."""
    import papermill

    calls = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *args, **kwargs: calls.append(kwargs["parameters"]))
    return calls


def test_resume_after_a_refused_command_continues_the_interrupted_run_not_an_empty_folder(
    tmp_path, monkeypatch, executed
):
    monkeypatch.setattr(notebook_runner, "REPO_ROOT", tmp_path)
    interrupted = tmp_path / "results" / "cpu-20261101-000000" / "01_single_task"
    _checkpointed(interrupted / "comp_rl_seed0")
    with pytest.raises(SystemExit, match="-p steps: steps='thirty' is of type str; accepted: int"):
        main(["run", "01_single_task", "--profile", "cpu", "-p", "steps", "thirty"])
    assert sorted((tmp_path / "results").iterdir()) == [interrupted.parent]  # the refusal made no folder
    main(["run", "01_single_task", "--profile", "cpu", "-p", "steps", "30", "--resume"])
    assert [call["output_dir"] for call in executed] == [str(interrupted)]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("steps", "thirty", r"comprl: -p steps: steps='thirty' is of type str; accepted: int \(not bool or float\)$"),
        ("steps", "[30]", r"comprl: -p steps: steps=\[30\] is of type list; accepted: int"),
        ("env_id", "comprl/Nope-v0", r"comprl: -p env_id: unknown env id 'comprl/Nope-v0'; accepted: comprl/Room"),
    ],
)
def test_a_parameter_named_after_a_config_field_is_checked_as_that_field_before_any_folder_or_kernel(
    tmp_path, monkeypatch, executed, name, text, message
):
    monkeypatch.setattr(notebook_runner, "REPO_ROOT", tmp_path)
    with pytest.raises(SystemExit, match=message):
        main(["run", "01_single_task", "--profile", "cpu", "-p", name, text])
    assert executed == [] and not (tmp_path / "results").exists()


@pytest.mark.parametrize(("name", "option"), [("profile", "--profile"), ("output_dir", "--output-dir")])
def test_cli_refuses_the_parameters_the_command_sets_itself_and_names_the_option(tmp_path, executed, name, option):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    with pytest.raises(SystemExit, match=f"^comprl: -p {name} is not accepted: the command sets it from {option}; "
                                         f"give {option}$"):
        main(["run", "01_single_task", "--output-dir", str(out), "-p", name, str(elsewhere)])
    assert executed == [] and not out.exists() and not elsewhere.exists()


def test_a_deeply_nested_value_is_refused_in_one_short_line_before_the_folder_or_the_kernel(tmp_path, executed):
    out = tmp_path / "out"
    deep = "[" * 400 + "]" * 400
    with pytest.raises(SystemExit) as refused:
        main(["run", "01_single_task", "--output-dir", str(out), "-p", "overrides", f'{{"a": {deep}}}'])
    assert re.fullmatch(
        r"comprl: parameter overrides=\{'a': \[\[\[.*\]\]\]\}: lists and dicts nest deeper than 32 levels; "
        r"accepted: None, .*", str(refused.value.code)
    ) and len(str(refused.value.code)) < 300
    with pytest.raises(SystemExit, match="^comprl: a -p value nests deeper than Python reads; accepted: at most 32"):
        main(["run", "01_single_task", "--output-dir", str(out), "-p", "overrides", "[" * 10**5 + "]" * 10**5])
    assert executed == [] and not out.exists()


def test_ctrl_c_during_a_notebook_prints_one_line_with_the_command_that_resumes_it(tmp_path, monkeypatch, capsys):
    import papermill

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    monkeypatch.setattr(notebook_runner, "REPO_ROOT", tmp_path)
    monkeypatch.chdir(tmp_path)
    given = ["01_single_task", "--profile", "cpu", "-p", "seeds", "[0, 1]", "-p", "env_id", "comprl/MazeWalk-9x9-v0"]
    try:
        status = main(["run", *given, "--tracker", "none"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the command as a traceback")
    assert status == 130  # 128 + SIGINT, as a shell reports an interrupted command
    [line] = capsys.readouterr().err.splitlines()
    shown = "comprl: interrupted; to continue where it stopped: "
    assert line.startswith(shown)
    [out] = (tmp_path / "results").glob("cpu-*/01_single_task")
    again = shlex.split(line.removeprefix(shown))
    folder = str(out.relative_to(tmp_path))
    assert again == ["comprl", "run", *given, "--tracker", "none", "--output-dir", folder, "--resume"]
    calls = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *args, **kwargs: calls.append(kwargs["parameters"]))
    main(again[1:])
    assert calls == [{
        "profile": "cpu", "output_dir": str(out), "seeds": [0, 1], "env_id": "comprl/MazeWalk-9x9-v0",
        "overrides": {"tracker": "none"},
    }]


def test_a_folder_executed_with_another_profile_is_refused_before_its_executed_copy_is_replaced(tmp_path, executed):
    """``--profile smoke --output-dir results/cpu/01_single_task`` overwrote the reproduction's committed executed
    notebook with a copy that then failed on the first run of the cpu config it found there."""
    out = tmp_path / "cpu" / "01_single_task"
    out.mkdir(parents=True)
    copy = out / "01_single_task.ipynb"
    copy.write_text(json.dumps({"metadata": {"papermill": {"parameters": {"profile": "cpu", "seeds": [0, 1]}}}}))
    before = copy.read_bytes()
    with pytest.raises(SystemExit, match=f"^comprl: {out} holds 01_single_task executed with profile cpu: continue it "
                                         "with --profile cpu, or give another --output-dir"):
        main(["run", "01_single_task", "--profile", "smoke", "--output-dir", str(out)])
    assert copy.read_bytes() == before and executed == []
    main(["run", "01_single_task", "--profile", "cpu", "--output-dir", str(out)])  # continuing it is accepted
    assert [call["profile"] for call in executed] == ["cpu"]


def test_a_file_that_is_not_a_notebook_is_refused_in_one_line_not_read_by_papermill(tmp_path):
    (tmp_path / "notes.txt").write_text("not a notebook")
    for name in ("../README.md", str(tmp_path / "notes.txt")):
        with pytest.raises(SystemExit, match=f"^comprl: unknown notebook {re.escape(repr(name))}; available: 01_"):
            main(["run", name, "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_import_comprl_without_a_dependency_says_how_to_install_them():
    code = "import sys; sys.modules['gymnasium'] = None; import comprl"  # None there: the import fails
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: comprl needs 'gymnasium', which this Python") and all(
        hint in last for hint in ("make setup", "pip install -e .", "source .venv/bin/activate")
    ), done.stderr


def test_the_command_and_the_configs_load_without_torch():
    # the papermill process of `comprl run` sits beside its kernel for the whole run: it must stay small
    code = (
        "import sys, comprl.kit.cli, comprl.config, comprl.kit.reproduce; "
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_cli_tracker_reaches_the_executed_notebooks_overrides_beside_the_given_ones(tmp_path):
    out = tmp_path / "out"
    main(["run", str(_tiny_notebook(tmp_path)), "--output-dir", str(out), "--tracker", "none",
          "-p", "overrides", '{"steps": 2}'])
    assert json.loads((out / "given.json").read_text())["overrides"] == {"steps": 2, "tracker": "none"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tracker", "neptune"],
         "--tracker 'neptune' is unknown; accepted: none, tensorboard, wandb, mlflow, trackio"),
        (["--tracker", "none", "-p", "overrides", '{"tracker": "wandb"}'],
         "--tracker 'none' and overrides' tracker 'wandb' differ; give one of them"),
    ],
)
def test_cli_run_refuses_an_unknown_or_contradicted_tracker_before_any_kernel_starts(tmp_path, extra, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=message):
        main(["run", str(_tiny_notebook(tmp_path)), "--output-dir", str(out), *extra])
    assert not out.exists()


def test_reproduce_refuses_an_unknown_tracker_before_any_notebook(tmp_path):
    with pytest.raises(SystemExit, match="--tracker 'neptune' is unknown; accepted: none, tensorboard, wandb"):
        main(["reproduce", "--profile", "smoke", "--results", str(tmp_path / "results"), "--tracker", "neptune"])
    assert not (tmp_path / "results").exists()


def test_reproduce_tracker_goes_into_every_notebooks_overrides_and_the_configs_take_it(tmp_path, monkeypatch):
    executed = {}
    monkeypatch.setattr(
        "comprl.kit.notebook_runner.run_notebook", lambda name, profile, params, out: executed.setdefault(name, params)
    )
    monkeypatch.setattr("comprl.kit.reproduce.write_report", lambda profile, results: results / "REPORT.md")
    main(["reproduce", "--profile", "smoke", "--results", str(tmp_path), "--tracker", "none"])
    from comprl.kit.reproduce import STEPS

    assert set(executed) == {step.notebook for step in STEPS}
    for name, params in executed.items():
        assert params["overrides"] == {"tracker": "none"}, name
        check_parameters(notebook_path(name), params)  # what run_notebook checks before the kernel starts
    assert make_config("smoke", **executed["01_single_task"]["overrides"]).tracker == "none"
