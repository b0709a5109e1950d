"""SWE-lite: task data, the sandbox's containment, the tools, SWE-bench grading, and whole episodes."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest
from conftest import needs_sandbox

from comprl.envs import make
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.envs.swe.sandbox import Sandbox, SandboxConfig
from comprl.envs.swe.seccomp import DENIED, UnsupportedMachine, filter_program
from comprl.envs.swe.tasks import (
    DATA_DIR,
    SubmissionRefused,
    TaskDataError,
    diff_trees,
    grade_statuses,
    load_tasks,
    materialize,
    status_log,
)
from comprl.envs.swe.tools import Editor, ToolCallError, parse_tool_call


TASKS = load_tasks()


def call(name: str, **arguments) -> str:
    return "<answer>" + json.dumps({"name": name, "arguments": arguments}) + "</answer>"


def gold_edits(task) -> list[str]:
    """Replies that undo the task's bug with the editor (the gold patch, played through the tools)."""
    return [
        call(
            "str_replace_editor",
            command="str_replace",
            path=f"/repo/{edit.path}",
            old_str=edit.replace,
            new_str=edit.find,
        )
        for edit in task.bug
    ]


@pytest.fixture()
def env():
    environment = make("comprl/SWE-Lite-v0")
    yield environment
    environment.close()


# ---- task data --------------------------------------------------------------------------------------------


def test_shipped_tasks_cover_several_repositories_and_both_splits():
    repos = {task.repo for task in TASKS}
    assert len(TASKS) >= 30 and len(repos) >= 3
    assert {task.split for task in TASKS} == {"train", "test"}
    for task in TASKS:
        assert task.problem_statement.strip() and task.fail_to_pass and task.pass_to_pass
        assert set(task.fail_to_pass).isdisjoint(task.pass_to_pass)
        for hidden in task.hidden_files:
            assert not (task.repo_dir / hidden).exists(), f"{task.instance_id}: hidden {hidden} is visible"


def test_malformed_task_file_names_the_file(tmp_path):
    (tmp_path / "repos" / "r").mkdir(parents=True)
    folder = tmp_path / "tasks" / "r-001"
    folder.mkdir(parents=True)
    (folder / "task.json").write_text('{"instance_id": "r-001", "repo": "r"}')
    with pytest.raises(TaskDataError, match="r-001/task.json.*KeyError"):
        load_tasks(tmp_path)


def test_buggy_tree_differs_from_fixed_exactly_by_the_bug(tmp_path):
    task = TASKS[0]
    buggy, fixed = materialize(task, tmp_path / "buggy"), materialize(task, tmp_path / "fixed", fixed=True)
    for edit in task.bug:
        assert edit.replace in (buggy / edit.path).read_text()
        assert edit.find in (fixed / edit.path).read_text()
    assert not any((buggy / hidden).exists() for hidden in task.hidden_files)


# ---- grading ----------------------------------------------------------------------------------------------

STATUSES = {
    "tests/test_a.py::test_kept": "PASSED",
    "tests/test_issue.py::test_fixed": "PASSED",
    "tests/test_issue.py::test_other": "FAILED",
    "tests/test_a.py::test_skipped": "SKIPPED",
}


def _task_with(fail_to_pass, pass_to_pass):
    return dataclasses.replace(TASKS[0], fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass)


def test_status_log_reads_like_pytest_summary_lines():
    assert status_log(STATUSES).splitlines()[:2] == [
        "PASSED tests/test_a.py::test_kept",
        "PASSED tests/test_issue.py::test_fixed",
    ]


def test_resolution_needs_every_fail_to_pass_and_pass_to_pass_test():
    def grade(fail_to_pass, pass_to_pass):
        return grade_statuses(STATUSES, 1, _task_with(fail_to_pass, pass_to_pass))

    resolved = grade(
        ("tests/test_issue.py::test_fixed",), ("tests/test_a.py::test_kept", "tests/test_a.py::test_skipped")
    )
    assert resolved.resolved and resolved.log_trusted
    partial = grade(("tests/test_issue.py::test_fixed", "tests/test_issue.py::test_other"), ())
    assert not partial.resolved and partial.fail_to_pass_failed == ("tests/test_issue.py::test_other",)
    missing = grade(("tests/test_issue.py::test_fixed",), ("tests/test_a.py::test_gone",))
    assert not missing.resolved and missing.pass_to_pass_failed == ("tests/test_a.py::test_gone",)
    skipped = grade(("tests/test_a.py::test_skipped",), ())
    assert not skipped.resolved and skipped.fail_to_pass_failed == ("tests/test_a.py::test_skipped",)


