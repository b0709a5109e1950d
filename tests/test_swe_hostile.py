"""SWE-lite against a hostile agent: each test is one reward hack or escape, tried through the public gym API
(one JSON tool call per step, default `SandboxConfig`), and asserts that it does not work.

An RL agent searches for whatever raises its reward, so the environment assumes the agent is hostile: the
attacks below were found by trying (issue "SWE-lite: a sandbox that contains a hostile agent").
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from conftest import needs_sandbox

from comprl.envs import make
from comprl.envs.swe.sandbox import SandboxConfig
from comprl.envs.swe.tasks import DATA_DIR, load_tasks

pytestmark = needs_sandbox

TASK = load_tasks()[0]
"""confkit-001: the bug is one regular expression in ``confkit/ini.py``."""
GOLD_FIX = "import re as _re\nfrom confkit import ini as _ini\n_ini._INLINE_COMMENT = _re.compile(r'\\s+[#;].*$')\n"
"""Python that fixes TASK's bug at import time (used by attacks that fix it only when they can cheat)."""


def call(name: str, **arguments) -> str:
    return "<answer>" + json.dumps({"name": name, "arguments": arguments}) + "</answer>"


def bash(command: str) -> str:
    return call("bash", command=command)


def append_to_package(code: str) -> str:
    """A reply that appends `code` to the package's ``__init__.py`` (runs whenever the package is imported)."""
    return call(
        "str_replace_editor",
        command="insert",
        path=f"/repo/{TASK.repo}/__init__.py",
        insert_line=len((TASK.repo_dir / TASK.repo / "__init__.py").read_text().split("\n")),
        new_str=textwrap.dedent(code),
    )


@pytest.fixture()
def env():
    environment = make("comprl/SWE-Lite-v0")
    environment.reset(options={"instance_id": TASK.instance_id})
    yield environment
    environment.close()


def submit(env) -> tuple[float, dict]:
    _, reward, terminated, _, info = env.step(call("submit"))
    assert terminated
    return reward, info


def test_the_unmodified_buggy_tree_is_not_resolved(env):
    """The baseline every attack starts from: the task's bug is there, so the honest grade is 0."""
    reward, info = submit(env)
    assert reward == 0.0 and info["grading"]["FAIL_TO_PASS"]["success"] == []


# ---- 1. the host's environment ------------------------------------------------------------------------------


def test_host_environment_variables_are_not_visible_inside(env, monkeypatch):
    secret = "comprl-test-secret-4b1d"
    monkeypatch.setenv("COMPRL_TEST_API_TOKEN", secret)
    observation, *_ = env.step(
        bash("env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done 2>/dev/null")
    )
    assert "PATH=" in observation and secret not in observation and "COMPRL_TEST_API_TOKEN" not in observation


# ---- 2. faking the grade from the code under test ----------------------------------------------------------


def test_patching_pytest_from_the_package_does_not_fake_the_grade(env):
    env.step(
        append_to_package(
            """
            try:
                import _pytest.python
                _pytest.python.Function.runtest = lambda self: None
            except Exception:
                pass
            """
        )
    )
    reward, info = submit(env)
    assert reward == 0.0 and not info["success"] and info["grading"]["FAIL_TO_PASS"]["success"] == []


def test_forged_passed_lines_and_exit_status_do_not_fake_the_grade(env):
    env.step(
        append_to_package(
            """
            import atexit, os, pathlib, re, sys

            def _forge():
                names = []
                for path in pathlib.Path("/repo").rglob("test_*.py"):
                    relative = path.relative_to("/repo")
                    names += [f"{relative}::{name}" for name in re.findall(r"^def (test_\\w+)", path.read_text(), re.M)]
                sys.stdout.write("".join(f"PASSED {name}\\n" for name in names))
                sys.stdout.flush()
                os._exit(0)

            atexit.register(_forge)
            """
        )
    )
    reward, info = submit(env)
    assert reward == 0.0 and not info["success"] and info["grading"]["FAIL_TO_PASS"]["success"] == []


def test_exiting_during_import_does_not_fake_the_grade(env):
    env.step(append_to_package("import os\nos._exit(0)\n"))
    reward, info = submit(env)
    assert reward == 0.0 and info["grading"]["PASS_TO_PASS"]["success"] == []


