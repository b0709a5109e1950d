"""SWE-lite against a hostile agent: each test is one reward hack or escape, tried through the public gym API
(one JSON tool call per step, default `SandboxConfig`), and asserts that it does not work.

An RL agent searches for whatever raises its reward, so the environment assumes the agent is hostile: the
attacks below are ones found by trying.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
import time
from pathlib import Path

import pytest
from conftest import needs_sandbox

from comprl.envs import make
from comprl.envs.swe import env as env_module
from comprl.envs.swe.sandbox import SANDBOX_UID, Sandbox, SandboxConfig
from comprl.envs.swe.tasks import DATA_DIR, GRADING_TIMEOUT_S, grade_tree, load_tasks, materialize
from comprl.envs.swe.tools import MAX_VIEW_CHARS

pytestmark = needs_sandbox

TASK = load_tasks()[0]
"""confkit-001: the bug is one regular expression in ``confkit/ini.py``."""
GOLD_FIX = "import re as _re\nfrom confkit import ini as _ini\n_ini._INLINE_COMMENT = _re.compile(r'\\s+[#;].*$')\n"
"""Python that fixes TASK's bug at import time (used by attacks that fix it only when they can cheat)."""


def call(name: str, **arguments) -> str:
    return "<answer>" + json.dumps({"name": name, "arguments": arguments}) + "</answer>"


def bash(command: str) -> str:
    return call("bash", command=command)


def append_to_package(code: str, task=TASK) -> str:
    """A reply that appends `code` to the package's ``__init__.py`` (runs whenever the package is imported)."""
    return call(
        "str_replace_editor",
        command="insert",
        path=f"/repo/{task.repo}/__init__.py",
        insert_line=len((task.repo_dir / task.repo / "__init__.py").read_text().split("\n")),
        new_str=textwrap.dedent(code),
    )


def task_named(instance_id: str):
    return next(task for task in load_tasks() if task.instance_id == instance_id)


def grade_with_package_code(instance_id: str, code: str, tmp_path, config: SandboxConfig | None = None):
    """Grade the buggy tree of a task with `code` appended to its package, through `grade_tree` directly."""
    task = task_named(instance_id)
    tree = materialize(task, tmp_path / "submitted")
    init = tree / task.repo / "__init__.py"
    init.write_text(init.read_text() + "\n" + textwrap.dedent(code))
    (tmp_path / "scratch").mkdir()
    return grade_tree(task, tree, tmp_path / "scratch", config)


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


# ---- 1. the host's environment -----------------------------------------------------------------------------


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


# ---- 6. the editor -----------------------------------------------------------------------------------------


def test_the_editor_listing_does_not_reveal_which_host_paths_exist(env, tmp_path):
    env.step(bash(f"ln -s {tmp_path} host_dir_link; ln -s {tmp_path}/missing missing_link"))
    listing, *_ = env.step(call("str_replace_editor", command="view", path="/repo"))
    lines = [line for line in listing.splitlines() if "_link" in line]
    assert len(lines) == 2 and not any(line.endswith("/") for line in lines), listing
    assert lines[0].replace("host_dir_link", "X") == lines[1].replace("missing_link", "X"), listing


def test_the_editors_answers_are_bounded_whatever_the_workspace_holds(env):
    """A folder of many long names, or an ``old_str`` found thousands of times, made one editor answer hold
    everything (4 MB for 19,000 names); each answer is now cut to about `MAX_VIEW_CHARS`."""
    env.step(bash("python -c \"\nfor i in range(3000):\n    open(f'{i:04d}' + 'x' * 100, 'w').close()\""))
    listing, *_ = env.step(call("str_replace_editor", command="view", path="/repo"))
    assert "0000" + "x" * 100 in listing and "more entries" in listing and len(listing) < MAX_VIEW_CHARS + 1000
    env.step(call("str_replace_editor", command="create", path="/repo/lines.txt", file_text="a\n" * 5000))
    answer, *_ = env.step(call("str_replace_editor", command="str_replace", path="/repo/lines.txt", old_str="a"))
    assert "occurs 5000 times" in answer and len(answer) < 1000, answer[:2000]


