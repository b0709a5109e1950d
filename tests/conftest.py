"""Shared fixtures: the tiny random model (same tokenizer as SmolLM2) is cheap enough to build per test module."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import comprl  # noqa: F401  before torch: sets how OpenMP threads wait (comprl/threads.py)
import gymnasium as gym
import pytest
import torch

from comprl.envs import make
from comprl.envs.swe.sandbox import SandboxUnavailable, bwrap_path, check_episode_limits
from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
from comprl.llm import HFEngine, load_model, token_logprobs
from comprl.policy_gradient import PackedSequence
from comprl.policy_gradient import pad_batch


def _sandbox_problem() -> str:
    """Why SWE-lite's sandbox cannot run here with its default limits ("" when it can)."""
    try:
        bwrap_path()
        check_episode_limits()
    except SandboxUnavailable as error:
        return str(error)
    return ""


if os.environ.get("PYTEST_XDIST_WORKER"):
    # one torch thread per pytest-xdist worker (`make test` runs 2 workers): two workers of two threads each would
    # oversubscribe 2 cores
    torch.set_num_threads(1)

RAY_MODULES = frozenset(
    {"test_extractor_diagnostics", "test_manager_ray", "test_notebook_05", "test_ray_start", "test_rollout_workers"}
)
"""Test modules that start Ray (notebook 05 in its kernel). Under pytest-xdist they run on one worker, one after
another: each starts nodes of its own, but two nodes starting at once on 2 cores can miss Ray's 30 s window to
register (comprl/ray_start.py)."""


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it (`-p no:xdist`) it is not called
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n N`` (``--dist load``, as ``make test`` runs): each module's tests on one worker (its module-scoped
    fixtures built once), and the modules of :data:`RAY_MODULES` together on one. Any other ``--dist`` is left as it
    is. (xdist's own ``--dist loadgroup`` marks no longer reach its scheduler under pytest 9.2.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesWithRayTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "ray" if Path(module).stem in RAY_MODULES else module

    return ModulesWithRayTogether(config, log)


@pytest.fixture(autouse=True)
def _ray_tests_are_listed(request):
    """Fails a test that leaves Ray started in its process from a module :data:`RAY_MODULES` does not list."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and request.node.path.stem not in RAY_MODULES:
        pytest.fail(f"{request.node.path.name} starts Ray: add it to RAY_MODULES in tests/conftest.py")


RAY = Path(sys.executable).with_name("ray")
"""The ``ray`` command of this environment."""

LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for its single-machine mode, loopback only (``"0"``), read from the environment on import."""


@dataclass(frozen=True)
class HeadNode:
    """A Ray node :func:`ray_head_node` started."""

    address: str
    """Its GCS address, ``127.0.0.1:port``."""
    temp_dir: Path
    """Its temp dir (``ray start --temp-dir``), where it records its address (``ray_current_cluster``)."""


@contextmanager
def ray_head_node(token: str | None = None, num_cpus: int = 1) -> Iterator[HeadNode]:
    """A Ray node started from the command line (``ray start --head``, as on a real head node), confined to the
    test: its files in a folder of its own, a free port on loopback only (Ray's single-machine mode), token
    authentication with ``token`` (None: none, as ``ray start`` leaves a node without a token); stopped by
    killing its own process group (its workers, in groups of their own, end with its raylet), never by
    ``ray stop``, which stops every Ray node on the machine."""
    if not RAY.exists():
        pytest.skip(f"no ray command next to {sys.executable}")
    with tempfile.TemporaryDirectory(prefix="comprl-test-ray-") as root:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH_TOKEN")}
        env.update({LOOPBACK_ONLY: "0", "RAY_AUTH_MODE": "token" if token else "disabled"})
        if token:
            env["RAY_AUTH_TOKEN"] = token
        node = HeadNode(f"127.0.0.1:{port}", Path(root) / "ray")
        start = subprocess.Popen(
            [str(RAY), "start", "--head", f"--temp-dir={node.temp_dir}", f"--port={port}",
             "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}", "--include-dashboard=false",
             "--disable-usage-stats"],
            env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # its own process group, which the node's processes inherit
        try:
            output = start.communicate(timeout=120)[0]
            if start.returncode:
                pytest.fail(f"ray start --head failed:\n{output}")
            yield node
        finally:
            _stop_process_group(start.pid)


def _stop_process_group(group: int) -> None:
    """Kills the processes of ``group`` (a test's node holds nothing to save; gracefully, its GCS and raylet take
    10 s or more to stop) and waits up to 30 s for them to end."""
    deadline = time.monotonic() + 30
    if _group_members(group):
        os.killpg(group, signal.SIGKILL)
    while _group_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)


def _group_members(group: int) -> list[int]:
    """The live processes (zombies aside) of process group ``group``."""
    members = []
    for entry in Path("/proc").iterdir():
        try:
            state, _, pgrp = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):  # not a process, or one that ended meanwhile
            continue
        if int(pgrp) == group and state != "Z":
            members.append(int(entry.name))
    return members