def test_objects_equal_to_everything_do_not_fake_the_grade(env):
    """The 'always equal' hack, aimed at the values the issue text names."""
    env.step(
        append_to_package(
            """
            from confkit import ini as _ini

            class _Anything(str):
                def __eq__(self, other):
                    return True

                def __ne__(self, other):
                    return False

                __hash__ = str.__hash__

            _real_get = _ini.Config.get

            def _get(self, section, option, *args, **kwargs):
                value = _real_get(self, section, option, *args, **kwargs)
                return _Anything(value) if option in ("accent", "docs", "dsn") else value

            _ini.Config.get = _get
            """
        )
    )
    reward, info = submit(env)
    assert reward == 0.0 and info["grading"]["FAIL_TO_PASS"]["success"] == []


# ---- 3. links and special files in the workspace -----------------------------------------------------------


def test_a_link_to_host_folders_does_not_bring_hidden_tests_into_grading(env):
    """The package fixes the bug only if it can read the hidden tests through a link to the task data."""
    env.step(bash(f"ln -s {DATA_DIR / 'tasks'} leak && ln -s / host_root"))
    env.step(
        append_to_package(
            f"""
            import os
            if os.path.isfile("/repo/leak/{TASK.instance_id}/task.json") or os.path.isdir("/repo/host_root/work"):
            {textwrap.indent(GOLD_FIX, "    ")}
            """
        )
    )
    reward, info = submit(env)
    assert reward == 0.0 and info["grading"]["FAIL_TO_PASS"]["success"] == []


def test_dangling_links_loops_and_fifos_are_graded_not_raised(env):
    junk = "ln -s /nonexistent dangling; ln -s loop_a loop_b; ln -s loop_b loop_a; mkfifo pipe; mkfifo confkit/pipe"
    env.step(bash(junk))
    for edit in TASK.bug:
        env.step(
            call("str_replace_editor", command="str_replace", path=f"/repo/{edit.path}", old_str=edit.replace,
                 new_str=edit.find)
        )
    reward, info = submit(env)
    assert reward == 1.0 and info["success"] and "--- a/confkit/ini.py" in info["patch"]


def test_junk_files_without_the_fix_grade_zero(env):
    env.step(bash("ln -s /nonexistent dangling; ln -s loop_a loop_b; ln -s loop_b loop_a; mkfifo pipe"))
    reward, info = submit(env)
    assert reward == 0.0 and not info["success"]


# ---- 4. and 5. processes, memory and disk per episode ------------------------------------------------------


def test_a_fork_bomb_is_capped_per_episode(env):
    limit = SandboxConfig().max_processes
    spawn = (
        "import subprocess\nchildren = []\nfor _ in range(1000):\n    try:\n"
        "        children.append(subprocess.Popen(['sleep', '20']))\n    except OSError:\n        break\n"
        "print('spawned', len(children))"
    )
    observation, *_ = env.step(bash(f"python -c \"{spawn}\""))
    spawned = int(re.search(r"spawned (\d+)", observation).group(1))
    assert spawned < limit, observation


def test_memory_is_capped_for_the_whole_episode_not_per_process(env):
    """Four processes of 700 MB each: each is within the 2 GB limit, but not all four together."""
    assert SandboxConfig().memory_mb == 2048
    allocate = "python -c 'import time; b = b\"x\" * (700 * 2**20); time.sleep(3); print(\"survived\")'"
    observation, *_ = env.step(bash(f"for i in 1 2 3 4; do {allocate} & done; wait"))
    survivors = [line for line in observation.splitlines() if line == "survived"]
    assert len(survivors) <= 2 and "memory limit" in observation, observation


def test_the_workspace_has_a_disk_quota(env):
    quota = SandboxConfig().workspace_mb
    observation, *_ = env.step(bash("for i in $(seq 12); do head -c 40M /dev/zero > blob$i; done; echo written"))
    used = sum(path.stat().st_size for path in env.unwrapped.workspace.rglob("*") if path.is_file())
    assert used <= quota * 2**20 and "No space left on device" in observation
    reward, info = submit(env)
    assert reward == 0.0 and "grading" in info


# ---- 6. the editor ----------------------------------------------------------------------------------------


def test_the_editor_listing_does_not_reveal_which_host_paths_exist(env, tmp_path):
    env.step(bash(f"ln -s {tmp_path} host_dir_link; ln -s {tmp_path}/missing missing_link"))
    listing, *_ = env.step(call("str_replace_editor", command="view", path="/repo"))
    lines = [line for line in listing.splitlines() if "_link" in line]
    assert len(lines) == 2 and not any(line.endswith("/") for line in lines), listing
    assert lines[0].replace("host_dir_link", "X") == lines[1].replace("missing_link", "X"), listing
