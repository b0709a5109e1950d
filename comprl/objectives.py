"""The two training objectives of Complementary RL, as pure tensor functions.

Paper: "Complementary Reinforcement Learning", arXiv 2603.17621. Two learners share one experience bank:

* **Actor** (policy): GRPO with *split groups* (paper, section "Actor objective"). Each task instance is
  rolled out K = 8 times; K/2 rollouts are experience-guided (a retrieved bank entry is in the prompt) and
  K/2 are experience-free. Advantages are normalised within each half separately (paper Eq. 5)::

      A_{g,h,k} = (r_{g,h,k} - mean_k r_{g,h,.}) / std_k r_{g,h,.}       h in {guided, free}

  The official code subtracts the mean only; :func:`split_group_advantages` offers both. The surrogate is
  PPO's clipped objective (Schulman et al. 2017, Eq. 7) with epsilon = 0.2 and no KL term
  (:func:`grpo_policy_loss`).

* **Extractor** (experience writer): CISPO (paper, section "Extractor objective"; CISPO is from MiniMax-M1,
  arXiv 2506.13585)::

      J(phi) = 1 / sum_i |m_i| * sum_i sum_t sg(clip(ratio_{i,t}, 1 - eps_low, 1 + eps_high)) * A_i
                                               * log pi_phi(m_{i,t} | ...)

  with ratio_{i,t} = pi_phi / pi_phi_old for token t of experience m_i, eps_low = eps_high = 0.1, and a
  batch-level advantage A_i = r_i - mean_batch(r) (:func:`batch_advantages`). The clipped ratio is a
  stop-gradient *weight*: every token keeps the gradient of its log-prob, clipped or not (PPO clipping
  instead zeroes the gradient of clipped tokens). See :func:`cispo_loss`.

  Note: TRL's ``loss_type="cispo"`` (read in TRL 1.16) uses the weight sg(min(ratio, epsilon_high)): no lower
  clip, and ``epsilon_high`` is the cap *itself* (TRL recommends 5.0), not an offset from 1. So its window is not
  the paper's [1 - eps_low, 1 + eps_high] = [0.9, 1.1]; with epsilon_high = 1 + eps_high the two agree only while
  no ratio is below 1 - eps_low. Do not carry TRL's epsilon values over to this module.

Loss aggregation (:func:`aggregate`): the paper uses ``"token-mean"`` (sum over all action tokens of the batch
divided by their number); the official code uses ``"seq-mean-token-mean"`` (mean over tokens within a
sequence, then mean over sequences). They differ when sequences have unequal lengths. :func:`grpo_policy_loss`
with these two modes equals TRL's ``GRPOTrainer`` ``loss_type`` "bnpo" and "grpo" (tests/test_trl_oracle.py),
except that TRL's "grpo" counts a sequence with no action token in its mean (as 0) where ours leaves it out.

Conventions: losses are returned as scalars to MINIMISE (= -J). ``mask`` is 1 on the model's own action tokens
and 0 on context/padding (float or bool). Diagnostics are python floats computed over masked tokens, without
gradient: ``clip_fraction`` (how often clipping bit), ``ratio_mean`` and ``approx_kl``
(k3 estimator, mean of (ratio - 1) - log ratio, which is >= 0 and ~0 on-policy).
"""

from __future__ import annotations

import torch
from torch import Tensor

from comprl.config import AGGREGATIONS

__all__ = [
    "AGGREGATIONS",
    "split_group_advantages",
    "batch_advantages",
    "aggregate",
    "grpo_policy_loss",
    "cispo_loss",
]

# --------------------------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------------------------


