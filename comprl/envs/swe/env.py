"""SWE-lite as a comprl text environment: fix a bug in a small Python repository from its issue text.

``comprl/SWE-Lite-v0`` is an offline miniature of SWE-bench (the paper trains and evaluates on a filtered
SWE-Bench-Verified, which needs Docker and a model hub; see `comprl.envs.swe.swebench_docker` for that). Each
task (``data/swe_lite/``, see `comprl.envs.swe.tasks`) is a small pure-Python library with one injected bug,
an issue written by a user who hit it, and hidden tests.

An episode:

- ``reset`` copies the task's buggy repository into a fresh temporary folder (the workspace, deleted at the
  next reset or at ``close``); the first observation is the issue and the repository's file list;
- each action is one tool call, JSON inside answer tags (`comprl.envs.swe.tools`): ``bash`` runs a command in
  the workspace under bubblewrap (`comprl.envs.swe.sandbox`: no network, nothing else of the host writable or
  visible, time, output, memory and process limits; the workspace is a tmpfs of ``workspace_mb``),
  ``str_replace_editor`` views, creates and edits files, ``submit`` ends the episode;
- the submission is graded with SWE-bench's rules (`comprl.envs.swe.tasks.grade_tree`): reward 1.0 and
  success when the task is resolved, else 0.0. An episode that reaches `max_turns` without submitting is
  graded as it stands, as SWE-agent submits automatically at its step limit (``grade_unsubmitted=False``
  turns that off). ``info`` then carries ``patch`` (the diff from the buggy repository) and ``grading``. A
  submission over the limits of `SandboxConfig` (files, apparent size, diff size) is refused before the host
  reads it: graded 0, its ``patch`` empty, and ``grading["refused"]`` says which limit.

A reply that is not a well-formed tool call is answered with what is wrong with it and counted in
``info["invalid_action"]``; a tool that fails (a command that errors, an ``old_str`` that is not unique)
answers with its error text, as a real tool would.

Tasks and seeds (``split`` argument): ``"train"`` and ``"test"`` play ``reset(seed=s)`` as task
``s mod n`` of that split; ``"auto"`` (default) plays test tasks for seeds from `EVAL_SEED_OFFSET` on and
training tasks below it. ``reset(options={"instance_id": ...})`` plays one task by name.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Protocol

from gymnasium import spaces

from comprl.envs.base import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    MAX_TEXT_LENGTH,
    GameStep,
    TextEnv,
    answer_span,
    choose_by_seed,
    seed_split,
)
from comprl.envs.swe.sandbox import (
    WORKSPACE_MOUNT,
    CommandResult,
    Sandbox,
    SandboxConfig,
    bwrap_path,
    check_episode_limits,
    mount_quota,
    unmount_quota,
)
from comprl.envs.swe.tasks import (
    DATA_DIR,
    GRADING_TIMEOUT_S,
    GradingReport,
    SubmissionRefused,
    SweTask,
    copy_tree,
    diff_trees,
    grade_tree,
    load_tasks,
    materialize,
    refused_report,
)
from comprl.envs.swe.tools import TOOLS, Editor, ToolCall, ToolCallError, parse_tool_call

SPLITS = ("auto", "train", "test")
SOURCE_CHARSET = "".join(map(chr, (*range(0xD800), *range(0xE000, 0x10000))))
"""Observations show source files and issues, which may hold any character of Unicode's basic plane."""
TASK_SETS = ("lite",)
"""The task collections this env knows: ``"lite"``, the repositories shipped in ``data/swe_lite/``."""


class Workspace(Protocol):
    """Where one episode's repository lives and how its commands run and it is graded."""

    root: Path
    """The host folder holding the repository (the editor works on it)."""
    mount: str
    """The repository's path as the actor sees it."""

    def run(self, command: str) -> CommandResult: ...

    def grade(self) -> GradingReport: ...

    def patch(self) -> str:
        """The diff of the graded repository from the task's ("" when the submission was refused)."""
        ...

    def close(self) -> None: ...