def test_outcomes_contradicting_the_exit_code_are_not_trusted():
    only_passes = {"tests/test_issue.py::test_fixed": "PASSED"}
    report = grade_statuses(only_passes, 1, _task_with(("tests/test_issue.py::test_fixed",), ()))
    assert not report.log_trusted and not report.resolved
    assert not grade_statuses(only_passes, None, _task_with(("tests/test_issue.py::test_fixed",), ())).resolved
    assert grade_statuses(only_passes, 0, _task_with(("tests/test_issue.py::test_fixed",), ())).resolved


def test_builtin_grading_agrees_with_swebench_when_installed():
    pytest.importorskip("swebench", reason="the swe extra (swebench) is not installed")
    from comprl.envs.swe.tasks import _builtin_report, _swebench_report

    cases = [
        (("tests/test_issue.py::test_fixed",), ("tests/test_a.py::test_kept",)),
        (("tests/test_issue.py::test_other",), ("tests/test_a.py::test_kept",)),
        (("tests/test_issue.py::test_fixed", "tests/test_issue.py::test_other"), ()),
        (("tests/test_issue.py::test_fixed",), ("tests/test_a.py::test_missing",)),
    ]
    for fail_to_pass, pass_to_pass in cases:
        task = _task_with(fail_to_pass, pass_to_pass)
        assert _builtin_report(STATUSES, task) == _swebench_report(status_log(STATUSES), task)


# ---- tool calls and the editor ----------------------------------------------------------------------------


def test_tool_calls_are_validated_with_precise_messages():
    assert parse_tool_call('{"name": "bash", "arguments": {"command": "ls"}}').arguments == {"command": "ls"}
    assert parse_tool_call('```json\n{"name": "submit"}\n```').name == "submit"
    bad = {
        "": "empty",
        "ls -la": "not valid JSON",
        "[1, 2]": "JSON object",
        '{"name": "rm"}': '"name" must be one of',
        '{"name": "bash", "arguments": {}}': "non-empty",
        '{"name": "bash", "arguments": {"command": 3}}': "must be a string",
        '{"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "a"}}': "needs old_str",
        '{"name": "str_replace_editor", "arguments": {"command": "delete", "path": "a"}}': "must be one of",
        (
            '{"name": "str_replace_editor", "arguments": {"command": "view", "path": "a", "view_range": [1]}}'
        ): "two integers",
        (
            '{"name": "str_replace_editor", "arguments": '
            '{"command": "insert", "path": "a", "insert_line": "2", "new_str": ""}}'
        ): "integer",
        '{"name": "submit", "arguments": {"now": true}}': "no arguments",
        '{"name": "bash", "args": {}}': "unexpected keys",
    }
    for text, message in bad.items():
        with pytest.raises(ToolCallError, match=message):
            parse_tool_call(text)


