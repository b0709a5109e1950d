"""The real SWE-bench through the SWE-lite interface: needs the ``swe`` extra and a running Docker daemon.

SWE-lite (`comprl.envs.swe.env`) is the offline stand-in. Users with Docker and SWE-bench's prebuilt instance
images can play the paper's benchmark with the same tools, prompts and reward::

    pip install 'comprl[swe]'
    env = SweBenchDockerEnv("swe_bench_verified_124.jsonl")   # instances exported from the dataset
    observation, info = env.reset(seed=0)

`instances_path` is a JSON Lines file of SWE-bench instances in the format swebench 5 reads (``instance_id``,
``problem_statement``, ``image``, ``eval_script``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``log_parser``, ...),
for example the paper's 124-task filter of SWE-Bench-Verified saved once with ``datasets``; nothing is
downloaded here. An optional ``split`` field (default ``"test"``) puts an instance in a split.

Per episode, the instance image's ``/testbed`` is copied to a host folder that is bind-mounted into a fresh
container (network disabled), so the editor works on host files exactly as in SWE-lite; ``bash`` runs
through ``docker exec`` with a timeout and the same output cap. Grading runs the instance's SWE-bench
evaluation script in the container and decides with swebench's own log parser and report functions. This
module is exercised only where Docker runs; CI checks that it refuses clearly when it cannot.

Unlike SWE-lite's grader, this one trusts the submission, as SWE-bench itself does: the tests run in the same
container and the same Python process as the agent's code, and their log is read, so code that patches pytest
or prints fake ``PASSED`` lines can fake a resolution. Use it to evaluate a policy, not to train on its reward.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comprl.envs.swe.env import SweLiteEnv, Workspace
from comprl.envs.swe.sandbox import CommandResult, SandboxConfig, cap_output
from comprl.envs.swe.tasks import GradingReport

TESTBED = "/testbed"
"""Where SWE-bench images keep the repository."""
KILLED = 137
"""Exit status of a command that ``timeout -s KILL`` stopped."""


def _import_harness() -> Any:
    try:
        import docker
        from swebench.harness import grading, utils
    except ImportError as error:
        raise ImportError(
            f"SweBenchDockerEnv needs the swe extra: pip install 'comprl[swe]' ({error.name} is missing)"
        ) from error
    return docker, grading, utils


@dataclass(frozen=True)
class SweBenchInstance:
    """One SWE-bench instance and the test spec swebench builds from it."""

    instance_id: str
    problem_statement: str
    split: str
    spec: Any
    """swebench's ``TestSpec``: the image, the evaluation script, FAIL_TO_PASS and PASS_TO_PASS."""


def load_instances(path: str | Path) -> tuple[SweBenchInstance, ...]:
    """The instances of a JSON Lines export of a SWE-bench dataset (see the module docstring)."""
    _, _, utils = _import_harness()
    instances = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            instances.append(
                SweBenchInstance(
                    raw["instance_id"], raw["problem_statement"], raw.get("split", "test"), utils.make_test_spec(raw)
                )
            )
        except (KeyError, json.JSONDecodeError) as error:
            raise ValueError(
                f"{path}, line {number}: not a SWE-bench instance ({type(error).__name__}: {error})"
            ) from error
    return tuple(instances)


class DockerWorkspace:
    """One instance's repository, bind-mounted from a host folder into a fresh container of its image."""

    mount = TESTBED

    def __init__(self, client: Any, instance: SweBenchInstance, config: SandboxConfig) -> None:
        self.instance, self.config = instance, config
        self._scratch = Path(tempfile.mkdtemp(prefix=f"comprl-swebench-{instance.instance_id}-"))
        self.root = self._scratch / "testbed"
        copier = client.containers.create(instance.spec.image, command="true")
        try:
            stream, _ = copier.get_archive(TESTBED)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
                archive.extractall(self._scratch, filter="tar")
        finally:
            copier.remove(force=True)
        self.container = client.containers.run(
            instance.spec.image,
            command="sleep infinity",
            detach=True,
            network_disabled=True,
            working_dir=TESTBED,
            volumes={str(self.root): {"bind": TESTBED, "mode": "rw"}},
            mem_limit=f"{config.memory_mb}m",
        )
        self._cleanup = weakref.finalize(self, _remove, self.container, self._scratch)

    def _exec(self, command: str, timeout_s: float) -> tuple[int, bytes]:
        exit_code, output = self.container.exec_run(
            ["timeout", "-s", "KILL", f"{timeout_s:g}", "bash", "-c", command], workdir=TESTBED
        )
        return exit_code, output or b""

    def run(self, command: str) -> CommandResult:
        started = time.perf_counter()
        exit_code, output = self._exec(command, self.config.timeout_s)
        text, truncated = cap_output(output, self.config.output_chars)
        timed_out = exit_code == KILLED and time.perf_counter() - started >= self.config.timeout_s
        return CommandResult(
            text, None if timed_out else exit_code, timed_out, truncated, time.perf_counter() - started
        )

    def grade(self) -> GradingReport:
        """Run the instance's SWE-bench evaluation script and apply swebench's grading."""
        _, grading, _ = _import_harness()
        spec = self.instance.spec
        _, output = self._exec(spec.eval_script, timeout_s=1800)
        log_path = self._scratch / "eval.log"
        log_path.write_bytes(output)
        statuses, trusted = grading.get_logs_eval(spec, str(log_path))
        gold = {"FAIL_TO_PASS": spec.FAIL_TO_PASS, "PASS_TO_PASS": spec.PASS_TO_PASS}
        report = grading.get_eval_tests_report(statuses, gold)
        f2p, p2p = report["FAIL_TO_PASS"], report["PASS_TO_PASS"]
        return GradingReport(
            resolved=trusted and grading.get_resolution_status(report) == "RESOLVED_FULL",
            fail_to_pass_passed=tuple(f2p["success"]),
            fail_to_pass_failed=tuple(f2p["failure"]),
            pass_to_pass_passed=tuple(p2p["success"]),
            pass_to_pass_failed=tuple(p2p["failure"]),
            log_trusted=trusted,
            backend="swebench-docker",
            log=output.decode("utf-8", errors="replace"),
        )

    def patch(self) -> str:
        return self._exec("git -c core.fileMode=false diff", timeout_s=60)[1].decode("utf-8", errors="replace")

    def close(self) -> None:
        self._cleanup()


def _remove(container: Any, scratch: Path) -> None:
    container.remove(force=True)
    shutil.rmtree(scratch, ignore_errors=True)


class SweBenchDockerEnv(SweLiteEnv):
    """SWE-bench instances played in Docker with SWE-lite's tools and reward (see the module docstring)."""

    mount = TESTBED

    def __init__(self, instances_path: str | Path, split: str = "test", **kwargs: Any) -> None:
        """`kwargs` are `SweLiteEnv`'s (``max_turns``, ``sandbox`` limits, ``grade_unsubmitted``, ...)."""
        super().__init__(task="swebench", split=split, data_dir=instances_path, **kwargs)

    def _load_tasks(self, task: str, data_dir: Path) -> tuple[SweBenchInstance, ...]:
        docker, _, _ = _import_harness()
        try:
            self._client = docker.from_env()
            self._client.ping()
        except docker.errors.DockerException as error:
            raise RuntimeError(f"SweBenchDockerEnv needs a running Docker daemon: {error}") from error
        return load_instances(data_dir)

    def _open_workspace(self, task: SweBenchInstance) -> Workspace:
        return DockerWorkspace(self._client, task, self.sandbox_config)