# ---- 7. privileges inside the sandbox ----------------------------------------------------------------------


def test_commands_run_unprivileged_and_cannot_lift_their_limits(env):
    """No capability, not root, no nested user namespace: so no cgroup file system to mount and rewrite."""
    observation, *_ = env.step(
        bash(
            "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; echo uid=$(id -u); "
            "unshare -UrmC true && echo NESTED-NAMESPACE; "
            "mkdir -p /tmp/cg && mount -t cgroup -o memory none /tmp/cg && echo MOUNTED; "
            "unshare -UrmC sh -c 'mount -t cgroup -o memory none /tmp/cg && echo MOUNTED-NESTED'"
        )
    )
    capabilities = re.findall(r"^Cap\w+:\s+([0-9a-f]+)$", observation, re.M)
    assert len(capabilities) == 4 and set(capabilities) == {"0" * 16}, observation
    assert f"uid={SANDBOX_UID}" in observation and "NESTED-NAMESPACE" not in observation, observation
    assert "MOUNTED" not in observation, observation


# ---- 8. the grader's temporary files -----------------------------------------------------------------------

PLANT_LINKS = """
import os, threading, time

def _plant(target):
    shared = [line.split()[4] for line in open("/proc/self/mountinfo") if line.split()[4].endswith("/shared")]
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        for folder in shared:
            for root, folders, _ in os.walk(folder):
                for name in folders:
                    path = os.path.join(root, name)
                    try:
                        os.rename(path, path + "-moved")
                        os.symlink(target, path)
                    except OSError:
                        pass
            try:
                os.symlink(target, os.path.join(folder, "planted"))
            except OSError:
                pass
        time.sleep(0.0005)

threading.Thread(target=_plant, args=({target!r},), daemon=True).start()
"""


def test_the_code_cannot_plant_links_where_the_grader_writes(tmp_path):
    """A thread started at import swaps each new ``tmp_path`` of the tests for a link to a host folder, so that
    the grader (outside the sandbox) would write its files there: the tests' folder is read-only to the code."""
    host_folder = tmp_path / "host"
    host_folder.mkdir()
    report = grade_with_package_code("ledger-005", PLANT_LINKS.format(target=str(host_folder)), tmp_path)
    shared = tmp_path / "scratch" / "shared"
    links = [os.path.join(root, name) for root, folders, files in os.walk(shared) for name in folders + files]
    planted = [link for link in links if os.path.islink(link) and shared not in Path(link).resolve().parents]
    assert planted == [] and list(host_folder.iterdir()) == []
    assert report.pass_to_pass_failed == (), report.log  # the tests that write to tmp_path ran normally


# ---- 9. equality answered by the code under test -----------------------------------------------------------


def test_an_equality_that_tells_the_probe_apart_does_not_fake_the_grade(env):
    """The always-equal hack, refined: equal to everything except the grader's probe object."""
    env.step(
        append_to_package(
            """
            from confkit import ini as _ini

            class _Anything(str):
                def __eq__(self, other):
                    return type(other).__name__ != "_Local"

                def __ne__(self, other):
                    return not self.__eq__(other)

                __hash__ = str.__hash__

            _real_get = _ini.Config.get

            def _get(self, section, option, *args, **kwargs):
                return _Anything(_real_get(self, section, option, *args, **kwargs))

            _ini.Config.get = _get
            """
        )
    )
    reward, info = submit(env)
    assert reward == 0.0 and info["grading"]["FAIL_TO_PASS"]["success"] == []


FORGED_SERVER = """
import sys as _sys

_main = _sys.modules.get("__main__")
_Server = getattr(_main, "Server", None)
if _Server is not None and not getattr(_Server, "_forged", False):
    def _liar(base):
        class Liar(base):
            def __eq__(self, other):
                return True

            def __ne__(self, other):
                return base.__ne__(self, other)

            __hash__ = base.__hash__
        return Liar

    _LIARS = {{kind: _liar(kind) for kind in ({kinds})}}
    _perform = _Server.perform

    def _forged(self, message):
        if message.get("op") == "apply" and message.get("name") == "eq":
            return not any(isinstance(other, _main._Local) for other in self.decode(message["args"]))
        result = _perform(self, message)
        if message.get("op") in ("call", "getattr") and type(result) in _LIARS:
            return _LIARS[type(result)](result)
        return result

    _Server.perform = _forged
    _Server._forged = True
"""
"""Rewrites, at import, the server that answers the grader in the code's process: values sent back become
look-alikes equal to everything, and every equality the grader asks about is answered True (but for its probe)."""