def test_editor_views_edits_and_inserts(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("a = 1\nb = 2\na = 1\n")
    editor = Editor(tmp_path)
    assert "     2\tb = 2" in editor.run({"command": "view", "path": "/repo/pkg/m.py", "view_range": [2, 2]})
    assert "/repo/pkg/m.py" in editor.run({"command": "view", "path": "/repo"})
    assert "occurs 2 times" in editor.run({"command": "str_replace", "path": "pkg/m.py", "old_str": "a = 1"})
    assert "not found verbatim" in editor.run({"command": "str_replace", "path": "pkg/m.py", "old_str": "zzz"})
    editor.run({"command": "str_replace", "path": "/repo/pkg/m.py", "old_str": "b = 2", "new_str": "b = 3"})
    editor.run({"command": "insert", "path": "/repo/pkg/m.py", "insert_line": 0, "new_str": "import os"})
    assert (tmp_path / "pkg" / "m.py").read_text() == "import os\na = 1\nb = 3\na = 1\n"
    assert "already exists" in editor.run({"command": "create", "path": "/repo/pkg/m.py", "file_text": ""})
    assert "Created" in editor.run({"command": "create", "path": "/repo/new/x.py", "file_text": "x = 1\n"})
    assert (tmp_path / "new" / "x.py").read_text() == "x = 1\n"
    assert "not within" in editor.run({"command": "insert", "path": "/repo/pkg/m.py", "insert_line": 99, "new_str": ""})


def test_editor_refuses_paths_outside_the_workspace(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("hidden")
    (workspace / "link").symlink_to(tmp_path)
    editor = Editor(workspace)
    for path in ("../secret.txt", "/repo/../secret.txt", "/etc/passwd", "/repo/link/secret.txt", "link/secret.txt"):
        output = editor.run({"command": "view", "path": path})
        assert output.startswith("Error:") and "outside the repository" in output, path
    output = editor.run({"command": "create", "path": "../planted.py", "file_text": "x"})
    assert output.startswith("Error:") and not (tmp_path / "planted.py").exists()


# ---- the sandbox ------------------------------------------------------------------------------------------


@needs_sandbox
def test_sandbox_confines_writes_network_and_reads(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    sandbox = Sandbox(workspace, SandboxConfig(timeout_s=20))
    escape = sandbox.run(
        f"echo x > ../escape.txt; echo x > {tmp_path}/escape2.txt; rm -rf {canary}; touch /usr/x; echo done"
    )
    assert "Read-only file system" in escape.output and "done" in escape.output
    assert canary.read_text() == "still here" and not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "escape2.txt").exists()
    network = sandbox.run("python -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"")
    assert network.exit_code != 0 and "unreachable" in network.output.lower()
    hidden = sandbox.run(f"ls {DATA_DIR}/tasks || echo missing")
    assert hidden.output.strip().endswith("missing")
    assert sandbox.run("echo inside > made.txt").exit_code == 0 and (workspace / "made.txt").read_text() == "inside\n"


@needs_sandbox
def test_sandbox_kills_long_commands_and_caps_output(tmp_path):
    sandbox = Sandbox(tmp_path, SandboxConfig(timeout_s=1.5, output_chars=1000))
    slow = sandbox.run("sleep 30")
    assert slow.timed_out and slow.exit_code is None and slow.seconds < 10
    flood = sandbox.run("yes")
    assert flood.timed_out and flood.truncated and len(flood.output) < 1200 and "omitted" in flood.output
    background = sandbox.run("sleep 30 & echo started")
    assert not background.timed_out and background.output.strip() == "started"


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seccomp_filter_checks_every_denied_call_on_each_supported_machine(machine):
    program = filter_program(machine)
    instructions = [struct.unpack("=HBBI", program[start : start + 8]) for start in range(0, len(program), 8)]
    equality_checks = [number for code, _, _, number in instructions if code == 0x15]  # BPF_JMP|BPF_JEQ|BPF_K
    assert len(equality_checks) == len(set(equality_checks)) == len(DENIED) + 1  # the architecture, then each call
    with pytest.raises(UnsupportedMachine, match="supported: x86_64, aarch64"):
        filter_program("riscv64")


def test_the_diff_of_a_tree_is_bounded_before_its_files_are_read(tmp_path):
    """A file that gained more bytes than the patch may hold is refused from its size alone (its diff would hold
    them all), and so are trees with too many entries or too many bytes."""
    task = TASKS[0]
    before, after = materialize(task, tmp_path / "before"), materialize(task, tmp_path / "after")
    config = SandboxConfig(patch_kb=4, workspace_files=40, submission_mb=1)
    (after / "notes.txt").write_text("fixed\n")
    assert diff_trees(before, after, config) == "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+fixed\n"
    with (after / "sparse").open("wb") as sparse:
        sparse.truncate(5 * 2**20)
    with pytest.raises(SubmissionRefused, match="submission_mb"):
        diff_trees(before, after, config)
    (after / "sparse").write_bytes(b"\n" * 5000)
    with pytest.raises(SubmissionRefused, match="patch_kb"):
        diff_trees(before, after, config)
    (after / "sparse").unlink()
    for index in range(40):
        (after / f"empty{index}").touch()
    with pytest.raises(SubmissionRefused, match="workspace_files"):
        diff_trees(before, after, config)


# ---- episodes ---------------------------------------------------------------------------------------------


@needs_sandbox
def test_same_seed_same_task_fresh_workspace(env):
    first, info = env.reset(seed=7)
    workspace = env.unwrapped.workspace
    env.step(call("bash", command="echo scribble >> README.md"))
    again, again_info = env.reset(seed=7)
    assert first == again and info["instance_id"] == again_info["instance_id"]
    assert env.unwrapped.workspace != workspace and not workspace.exists()
    assert "scribble" not in (env.unwrapped.workspace / "README.md").read_text()
    _, test_info = env.reset(seed=EVAL_SEED_OFFSET + 1)
    test_ids = {task.instance_id for task in TASKS if task.split == "test"}
    assert test_info["instance_id"] in test_ids and info["instance_id"] not in test_ids


@needs_sandbox
def test_invalid_and_adversarial_replies_are_answered(env, tmp_path):
    env.reset(seed=0)
    for reply in ("", "x" * 10_000, "<answer>rm -rf /</answer>", '<answer>{"name": "bash"', call("python", code="1")):
        observation, reward, terminated, truncated, info = env.step(reply)
        assert info["invalid_action"] and not terminated and reward == 0.0
        assert observation.startswith("Invalid tool call:")
    assert env.unwrapped._invalid_actions == 5
    canary = tmp_path / "canary"
    canary.write_text("x")
    hostile = (
        f"rm -rf {tmp_path} / 2>/dev/null; $(echo cat) /etc/shadow | tee /repo/out; `reboot`; echo $((6*7)) && exit 3"
    )
    observation, _, _, _, info = env.step(call("bash", command=hostile))
    assert not info["invalid_action"] and "42" in observation and "[exit code 3]" in observation
    assert canary.exists() and DATA_DIR.is_dir()


@needs_sandbox
@pytest.mark.parametrize("task", TASKS, ids=[task.instance_id for task in TASKS])
def test_gold_patch_through_the_tools_resolves_and_the_bug_does_not(task):
    """Every task is well-posed: submitting the buggy tree fails its FAIL_TO_PASS tests but keeps every
    PASS_TO_PASS test, and undoing the bug with the editor resolves it."""
    environment = make("comprl/SWE-Lite-v0")
    try:
        environment.reset(options={"instance_id": task.instance_id})
        _, reward, terminated, _, info = environment.step(call("submit"))
        grading = info["grading"]
        assert terminated and reward == 0.0 and not info["success"] and grading["log_trusted"]
        assert grading["FAIL_TO_PASS"]["success"] == [] and grading["PASS_TO_PASS"]["failure"] == []
        environment.reset(options={"instance_id": task.instance_id})
        for reply in gold_edits(task):
            observation, *_ = environment.step(reply)
            assert observation.startswith("Edited"), observation
        _, reward, terminated, _, info = environment.step(call("submit"))
        assert terminated and reward == 1.0 and info["success"] and info["grading"]["resolved"]
        assert all(f"--- a/{edit.path}" in info["patch"] for edit in task.bug)
    finally:
        environment.close()


@needs_sandbox
def test_editing_tests_or_pytest_setup_does_not_fake_a_resolution(env):
    task = TASKS[0]
    env.reset(options={"instance_id": task.instance_id})
    for path in task.hidden_files:
        env.step(
            call("str_replace_editor", command="create", path=f"/repo/{path}", file_text="def test_x():\n    pass\n")
        )
    env.step(call("bash", command="printf 'import pytest\\ncollect_ignore_glob = [\"*\"]\\n' > conftest.py"))
    env.step(call("bash", command="printf 'raise SystemExit(0)\\n' > pytest.py; rm -rf tests"))
    _, reward, _, _, info = env.step(call("submit"))
    assert reward == 0.0 and not info["success"] and info["grading"]["FAIL_TO_PASS"]["success"] == []


@needs_sandbox
def test_an_episode_the_trainer_cuts_short_is_graded_as_it_stands(env):
    task = TASKS[1]
    env.reset(options={"instance_id": task.instance_id})
    for reply in gold_edits(task):
        env.step(reply)
    observation, reward, terminated, truncated, info = env.unwrapped.truncate("The context is full.")
    assert truncated and not terminated and reward == 1.0 and info["success"] and "graded as they stand" in observation


@needs_sandbox
def test_episode_out_of_turns_is_graded_as_it_stands():
    task = TASKS[1]
    environment = make("comprl/SWE-Lite-v0", max_turns=len(task.bug) + 1)
    try:
        environment.reset(options={"instance_id": task.instance_id})
        for reply in gold_edits(task):
            environment.step(reply)
        observation, reward, terminated, truncated, info = environment.step(call("bash", command="true"))
        assert truncated and not terminated and reward == 1.0 and info["success"]
        assert "graded as they stand" in observation
    finally:
        environment.close()


def test_docker_adapter_names_what_it_needs(tmp_path):
    from comprl.envs.swe.swebench_docker import SweBenchDockerEnv

    instances = tmp_path / "instances.jsonl"
    instances.write_text("")
    try:
        import docker  # noqa: F401
        import swebench  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"comprl\[swe\]"):
            SweBenchDockerEnv(instances)
    else:
        pytest.skip("docker and swebench are installed: the refusal path cannot be shown here")


@needs_sandbox
def test_model_plays_swe_lite_through_the_rollout_code(tiny_engine):
    from comprl.actor.rollout import RolloutConfig, run_episodes

    envs = [make("comprl/SWE-Lite-v0", max_turns=2) for _ in range(2)]
    config = RolloutConfig(max_new_tokens=16, response_prefix="<answer>")
    trajectories = run_episodes(tiny_engine, envs, [3, EVAL_SEED_OFFSET], config)
    for trajectory, environment in zip(trajectories, envs):
        assert trajectory.turns == 2 and trajectory.truncated and trajectory.reward == 0.0
        assert trajectory.invalid_actions == 2 and trajectory.messages[1]["content"].startswith("Issue to resolve:")
        assert environment.unwrapped.report is not None and not environment.unwrapped.report.resolved
    for environment in envs:
        environment.close()