def _check_1d(name: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 1:
        raise ValueError(f"{name} must be 1-D [N], got shape {tuple(x.shape)}")


def _check_same_shape(name: str, x: Tensor, ref_name: str, ref: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.shape != ref.shape:
        raise ValueError(
            f"{name} has shape {tuple(x.shape)} but {ref_name} has shape {tuple(ref.shape)}; they must match"
        )


def _check_token_inputs(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor) -> None:
    """logprobs, old_logprobs, mask: [B, T]; advantages: [B]."""
    if not isinstance(logprobs, Tensor) or logprobs.dim() != 2:
        shape = tuple(logprobs.shape) if isinstance(logprobs, Tensor) else type(logprobs).__name__
        raise ValueError(f"logprobs must be a 2-D tensor [B, T], got {shape}")
    _check_same_shape("old_logprobs", old_logprobs, "logprobs", logprobs)
    _check_same_shape("mask", mask, "logprobs", logprobs)
    if not isinstance(advantages, Tensor) or advantages.shape != logprobs.shape[:1]:
        shape = tuple(advantages.shape) if isinstance(advantages, Tensor) else type(advantages).__name__
        raise ValueError(
            f"advantages must have shape [B] = ({logprobs.shape[0]},) (one per sequence, broadcast over its "
            f"tokens), got {shape}"
        )


def _masked_mean(x: Tensor, mask: Tensor) -> float:
    """Mean of ``x`` over ``mask`` (bool) as a python float; 0.0 when nothing is masked in."""
    n = int(mask.sum())
    if n == 0:
        return 0.0
    return float(torch.where(mask, x, torch.zeros_like(x)).sum() / n)


# --------------------------------------------------------------------------------------------------------------
# Advantages
# --------------------------------------------------------------------------------------------------------------


def split_group_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    guided: Tensor,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """Actor advantages: GRPO normalisation within each (task instance, half) cell (paper Eq. 5).

    For rollout k of task instance g in half h (h = experience-guided or experience-free)::

        A_{g,h,k} = (r_{g,h,k} - mean(r_{g,h,.})) / (std(r_{g,h,.}) + eps)     if scale_by_std   (paper Eq. 5)
        A_{g,h,k} =  r_{g,h,k} - mean(r_{g,h,.})                               otherwise         (official code)

    ``std`` is the **population** standard deviation (``unbiased=False``, divide by n, not n - 1). With the
    paper's K/2 = 4 rollouts per half the choice matters: for rewards [1, 0, 0, 0] the population std is 0.433
    (A = [1.73, -0.58, -0.58, -0.58]) while the sample std is 0.5 (A = [1.5, -0.5, -0.5, -0.5]).

    A cell with a single rollout or with all rewards equal carries no learning signal and gets advantage
    exactly 0 (never NaN or eps-amplified rounding noise). With ``guided`` all False this is plain GRPO group
    normalisation; the paper reports that normalising across both halves at once made training collapse.

    Args:
        rewards: float [N], the outcome reward of each rollout.
        group_ids: integer [N], the task instance (GRPO group) of each rollout.
        guided: bool [N], True for the experience-guided half, False for the experience-free half.
        scale_by_std: divide by the cell's std (paper Eq. 5) or only subtract the cell mean (official code).
        eps: added to the std before dividing.

    Returns:
        float [N] advantages, in the order of ``rewards``.
    """
    _check_1d("rewards", rewards)
    _check_same_shape("group_ids", group_ids, "rewards", rewards)
    _check_same_shape("guided", guided, "rewards", rewards)
    if group_ids.is_floating_point() or group_ids.is_complex() or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor (task instance ids), got dtype {group_ids.dtype}")
    if guided.dtype != torch.bool:
        raise ValueError(f"guided must be a bool tensor (True = experience-guided half), got dtype {guided.dtype}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")

    rewards = rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())
    if rewards.numel() == 0:
        return torch.zeros_like(rewards)

    # One cell per (task instance, half): key = 2 * group + guided, then renumber cells 0..C-1.
    cell_key = group_ids.long() * 2 + guided.long()
    _, cell = torch.unique(cell_key, return_inverse=True)
    num_cells = int(cell.max()) + 1

    zeros = rewards.new_zeros(num_cells)
    count = zeros.index_add(0, cell, torch.ones_like(rewards))
    mean = zeros.index_add(0, cell, rewards) / count
    centred = rewards - mean[cell]  # r - mean_cell
    var = zeros.index_add(0, cell, centred**2) / count  # population variance (divide by n)
    std = var.sqrt()

    # Constant cells (incl. singletons) are detected exactly via max == min, not via a float std threshold.
    r_max = zeros.scatter_reduce(0, cell, rewards, reduce="amax", include_self=False)
    r_min = zeros.scatter_reduce(0, cell, rewards, reduce="amin", include_self=False)
    constant = (r_max == r_min)[cell]

    advantages = centred / (std[cell] + eps) if scale_by_std else centred
    return torch.where(constant, torch.zeros_like(advantages), advantages)


def batch_advantages(rewards: Tensor) -> Tensor:
    """Extractor advantages: A_i = r_i - mean_batch(r) (paper, section "Extractor objective").

    ``rewards[i]`` is r(m_i) in [-1, +1]: whether the trajectories that experience m_i guided succeeded (their
    mean when several trajectories used the same m_i, which then counts as one sample). No std division.

    Args:
        rewards: float [N], one reward per extractor sample in the batch.

    Returns:
        float [N] advantages (they sum to 0).
    """
    _check_1d("rewards", rewards)
    rewards = rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())
    if rewards.numel() == 0:
        return torch.zeros_like(rewards)
    return rewards - rewards.mean()


