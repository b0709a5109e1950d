"""Behaviour of comprl.objectives, pinned with hand-computed numbers.

Every expected value below is worked out in the comment next to it; nothing is recomputed with the code under
test. float64 is used where a value is compared to many digits.
"""

import math

import pytest
import torch

from comprl.objectives import (
    AGGREGATIONS,
    aggregate,
    batch_advantages,
    cispo_loss,
    grpo_policy_loss,
    split_group_advantages,
)

T, F = True, False
SQRT3 = math.sqrt(3.0)  # 1.7320508...
INV_SQRT3 = 1.0 / SQRT3  # 0.5773502...


def _t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# split_group_advantages (paper Eq. 5)
# ---------------------------------------------------------------------------------------------------------------

# One task instance, K = 8: the first K/2 rollouts experience-guided, the last K/2 experience-free.
REWARDS = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
ONE_GROUP = [0] * 8
HALVES = [T, T, T, T, F, F, F, F]


def test_guided_and_free_halves_normalised_separately():
    # guided [1,0,1,1]: mean 0.75, centred [.25,-.75,.25,.25], population var (3*.0625+.5625)/4 = .1875,
    #   std = sqrt(.1875) = sqrt(3)/4 -> A = [1/sqrt3, -sqrt3, 1/sqrt3, 1/sqrt3]
    # free   [0,0,1,0]: mean 0.25, centred [-.25,-.25,.75,-.25], same std -> A = [-1/sqrt3, -1/sqrt3, sqrt3, -1/sqrt3]
    adv = split_group_advantages(_t(REWARDS), torch.tensor(ONE_GROUP), torch.tensor(HALVES), eps=0.0)
    expected = _t([INV_SQRT3, -SQRT3, INV_SQRT3, INV_SQRT3, -INV_SQRT3, -INV_SQRT3, SQRT3, -INV_SQRT3])
    torch.testing.assert_close(adv, expected)

    # Whole-group normalisation (both halves together): mean 0.5, std 0.5 -> A = +-1. Different numbers,
    # and e.g. the guided failure gets -1 instead of -sqrt3.
    whole = split_group_advantages(_t(REWARDS), torch.tensor(ONE_GROUP), torch.zeros(8, dtype=torch.bool), eps=0.0)
    torch.testing.assert_close(whole, _t([1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 1.0, -1.0]))
    assert not torch.allclose(adv, whole)


