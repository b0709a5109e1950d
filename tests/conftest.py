"""Shared fixtures: the tiny random model (same tokenizer as SmolLM2) is cheap enough to build per test module."""

from __future__ import annotations

import os
import sys
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

RAY_MODULES = frozenset({"test_extractor_diagnostics", "test_manager_ray", "test_notebook_05", "test_rollout_workers"})
"""Test modules that start Ray (notebook 05 in its kernel). Under pytest-xdist they run on one worker, one after
another: ``tests/test_rollout_workers.py`` starts a node with ``ray start --head``, which a plain ``ray.init()``
elsewhere on the machine would join, and ends with ``ray stop --force``, which stops every Ray node on it."""


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
