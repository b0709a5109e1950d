"""TRL as an independent oracle for the actor loss.

comprl's :func:`~comprl.objectives.grpo_policy_loss` is checked against the loss that TRL's ``GRPOTrainer``
computes, on the same tensors:

* TRL ``loss_type="bnpo"`` (token sum over the micro-batch / its token count)  == our ``"token-mean"`` (paper);
* TRL ``loss_type="grpo"`` (per-sequence token mean, then mean over sequences) == our ``"seq-mean-token-mean"``
  (official code);
* TRL ``loss_type="dapo"`` (TRL's default; token sum / ``num_items_in_batch``) == our ``"token-mean"`` when
  ``num_items_in_batch`` is the token count of this one batch (single process, no gradient accumulation).

What exactly runs in TRL: the real ``GRPOTrainer._compute_loss`` method, unmodified, on a trainer object made with
``GRPOTrainer.__new__`` (``__init__`` is skipped: it needs a model, a tokenizer, a dataset and reward functions).
The attributes ``_compute_loss`` reads are set from a real ``GRPOConfig`` the way ``GRPOTrainer.__init__`` sets
them. Two things are replaced, and only these:

* ``_get_per_token_logps_and_entropies`` (the model forward pass) returns our ``logprobs`` tensor, so TRL's ratio,
  clipping, masking and aggregation code run on exactly the per-token log-probs we hand it (and the gradient flows
  back to that tensor); the entropies it returns are zeros, used only by TRL's logged "entropy" metric;
* ``accelerator`` is a single-process stand-in whose ``gather``/``reduce`` return their input; TRL calls them only
  to log metrics (and reads ``num_processes`` = 1 in the cispo/dapo normaliser).

The forward pass, generation, reward computation and advantage normalisation of TRL are NOT exercised here: the
advantages are given. ``beta = 0`` (no KL term, no reference model), as in the paper.

CISPO is not the same objective in TRL. Our extractor loss (paper; MiniMax-M1) weights each token's log-prob by
``sg(clip(ratio, 1 - eps_low, 1 + eps_high))``; TRL's ``loss_type="cispo"`` weights it by
``sg(min(ratio, epsilon_high))``: there is no lower clip, and ``epsilon_high`` is the cap itself (TRL recommends
5.0), not an offset from 1. With TRL's ``epsilon_high = 1 + eps_high`` the two agree exactly when no ratio falls
below ``1 - eps_low``; that regime is checked below, and the disagreement outside it is pinned down.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from comprl.objectives import cispo_loss, grpo_policy_loss

trl = pytest.importorskip("trl")
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

# GRPOConfig's own defaults trip a transformers deprecation warning; it is not about anything tested here.
pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")

SEEDS = (0, 1, 2, 3, 4)
DTYPE = torch.float64  # both sides compute in float64, so any real discrepancy is far above rounding
TOL = dict(rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------------------------------------------
# Driving TRL's own loss code
# --------------------------------------------------------------------------------------------------------------


class _SingleProcess:
    """Stand-in for ``accelerate.Accelerator`` on one process: collectives are the identity.

    A real ``Accelerator`` would also be the identity here, but it initialises process-wide accelerate state that
    other tests could trip over.
    """

    num_processes = 1
    sync_gradients = True
    is_main_process = True

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def _trl_trainer(loss_type: str, epsilon: float, epsilon_high: float | None = None) -> GRPOTrainer:
    """A GRPOTrainer whose ``_compute_loss`` is TRL's, configured from a real GRPOConfig (beta = 0)."""
    args = GRPOConfig(
        output_dir="unused-trl-oracle-output",  # never written: nothing here saves
        loss_type=loss_type,
        beta=0.0,
        epsilon=epsilon,
        epsilon_high=epsilon_high,
        report_to="none",
        use_cpu=True,
    )
    assert args.gradient_accumulation_steps == 1 and args.steps_per_generation == 1
    assert args.importance_sampling_level == "token" and args.delta is None

    trainer = GRPOTrainer.__new__(GRPOTrainer)
    # The attributes _compute_loss reads, set as GRPOTrainer.__init__ sets them from `args`.
    trainer.args = args
    trainer.loss_type = args.loss_type
    trainer.beta = args.beta
    trainer.epsilon_low = args.epsilon
    trainer.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    trainer.importance_sampling_level = args.importance_sampling_level
    trainer.off_policy_mask_threshold = args.off_policy_mask_threshold
    trainer.top_entropy_quantile = args.top_entropy_quantile
    trainer.use_vllm = args.use_vllm
    trainer.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    trainer.aux_loss_enabled = False  # no mixture-of-experts router
    trainer._entropy_bonus_enabled = False  # entropy_coef = 0 (TRL's default)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    # Training mode, one micro-batch per optimizer step: TRL's division by the accumulation steps is by 1.
    trainer.model = torch.nn.Identity().train()
    trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps
    trainer.accelerator = _SingleProcess()
    return trainer


