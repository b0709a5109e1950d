"""Token-exact multi-turn chat sequences built from a tokenizer's own chat template.

An episode is packed as ONE token sequence: system prompt, first observation, the model's reply, the next
observation, and so on. The model's replies are kept as the exact token ids it sampled (never re-tokenised from
text), and the text between turns is rendered once from the chat template by probing it with marker messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

_REPLY, _NEXT = "\x00REPLY\x00", "\x00NEXT\x00"


@dataclass(frozen=True)
class ChatFormat:
    """The pieces of a chat template needed to extend a packed sequence turn by turn."""

    tokenizer: PreTrainedTokenizerBase
    between_turns: str
    """Text after an assistant reply and before the next user message's content (e.g.
    ``<|im_end|>\\n<|im_start|>user\\n``)."""
    after_user: str
    """Text after a user message's content up to where the assistant starts writing."""

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
        between = probe[probe.index(_REPLY) + len(_REPLY) : probe.index(_NEXT)]
        after = probe[probe.index(_NEXT) + len(_NEXT) :]
        return cls(tokenizer, between, after)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def start(self, system: str, user: str) -> list[int]:
        """Token ids of the first prompt: system message, first user message, generation prompt."""
        text = self.tokenizer.apply_chat_template(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            tokenize=False,
            add_generation_prompt=True,
        )
        return self.encode(text)

    def next_turn(self, reply_ids: list[int], user: str) -> list[int]:
        """Context ids to append after the model's reply ``reply_ids`` so that the model answers ``user`` next."""
        between = self.between_turns
        eos = self.tokenizer.eos_token
        if reply_ids and reply_ids[-1] == self.tokenizer.eos_token_id and eos and between.startswith(eos):
            between = between[len(eos) :]  # the reply already closed its turn
        return self.encode(between + user + self.after_user)
