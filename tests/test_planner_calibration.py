"""The planner prices what the kit does: the view's prompt sizes, one pass per constrained reply, the share of
rollouts the update trains, distillation prompts from the episode, and one GPU for runs whose models fit it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from comprl.config import make_config
from comprl.kit import planner

SMALL_GPU_RUN = {"model": "Qwen/Qwen2.5-1.5B-Instruct", "extractor.model": "Qwen/Qwen3-1.7B"}
"""The gpu profile's models: a 1.5B actor and a 1.7B extractor, both fully fine-tuned."""


@pytest.mark.parametrize("k", [2, 4, 8])
def test_the_trained_share_is_the_chance_that_a_group_of_k_is_not_all_equal(k):
    p = np.linspace(0.0, 1.0, 200_001)
    all_equal = np.trapezoid(p**k + (1 - p) ** k, p)  # success rate uniform on [0, 1]
    assert planner.trained_share(make_config("cpu", method="baseline", group_size=k)) == pytest.approx(1 - all_equal)
    halves = make_config("cpu", method="comp_rl", group_size=2 * k)  # advantages within halves of k
    assert planner.trained_share(halves) == pytest.approx(1 - all_equal)


def test_a_constrained_reply_is_one_decode_pass_and_its_forced_tokens_are_prefilled():
    config = make_config("cpu", method="baseline")
    free = make_config("cpu", method="baseline", **{"rollout.constrained_actions": False})
    (room,), (free_room,) = planner.step_budget(config).tasks, planner.step_budget(free).tasks
    assert room.turns == free_room.turns == config.max_turns
    assert room.decode == room.rollouts * room.turns  # one pass per reply
    assert free_room.decode == room.decode * config.rollout.max_new_tokens
    forced = (room.turns - 1) * (config.rollout.max_new_tokens - 1) * room.rollouts
    assert room.prefill - free_room.prefill == forced


def test_the_brief_view_is_priced_with_its_own_prompt_sizes_and_distillation_from_the_episode():
    config = make_config("cpu", method="comp_rl")
    (room,) = planner.step_budget(config).tasks
    brief = planner.VIEW_PROMPT_TOKENS["comprl/Room-Random-5x5-v0", "brief"]
    assert room.per_turn == brief.per_turn < planner.PROMPT_TOKENS["comprl/Room-Random-5x5-v0"].per_turn
    budget = planner.step_budget(config)
    episode = planner.DISTILL_FRAMING + room.sequence
    assert episode < brief.distill  # a 6-turn episode's prompt, not the transcript cap's
    assert budget.distill_prompt == pytest.approx(episode + 0.5 * planner.SHARED_TOKENS["entry"])
    long = make_config("paper", method="comp_rl")  # 30 turns of replies up to 4,096 tokens: the cap
    (paper_room,) = planner.step_budget(long).tasks
    assert planner.step_budget(long).distill_prompt == pytest.approx(
        planner.PROMPT_TOKENS[paper_room.env_id].distill + 0.5 * planner.SHARED_TOKENS["entry"]
    )


def test_a_run_whose_models_fit_one_gpu_takes_one_gpu_its_phases_in_turn():
    h200 = planner.load_throughput(planner.THROUGHPUT_DIR / "nvidia-h200.json")
    small = make_config("paper", method="comp_rl", **SMALL_GPU_RUN, **{"experience.mode": "async"})
    assert planner.run_gb(small) <= planner.GPU_MEMORY_GB and planner.gpu_count(small) == 1
    took = planner.step_time(small, planner.step_budget(small), h200)
    assert not took.overlap  # one GPU: the extractor's work waits for the actor's
    assert took.step == pytest.approx(took.rollout + took.actor_update + took.extraction + took.extractor_update)
    plan = planner.placement_plan([small, make_config("paper", method="baseline", **SMALL_GPU_RUN)])
    assert "one GPU each" in plan and "total: 1 GPU on 1 node for 2 runs" in plan and "GPUs 0-7" not in plan


def test_the_paper_profile_keeps_the_official_placement():
    paper = [make_config("paper", method=method) for method in ("comp_rl", "baseline")]
    assert not any(map(planner.fits_one_gpu, paper))
    assert [planner.gpu_count(c) for c in paper] == [16, 8]
    plan = planner.placement_plan(paper)
    assert "fit one 80 GB GPU" not in plan and "actor      GPUs 0-7" in plan and "extractor  GPUs 8-15" in plan
    assert "total: 16 GPUs on 2 nodes for 1 runs" in plan and "the reproduction needs 16 GPUs at once" in plan


def test_a_gpu_plan_for_a_model_far_smaller_than_the_measured_one_says_its_times_are_too_short():
    h200 = planner.load_throughput(planner.THROUGHPUT_DIR / "nvidia-h200.json")
    cpu = dataclasses.replace(h200, device_kind="cpu")  # the same rates, said of a CPU
    warning = "more than 4x smaller than the measured model"
    small = make_config("cpu", method="comp_rl")  # SmolLM2-135M, 56x smaller than the H200's measured 7.6B
    same = make_config("paper", method="baseline")  # the measured 7B itself: scaled x1
    assert h200.rate("prefill", small.model) > planner.FAR_SCALE * h200.prefill_tokens_per_s
    assert warning in planner.time_plan({"": [small]}, small, planner.step_budget(small), h200)
    assert warning not in planner.time_plan({"": [same]}, same, planner.step_budget(same), h200)
    assert warning not in planner.time_plan({"": [small]}, small, planner.step_budget(small), cpu)  # CPUs: not flagged