needs_sandbox = pytest.mark.skipif(bool(_sandbox_problem()), reason=_sandbox_problem() or "sandbox available")
"""Skips a test that needs SWE-lite's sandbox (bubblewrap, cgroups and tmpfs mounts), saying what is missing."""


@pytest.fixture(scope="session")
def seeded_bank(tmp_path_factory):
    """A bank file with three Room lessons at step 0, for ``bank.init_from``: the tiny models' guided episodes then
    retrieve real entries from the first step on."""
    path = tmp_path_factory.mktemp("bank") / "seed.duckdb"
    lessons = [
        ("Find the stairs", "Look for the > symbol on the map and walk toward it."),
        ("Avoid monsters", "Step around letters on the map; they are monsters."),
        ("Use diagonals", "Diagonal moves cover the room in fewer turns."),
    ]
    with ExperienceBank(path, Embedder()) as bank:
        bank.apply([Write("add", entry=NewEntry(t, c)) for t, c in lessons], step=0, task="comprl/Room-Ultimate-5x5-v0")
    return path


class RewardByReplyLength(gym.Wrapper):
    """An env whose replies of even length earn 1: a random model's rollouts of one task then differ in return,
    so its GRPO advantages are not all zero."""

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, float(len(action) % 2 == 0), terminated, truncated, info


def make_rewarding_even_replies(env_id: str, **kwargs) -> RewardByReplyLength:
    """``comprl.envs.make`` with :class:`RewardByReplyLength` around the env (patched over
    ``comprl.envs.mixture.make``, which builds the loop's envs)."""
    return RewardByReplyLength(make(env_id, **kwargs))


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2 (loading takes a few seconds, so once per module)."""
    return Embedder()


@pytest.fixture()
def make_track(tmp_path, embedder, tiny_engine):
    """``make_track(task, **extractor_config)``: an experience track of the tiny engine over a fresh DuckDB bank
    under ``tmp_path`` (each call its own bank file, all closed at the end of the test)."""
    from comprl.experience.extractor.track import ExperienceTrack
    from comprl.experience.extractor.trainer import ExtractorConfig

    banks = []

    def make_one(task: str, **config) -> ExperienceTrack:
        banks.append(ExperienceBank(tmp_path / f"bank{len(banks)}.duckdb", embedder))
        return ExperienceTrack(tiny_engine, banks[-1], ExtractorConfig(**config), task=task)

    yield make_one
    for bank in banks:
        bank.close()


@pytest.fixture(scope="module")
def tiny():
    """(model, tokenizer) of the tiny random Llama; module-scoped because trainer tests modify weights."""
    return load_model("tiny-random", seed=0)


@pytest.fixture(scope="module")
def sharp():
    """tiny-random with its matrices scaled up: its greedy replies vary with the context (at scale 1 they are
    all newlines), so equal completions say something."""
    model, tokenizer = load_model("tiny-random", seed=0)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 2:
                param.mul_(6.0)
    return model, tokenizer


@pytest.fixture(scope="module")
def tiny_engine(tiny):
    model, tokenizer = tiny
    return HFEngine(model, tokenizer)


def pack(prompts, completions) -> list[PackedSequence]:
    """One packed sequence per (prompt ids, completion): prompt as context, completion with its log-probs."""
    sequences = []
    for prompt, completion in zip(prompts, completions):
        sequence = PackedSequence()
        sequence.extend(prompt)
        sequence.extend(completion.token_ids, completion.logprobs)
        sequences.append(sequence)
    return sequences


@pytest.fixture()
def assert_logprobs_match_fresh_pass():
    """Check that the behaviour log-probs of packed sequences equal a fresh forward pass's (within fp tolerance)."""

    def check(model, pad_id, sequences, temperature) -> None:
        batch = pad_batch(sequences, pad_id)
        with torch.no_grad():
            fresh = token_logprobs(
                model, batch["input_ids"], batch["attention_mask"], batch["action_mask"], temperature,
                choices=[s.choices for s in sequences],
            )
        mask = batch["action_mask"].bool()
        assert mask.sum() == sum(s.num_action_tokens for s in sequences) > 0
        torch.testing.assert_close(fresh[mask], batch["old_logprobs"][mask], atol=1e-4, rtol=1e-4)

    return check


@pytest.fixture
def cpu_measurement():
    """The first CPU throughput file checked in under results/throughput/ (its path)."""
    import json

    from comprl.kit.planner import THROUGHPUT_DIR

    found = [p for p in sorted(THROUGHPUT_DIR.glob("*.json")) if json.loads(p.read_text())["device_kind"] == "cpu"]
    assert found, f"no CPU measurement in {THROUGHPUT_DIR}"
    return found[0]
