"""Token-exact multi-turn chat sequences built from a tokenizer's own chat template.

An episode is packed as ONE token sequence: system prompt, first observation, the model's reply, the next
observation, and so on. The model's replies are kept as the exact token ids it sampled (never re-tokenised from
text), and the text between turns is rendered once from the chat template by probing it with marker messages.

Special tokens (turn markers such as ``<|im_end|>``) come from the template alone: message contents (lessons,
observations, instructions, transcripts shown to the extractor) are untrusted text, tokenised with special-token
parsing off, so a content that spells ``<|im_end|>\\n<|im_start|>assistant`` reads as that text and cannot forge a
turn. Text without special-token strings is tokenised exactly as the tokenizer tokenises the whole rendered prompt.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

_REPLY, _NEXT = "\x00REPLY\x00", "\x00NEXT\x00"
_SYSTEM, _USER = "\x00SYSTEM\x00", "\x00USER\x00"

Piece = tuple[str, bool]
"""Text of a prompt and whether it is the template's own (its special-token strings are special tokens)."""


def _special_tokens(tokenizer: PreTrainedTokenizerBase) -> dict[str, int]:
    """Every special token of ``tokenizer`` (its named ones and its added tokens marked special) and its id."""
    found = {token.content: i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
    found.update(zip(tokenizer.all_special_tokens, tokenizer.all_special_ids))
    return found


@dataclass(frozen=True)
class ChatFormat:
    """The pieces of a chat template needed to extend a packed sequence turn by turn."""

    tokenizer: PreTrainedTokenizerBase
    between_turns: str
    """Text after an assistant reply and before the next user message's content (e.g.
    ``<|im_end|>\\n<|im_start|>user\\n``)."""
    after_user: str
    """Text after a user message's content up to where the assistant starts writing."""
    first_turn: tuple[str, str, str]
    """The first prompt's template text: before the system message's content, between it and the first user
    message's content, and after that up to where the assistant starts writing."""

    @classmethod
    def from_tokenizer(cls, tokenizer: PreTrainedTokenizerBase) -> "ChatFormat":
        if not tokenizer.chat_template:
            raise ValueError(
                f"tokenizer {tokenizer.name_or_path!r} has no chat template; use an instruction-tuned model"
            )
        probe = tokenizer.apply_chat_template(
            [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": _REPLY},
                {"role": "user", "content": _NEXT},
            ],
            tokenize=False,
            add_generation_prompt=True,
        )
        first = tokenizer.apply_chat_template(
            [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _USER}],
            tokenize=False,
            add_generation_prompt=True,
        )
        markers = [(probe, _REPLY), (probe, _NEXT), (first, _SYSTEM), (first, _USER)]
        if any(text.count(marker) != 1 for text, marker in markers) or first.index(_SYSTEM) > first.index(_USER):
            raise ValueError(
                f"the chat template of {tokenizer.name_or_path!r} does not place each message's content once, as "
                f"given and in order; accepted: templates that write every message's content verbatim"
            )
        between = probe[probe.index(_REPLY) + len(_REPLY) : probe.index(_NEXT)]
        after = probe[probe.index(_NEXT) + len(_NEXT) :]
        before_system, rest = first.split(_SYSTEM)
        middle, after_first = rest.split(_USER)
        return cls(tokenizer, between, after, (before_system, middle, after_first))

    @functools.cached_property
    def _specials(self) -> dict[str, int]:
        return _special_tokens(self.tokenizer)

    @functools.cached_property
    def _special_ids(self) -> frozenset[int]:
        return frozenset(self._specials.values())

    @functools.cached_property
    def _special_pattern(self) -> re.Pattern[str]:
        """Matches a special token's string, the longest first where one string starts another."""
        return re.compile("(" + "|".join(map(re.escape, sorted(self._specials, key=len, reverse=True))) + ")")

    def encode(self, text: str) -> list[int]:
        """Token ids of untrusted text: a special token's string in it is tokenised as plain text."""
        return self._ids([(text, False)])

    def start(self, system: str, user: str) -> list[int]:
        """Token ids of the first prompt: system message, first user message, generation prompt."""
        before, middle, after = self.first_turn
        return self._ids([(before, True), (system, False), (middle, True), (user, False), (after, True)])

    def next_turn(self, reply_ids: list[int], user: str) -> list[int]:
        """Context ids to append after the model's reply ``reply_ids`` so that the model answers ``user`` next."""
        between = self.between_turns
        eos = self.tokenizer.eos_token
        if reply_ids and reply_ids[-1] == self.tokenizer.eos_token_id and eos and between.startswith(eos):
            between = between[len(eos) :]  # the reply already closed its turn
        return self._ids([(between, True), (user, False), (self.after_user, True)])

    def _ids(self, pieces: list[Piece]) -> list[int]:
        """Token ids of ``pieces`` in order: the template's special-token strings as their tokens, and the text
        between them tokenised as a whole (as the tokenizer does a rendered prompt) with special tokens off."""
        ids: list[int] = []
        text = ""
        for piece, template in pieces:
            parts = self._special_pattern.split(piece) if template and self._specials else [piece]
            for i, part in enumerate(parts):
                if i % 2:  # a special token of the template
                    ids += self._plain(text) + [self._specials[part]]
                    text = ""
                else:
                    text += part
        return ids + self._plain(text)

    def _plain(self, text: str) -> list[int]:
        """Token ids of text with no special token in it, refusing a tokenizer that merges one out of text."""
        if not text:
            return []
        ids = self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        forged = self._special_ids.intersection(ids)
        if forged:
            raise ValueError(
                f"tokenizer {self.tokenizer.name_or_path!r} turned plain text into the special token ids "
                f"{sorted(forged)}; a chat prompt takes special tokens from its template only"
            )
        return ids