def test_all_free_is_plain_grpo_group_normalisation():
    # Two groups, no guided rollouts: group 0 = [1,0] (mean .5, std .5) -> [1,-1];
    # group 1 = [1,0,0,0] (mean .25, pop. std sqrt(3)/4) -> [sqrt3, -1/sqrt3, -1/sqrt3, -1/sqrt3].
    rewards = _t([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    groups = torch.tensor([0, 1, 0, 1, 1, 1])
    adv = split_group_advantages(rewards, groups, torch.zeros(6, dtype=torch.bool), eps=0.0)
    torch.testing.assert_close(adv, _t([1.0, SQRT3, -1.0, -INV_SQRT3, -INV_SQRT3, -INV_SQRT3]))


def test_std_is_population_std_not_sample_std():
    # [1,0,0,0]: population std = sqrt(3/16) = 0.4330 -> A_0 = .75/.4330 = sqrt3 = 1.7321;
    # the sample std sqrt(3/12) = 0.5 would give 1.5 instead.
    adv = split_group_advantages(_t([1.0, 0.0, 0.0, 0.0]), torch.zeros(4, dtype=torch.long),
                                 torch.ones(4, dtype=torch.bool), eps=0.0)
    torch.testing.assert_close(adv, _t([SQRT3, -INV_SQRT3, -INV_SQRT3, -INV_SQRT3]))
    assert abs(adv[0].item() - 1.5) > 0.2


def test_std_division_off_only_subtracts_half_mean():
    # guided mean 0.75 -> [.25,-.75,.25,.25]; free mean 0.25 -> [-.25,-.25,.75,-.25]
    adv = split_group_advantages(_t(REWARDS), torch.tensor(ONE_GROUP), torch.tensor(HALVES), scale_by_std=False)
    torch.testing.assert_close(adv, _t([0.25, -0.75, 0.25, 0.25, -0.25, -0.25, 0.75, -0.25]))


def test_eps_is_added_to_std():
    # guided failure: -0.75 / (sqrt(3)/4 + 0.1) = -0.75 / 0.5330127 = -1.4071
    adv = split_group_advantages(_t(REWARDS), torch.tensor(ONE_GROUP), torch.tensor(HALVES), eps=0.1)
    assert adv[1].item() == pytest.approx(-0.75 / (math.sqrt(3.0) / 4.0 + 0.1))
    assert adv[1].item() == pytest.approx(-1.40709, abs=1e-5)


def test_cells_found_by_group_id_not_position():
    # Interleaved rollouts of two task instances:
    #   (g0, guided) = idx 0,4 rewards [1,1] -> constant -> 0, 0
    #   (g1, guided) = idx 1,5 rewards [0,1] -> mean .5, std .5 -> -1, +1
    #   (g0, free)   = idx 2,6 rewards [0,0] -> constant -> 0, 0
    #   (g1, free)   = idx 3,7 rewards [0,1] -> -1, +1
    rewards = _t([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    groups = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    guided = torch.tensor([T, T, F, F, T, T, F, F])
    adv = split_group_advantages(rewards, groups, guided, eps=0.0)
    torch.testing.assert_close(adv, _t([0.0, -1.0, 0.0, -1.0, 0.0, 1.0, 0.0, 1.0]))


@pytest.mark.parametrize("scale_by_std", [True, False])
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_singleton_and_constant_cells_get_zero_not_nan(scale_by_std, eps):
    # group 0: one rollout (singleton); group 1: three rollouts of 0.9 (constant; in float32 the computed mean
    # is 0.9 - 6e-8, so r - mean = 6e-8 and dividing by std + 1e-6 would give ~0.056, not 0);
    # group 2: guided singleton 1.0 next to free pair [0, 1] -> free pair gets -1, +1 (std on) or -.5, +.5 (off).
    rewards = torch.tensor([1.0, 0.9, 0.9, 0.9, 1.0, 0.0, 1.0], dtype=torch.float32)
    groups = torch.tensor([0, 1, 1, 1, 2, 2, 2])
    guided = torch.tensor([F, F, F, F, T, F, F])
    adv = split_group_advantages(rewards, groups, guided, scale_by_std=scale_by_std, eps=eps)
    assert not torch.isnan(adv).any()
    pair = [-1.0, 1.0] if scale_by_std else [-0.5, 0.5]
    torch.testing.assert_close(adv, torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0] + pair), atol=1e-5, rtol=0)
    assert (adv[:5] == 0).all()  # exactly zero


def test_split_group_advantages_validates_inputs():
    r = torch.zeros(4)
    with pytest.raises(ValueError, match="group_ids"):
        split_group_advantages(r, torch.zeros(3, dtype=torch.long), torch.zeros(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="guided"):
        split_group_advantages(r, torch.zeros(4, dtype=torch.long), torch.zeros(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="guided"):
        split_group_advantages(r, torch.zeros(4, dtype=torch.long), torch.zeros(4))  # float, not bool
    with pytest.raises(ValueError, match="group_ids"):
        split_group_advantages(r, torch.zeros(4), torch.zeros(4, dtype=torch.bool))  # float ids
    with pytest.raises(ValueError, match="rewards"):
        split_group_advantages(torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.long),
                               torch.zeros(2, 2, dtype=torch.bool))


# ---------------------------------------------------------------------------------------------------------------
# batch_advantages (extractor)
# ---------------------------------------------------------------------------------------------------------------


def test_extractor_advantage_is_reward_minus_batch_mean():
    # mean(1, -1, 1, 0.5) = 1.5/4 = 0.375 -> [0.625, -1.375, 0.625, 0.125]; no std division
    adv = batch_advantages(_t([1.0, -1.0, 1.0, 0.5]))
    torch.testing.assert_close(adv, _t([0.625, -1.375, 0.625, 0.125]))


def test_batch_advantages_rejects_non_vector():
    with pytest.raises(ValueError, match="rewards"):
        batch_advantages(torch.zeros(2, 2))


# ---------------------------------------------------------------------------------------------------------------
# aggregate
# ---------------------------------------------------------------------------------------------------------------

VALUES = [[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [9.0, 9.0, 9.0]]
MASK = [[1, 1, 1], [1, 0, 0], [0, 0, 0]]  # lengths 3, 1 and an empty sequence


def test_token_mean_averages_over_all_masked_tokens():
    # (1 + 2 + 3 + 4) / 4 = 2.5; the 9s and 0s are masked out
    assert aggregate(_t(VALUES), _t(MASK), "token-mean").item() == pytest.approx(2.5)


def test_seq_mean_token_mean_averages_sequences_with_tokens():
    # seq 0: (1+2+3)/3 = 2; seq 1: 4/1 = 4; seq 2 has no token and is skipped -> (2 + 4) / 2 = 3.0
    assert aggregate(_t(VALUES), _t(MASK), "seq-mean-token-mean").item() == pytest.approx(3.0)


def test_aggregate_accepts_bool_mask_and_ignores_nan_under_mask():
    values = _t([[1.0, 2.0, float("nan")], [4.0, float("inf"), 0.0]])
    mask = torch.tensor([[T, T, F], [T, F, F]])
    # token-mean (1+2+4)/3 = 7/3; seq-mean ((1+2)/2 + 4)/2 = 2.75
    assert aggregate(values, mask, "token-mean").item() == pytest.approx(7.0 / 3.0)
    assert aggregate(values, mask, "seq-mean-token-mean").item() == pytest.approx(2.75)


def test_aggregate_of_empty_mask_is_zero():
    for mode in AGGREGATIONS:
        assert aggregate(torch.ones(2, 3), torch.zeros(2, 3), mode).item() == 0.0


def test_unknown_aggregation_raises_and_names_accepted_modes():
    with pytest.raises(ValueError, match="token-mean.*seq-mean-token-mean"):
        aggregate(torch.ones(1, 2), torch.ones(1, 2), "sum")


# ---------------------------------------------------------------------------------------------------------------
# grpo_policy_loss (actor)
# ---------------------------------------------------------------------------------------------------------------


def _leaf(values):
    return _t(values).requires_grad_(True)


def test_grpo_loss_at_ratio_one_is_minus_mean_advantage():
    # ratio = 1 everywhere -> objective per token = A_i; equal lengths -> token-mean = mean(A) = (1.5 - 0.5)/2
    logprobs = _t([[-1.0, -2.0, -0.5], [-0.3, -0.7, -1.1]])
    loss, stats = grpo_policy_loss(logprobs, logprobs.clone(), _t([1.5, -0.5]), torch.ones(2, 3))
    assert loss.item() == pytest.approx(-0.5)
    assert stats == {"clip_fraction": 0.0, "ratio_mean": 1.0, "approx_kl": 0.0}


# Ratios chosen inside and outside the window [0.8, 1.2] for both signs of A (old_logprobs = 0, so
# logprobs = log ratio):
#   row 0, A = +2, ratios [1.5, 0.5, 1.0]:
#     1.5: min(1.5*2 = 3.0, 1.2*2 = 2.4) = 2.4   clipped branch selected (clip active)
#     0.5: min(0.5*2 = 1.0, 0.8*2 = 1.6) = 1.0   unclipped
#     1.0: 2.0
#   row 1, A = -1, ratios [1.5, 0.5, 1.1]:
#     1.5: min(-1.5, -1.2) = -1.5                 unclipped
#     0.5: min(-0.5, -0.8) = -0.8                 clipped branch selected (clip active)
#     1.1: min(-1.1, -1.1) = -1.1                 inside window
#   token-mean J = (2.4 + 1.0 + 2.0 - 1.5 - 0.8 - 1.1) / 6 = 2.0 / 6 = 0.333333 -> loss = -0.333333
RATIOS = [[1.5, 0.5, 1.0], [1.5, 0.5, 1.1]]
ADV = [2.0, -1.0]


def test_grpo_loss_matches_hand_values_with_ratios_outside_clip_window():
    logprobs = _t(RATIOS).log()
    loss, stats = grpo_policy_loss(logprobs, torch.zeros(2, 3, dtype=torch.float64), _t(ADV), torch.ones(2, 3))
    assert loss.item() == pytest.approx(-2.0 / 6.0)
    # clip active on 2 of 6 tokens (row 0 ratio 1.5, row 1 ratio 0.5)
    assert stats["clip_fraction"] == pytest.approx(2.0 / 6.0)
    # (1.5 + 0.5 + 1.0 + 1.5 + 0.5 + 1.1) / 6 = 6.1 / 6
    assert stats["ratio_mean"] == pytest.approx(6.1 / 6.0)
    # (r-1) - ln r: 1.5 -> .5 - .405465 = .094535; 0.5 -> -.5 + .693147 = .193147; 1.0 -> 0;
    # 1.1 -> .1 - .095310 = .004690; sum 2*.094535 + 2*.193147 + .004690 = .580054 -> / 6 = .096676
    assert stats["approx_kl"] == pytest.approx(0.096676, abs=1e-6)
    assert all(isinstance(v, float) for v in stats.values())


def test_grpo_gradient_is_zero_for_tokens_clipped_in_pessimistic_branch():
    # d loss / d logprob = -ratio * A / 6 on unclipped tokens (d ratio / d logprob = ratio), 0 where the clipped
    # (constant) branch was selected:
    #   row 0 (A=2):  [0 (clipped), -0.5*2/6 = -1/6, -1.0*2/6 = -1/3]
    #   row 1 (A=-1): [+1.5/6 = 0.25, 0 (clipped), +1.1/6 = 0.183333]
    logprobs = _t(RATIOS).log().requires_grad_(True)
    loss, _ = grpo_policy_loss(logprobs, torch.zeros(2, 3, dtype=torch.float64), _t(ADV), torch.ones(2, 3))
    loss.backward()
    expected = _t([[0.0, -1.0 / 6.0, -1.0 / 3.0], [0.25, 0.0, 1.1 / 6.0]])
    torch.testing.assert_close(logprobs.grad, expected)


def test_grpo_treats_old_logprobs_as_constants():
    logprobs = _t(RATIOS).log().requires_grad_(True)
    old = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    loss, _ = grpo_policy_loss(logprobs, old, _t(ADV), torch.ones(2, 3))
    loss.backward()
    assert old.grad is None


def test_grpo_seq_mean_token_mean_differs_from_token_mean_on_unequal_lengths():
    # ratio 1, A = [+1, -1], lengths 3 and 1:
    #   token-mean:          (3 * 1 + 1 * -1) / 4 = 0.5 -> loss -0.5
    #   seq-mean-token-mean: (1 + -1) / 2        = 0.0 -> loss  0.0   (difference 0.5)
    logprobs = torch.zeros(2, 3, dtype=torch.float64)
    mask = _t([[1, 1, 1], [1, 0, 0]])
    adv = _t([1.0, -1.0])
    tok, _ = grpo_policy_loss(logprobs, logprobs, adv, mask, aggregation="token-mean")
    seq, _ = grpo_policy_loss(logprobs, logprobs, adv, mask, aggregation="seq-mean-token-mean")
    assert tok.item() == pytest.approx(-0.5)
    assert seq.item() == pytest.approx(0.0)
    assert seq.item() - tok.item() == pytest.approx(0.5)


def test_grpo_padding_tokens_get_zero_gradient_and_do_not_change_loss():
    # Same tokens as the hand-computed case plus a padding column holding garbage (-inf / +50 log-probs).
    logprobs = torch.cat([_t(RATIOS).log(), _t([[-math.inf], [50.0]])], dim=1).requires_grad_(True)
    old = torch.cat([torch.zeros(2, 3, dtype=torch.float64), _t([[-math.inf], [0.0]])], dim=1)
    mask = torch.tensor([[T, T, T, F], [T, T, T, F]])
    loss, stats = grpo_policy_loss(logprobs, old, _t(ADV), mask)
    loss.backward()
    assert loss.item() == pytest.approx(-2.0 / 6.0)
    assert stats["clip_fraction"] == pytest.approx(2.0 / 6.0)
    torch.testing.assert_close(logprobs.grad[:, 3], _t([0.0, 0.0]))
    assert torch.isfinite(logprobs.grad).all()


# ---------------------------------------------------------------------------------------------------------------
# cispo_loss (extractor)
# ---------------------------------------------------------------------------------------------------------------

# Window [0.9, 1.1] (eps_low = eps_high = 0.1), old_logprobs = 0 so logprobs = log ratio; 5 real tokens
# plus one padding token in row 1:
#   row 0, A = +2, ratios [1.5, 0.5, 1.05] -> weights sg(clip) = [1.1, 0.9, 1.05]
#   row 1, A = -1, ratios [1.2, 0.8, pad]  -> weights            [1.1, 0.9]
C_RATIOS = [[1.5, 0.5, 1.05], [1.2, 0.8, 1.0]]
C_MASK = [[1, 1, 1], [1, 1, 0]]
C_ADV = [2.0, -1.0]


def _cispo_inputs():
    logprobs = _t(C_RATIOS).log()
    logprobs[1, 2] = -math.inf  # garbage on the padding token
    return logprobs.requires_grad_(True), torch.zeros(2, 3, dtype=torch.float64), _t(C_ADV), _t(C_MASK)


def test_cispo_loss_matches_hand_value():
    # J = 1/5 * [2 * (1.1 ln1.5 + 0.9 ln0.5 + 1.05 ln1.05) - (1.1 ln1.2 + 0.9 ln0.8)]
    #   = 1/5 * [2 * (0.446012 - 0.623832 + 0.051230) - (0.200554 - 0.200829)]
    #   = 1/5 * [-0.253182 + 0.000275] = -0.050581  -> loss = +0.050581
    logprobs, old, adv, mask = _cispo_inputs()
    loss, stats = cispo_loss(logprobs, old, adv, mask)
    assert loss.item() == pytest.approx(0.050581, abs=1e-6)
    # outside [0.9, 1.1]: 1.5, 0.5, 1.2, 0.8 -> 4 of 5 tokens
    assert stats["clip_fraction"] == pytest.approx(0.8)
    # (1.5 + 0.5 + 1.05 + 1.2 + 0.8) / 5 = 5.05 / 5
    assert stats["ratio_mean"] == pytest.approx(1.01)


def test_cispo_gradient_nonzero_for_every_token_including_clipped_ones():
    # token-mean: d loss / d logprob_{i,t} = -sg(clip(ratio)) * A_i / 5
    #   row 0 (A=+2): [-1.1*2/5 = -0.44, -0.9*2/5 = -0.36, -1.05*2/5 = -0.42]
    #   row 1 (A=-1): [+1.1/5 = 0.22, +0.9/5 = 0.18, padding 0]
    logprobs, old, adv, mask = _cispo_inputs()
    loss, _ = cispo_loss(logprobs, old, adv, mask, eps_low=0.1, eps_high=0.1)
    loss.backward()
    expected = _t([[-0.44, -0.36, -0.42], [0.22, 0.18, 0.0]])
    torch.testing.assert_close(logprobs.grad, expected)
    assert (logprobs.grad[mask.bool()] != 0).all()


def test_cispo_keeps_gradient_where_ppo_clipping_zeroes_it():
    # Row 0 token 0: ratio 1.5, A = +2. PPO (eps 0.1) selects the clipped branch -> gradient 0;
    # CISPO keeps -1.1 * 2 / 5 = -0.44.
    logprobs, old, adv, mask = _cispo_inputs()
    ppo, _ = grpo_policy_loss(logprobs, old, adv, mask, clip_eps=0.1)
    (g_ppo,) = torch.autograd.grad(ppo, logprobs)
    cis, _ = cispo_loss(logprobs, old, adv, mask)
    (g_cis,) = torch.autograd.grad(cis, logprobs)
    assert g_ppo[0, 0].item() == 0.0
    assert g_cis[0, 0].item() == pytest.approx(-0.44)


def test_cispo_seq_mean_token_mean_gradient_and_value():
    # seq-mean-token-mean: d loss / d logprob_{i,t} = -w * A_i / (2 sequences * |m_i|)
    #   row 0 (3 tokens): [-2.2/6, -1.8/6, -2.1/6];  row 1 (2 tokens): [1.1/4, 0.9/4, 0]
    # value: J = 1/2 * (-0.253182 / 3 + 0.000275 / 2) = 1/2 * (-0.084394 + 0.000138) = -0.042128
    # -> loss 0.042128, i.e. 0.008453 below the token-mean loss 0.050581
    logprobs, old, adv, mask = _cispo_inputs()
    loss, _ = cispo_loss(logprobs, old, adv, mask, aggregation="seq-mean-token-mean")
    loss.backward()
    assert loss.item() == pytest.approx(0.042128, abs=1e-6)
    torch.testing.assert_close(logprobs.grad, _t([[-2.2 / 6, -1.8 / 6, -2.1 / 6], [1.1 / 4, 0.9 / 4, 0.0]]))
    tok, _ = cispo_loss(logprobs, old, adv, mask, aggregation="token-mean")
    assert tok.item() - loss.item() == pytest.approx(0.008453, abs=1e-6)


def test_cispo_asymmetric_window_uses_eps_low_and_eps_high():
    # eps_low = 0.2, eps_high = 0.3 -> window [0.8, 1.3]; ratios [1.5, 0.5, 1.2] with A = +1, one sequence:
    # weights [1.3, 0.8, 1.2] -> grad = -w / 3; clip_fraction 2/3 (1.5 and 0.5 are outside)
    logprobs = _t([[1.5, 0.5, 1.2]]).log().requires_grad_(True)
    loss, stats = cispo_loss(logprobs, torch.zeros(1, 3, dtype=torch.float64), _t([1.0]), torch.ones(1, 3),
                             eps_low=0.2, eps_high=0.3)
    loss.backward()
    torch.testing.assert_close(logprobs.grad, _t([[-1.3 / 3, -0.8 / 3, -1.2 / 3]]))
    assert stats["clip_fraction"] == pytest.approx(2.0 / 3.0)


def test_cispo_and_grpo_gradients_agree_on_policy():
    # At ratio 1 both reduce to the policy gradient: d loss / d logprob = -A_i / num_tokens = [-2/5, 1/5]
    logprobs = _t([[-1.0, -2.0, -0.5], [-0.3, -0.7, -1.1]]).requires_grad_(True)
    old, adv, mask = logprobs.detach().clone(), _t([2.0, -1.0]), _t(C_MASK)
    (g_ppo,) = torch.autograd.grad(grpo_policy_loss(logprobs, old, adv, mask)[0], logprobs)
    (g_cis,) = torch.autograd.grad(cispo_loss(logprobs, old, adv, mask)[0], logprobs)
    expected = _t([[-0.4, -0.4, -0.4], [0.2, 0.2, 0.0]])
    torch.testing.assert_close(g_ppo, expected)
    torch.testing.assert_close(g_cis, expected)


# ---------------------------------------------------------------------------------------------------------------
# Input validation shared by both losses
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss_fn", [grpo_policy_loss, cispo_loss])
def test_bad_aggregation_name_raises(loss_fn):
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="token-mean.*seq-mean-token-mean"):
        loss_fn(x, x, torch.zeros(2), torch.ones(2, 3), aggregation="mean")


@pytest.mark.parametrize("loss_fn", [grpo_policy_loss, cispo_loss])
@pytest.mark.parametrize(
    "bad, name",
    [
        ("old_logprobs", "old_logprobs"),
        ("mask", "mask"),
        ("advantages_length", "advantages"),
        ("advantages_per_token", "advantages"),
        ("logprobs_1d", "logprobs"),
    ],
)
def test_shape_mismatch_raises_naming_the_argument(loss_fn, bad, name):
    lp, old, adv, mask = torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3)
    if bad == "old_logprobs":
        old = torch.zeros(2, 4)
    elif bad == "mask":
        mask = torch.ones(3, 3)
    elif bad == "advantages_length":
        adv = torch.zeros(3)
    elif bad == "advantages_per_token":
        adv = torch.zeros(2, 3)
    elif bad == "logprobs_1d":
        lp, old, mask = torch.zeros(3), torch.zeros(3), torch.ones(3)
    with pytest.raises(ValueError, match=name):
        loss_fn(lp, old, adv, mask)