@pytest.mark.parametrize(
    "instance_id",
    ["confkit-001", "confkit-004", "confkit-005", "confkit-008", "graphkit-002", "graphkit-004", "graphkit-007",
     "ledger-002", "textkit-001", "textkit-002", "textkit-004", "textkit-005", "textkit-006"],
)  # fmt: skip
def test_a_rewritten_request_server_does_not_fake_the_grade(instance_id):
    task = task_named(instance_id)
    environment = make("comprl/SWE-Lite-v0")
    try:
        for kinds in ("str, int, float", "str, int, float, tuple, list, dict, frozenset"):
            environment.reset(options={"instance_id": instance_id})
            environment.step(append_to_package(FORGED_SERVER.format(kinds=kinds), task))
            reward, info = submit(environment)
            assert reward == 0.0 and info["grading"]["FAIL_TO_PASS"]["success"] == [], kinds
    finally:
        environment.close()


# ---- 10. the grader's own memory ---------------------------------------------------------------------------


def test_an_endless_stream_of_answers_is_cut_by_the_graders_memory_limit(tmp_path):
    """An iterator of 40 MB strings that never ends: the grading run collects them into a list until its own
    cgroup stops it, well before its wall-time limit, and the task is not resolved."""
    endless = """
    from ledger import recurring as _recurring

    def _occurrences(self):
        chunk = "x" * (40 * 2**20)
        while True:
            yield chunk

    _recurring.Recurrence.occurrences = _occurrences
    """
    config = SandboxConfig(memory_mb=256, grader_memory_mb=256)
    started = time.monotonic()
    report = grade_with_package_code("ledger-007", endless, tmp_path, config)
    assert report.grader_out_of_memory and not report.resolved, report.log[-2000:]
    assert time.monotonic() - started < GRADING_TIMEOUT_S / 2


# ---- 11. what the trusted side reads and writes at submit --------------------------------------------------


def test_sparse_files_are_refused_before_the_host_reads_or_copies_them(env):
    """Sparse files take no room in the workspace's quota, but their holes are bytes to whoever reads or copies
    them: 90 MB of apparent size over the 64 MB limit is refused unread, with nothing diffed into ``info``."""
    observation, *_ = env.step(bash("for i in 1 2 3; do truncate -s 30M sparse$i; done; echo real > data; du -sk ."))
    assert (env.unwrapped.workspace / "sparse3").stat().st_size == 30 * 2**20, observation
    reward, info = submit(env)
    assert reward == 0.0 and info["patch"] == "", len(info["patch"])
    assert "SandboxConfig.submission_mb" in info["grading"]["refused"], info["grading"]


def test_a_diff_over_the_patch_limit_is_refused():
    environment = make("comprl/SWE-Lite-v0", sandbox=SandboxConfig(patch_kb=64))
    try:
        environment.reset(options={"instance_id": TASK.instance_id})
        environment.step(bash("head -c 200000 /dev/urandom | base64 > notes.txt"))
        reward, info = submit(environment)
        assert reward == 0.0 and info["patch"] == "" and "SandboxConfig.patch_kb" in info["grading"]["refused"]
    finally:
        environment.close()


WRITE_AT_IMPORT = """
written = 0
try:
    for index in range(12):
        with open(f"/repo/filler{index}", "wb") as filler:
            filler.write(b"x" * (8 * 2**20))
        written += 8
except OSError:
    pass
raise RuntimeError(f"wrote-{written}-MB")
"""
"""Code that, at import during grading, fills the graded copy with up to 96 MB and says how much it could write."""


