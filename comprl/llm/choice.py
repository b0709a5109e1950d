"""Constrained choice: a reply restricted to a closed list of admissible texts (opt-in; comprl's deviation).

The paper's actor writes free text and an unparseable reply is answered by the env as an invalid action. A
135M model mostly names one action or none (SmolLM2-135M on Room: nearly always "north"), so the actor can never
sample the moves it would have to learn. With constrained choice each reply token is drawn
from the model's tempered distribution renormalised over the tokens that keep the reply on one of the
admissible texts (their canonical tokenisations, held in a token trie):

    pi(t | prefix) = exp(z_t / T) / sum_{a in A(prefix)} exp(z_a / T),   t in A(prefix),

where ``z`` are the model's logits and ``A(prefix)`` the allowed next tokens. The engine reports behaviour
log-probs under this distribution and the trainers recompute them the same way (:func:`choice_logprob` in both), so
the importance ratio stays exactly 1 on-policy; a token with one allowed choice has log-prob 0 and no gradient.
A *free* branch (a tool call's opening tag, the text before a placeholder such as WebShop's
``search[<your query>]``) constrains the reply up to its end and leaves the rest to the model, up to a length:
a branch with a *closing* (WebShop's ``]</answer>``) is then forced to end with it, one token at a time (log-prob
0), so that a query sampled at a high temperature still makes a well-formed action instead of running past the
reply cap unclosed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch


def restrict(logits: torch.Tensor, allowed: Sequence[int]) -> torch.Tensor:
    """``logits`` (last dimension: the vocabulary) with every token outside ``allowed`` set to ``-inf``."""
    keep = torch.full_like(logits, float("-inf"))
    index = torch.as_tensor(list(allowed), dtype=torch.long, device=logits.device)
    return keep.index_copy(-1, index, logits.index_select(-1, index))


def choice_logprob(
    logits: torch.Tensor, allowed: Sequence[int], token: int, temperature: float | torch.Tensor
) -> torch.Tensor:
    """Log-prob of ``token`` under ``softmax(logits / T)`` renormalised over ``allowed`` (``logits``: one position's
    vocabulary row): the behaviour log-prob the engine reports and the one the trainers recompute."""
    return torch.log_softmax(restrict(logits.float(), allowed) / temperature, -1)[token]


@dataclass(frozen=True)
class ReplyChoices:
    """The admissible replies of one turn as a token trie: which tokens may follow each reply prefix."""

    next_tokens: dict[tuple[int, ...], tuple[int, ...]]
    """Allowed next tokens after each proper prefix of an admissible reply (or of a free branch)."""
    free: dict[tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)
    """Prefixes after which the reply is the model's, each with its closing tokens (empty: none)."""
    free_length: int = 0
    """Tokens a reply through a free branch with a closing takes at most, the closing included: once its free
    text leaves just room for the closing, the closing is forced (0: no limit, nothing forced)."""

    @classmethod
    def build(
        cls, replies: Sequence[Sequence[int]], free: Sequence[Sequence[int]] = (),
        closing: Sequence[Sequence[int]] | None = None, free_length: int = 0,
    ) -> ReplyChoices:
        """The trie of ``replies`` (complete replies, as token ids) and ``free`` branches (prefixes, as token ids),
        with the ``closing`` of each free branch (default: none) forced within ``free_length`` tokens."""
        if not replies and not free:
            raise ValueError("constrained choice needs at least one admissible reply")
        closing = [()] * len(free) if closing is None else [tuple(int(t) for t in c) for c in closing]
        if len(closing) != len(free):
            raise ValueError(f"got {len(closing)} closings for {len(free)} free branches")
        children: dict[tuple[int, ...], set[int]] = {}
        for ids in [*replies, *free]:
            if not ids:
                raise ValueError("an admissible reply or free branch tokenised to no tokens")
            for end in range(len(ids)):
                children.setdefault(tuple(ids[:end]), set()).add(int(ids[end]))
        branches = {tuple(int(t) for t in f): c for f, c in zip(free, closing)}
        too_short = [f for f, c in branches.items() if c and len(f) + 1 + len(c) > free_length]
        if too_short:
            raise ValueError(
                f"free_length={free_length} leaves no free token between a free branch of {len(too_short[0])} "
                f"tokens and its closing of {len(branches[too_short[0]])}"
            )
        return cls({prefix: tuple(sorted(ids)) for prefix, ids in children.items()}, branches, free_length)

    @property
    def longest(self) -> int:
        """Tokens of the longest admissible reply (a free branch: ``free_length``, or its prefix and one token)."""
        trie = max(len(prefix) for prefix in self.next_tokens) + 1 + (1 if self.free else 0)
        return max(trie, self.free_length if any(self.free.values()) else 0)

    def allowed(self, generated: Sequence[int]) -> tuple[int, ...] | None:
        """The tokens allowed after ``generated`` (the reply so far), or None when it is unconstrained: it is in
        a free branch's free text, or it is already a complete reply (generation stops there)."""
        generated = tuple(generated)
        for prefix, closing in self.free.items():
            if generated[: len(prefix)] == prefix:
                forced = len(generated) - (self.free_length - len(closing))
                return (closing[forced],) if closing and 0 <= forced < len(closing) else None
        return self.next_tokens.get(generated)

    def along(self, tokens: Sequence[int]) -> list[tuple[int, ...] | None]:
        """The allowed set at each position of a generated reply (None where it was unconstrained)."""
        return [self.allowed(tokens[:end]) for end in range(len(tokens))]