def trl_loss(
    loss_type: str,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """TRL's loss for the given per-token log-probs; returns (loss, TRL's logged train metrics)."""
    trainer = _trl_trainer(loss_type, epsilon, epsilon_high)

    def given_logprobs(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        # Replaces the model forward: the completion log-probs are the tensor under test.
        assert logits_to_keep == logprobs.shape[1]
        return logprobs, torch.zeros_like(logprobs.detach()), None

    trainer._get_per_token_logps_and_entropies = given_logprobs

    B, T = logprobs.shape
    completion_mask = mask.long()  # TRL's completion_mask is an integer tensor
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),  # only concatenated and handed to the forward pass
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": completion_mask,
        "advantages": advantages,
        "old_per_token_logps": old_logprobs,
        # Read by cispo/dapo only: the token count that normalises the sum (here: this batch's).
        "num_items_in_batch": completion_mask.sum(),
    }
    loss = trainer._compute_loss(trainer.model, inputs)
    return loss, dict(trainer._metrics["train"])


# --------------------------------------------------------------------------------------------------------------
# Test tensors
# --------------------------------------------------------------------------------------------------------------


def make_batch(seed: int, B: int = 6, T: int = 9, log_ratio_range: tuple[float, float] = (-0.6, 0.6)):
    """Right-padded completions of unequal lengths (1..T tokens), mixed-sign advantages, spread-out ratios.

    Padding positions hold finite junk log-probs: both implementations must ignore them. (They must be finite:
    TRL multiplies the per-token loss by the mask, so -inf padding would make its loss NaN; ours would not.)
    """
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0], lengths[1] = 1, T  # always a one-token and a full-length completion
    mask = torch.arange(T)[None, :] < lengths[:, None]

    old_logprobs = -3.0 * torch.rand(B, T, generator=g, dtype=DTYPE)
    lo, hi = log_ratio_range
    log_ratio = lo + (hi - lo) * torch.rand(B, T, generator=g, dtype=DTYPE)
    logprobs = old_logprobs + log_ratio

    advantages = torch.randn(B, generator=g, dtype=DTYPE)
    advantages[0], advantages[1] = advantages[0].abs() + 0.1, -(advantages[1].abs() + 0.1)
    return logprobs, old_logprobs, advantages, mask


def _both_grads(loss_fn_ours, loss_fn_trl, logprobs):
    """(our loss, our grad, TRL loss, TRL grad) w.r.t. the per-token log-probs."""
    ours_lp = logprobs.clone().requires_grad_(True)
    ours, stats = loss_fn_ours(ours_lp)
    ours.backward()
    trl_lp = logprobs.clone().requires_grad_(True)
    theirs, metrics = loss_fn_trl(trl_lp)
    theirs.backward()
    return ours, ours_lp.grad, stats, theirs, trl_lp.grad, metrics


# --------------------------------------------------------------------------------------------------------------
# GRPO clipped surrogate: comprl == TRL
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_is_nontrivial(seed):
    """The tensors exercise every branch: both clip sides, the inside of the window, both advantage signs."""
    logprobs, old_logprobs, advantages, mask = make_batch(seed)
    ratio = (logprobs - old_logprobs).exp()[mask]
    assert (ratio > 1.2).any() and (ratio < 0.8).any() and ((ratio > 0.8) & (ratio < 1.2)).any()
    assert (advantages > 0).any() and (advantages < 0).any()
    assert len(set(mask.sum(1).tolist())) > 1  # unequal lengths
    # ...so the two aggregations really differ, and pairing bnpo with one and grpo with the other is a real check.
    by_token, _ = grpo_policy_loss(logprobs, old_logprobs, advantages, mask, aggregation="token-mean")
    by_seq, _ = grpo_policy_loss(logprobs, old_logprobs, advantages, mask, aggregation="seq-mean-token-mean")
    assert float(by_token) != pytest.approx(float(by_seq), rel=1e-3)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "trl_loss_type, aggregation",
    [("bnpo", "token-mean"), ("grpo", "seq-mean-token-mean"), ("dapo", "token-mean")],
)
@pytest.mark.parametrize("clip_eps", [0.2, 0.1])
def test_clipped_grpo_loss_and_gradient_equal_trl(seed, trl_loss_type, aggregation, clip_eps):
    logprobs, old_logprobs, advantages, mask = make_batch(seed)

    ours, g_ours, stats, theirs, g_trl, metrics = _both_grads(
        lambda lp: grpo_policy_loss(lp, old_logprobs, advantages, mask, clip_eps=clip_eps, aggregation=aggregation),
        lambda lp: trl_loss(trl_loss_type, lp, old_logprobs, advantages, mask, epsilon=clip_eps),
        logprobs,
    )

    torch.testing.assert_close(ours.detach(), theirs.detach(), **TOL)
    torch.testing.assert_close(g_ours, g_trl, **TOL)
    # The gradient is not trivially zero: some tokens are clipped (zero gradient), others are not.
    assert (g_ours[mask] != 0).any() and (g_ours[mask] == 0).any()
    assert (g_trl[~mask] == 0).all()
    # Our clip_fraction is TRL's clip_ratio/region_mean (ratio past the bound on the side the advantage pushes);
    # TRL counts in float32, hence the looser tolerance on this one number.
    assert stats["clip_fraction"] == pytest.approx(metrics["clip_ratio/region_mean"][0], rel=1e-6)
    assert stats["clip_fraction"] > 0