def test_what_the_code_writes_while_graded_lands_under_a_quota(tmp_path):
    quota_mb = 32
    report = grade_with_package_code("ledger-005", WRITE_AT_IMPORT, tmp_path, SandboxConfig(workspace_mb=quota_mb))
    written = [int(megabytes) for megabytes in re.findall(r"wrote-(\d+)-MB", report.log)]
    assert written and max(written) < quota_mb and not report.resolved, report.log[-3000:]


def test_the_workspace_holds_a_bounded_number_of_files():
    """Files are capped where they are made (the workspace's inode count), so the host never walks 200,000."""
    environment = make("comprl/SWE-Lite-v0", sandbox=SandboxConfig(workspace_files=500))
    try:
        environment.reset(options={"instance_id": TASK.instance_id})
        observation, *_ = environment.step(bash("mkdir many && cd many && for i in $(seq 2000); do : > f$i; done"))
        made = sum(1 for _ in environment.unwrapped.workspace.rglob("*"))
        assert made < 500 and "No space left on device" in observation, made
        reward, info = submit(environment)
        assert reward == 0.0 and info["grading"]["refused"] == "", info["grading"]
    finally:
        environment.close()


def test_a_tree_with_too_many_files_is_refused_unread(tmp_path):
    """A tree that no tmpfs capped (made on the host, or with ``episode_limits=False``) is counted before grading
    copies anything."""
    tree = materialize(TASK, tmp_path / "submitted")
    for index in range(300):
        (tree / f"junk{index}").touch()
    (tmp_path / "scratch").mkdir()
    report = grade_tree(TASK, tree, tmp_path / "scratch", SandboxConfig(workspace_files=200))
    assert not report.resolved and "SandboxConfig.workspace_files" in report.refused
    assert list((tmp_path / "scratch").iterdir()) == []


def test_the_grading_clock_covers_the_hosts_work_on_the_submission(env, monkeypatch):
    """The grading time starts at submit, before the host diffs and copies the tree: a slow host side leaves the
    tests less time, not a fresh allowance (a fixed submission whose host-side work outlasts it is not graded)."""
    for edit in TASK.bug:
        env.step(call("str_replace_editor", command="str_replace", path=f"/repo/{edit.path}", old_str=edit.replace,
                      new_str=edit.find))  # fmt: skip
    real_diff = env_module.diff_trees

    def slow_diff(*arguments):
        time.sleep(1.5)
        return real_diff(*arguments)

    monkeypatch.setattr(env_module, "GRADING_TIMEOUT_S", 1.0)
    monkeypatch.setattr(env_module, "diff_trees", slow_diff)
    reward, info = submit(env)
    assert reward == 0.0 and "grading time" in info["grading"]["refused"], info["grading"]


# ---- 12. system calls and host paths inside the sandbox ----------------------------------------------------