class LocalWorkspace:
    """A SWE-lite task's buggy repository in a fresh temporary folder, its commands run under bubblewrap."""

    mount = WORKSPACE_MOUNT

    def __init__(self, task: SweTask, config: SandboxConfig) -> None:
        self.task, self.config = task, config
        self._scratch = Path(tempfile.mkdtemp(prefix=f"comprl-swe-{task.instance_id}-"))
        self.root = self._scratch / "repo"
        self.root.mkdir()
        self._cleanup = weakref.finalize(self, _remove_workspace, self._scratch, self.root, config.episode_limits)
        if config.episode_limits:
            mount_quota(self.root, config.workspace_mb, config.workspace_files)
        self._base = materialize(task, self._scratch / "base")
        copy_tree(self._base, self.root)
        self._sandbox = Sandbox(self.root, config)
        self._patch = ""

    def run(self, command: str) -> CommandResult:
        return self._sandbox.run(command)

    def grade(self) -> GradingReport:
        """Take the diff, then grade a copy; the grading time (`GRADING_TIMEOUT_S`) starts before either, and a
        submission over the limits is refused before it is read (`comprl.envs.swe.tasks.diff_trees`)."""
        deadline = time.monotonic() + GRADING_TIMEOUT_S
        try:
            self._patch = diff_trees(self._base, self.root, self.config)
        except SubmissionRefused as refusal:
            self._patch = ""
            return refused_report(self.task, str(refusal))
        scratch = Path(tempfile.mkdtemp(dir=self._scratch, prefix="grade-"))
        try:
            return grade_tree(self.task, self.root, scratch, self.config, deadline)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def patch(self) -> str:
        return self._patch

    def close(self) -> None:
        self._cleanup()


def _remove_workspace(scratch: Path, root: Path, mounted: bool) -> None:
    if mounted:
        unmount_quota(root)
    shutil.rmtree(scratch, ignore_errors=True)


