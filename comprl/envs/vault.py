"""Vaults: text tasks whose knowledge persists across episodes and never shows on screen (issue 68).

A check of comprl's machinery, not a task of the paper. The paper's tasks cannot show whether experience carries
knowledge from one episode to the next: their observations already hold what an episode needs (the lit Room says
where the stairs are), and a new seed draws a new layout. A vault is the opposite. Each vault opens to a secret
sequence of moves, fixed forever per (env id, vault), that no observation, instruction or ``info`` ever shows. A
policy that has not learned the secret (in its weights or from a lesson) wins at chance, known in closed form
(`free_success`); a lesson that states the secret (`states_secret`) can lift it to 1.

- ``comprl/Vault-v0``: 8 vaults, each opening to one move of 8. The 8 secrets are a permutation of the 8 moves,
  so always playing one move wins exactly 1 vault in 8.
- ``comprl/Vault-Code-v0``: 8 other vaults, each opening to a code of 3 moves (a right move clicks, a wrong one
  seals the vault): slow to memorise in the weights, easy to copy from a lesson.
- ``comprl/Vault-Fresh-v0``: 8 further vaults, one move each, for a test-time stream on vaults never trained on.

The seed picks the vault (``seed mod 8``, `choose_by_seed`), so training seeds and the held-out ones (from
`EVAL_SEED_OFFSET`, a multiple of 8) meet the same vaults with the same secrets. Secrets come from sha256 (no
numpy stream, whose output may change between versions): at each position of the code, the 8 moves are ordered by
the hash of (env id, position, move) and vault ``i`` gets the ``i``-th, so every position is a permutation of the
moves over a family's vaults and no two vaults of a family share a code.

The moves are the 8 compass words of comprl's MiniHack envs, with the same abbreviations and ``go``/``move``
spellings, so an actor meets the same vocabulary. Rewards follow the paper's binary scheme: 1 when the vault
opens, else 0; a wrong move ends the episode (terminated, success False); an unparseable reply costs a turn and
changes nothing (`TextEnv`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, DEFAULT_MAX_TURNS, GameStep, TextEnv, choose_by_seed

MOVES: tuple[str, ...] = ("north", "east", "south", "west", "northeast", "southeast", "southwest", "northwest")
"""The action words, spelled and ordered as `comprl.envs.minihack.env.DIRECTIONS` (not imported: it needs nle)."""

MOVE_ABBREVIATIONS: Mapping[str, str] = MappingProxyType(
    {"n": "north", "e": "east", "s": "south", "w": "west", "ne": "northeast", "se": "southeast"}
    | {"sw": "southwest", "nw": "northwest"}
)
"""The abbreviations MiniHack's envs accept, accepted here too."""


@dataclass(frozen=True)
class VaultFamily:
    """One registered vault id: its vaults and the length of their codes."""

    env_id: str
    vaults: tuple[str, ...]
    """The vault names; seed ``s`` meets ``vaults[s % len(vaults)]``."""
    code_length: int
    """Moves per secret: 1 (a single move) or more (a code)."""


FAMILIES: Mapping[str, VaultFamily] = MappingProxyType(
    {
        "single": VaultFamily(
            "comprl/Vault-v0", ("Opal", "Garnet", "Topaz", "Jade", "Amber", "Onyx", "Pearl", "Coral"), 1
        ),
        "code": VaultFamily(
            "comprl/Vault-Code-v0", ("Copper", "Silver", "Iron", "Zinc", "Tin", "Cobalt", "Nickel", "Bronze"), 3
        ),
        "fresh": VaultFamily(
            "comprl/Vault-Fresh-v0", ("Maple", "Cedar", "Willow", "Oak", "Pine", "Holly", "Birch", "Rowan"), 1
        ),
    }
)
"""The vault families by `task` name (the entry point's argument). Names differ across families, so a lesson about
one vault never reads as one about a vault of another family when several share a bank."""

VAULT_IDS: tuple[str, ...] = tuple(family.env_id for family in FAMILIES.values())
"""The registered vault env ids."""