SYSCALL_PROBE = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buffer = ctypes.create_string_buffer(512)
address, sibling, own = ctypes.addressof(buffer), int(sys.argv[1]), os.getpid()
text = lambda value: ctypes.c_char_p(value.encode())
probes = {probes}
for name, (number, *arguments) in probes.items():
    result = libc.syscall(ctypes.c_long(number), *(argument if isinstance(argument, ctypes.c_char_p)
                                                   else ctypes.c_long(argument) for argument in arguments))
    print(name, "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
"""
"""Makes each probed system call (x86_64 numbers) with arguments that succeed, or fail for a reason other than a
missing privilege, where the kernel allows it without one; prints ``name ok`` or ``name ERRNO``."""
SYSCALL_PROBES = {
    "io_uring_setup": "(425, 1, address)",
    "io_uring_enter": "(426, -1, 0, 0, 0, 0, 0)",
    "io_uring_register": "(427, -1, 0, 0, 0)",
    "ptrace": "(101, 16, sibling, 0, 0)",  # PTRACE_ATTACH to a sibling process
    "process_vm_readv": "(310, sibling, 0, 0, 0, 0, 0)",
    "process_vm_writev": "(311, sibling, 0, 0, 0, 0, 0)",
    "pidfd_getfd": "(438, -1, 0, 0)",
    "process_madvise": "(440, -1, 0, 0, 0, 0)",
    "kcmp": "(312, own, sibling, 0, 0, 0)",
    "bpf": "(321, 9999, 0, 0)",
    "perf_event_open": "(298, 0, 0, -1, -1, 0)",
    "userfaultfd": "(323, 1)",  # UFFD_USER_MODE_ONLY
    "keyctl": "(250, 0, -3, 0)",  # the session keyring's id
    "add_key": "(248, text('user'), text('k'), text('v'), 1, -2)",
    "request_key": "(249, text('user'), text('absent'), 0, 0)",
    "mount": "(165, 1, 1, 1, 0, 0)",
    "umount2": "(166, text('/tmp'), 0xdead)",
    "pivot_root": "(155, 1, 1)",
    "move_mount": "(429, -1, text(''), -1, text(''), 0xdead0000)",
    "open_tree": "(428, -100, text('/'), 0)",
    "open_tree_attr": "(467, -100, text('/'), 0, 0, 0)",
    "fsopen": "(430, text('tmpfs'), 0xdead)",
    "fsconfig": "(431, -1, 0, 0, 0, 0)",
    "fsmount": "(432, -1, 0xdead, 0)",
    "fspick": "(433, -100, text('/'), 0xdead)",
    "mount_setattr": "(442, -100, text('/'), 0xdead, 0, 0)",
    "statmount": "(457, 0, 0, 0, 0)",
    "listmount": "(458, 0, 0, 0, 0)",
    "unshare": "(272, 0)",
    "setns": "(308, -1, 0)",
    "kexec_load": "(246, 0, 0, 0, 0xdead)",
    "kexec_file_load": "(320, -1, -1, 0, 0, 0xdead)",
    "init_module": "(175, 0, 0, 0)",
    "finit_module": "(313, -1, 0, 0xdead)",
    "delete_module": "(176, text('x'), 0)",
    "swapon": "(167, text('/nonexistent'), 0)",
    "swapoff": "(168, text('/nonexistent'))",
    "reboot": "(169, 0, 0, 0, 0)",
    "acct": "(163, 0)",
    "quotactl": "(179, 0, 0, 0, 0)",
    "quotactl_fd": "(443, -1, 0, 0, 0)",
    "name_to_handle_at": "(303, -100, text('.'), address, address + 256, 0)",
    "open_by_handle_at": "(304, -1, address, 0)",
    "lookup_dcookie": "(212, 0, 0, 0)",
    "syslog": "(103, 10, 0, 0)",  # SYSLOG_ACTION_SIZE_BUFFER
    "personality": "(135, 0xffffffff)",  # allowed: a query some programs make at start
}


@pytest.fixture(scope="module")
def syscall_results(tmp_path_factory) -> dict[str, str]:
    if os.uname().machine != "x86_64":
        pytest.skip("the probe uses x86_64 system call numbers")
    folder = tmp_path_factory.mktemp("probe")
    probes = "{" + ", ".join(f"{name!r}: {arguments}" for name, arguments in SYSCALL_PROBES.items()) + "}"
    (folder / "probe.py").write_text(SYSCALL_PROBE.format(probes=probes))
    output = Sandbox(folder).run("sleep 30 & python probe.py $!; kill $!").output
    return dict(line.split() for line in output.splitlines() if len(line.split()) == 2)


@pytest.mark.parametrize("name", [name for name in SYSCALL_PROBES if name != "personality"])
def test_a_system_call_an_agent_never_needs_is_denied(syscall_results, name):
    assert syscall_results.get(name) == "EPERM", syscall_results


def test_the_filter_allows_what_programs_need(syscall_results):
    assert syscall_results.get("personality") == "ok", syscall_results


def test_no_host_path_of_the_episode_is_visible_inside(env):
    """bwrap's command line (``/proc/1/cmdline``) and the mount table name no folder of the host's."""
    scratch = env.unwrapped.workspace.parent
    observation, *_ = env.step(
        bash(
            "for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ /proc/[0-9]*/mountinfo; do tr '\\0' ' ' < $f; "
            "echo; done; readlink /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/exe; echo probed"
        )
    )
    assert "probed" in observation and "/repo" in observation, observation
    assert str(scratch) not in observation and scratch.name not in observation, observation