class SweLiteEnv(TextEnv):
    """Bug fixing with bash, a file editor and submit, graded by hidden tests (see the module docstring)."""

    def __init__(
        self,
        task: str = "lite",
        split: str = "auto",
        max_turns: int = 30,
        sandbox: SandboxConfig | None = None,
        grade_unsubmitted: bool = True,
        data_dir: str | Path = DATA_DIR,
        action_prompt: bool = True,
    ) -> None:
        """`sandbox` sets the limits of every command and of the workspace (default `SandboxConfig()`: 30 s,
        10,000 characters of output, 2 GB and 256 processes per command, a 256 MB workspace)."""
        super().__init__(max_turns=max_turns, action_prompt=action_prompt)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.task, self.split = task, split
        self.sandbox_config = sandbox or SandboxConfig()
        self.grade_unsubmitted = grade_unsubmitted
        self.tasks = self._load_tasks(task, Path(data_dir))
        self.observation_space = spaces.Text(max_length=MAX_TEXT_LENGTH, min_length=0, charset=SOURCE_CHARSET)
        self.current: SweTask | None = None
        self.report: GradingReport | None = None
        self._workspace: Workspace | None = None
        self._parse_error = ""

    def _load_tasks(self, task: str, data_dir: Path) -> tuple[SweTask, ...]:
        """The task pool; checks first that the sandbox works here, with its episode limits if they are on."""
        if task not in TASK_SETS:
            raise ValueError(f"task must be one of {TASK_SETS}, got {task!r}")
        bwrap_path()
        if self.sandbox_config.episode_limits:
            check_episode_limits()
        return load_tasks(data_dir)

    # ---- the text interface -------------------------------------------------------------------------------

    @property
    def instruction(self) -> str:
        """The tools, the reply format and the goal, for the system prompt."""
        tools = "\n".join(f"- {name} {arguments}" for name, arguments in TOOLS.items())
        return (
            f"You are a software engineer fixing an issue in a Python repository checked out at {self.mount}. "
            "Read the issue, find the code responsible, change it so the reported problem is fixed without "
            "breaking other behaviour, check your change (for example by running the tests with pytest), then "
            "submit. Hidden tests decide whether the issue is resolved; changes to test files are not graded. "
            f"You have {self.max_turns} tool calls. Each reply is exactly one tool call, written as JSON inside "
            f'{ANSWER_OPEN}{ANSWER_CLOSE} tags: {ANSWER_OPEN}{{"name": TOOL, "arguments": {{...}}}}{ANSWER_CLOSE}. '
            f"Tools and their arguments:\n{tools}"
        )

    @property
    def action_words(self) -> tuple[str, ...]:
        """The tool names (an action is a call of one of them)."""
        return tuple(TOOLS)

    def describe_actions(self) -> str:
        return 'a JSON tool call {"name": "bash" | "str_replace_editor" | "submit", "arguments": {...}}'

    def parse_action(self, text: str) -> str | None:
        """The canonical JSON of a well-formed tool call, else None (the reason is kept for the feedback)."""
        span = answer_span(text)
        if span is None:
            self._parse_error = f"the {ANSWER_OPEN} tags are unbalanced"
            return None
        try:
            return parse_tool_call(span).canonical()
        except ToolCallError as error:
            self._parse_error = str(error)
            return None

    def invalid_feedback(self, reply: str) -> str:
        return (
            f"Invalid tool call: {self._parse_error}. Nothing was run. Reply with one tool call as "
            f'{ANSWER_OPEN}{{"name": TOOL, "arguments": {{...}}}}{ANSWER_CLOSE}.'
        )

    # ---- episodes -----------------------------------------------------------------------------------------

    mount = WORKSPACE_MOUNT
    """The repository's path as the actor sees it."""

    @property
    def workspace(self) -> Path:
        """The host folder holding the episode's repository (``/repo`` inside the sandbox)."""
        if self._workspace is None:
            raise RuntimeError("no episode in progress: call reset() first")
        return self._workspace.root

    def _choose_task(self) -> SweTask:
        instance_id = self._options.get("instance_id")
        if instance_id is not None:
            for task in self.tasks:
                if task.instance_id == instance_id:
                    return task
            raise ValueError(f"no SWE-lite task {instance_id!r}")
        split, seed = seed_split(self.split, self._seed, "test")
        pool = [task for task in self.tasks if task.split == split]
        if not pool:
            raise ValueError(f"no {split} tasks to play; pass split= one of the tasks' splits")
        return choose_by_seed(pool, seed, self.np_random)

    def _open_workspace(self, task: SweTask) -> Workspace:
        """A fresh workspace for `task` (subclasses put it elsewhere, e.g. a Docker container)."""
        return LocalWorkspace(task, self.sandbox_config)

    def _reset_game(self) -> str:
        self._close_workspace()
        self.current = self._choose_task()
        self.report = None
        self._workspace = self._open_workspace(self.current)
        listing = Editor(self._workspace.root, self.mount).run({"command": "view", "path": self.mount})
        return f"Issue to resolve:\n\n{self.current.problem_statement.strip()}\n\n{listing}"

    def _observe(self) -> str:
        return f"(The repository is at {self.mount}; {self.max_turns - self._turn} tool calls left.)"

    def _play(self, action_word: str) -> GameStep:
        call = ToolCall(**json.loads(action_word))
        if call.name == "submit":
            return self._graded("Submitted.")
        if call.name == "bash":
            result = self._workspace.run(call.arguments["command"])
            if result.out_of_memory:
                limit = self.sandbox_config.memory_mb
                status = f"[killed: its processes together went over the memory limit of {limit} MB]"
            elif result.timed_out:
                status = f"[killed after {self.sandbox_config.timeout_s:g} s: the command timed out]"
            else:
                status = f"[exit code {result.exit_code}]"
            output = result.output if result.output.strip() else "(no output)"
            return GameStep(f"{output.rstrip()}\n{status}", 0.0, False, False)
        return GameStep(Editor(self.workspace, self.mount).run(call.arguments), 0.0, False, False)

    def _graded(self, opening: str) -> GameStep:
        """Grade the workspace and end the episode."""
        report = self.report = self._workspace.grade()
        issue_tests = len(report.fail_to_pass_passed) + len(report.fail_to_pass_failed)
        kept_tests = len(report.pass_to_pass_passed) + len(report.pass_to_pass_failed)
        verdict = "The issue is resolved." if report.resolved else "The issue is not resolved."
        if report.refused:
            return GameStep(f"{opening} It was not graded: {report.refused}. {verdict}", 0.0, True, False)
        summary = (
            f"{opening} Hidden tests: {len(report.fail_to_pass_passed)}/{issue_tests} issue tests pass, "
            f"{len(report.pass_to_pass_passed)}/{kept_tests} existing tests still pass. {verdict}"
        )
        return GameStep(summary, 1.0 if report.resolved else 0.0, True, report.resolved)

    def _truncation(self, observation: str, reward: float) -> tuple[str, float]:
        """An episode cut short (out of tool calls, or `truncate`) is graded as it stands (unless turned off)."""
        if not self.grade_unsubmitted:
            return super()._truncation(observation, reward)
        outcome = self._graded("The episode is over; your changes were graded as they stand.")
        self._success = outcome.success
        return f"{observation}\n{outcome.observation}", outcome.reward

    def _info(self, invalid_action: bool) -> dict[str, Any]:
        info = super()._info(invalid_action)
        assert self.current is not None
        info["instance_id"] = self.current.instance_id
        if self.report is not None:
            info["patch"] = self._workspace.patch()
            info["grading"] = {
                "resolved": self.report.resolved,
                "FAIL_TO_PASS": {
                    "success": list(self.report.fail_to_pass_passed),
                    "failure": list(self.report.fail_to_pass_failed),
                },
                "PASS_TO_PASS": {
                    "success": list(self.report.pass_to_pass_passed),
                    "failure": list(self.report.pass_to_pass_failed),
                },
                "log_trusted": self.report.log_trusted,
                "backend": self.report.backend,
                "refused": self.report.refused,
            }
        return info

    def _close_workspace(self) -> None:
        if self._workspace is not None:
            self._workspace.close()
        self._workspace = None

    def close(self) -> None:
        """Delete the episode's workspace."""
        self._close_workspace()
        super().close()
