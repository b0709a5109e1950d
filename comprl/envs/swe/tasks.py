"""SWE-lite tasks: loading them from ``data/swe_lite/``, building their repositories, and grading a patch.

Data layout (see ``data/swe_lite/README.md``)::

    repos/<repo>/                 the repository with the bug fixed, visible tests in tests/
    tasks/<instance_id>/task.json instance_id, repo, split, problem_statement, bug, FAIL_TO_PASS, PASS_TO_PASS
    tasks/<instance_id>/tests/... hidden test files, added only when grading (SWE-bench's test patch)

A task's ``bug`` is a list of ``{"path", "find", "replace"}`` edits applied to the fixed repository (each
``find`` occurs exactly once); the buggy tree is what the agent gets, and the reverse edits are the gold patch.

Grading follows SWE-bench's rules: the task's test files (the repository's own tests as shipped, plus the
hidden files; the agent's edits to tests play no part) run under pytest, and the task is resolved iff every
FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes (a skipped PASS_TO_PASS test counts as kept,
a skipped FAIL_TO_PASS test as failed). When the ``swe`` extra (``swebench``) is installed its log parser and
report functions make that decision; otherwise the same rules are applied here. As in swebench 5, outcomes
that contradict pytest's exit status are not trusted and grade as unresolved.

Unlike SWE-bench, the tests and the submitted code never share a process (a hostile agent's code could patch
pytest or forge its report): pytest runs outside the sandbox with `comprl.envs.swe.grading`, which imports
the submitted repository only in a sandboxed process of its own and records the outcomes itself. The
submitted tree is copied first without following links, special files (FIFOs, sockets) left out.

What the agent made is measured before the trusted side reads or copies any of it (`scan_submission`: entries
and apparent sizes, by ``lstat`` only), and a submission over the limits of `SandboxConfig` is refused unread
and graded 0, as is one whose diff would be too large (`diff_trees`). The grading copy lives on a tmpfs of
its own (``workspace_mb``), so what the code under test writes there during grading is under a quota too.
"""

from __future__ import annotations

import dataclasses
import difflib
import filecmp
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from comprl.envs.swe.sandbox import SandboxConfig, SandboxedProcess, cap_output, mount_quota, unmount_quota

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "swe_lite"
"""The shipped tasks: ``data/swe_lite/`` at the repository root."""
SPLITS = ("train", "test")
TEST_DIR = "tests"
"""Each repository's test folder, restored to the task's version before grading."""
GRADING_TIMEOUT_S = 120.0
"""Wall-clock limit of grading one submission: from the trusted side's first look at it (its diff and copy)
to the end of its tests."""
GRADING_LOG_CHARS = 200_000
_PASSING = ("PASSED", "XFAIL")
_FAILING = ("FAILED", "ERROR", "SKIPPED")
_IGNORED_PARTS = frozenset({"__pycache__", ".pytest_cache"})


class TaskDataError(ValueError):
    """A task file is malformed or does not fit its repository."""


class SubmissionRefused(Exception):
    """A submission the trusted side will not read or grade; the message says which limit it went over."""


@dataclass(frozen=True)
class BugEdit:
    """One edit that turns the fixed repository into the buggy one."""

    path: str
    find: str
    replace: str