def test_grpo_differs_from_trl_when_a_sequence_has_no_tokens():
    """A completion whose mask is all zero (e.g. TRL's mask_truncated_completions) counts differently.

    Ours averages over the sequences that have tokens; TRL's "grpo" averages over all B sequences, an empty one
    contributing 0. So TRL = ours * (non-empty sequences / B). "token-mean" / "bnpo" are unaffected.
    """
    logprobs, old_logprobs, advantages, mask = make_batch(0)
    mask[2] = False
    B = mask.shape[0]

    ours, _ = grpo_policy_loss(logprobs, old_logprobs, advantages, mask, aggregation="seq-mean-token-mean")
    theirs, _ = trl_loss("grpo", logprobs, old_logprobs, advantages, mask)
    assert float(ours) != pytest.approx(float(theirs), rel=1e-6)
    torch.testing.assert_close(theirs.detach(), ours * (B - 1) / B, **TOL)

    ours_tm, _ = grpo_policy_loss(logprobs, old_logprobs, advantages, mask, aggregation="token-mean")
    theirs_tm, _ = trl_loss("bnpo", logprobs, old_logprobs, advantages, mask)
    torch.testing.assert_close(ours_tm, theirs_tm.detach(), **TOL)


# --------------------------------------------------------------------------------------------------------------
# CISPO: agreement only where TRL's one-sided cap and our two-sided window coincide
# --------------------------------------------------------------------------------------------------------------

CISPO_EPS = 0.1  # paper: eps_low = eps_high = 0.1, window [0.9, 1.1]


@pytest.mark.parametrize("seed", SEEDS)
def test_cispo_equals_trl_when_no_ratio_is_below_the_window(seed):
    """With every ratio >= 1 - eps_low and TRL's epsilon_high = 1 + eps_high (an absolute cap), both weights are
    min(ratio, 1 + eps_high): loss and gradient match, including for tokens capped above the window."""
    lo = torch.log(torch.tensor(1.0 - CISPO_EPS, dtype=DTYPE)).item() + 1e-3
    logprobs, old_logprobs, advantages, mask = make_batch(seed, log_ratio_range=(lo, 0.5))
    ratio = (logprobs - old_logprobs).exp()[mask]
    assert (ratio > 1 + CISPO_EPS).any() and (ratio < 1 + CISPO_EPS).any() and (ratio >= 1 - CISPO_EPS).all()

    ours, g_ours, _, theirs, g_trl, _ = _both_grads(
        lambda lp: cispo_loss(lp, old_logprobs, advantages, mask, eps_low=CISPO_EPS, eps_high=CISPO_EPS),
        lambda lp: trl_loss("cispo", lp, old_logprobs, advantages, mask, epsilon_high=1.0 + CISPO_EPS),
        logprobs,
    )
    torch.testing.assert_close(ours.detach(), theirs.detach(), **TOL)
    torch.testing.assert_close(g_ours, g_trl, **TOL)
    assert (g_ours[mask] != 0).all()  # CISPO keeps every token's gradient, capped or not


@pytest.mark.parametrize("seed", SEEDS)
def test_cispo_differs_from_trl_below_the_window(seed):
    """Below 1 - eps_low our weight is floored at 1 - eps_low; TRL has no floor and uses the ratio itself.

    Token by token, TRL's gradient / ours = ratio / (1 - eps_low) below the window and 1 elsewhere.
    """
    logprobs, old_logprobs, advantages, mask = make_batch(seed)  # ratios in [0.55, 1.82]
    ratio = (logprobs - old_logprobs).exp()
    below = mask & (ratio < 1 - CISPO_EPS)
    assert below.any()

    ours, g_ours, _, theirs, g_trl, _ = _both_grads(
        lambda lp: cispo_loss(lp, old_logprobs, advantages, mask, eps_low=CISPO_EPS, eps_high=CISPO_EPS),
        lambda lp: trl_loss("cispo", lp, old_logprobs, advantages, mask, epsilon_high=1.0 + CISPO_EPS),
        logprobs,
    )
    assert float(ours.detach()) != pytest.approx(float(theirs.detach()), rel=1e-6)
    expected = torch.where(below, ratio / (1 - CISPO_EPS), torch.ones_like(ratio))
    torch.testing.assert_close(g_trl[mask], (g_ours * expected)[mask], **TOL)
