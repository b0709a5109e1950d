"""Rollout workers as Ray actors (``rollout_workers``) on a Ray cluster started as on a real head node
(``ray start --head``), the driver joining it by its address with its token (README, "Scaling out")."""

from __future__ import annotations

import secrets
import shutil

import pytest
import torch

from conftest import LOOPBACK_ONLY, ray_head_node
from comprl.config import make_config
from comprl.llm import load_model
from comprl.actor.trainer import ActorTrainer
from comprl.loop import StepLayout, make_envs, run_experiment
from comprl.actor.workers import RolloutWorkers

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    """A one-node Ray cluster started from the command line with a token (tests/conftest.py's ``ray_head_node``:
    its own files, loopback only, stopped alone), and its address; the driver holds the token as a driver on
    another machine would (``RAY_AUTH_TOKEN``) and reaches loopback as Ray's single-machine mode does."""
    from ray._private import ray_constants

    ray.shutdown()  # a Ray another test started in this process
    token = secrets.token_hex(32)
    with ray_head_node(token, num_cpus=3) as node, pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "token")
        patch.setenv("RAY_AUTH_TOKEN", token)
        patch.setenv(LOOPBACK_ONLY, "0")
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)  # what the switch sets when ray is imported
        try:
            yield node.address
        finally:
            ray.shutdown()


def smoke(address: str, **overrides):
    return make_config(
        "smoke", **{"batch_instances": 2, "rollout_workers": 2, "experience.ray_address": address, **overrides}
    )


def fresh_logprobs(model, pad_id: int, trajectories) -> tuple[torch.Tensor, torch.Tensor]:
    """(behaviour log-probs the workers sampled with, the driver model's log-probs of the same tokens)."""
    from comprl.llm.scoring import token_logprobs
    from comprl.policy_gradient import pad_batch

    batch = pad_batch(trajectories, pad_id)
    temperatures = torch.tensor([t.temperature for t in trajectories])
    with torch.no_grad():
        fresh = token_logprobs(
            model, batch["input_ids"], batch["attention_mask"], batch["action_mask"], temperatures,
            choices=[t.choices for t in trajectories],
        )
    mask = batch["action_mask"].bool()
    return batch["old_logprobs"][mask], fresh[mask]


def perturb(actor: ActorTrainer, seed: int) -> None:
    """Move every trainable weight (LoRA adapters) of the driver's learner, as an update would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in actor.model.parameters():
            if p.requires_grad:
                p.add_(0.5 * torch.randn(p.shape, generator=generator))


def test_workers_sample_with_the_weights_the_driver_sends(cluster):
    config = smoke(cluster, **{"actor.lora_rank": 4})
    tasks = [task for task, envs in make_envs(config).items() for _ in envs]
    model, tokenizer = load_model(config.model, seed=config.seed)
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    workers = RolloutWorkers(config, tasks)
    try:
        assert workers.rows == [[0, 1, 2, 3], [4, 5, 6, 7]]  # two groups of 4, one per worker
        seeds, groups, guided = [11] * 4 + [12] * 4, [0] * 4 + [1] * 4, [False] * 8
        for step in (1, 2):
            perturb(actor, step)
            trajectories, counters = workers.play(step, actor.state_dict()["weights"], seeds, groups, guided, [])
            assert [t.index for t in trajectories] == list(range(8))
            assert [(t.seed, t.group) for t in trajectories] == list(zip(seeds, groups))
            assert counters["generated_tokens"] == sum(t.num_action_tokens for t in trajectories) > 0
            behaviour, fresh = fresh_logprobs(actor.model, tokenizer.pad_token_id, trajectories)
            torch.testing.assert_close(fresh, behaviour, atol=1e-4, rtol=1e-4)
        # no weights sent: the workers keep step 2's; the driver's model moved on, so the ratio is no longer 1
        perturb(actor, 3)
        trajectories, _ = workers.play(3, None, seeds, groups, guided, [])
        behaviour, fresh = fresh_logprobs(actor.model, tokenizer.pad_token_id, trajectories)
        assert (fresh - behaviour).abs().max() > 1e-2
    finally:
        workers.close()


def test_more_workers_than_groups_is_refused(cluster):
    config = smoke(cluster, rollout_workers=3)
    tasks = [task for task, envs in make_envs(config).items() for _ in envs]
    with pytest.raises(ValueError, match="only 2 groups"):
        RolloutWorkers(config, tasks)


def test_search_and_ask_on_workers_needs_the_manager_in_ray():
    with pytest.raises(ValueError, match="experience.mode='async'"):
        make_config("smoke", method="comp_rl", rollout_workers=2, **{"experience.search_and_ask": True})


def test_a_run_on_two_workers_logs_what_a_run_in_one_process_logs(cluster, tmp_path):
    overrides = {"method": "comp_rl", "eval_episodes": 2}
    distributed = run_experiment(smoke(cluster, **overrides), tmp_path, name="ray", progress=False)
    local = run_experiment(smoke(cluster, rollout_workers=0, **overrides), tmp_path, name="local", progress=False)
    ray_rows, local_rows = distributed.metrics(), local.metrics()
    assert distributed.finished and local.finished
    assert set(ray_rows.columns) == set(local_rows.columns)
    assert ray_rows[["step", "phase"]].values.tolist() == local_rows[["step", "phase"]].values.tolist()
    train = ray_rows[ray_rows.phase == "train"]
    config = smoke(cluster, **overrides)
    assert (train.episodes == len(StepLayout(config, make_envs(config)).guided)).all()
    assert train.guided_with_entry.le(sum(StepLayout(config, make_envs(config)).guided)).all()
    assert train.generated_tokens.gt(0).all() and train.tokens_per_second.gt(0).all()
    # the extractor read the workers' trajectories: the bank grew from them
    assert train.bank_size.iloc[-1] > 0
    shutil.rmtree(tmp_path)