@dataclass(frozen=True)
class SweTask:
    """One SWE-lite instance, in SWE-bench's terms."""

    instance_id: str
    repo: str
    split: str
    problem_statement: str
    bug: tuple[BugEdit, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    hidden_files: Mapping[str, str] = field(repr=False)
    """Repository-relative path -> text of the test files added at grading time."""
    repo_dir: Path = field(repr=False)
    """The fixed repository this task's bug is applied to."""

    @property
    def test_files(self) -> tuple[str, ...]:
        """The test files pytest runs at grading time (those named by FAIL_TO_PASS and PASS_TO_PASS)."""
        return tuple(sorted({test.split("::")[0] for test in (*self.fail_to_pass, *self.pass_to_pass)}))


def _task_from_json(folder: Path, data_dir: Path) -> SweTask:
    try:
        raw = json.loads((folder / "task.json").read_text())
        bug = tuple(BugEdit(edit["path"], edit["find"], edit["replace"]) for edit in raw["bug"])
        task = SweTask(
            instance_id=raw["instance_id"],
            repo=raw["repo"],
            split=raw["split"],
            problem_statement=raw["problem_statement"],
            bug=bug,
            fail_to_pass=tuple(raw["FAIL_TO_PASS"]),
            pass_to_pass=tuple(raw["PASS_TO_PASS"]),
            hidden_files={
                str(path.relative_to(folder)): path.read_text()
                for path in sorted(folder.rglob("*.py"))
                if not _IGNORED_PARTS & set(path.parts)
            },
            repo_dir=data_dir / "repos" / raw["repo"],
        )
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as error:
        raise TaskDataError(f"{folder / 'task.json'}: {type(error).__name__}: {error}") from error
    if task.instance_id != folder.name:
        raise TaskDataError(f"{folder}: instance_id {task.instance_id!r} differs from its folder name")
    if task.split not in SPLITS:
        raise TaskDataError(f"{task.instance_id}: split must be one of {SPLITS}, got {task.split!r}")
    if not task.repo_dir.is_dir():
        raise TaskDataError(f"{task.instance_id}: repository {task.repo_dir} does not exist")
    if not task.bug or not task.fail_to_pass:
        raise TaskDataError(f"{task.instance_id}: needs at least one bug edit and one FAIL_TO_PASS test")
    return task


@lru_cache(maxsize=4)
def load_tasks(data_dir: Path = DATA_DIR) -> tuple[SweTask, ...]:
    """Every task under `data_dir`, sorted by instance id."""
    folders = sorted(path for path in (data_dir / "tasks").iterdir() if (path / "task.json").is_file())
    if not folders:
        raise TaskDataError(f"no SWE-lite tasks under {data_dir / 'tasks'}")
    return tuple(_task_from_json(folder, data_dir) for folder in folders)


def _left_out(folder: str, names: list[str]) -> set[str]:
    """Names `copy_tree` skips: caches, and anything that is not a folder, a regular file or a link."""
    kept = (stat.S_ISDIR, stat.S_ISREG, stat.S_ISLNK)
    return {
        name
        for name in names
        if name in _IGNORED_PARTS or not any(test(os.lstat(os.path.join(folder, name)).st_mode) for test in kept)
    }


def copy_tree(source: Path, destination: Path) -> None:
    """Copy `source` into `destination` without following links (a link is copied as a link, dangling or looping
    ones included) and without special files, which a hostile workspace may hold."""
    shutil.copytree(source, destination, symlinks=True, ignore=_left_out, dirs_exist_ok=True)


def materialize(task: SweTask, destination: Path, fixed: bool = False) -> Path:
    """Write the task's repository (buggy unless `fixed`) to `destination`, without the hidden tests."""
    copy_tree(task.repo_dir, destination)
    if fixed:
        return destination
    for edit in task.bug:
        path = destination / edit.path
        text = path.read_text()
        count = text.count(edit.find)
        if count != 1:
            raise TaskDataError(f"{task.instance_id}: bug edit of {edit.path} matches {count} times, expected once")
        path.write_text(text.replace(edit.find, edit.replace))
    return destination


def scan_submission(tree: Path, config: SandboxConfig) -> dict[str, int]:
    """Repository-relative path -> apparent size of each regular file in `tree`, found by ``lstat`` alone (links
    not followed, caches not entered); `SubmissionRefused` as soon as the tree holds more entries than
    ``config.workspace_files`` or its files more bytes than ``config.submission_mb``, so the walk is bounded too."""
    sizes: dict[str, int] = {}
    entries = total = 0
    folders = [""]
    while folders:
        folder = folders.pop()
        with os.scandir(tree / folder) as listing:
            for entry in listing:
                entries += 1
                if entries > config.workspace_files:
                    raise SubmissionRefused(
                        f"the repository holds more than {config.workspace_files} files, folders and links "
                        "(SandboxConfig.workspace_files)"
                    )
                if entry.name in _IGNORED_PARTS:
                    continue
                path, info = os.path.join(folder, entry.name), entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    folders.append(path)
                elif stat.S_ISREG(info.st_mode):
                    sizes[path] = info.st_size
                    total += info.st_size
                    if total > config.submission_mb * 2**20:
                        raise SubmissionRefused(
                            f"the repository's files add up to more than {config.submission_mb} MB, holes of sparse "
                            "files counted (SandboxConfig.submission_mb)"
                        )
    return sizes


def diff_trees(before: Path, after: Path, config: SandboxConfig) -> str:
    """A unified diff (``a/`` and ``b/`` prefixes, as ``git diff``) from tree `before` to tree `after`.
    `SubmissionRefused` when `after` goes over a limit of `config` (`scan_submission`) or the diff would be larger
    than ``config.patch_kb``: a file that grew by more than what is left of it is refused unread (its diff holds
    at least the bytes it gained), so no more than that is ever held in memory."""
    old, new = scan_submission(before, config), scan_submission(after, config)
    room = config.patch_kb * 1024
    chunks = []
    for path in sorted(old.keys() | new.keys()):
        if old.get(path) == new.get(path) and filecmp.cmp(before / path, after / path, shallow=False):
            continue
        if new.get(path, 0) - old.get(path, 0) > room:
            raise SubmissionRefused(f"the diff is larger than {config.patch_kb} KB (SandboxConfig.patch_kb)")
        chunk = "".join(
            difflib.unified_diff(
                _text(before, path, old).splitlines(keepends=True),
                _text(after, path, new).splitlines(keepends=True),
                fromfile=f"a/{path}" if path in old else "/dev/null",
                tofile=f"b/{path}" if path in new else "/dev/null",
            )
        )
        room -= len(chunk.encode())
        if room < 0:
            raise SubmissionRefused(f"the diff is larger than {config.patch_kb} KB (SandboxConfig.patch_kb)")
        chunks.append(chunk)
    return "".join(chunks)


def _text(tree: Path, path: str, sizes: Mapping[str, int]) -> str:
    """The text of file `path` of `tree`, or "" when the tree has no such file."""
    return (tree / path).read_text(errors="replace") if path in sizes else ""


def write_test_files(task: SweTask, folder: Path) -> Path:
    """The task's test files in `folder`: the repository's test folder as shipped, plus the hidden files."""
    copy_tree(task.repo_dir / TEST_DIR, folder / TEST_DIR)
    for relative, text in task.hidden_files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def top_level_modules(repo: Path) -> tuple[str, ...]:
    """The importable names a repository provides (its packages and top-level modules, tests excluded)."""
    names = {path.name for path in repo.iterdir() if (path / "__init__.py").is_file() and path.name != TEST_DIR}
    names |= {path.stem for path in repo.glob("*.py") if path.stem not in ("setup", "conftest")}
    return tuple(sorted(names))


@dataclass(frozen=True)
class GradingReport:
    """The outcome of grading one submission."""

    resolved: bool
    fail_to_pass_passed: tuple[str, ...]
    fail_to_pass_failed: tuple[str, ...]
    pass_to_pass_passed: tuple[str, ...]
    pass_to_pass_failed: tuple[str, ...]
    log_trusted: bool
    """False when pytest's exit status contradicts its log (the report then counts as unresolved)."""
    backend: str
    """``"swebench"`` when swebench's grading functions decided, ``"builtin"`` otherwise."""
    log: str = field(repr=False)
    grader_out_of_memory: bool = False
    """True when the grading run was killed for going over its memory (`SandboxConfig.grader_memory_mb`)."""
    refused: str = ""
    """Why the submission's tests did not run (a limit it went over, or the grading time spent before they
    could start); empty when they ran."""


_Outcome = tuple[list[str], list[str], list[str], list[str], bool]
"""FAIL_TO_PASS passed and failed, PASS_TO_PASS passed and failed, fully resolved."""


def _builtin_report(statuses: Mapping[str, str], task: SweTask) -> _Outcome:
    """SWE-bench's rules: a test passes when PASSED or XFAIL and fails when missing, FAILED, ERROR or (for
    FAIL_TO_PASS) SKIPPED; a skipped PASS_TO_PASS test counts as kept. Resolved iff no listed test failed."""
    f2p_ok = [test for test in task.fail_to_pass if statuses.get(test) in _PASSING]
    f2p_bad = [test for test in task.fail_to_pass if statuses.get(test, "FAILED") in _FAILING]
    p2p_ok = [test for test in task.pass_to_pass if statuses.get(test) in (*_PASSING, "SKIPPED")]
    p2p_bad = [test for test in task.pass_to_pass if statuses.get(test, "FAILED") in ("FAILED", "ERROR")]
    return f2p_ok, f2p_bad, p2p_ok, p2p_bad, not f2p_bad and not p2p_bad


def _swebench_report(log: str, task: SweTask) -> _Outcome | None:
    """The same outcome from swebench's own functions, or None when swebench is not installed."""
    try:
        from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus
        from swebench.harness.grading import get_eval_tests_report, get_resolution_status
        from swebench.harness.log_parsers.python import parse_log_pytest
    except ImportError:
        return None
    gold = {FAIL_TO_PASS: list(task.fail_to_pass), PASS_TO_PASS: list(task.pass_to_pass)}
    report = get_eval_tests_report(parse_log_pytest(log, None), gold)
    f2p, p2p = report[FAIL_TO_PASS], report[PASS_TO_PASS]
    full = get_resolution_status(report) == ResolvedStatus.FULL.value
    return f2p["success"], f2p["failure"], p2p["success"], p2p["failure"], full


def status_log(statuses: Mapping[str, str]) -> str:
    """Outcomes as the summary lines of ``pytest -rA`` (what swebench's log parser reads)."""
    return "".join(f"{status} {test}\n" for test, status in statuses.items())


def grade_statuses(
    statuses: Mapping[str, str], exit_code: int | None, task: SweTask, log: str = "", out_of_memory: bool = False
) -> GradingReport:
    """Grade the outcomes of the task's tests (test id -> PASSED, FAILED, ERROR, SKIPPED, XFAIL or XPASS) and
    the exit status of the pytest run that produced them (see the module docstring)."""
    failures = any(status in ("FAILED", "ERROR") for status in statuses.values())
    trusted = bool(statuses) and exit_code is not None and (exit_code == 0) != failures
    swebench = _swebench_report(status_log(statuses), task)
    f2p_ok, f2p_bad, p2p_ok, p2p_bad, full = swebench if swebench is not None else _builtin_report(statuses, task)
    return GradingReport(
        resolved=trusted and full,
        fail_to_pass_passed=tuple(f2p_ok),
        fail_to_pass_failed=tuple(f2p_bad),
        pass_to_pass_passed=tuple(p2p_ok),
        pass_to_pass_failed=tuple(p2p_bad),
        log_trusted=trusted,
        backend="builtin" if swebench is None else "swebench",
        log=log,
        grader_out_of_memory=out_of_memory,
    )


def refused_report(task: SweTask, reason: str) -> GradingReport:
    """The report of a submission whose tests did not run: unresolved, every listed test failed."""
    return dataclasses.replace(grade_statuses({}, None, task, reason), refused=reason)


def pytest_command(task: SweTask, settings: Path, tests: Path, shared: Path) -> list[str]:
    """The trusted grading run: isolated mode, no plugins or configuration but the grader's; the tests' temporary
    files (``tmp_path``) go under `shared`, which the process under test sees read-only."""
    return [
        sys.executable, "-I", "-m", "pytest", "-p", "comprl.envs.swe.grading", "--swe-grading", str(settings),
        "-rA", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--rootdir", str(tests),
        "-o", "console_output_style=classic", "--basetemp", str(shared / "pytest"), *task.test_files,
    ]  # fmt: skip


def grade_tree(
    task: SweTask, submitted: Path, scratch: Path, config: SandboxConfig | None = None, deadline: float | None = None
) -> GradingReport:
    """Grade the repository in `submitted` (left untouched): check it is within the limits of `config`, copy it
    into `scratch` and run the task's tests on it with the trusted grader (`comprl.envs.swe.grading`), then apply
    SWE-bench's rules. The tests must end by `deadline` (``time.monotonic()``; default `GRADING_TIMEOUT_S` from
    now), which the caller may have started earlier. While it is graded, `scratch` is a tmpfs (the grader's files)
    holding another (the copy, which the code under test may write to), so that code cannot fill the grader's."""
    config = config or SandboxConfig()
    deadline = time.monotonic() + GRADING_TIMEOUT_S if deadline is None else deadline
    try:
        scan_submission(submitted, config)
    except SubmissionRefused as refusal:
        return refused_report(task, str(refusal))
    tree = scratch / "graded"
    with _quota(scratch, config, config.workspace_files):
        tree.mkdir()
        with _quota(tree, config, 2 * config.workspace_files):
            try:
                copy_tree(submitted, tree)
            except OSError as error:
                return refused_report(task, f"its copy does not fit the grading quota ({error.strerror})")
            return _grade_copy(task, tree, scratch, config, deadline)


@contextmanager
def _quota(folder: Path, config: SandboxConfig, inodes: int) -> Iterator[None]:
    """`folder` as a tmpfs of ``config.workspace_mb`` and `inodes` for the block (unless episode limits are off)."""
    if not config.episode_limits:
        yield
        return
    mount_quota(folder, config.workspace_mb, inodes)
    try:
        yield
    finally:
        unmount_quota(folder)


def _grade_copy(task: SweTask, tree: Path, scratch: Path, config: SandboxConfig, deadline: float) -> GradingReport:
    """Run the task's tests on the copy in `tree` (see `grade_tree`)."""
    tests, shared = scratch / "tests", scratch / "shared"
    write_test_files(task, tests)
    shared.mkdir()
    settings = scratch / "grading.json"
    settings.write_text(
        json.dumps(
            {
                "tree": str(tree),
                "packages": top_level_modules(task.repo_dir),
                "sandbox": dataclasses.asdict(config),
                "binds": [str(shared)],
                "stderr": str(scratch / "remote-stderr.log"),
                "results": str(scratch / "results.json"),
            }
        )
    )
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch), "LANG": "C.UTF-8"}
    environment |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # The grader's cgroup also holds the cgroups of the code's processes that it starts (nested), hence the sum.
    bounds = dataclasses.replace(
        config, memory_mb=config.memory_mb + config.grader_memory_mb, max_processes=2 * config.max_processes
    )
    if time.monotonic() >= deadline:
        return refused_report(task, "the grading time ran out on the host's diff and copy, before the tests started")
    with (scratch / "pytest.log").open("w+b") as output:
        grader = SandboxedProcess(
            pytest_command(task, settings, tests, shared), bounds, env=environment, cwd=tests, stdout=output,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            exit_code: int | None = grader.popen.wait(timeout=deadline - time.monotonic())
        except subprocess.TimeoutExpired:
            grader.kill()
            exit_code = None
        finally:
            out_of_memory = grader.close()
        if out_of_memory:
            output.write(f"\n[the grading run went over its memory limit of {bounds.memory_mb} MB]\n".encode())
        output.seek(0)
        log, _ = cap_output(output.read(), GRADING_LOG_CHARS)
    results = scratch / "results.json"
    statuses = json.loads(results.read_text()) if exit_code is not None and results.is_file() else {}
    return grade_statuses(statuses, exit_code, task, log, out_of_memory)