_BY_ID: Mapping[str, VaultFamily] = MappingProxyType({family.env_id: family for family in FAMILIES.values()})
_MOVE_WORD = re.compile(r"\b(" + "|".join(sorted(MOVES, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def _family(env_id: str) -> VaultFamily:
    if env_id not in _BY_ID:
        raise ValueError(f"{env_id!r} is not a vault env id; accepted: {', '.join(VAULT_IDS)}")
    return _BY_ID[env_id]


def _moves_ranked(env_id: str, position: int) -> tuple[str, ...]:
    """The 8 moves in the order fixed by sha256 of (env id, position, move): position `position` of the codes."""
    return tuple(sorted(MOVES, key=lambda move: hashlib.sha256(f"{env_id}|{position}|{move}".encode()).digest()))


def vault_of(env_id: str, seed: int) -> str:
    """The vault an episode of `env_id` reset with `seed` stands before (``seed mod 8``)."""
    vaults = _family(env_id).vaults
    return vaults[seed % len(vaults)]


def secret_of(env_id: str, vault: str) -> tuple[str, ...]:
    """The moves that open `vault` of `env_id`, in order; the same in every episode, process and version."""
    family = _family(env_id)
    if vault not in family.vaults:
        raise ValueError(f"{env_id} has no vault {vault!r}; accepted: {', '.join(family.vaults)}")
    index = family.vaults.index(vault)
    return tuple(_moves_ranked(env_id, position)[index] for position in range(family.code_length))


def free_success(env_id: str, max_turns: int = DEFAULT_MAX_TURNS) -> float:
    """Success of a policy that plays uniformly random moves: ``(1/8) ** code length``, or 0 when `max_turns` is
    shorter than the code. The chance level a lesson-free actor that never learned the secrets sits at."""
    code_length = _family(env_id).code_length
    return (1 / len(MOVES)) ** code_length if max_turns >= code_length else 0.0


def named_moves(text: str) -> tuple[str, ...]:
    """The move words `text` names, in order, lower-cased: whole words only (``northeast`` is never read as
    ``north``), case-insensitive; ``<answer>X</answer>`` names X. Abbreviations (``n``, ``ne``) and spellings with
    a hyphen or a space (``north-east``, ``north east``) do not count as the compound move (the latter two read as
    two moves): a lesson states a move the way the actor has to reply it."""
    return tuple(match.group(1).lower() for match in _MOVE_WORD.finditer(text))


_NEGATION = re.compile(r"\b(?:avoid\w*|never|not|wrong|seal\w*)\b|n't\b", re.IGNORECASE)
"""Words that turn a named move away ("Avoid north", "never south", "don't go west", "north seals it"): a lesson
with one states no secret, whatever moves it names."""


def states_secret(env_id: str, seed: int, text: str) -> bool:
    """Whether lesson `text` states the secret of the vault that `seed` meets: the moves it names
    (`named_moves`) are the secret's moves in order, once or repeated whole (a lesson may restate the code, e.g.
    in prose and then as answers), and nothing else, and no word of it turns a move away (:data:`_NEGATION`: the
    lesson grammar's "Avoid SECRET when ..." names the secret as the move not to play). For a one-move secret: the
    text names that move and no other, as one to play. A text that names no move states nothing."""
    secret = secret_of(env_id, vault_of(env_id, seed))
    named = named_moves(text)
    repeats, rest = divmod(len(named), len(secret))
    return repeats > 0 and rest == 0 and named == secret * repeats and not _NEGATION.search(text)


class VaultTextEnv(TextEnv):
    """Open the vault the seed names with its secret moves; see the module docstring."""

    def __init__(self, task: str = "single", max_turns: int = DEFAULT_MAX_TURNS) -> None:
        """Create the env for `task`, a key of `FAMILIES`."""
        super().__init__(max_turns=max_turns)
        if task not in FAMILIES:
            raise ValueError(f"unknown vault task {task!r}; accepted: {', '.join(FAMILIES)}")
        self.family = FAMILIES[task]
        aliases = dict(MOVE_ABBREVIATIONS)
        for name, move in (*MOVE_ABBREVIATIONS.items(), *((move, move) for move in MOVES)):
            aliases.update({f"{verb} {name}": move for verb in ("go", "move")})
        self._aliases = MappingProxyType(aliases)
        self._vault: str | None = None
        self._clicks = 0

    @property
    def instruction(self) -> str:
        """What a vault is and the reply format, short (every prompt of every step pays for it)."""
        length = self.family.code_length
        secret = "secret move" if length == 1 else f"secret code of {length} moves"
        return (
            f"Each vault opens to its own {secret}, the same every time; nothing you see reveals it. "
            f"{'A right move clicks; a' if length > 1 else 'A'} wrong move seals the vault. "
            f"Actions: {', '.join(MOVES)}. Reply with one action as {ANSWER_OPEN}ACTION{ANSWER_CLOSE}."
        )

    @property
    def action_words(self) -> tuple[str, ...]:
        return MOVES

    @property
    def action_aliases(self) -> Mapping[str, str]:
        """MiniHack's abbreviations (n, ne, ...) and "go/move <move>"."""
        return self._aliases

    @property
    def vault(self) -> str:
        """The vault of the current episode."""
        if self._vault is None:
            raise RuntimeError("no vault yet: call reset() first")
        return self._vault

    def _reset_game(self) -> str:
        self._vault = choose_by_seed(self.family.vaults, self._seed, self.np_random)
        self._clicks = 0
        return self._observe()

    def _play(self, action_word: str) -> GameStep:
        secret = secret_of(self.family.env_id, self.vault)
        if action_word != secret[self._clicks]:
            return GameStep(f"Wrong move. The vault {self.vault} is sealed.", 0.0, True, False)
        self._clicks += 1
        if self._clicks == len(secret):
            return GameStep(f"Click. The vault {self.vault} opens.", 1.0, True, True)
        return GameStep(self._observe(), 0.0, False, False)

    def _observe(self) -> str:
        length = self.family.code_length
        if self._clicks:
            return f"Click, {self._clicks} of {length}."
        return f"You stand before the vault {self.vault}." + (f" Its lock takes {length} moves." if length > 1 else "")