# --------------------------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------------------------


def aggregate(values: Tensor, mask: Tensor, mode: str) -> Tensor:
    """Reduce per-token values [B, T] over the masked tokens to a scalar.

    * ``"token-mean"`` (paper)::

          sum_i sum_t m_{i,t} v_{i,t} / sum_i sum_t m_{i,t}

    * ``"seq-mean-token-mean"`` (official code)::

          mean over {i : |m_i| >= 1} of ( sum_t m_{i,t} v_{i,t} / |m_i| )

    Masked-out positions never contribute, even if they hold inf/NaN, and receive zero gradient. With no
    masked token at all the result is 0 (still attached to the graph).

    Args:
        values: [B, T] per-token values.
        mask: [B, T], nonzero/True on tokens that count.
        mode: one of :data:`AGGREGATIONS`.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {mode!r}; accepted modes: {', '.join(map(repr, AGGREGATIONS))}")
    if not isinstance(values, Tensor) or values.dim() != 2:
        shape = tuple(values.shape) if isinstance(values, Tensor) else type(values).__name__
        raise ValueError(f"values must be a 2-D tensor [B, T], got {shape}")
    _check_same_shape("mask", mask, "values", values)

    m = mask.bool()
    masked = torch.where(m, values, torch.zeros_like(values))
    if mode == "token-mean":
        return masked.sum() / m.sum().clamp(min=1)
    # seq-mean-token-mean
    tokens_per_seq = m.sum(dim=1)  # |m_i|
    seq_mean = masked.sum(dim=1) / tokens_per_seq.clamp(min=1)
    has_tokens = tokens_per_seq > 0
    return torch.where(has_tokens, seq_mean, torch.zeros_like(seq_mean)).sum() / has_tokens.sum().clamp(min=1)


# --------------------------------------------------------------------------------------------------------------
# Actor: GRPO clipped surrogate
# --------------------------------------------------------------------------------------------------------------


def grpo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
    aggregation: str = "token-mean",
) -> tuple[Tensor, dict[str, float]]:
    """Actor loss: PPO clipped surrogate with GRPO advantages, no KL term (paper, "Actor objective").

    Per action token t of rollout i (PPO, Schulman et al. 2017, Eq. 7)::

        ratio_{i,t} = exp(logprobs_{i,t} - old_logprobs_{i,t})
        J_{i,t}     = min(ratio_{i,t} * A_i, clip(ratio_{i,t}, 1 - clip_eps, 1 + clip_eps) * A_i)
        loss        = -aggregate(J, mask, aggregation)

    Where the clipped branch is the (strictly) smaller one, i.e. A > 0 and ratio > 1 + eps or A < 0 and
    ratio < 1 - eps, the token's objective is constant and its gradient is zero.

    Args:
        logprobs: [B, T] log-probs of the taken tokens under the current policy (carries the gradient).
        old_logprobs: [B, T] log-probs under the behaviour (rollout) policy; treated as constants.
        advantages: [B], one per rollout (e.g. from :func:`split_group_advantages`), broadcast over tokens.
        mask: [B, T], 1/True on the actor's own action tokens, 0/False on context and padding.
        clip_eps: PPO clip epsilon; paper value 0.2.
        aggregation: "token-mean" or "seq-mean-token-mean", see :func:`aggregate`.

    Returns:
        (loss, stats): the scalar loss to minimise, and python floats over masked tokens:
        ``clip_fraction`` (fraction of tokens whose clipped branch was selected and differs), ``ratio_mean``,
        ``approx_kl`` (mean of (ratio - 1) - log ratio).
    """
    _check_token_inputs(logprobs, old_logprobs, advantages, mask)
    if aggregation not in AGGREGATIONS:
        raise ValueError(
            f"unknown aggregation {aggregation!r}; accepted modes: {', '.join(map(repr, AGGREGATIONS))}"
        )
    if clip_eps < 0:
        raise ValueError(f"clip_eps must be >= 0, got {clip_eps}")

    m = mask.bool()
    # Padding may hold arbitrary log-probs; zero its log-ratio so exp() cannot overflow there.
    log_ratio = torch.where(m, logprobs - old_logprobs.detach(), torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    A = advantages.detach().to(ratio.dtype)[:, None]  # [B, 1], broadcast over tokens

    unclipped = ratio * A
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * A
    objective = torch.minimum(unclipped, clipped)  # pessimistic bound
    loss = -aggregate(objective, m, aggregation)

    with torch.no_grad():
        stats = {
            "clip_fraction": _masked_mean((clipped < unclipped).to(ratio.dtype), m),
            "ratio_mean": _masked_mean(ratio, m),
            "approx_kl": _masked_mean((ratio - 1.0) - log_ratio, m),
        }
    return loss, stats


# --------------------------------------------------------------------------------------------------------------
# Extractor: CISPO
# --------------------------------------------------------------------------------------------------------------


def cispo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float = 0.1,
    eps_high: float = 0.1,
    aggregation: str = "token-mean",
) -> tuple[Tensor, dict[str, float]]:
    """Extractor loss: CISPO, clipped importance-sampling weights (paper, "Extractor objective")::

        ratio_{i,t} = exp(logprobs_{i,t} - old_logprobs_{i,t})
        J(phi)      = 1 / sum_i |m_i| * sum_i sum_t sg(clip(ratio_{i,t}, 1 - eps_low, 1 + eps_high))
                                                    * A_i * logprobs_{i,t}
        loss        = -J   (the 1 / sum_i |m_i| is "token-mean"; "seq-mean-token-mean" is the official code)

    ``sg`` is stop-gradient: the clipped ratio is a detached weight, so for "token-mean"
    d loss / d logprobs_{i,t} = -clip(ratio_{i,t}) * A_i / sum_i |m_i| for *every* masked token, including
    tokens whose ratio lies outside the window (PPO clipping would give them zero gradient).

    TRL's ``loss_type="cispo"`` is a different window (absolute upper cap, no lower clip); see the module
    docstring.

    Args:
        logprobs: [B, T] log-probs of the experience tokens under the current extractor (carries the gradient).
        old_logprobs: [B, T] log-probs under the behaviour extractor; treated as constants.
        advantages: [B], one per experience sample (e.g. from :func:`batch_advantages`).
        mask: [B, T], 1/True on the extractor's generated tokens, 0/False on prompt and padding.
        eps_low: lower clip, weight >= 1 - eps_low; paper value 0.1.
        eps_high: upper clip, weight <= 1 + eps_high; paper value 0.1.
        aggregation: "token-mean" (paper) or "seq-mean-token-mean" (official code), see :func:`aggregate`.

    Returns:
        (loss, stats): the scalar loss to minimise, and python floats over masked tokens:
        ``clip_fraction`` (fraction of tokens with ratio outside [1 - eps_low, 1 + eps_high]), ``ratio_mean``,
        ``approx_kl`` (mean of (ratio - 1) - log ratio).
    """
    _check_token_inputs(logprobs, old_logprobs, advantages, mask)
    if aggregation not in AGGREGATIONS:
        raise ValueError(
            f"unknown aggregation {aggregation!r}; accepted modes: {', '.join(map(repr, AGGREGATIONS))}"
        )
    if not 0.0 <= eps_low <= 1.0:
        raise ValueError(f"eps_low must be in [0, 1] (lower bound 1 - eps_low >= 0), got {eps_low}")
    if eps_high < 0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high}")

    m = mask.bool()
    with torch.no_grad():
        log_ratio = torch.where(m, logprobs - old_logprobs, torch.zeros_like(logprobs))
        ratio = torch.exp(log_ratio)
        weight = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)  # sg(clip(ratio, 1 - eps_low, 1 + eps_high))
    A = advantages.detach().to(logprobs.dtype)[:, None]  # [B, 1], broadcast over tokens

    objective = weight * A * logprobs
    loss = -aggregate(objective, m, aggregation)

    with torch.no_grad():
        outside = (ratio < 1.0 - eps_low) | (ratio > 1.0 + eps_high)
        stats = {
            "clip_fraction": _masked_mean(outside.to(ratio.dtype), m),
            "ratio_mean": _masked_mean(ratio, m),
            "approx_kl": _masked_mean((ratio - 1.0) - log_ratio, m),
        }
    return loss, stats
