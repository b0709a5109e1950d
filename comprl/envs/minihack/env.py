"""The paper's four MiniHack tasks as comprl text environments, played through the real minihack/nle packages.

Each comprl id wraps the MiniHack id of the same name (``comprl/X`` wraps ``MiniHack-X``):

- comprl/Room-Ultimate-5x5-v0: find the stairs in a dark 5x5 room with a monster and a hidden trap;
- comprl/Room-Random-5x5-v0: walk to the stairs in a lit 5x5 room, from a random start to a random spot (not one
  of the paper's tasks: the easiest Room, where a small model's learning shows within a laptop run);
- comprl/MazeWalk-9x9-v0: find the stairs in a dark 9x9 maze;
- comprl/KeyRoom-Dark-S5-v0: pick up the key, unlock and open the door, reach the stairs in the subroom;
- comprl/River-Narrow-v0: push boulders into the river to cross it and reach the stairs;
- comprl/Room-Dark-Fixed-5x5-v0 (comprl's, not a MiniHack id): MiniHack's dark 5x5 Room with the stairs fixed in the
  south-east corner for every seed, a check of the machinery (`hidden`), not a task of the paper.

Differences from the raw MiniHack envs, all deliberate:

- Seeding: NetHack ignores gymnasium's reset seed, so `reset(seed=s)` draws NetHack's core and disp seeds
  from the env's seeded `np_random` and calls ``seed(core, disp, reseed=False)``: the same seed gives the
  same map and the same trajectory for the same actions, in any process, on any day.
- The clock: NetHack reads the host's clock at the start of a game (a new or full moon, Friday the 13th, night
  and midnight change the messages, the luck and the monsters), so with NLE's default a seed is another game on
  another day. comprl passes NLE's ``fix_moon_phase=True`` (``clock="seed"``): the four effects are drawn from the
  seed (about 1 game in 8 starts under a new moon, 1 in 8 under a full one). ``clock="host"`` is NLE's default
  and the official code's.
- Reward: 1.0 when the stairs are reached, else 0.0 (the paper's binary scheme; NLE's -0.01 penalty for
  steps on which game time does not pass is dropped).
- Episode cap: `max_turns` text actions (default 30, the paper's cap) instead of MiniHack's step limit.
- KeyRoom: "apply key <direction>" is played as NetHack's own key sequence (apply, the key's inventory
  letter, the direction, and "y" to "Unlock it?"), instead of MiniHack's APPLY action that finds the door
  by itself and also opens it. The agent then walks into the door to open it.
- A yes/no question left open by a move (e.g. "Really attack the gnome?") is declined at once, so every
  action word is a single complete game action.
"""

from __future__ import annotations

import platform
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, cast

import gymnasium
import numpy as np

try:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
        from minihack import LevelGenerator, MiniHack  # Importing minihack also registers the MiniHack-* ids.
        from minihack import wiki as minihack_wiki
        from nle import nethack
except ImportError as error:
    raise ImportError(
        "comprl's MiniHack environments need the `nle` and `minihack` packages, whose wheels exist only for "
        f"Linux x86_64 (this platform: {platform.system()} {platform.machine()}); building nle from source "
        "needs the network. On Linux x86_64: pip install nle==1.3.0 minihack"
    ) from error

# minihack.wiki keeps the ImportError of its optional NLP packages (inflect, stanza) as `import_error`. Its traceback
# holds the frames that first imported minihack, and through them the locals of their callers: imported lazily inside
# a training run, it would keep that run's models, optimiser states and envs alive for the life of the process. Only
# the error's message is ever used.
if getattr(minihack_wiki, "import_error", None) is not None:
    minihack_wiki.import_error.__traceback__ = None

from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, DEFAULT_MAX_TURNS, GameStep, TextEnv
from comprl.envs.minihack import hidden
from comprl.envs.minihack.official_view import OFFICIAL_KEYS_MAZE, OFFICIAL_KEYS_ROOM, official_text
from comprl.envs.minihack.text import message_text, render_screen

DIRECTIONS: Mapping[str, nethack.CompassDirection] = MappingProxyType(
    {
        "north": nethack.CompassDirection.N,
        "east": nethack.CompassDirection.E,
        "south": nethack.CompassDirection.S,
        "west": nethack.CompassDirection.W,
        "northeast": nethack.CompassDirection.NE,
        "southeast": nethack.CompassDirection.SE,
        "southwest": nethack.CompassDirection.SW,
        "northwest": nethack.CompassDirection.NW,
    }
)
"""The eight move words and NetHack's move keys."""

DIRECTION_ABBREVIATIONS: Mapping[str, str] = MappingProxyType(
    {"n": "north", "e": "east", "s": "south", "w": "west", "ne": "northeast", "se": "southeast"}
    | {"sw": "southwest", "nw": "northwest"}
)

PICK_UP = "pick up"
APPLY_KEY = "apply key"
CONFIRM_KEY = nethack.CompassDirection.NW
"""NetHack's "y" key: the answer "yes" to a [yn] question, and also the northwest move."""

VIEWS = ("full", "brief", "official")
"""The text views of the game (see `MiniHackTextEnv`)."""
CLOCKS = ("seed", "host")
"""Where NetHack's date and hour come from (see the module docstring): the seed (comprl's) or the host's clock."""
_VIEW_KEYS = ("glyphs", "chars", "blstats", "message", "inv_strs", "inv_letters")
"""The NLE observation keys every view needs (the official view adds its task's `official_keys`)."""

GAME_STEPS_PER_TURN = 10
"""NLE's own step limit is set to this many game steps per text turn, so only `max_turns` ever ends a game."""

_NOISE_MESSAGES = re.compile(r"\s*Can't open '[^']*' file\.")
"""NLE builds without NetHack's rumors file; the game then appends this complaint to some messages."""
_WELCOME_MESSAGE_PREFIX = "Hello Agent, welcome to NetHack!"


@dataclass(frozen=True)
class MiniHackTask:
    """One of the paper's MiniHack tasks."""

    minihack_id: str
    """The MiniHack gymnasium id that is wrapped."""
    goal: str
    """The task-specific part of the instruction."""
    uses_key: bool = False
    """True for KeyRoom: adds the "pick up" and "apply key <direction>" actions and shows picked-up items."""
    official_keys: tuple[str, ...] = OFFICIAL_KEYS_ROOM
    """The NLE observation keys the official view shows (see `official_view`): the official config's for Room and
    MazeWalk; KeyRoom, River and the lit Room have no official config and take the Room one's."""
    des_file: str | None = None
    """The level in NetHack's des-file language, for a task of comprl's own (`minihack_id` is then MiniHack's
    custom navigation id, which builds the level from it); None for a MiniHack task, whose id builds its level."""


def _fixed_stairs_room() -> str:
    """MiniHack's dark 5x5 Room (as MiniHack-Room-Dark-5x5-v0 builds it) with the stairs on `hidden.FIXED_STAIRS`
    instead of a random square; the player's start is left to the game, which draws a floor square per seed."""
    level = LevelGenerator(w=hidden.ROOM_SIZE, h=hidden.ROOM_SIZE, lit=False)
    level.add_goal_pos(hidden.FIXED_STAIRS)
    return level.get_des()


TASKS: Mapping[str, MiniHackTask] = MappingProxyType(
    {
        "room": MiniHackTask(
            "MiniHack-Room-Ultimate-5x5-v0",
            "Reach the stairs down (>) in a dark 5x5 room. You only see the squares next to you, so explore. "
            "The room may hold a monster (moving into it attacks it) and a hidden trap.",
        ),
        "room-lit": MiniHackTask(
            "MiniHack-Room-Random-5x5-v0",
            "Reach the stairs down (>) in a lit 5x5 room. You can see the whole room.",
        ),
        "maze": MiniHackTask(
            "MiniHack-MazeWalk-9x9-v0",
            "Reach the stairs down (>) in a dark 9x9 maze. You only see the squares next to you, so explore.",
            official_keys=OFFICIAL_KEYS_MAZE,
        ),
        "keyroom": MiniHackTask(
            "MiniHack-KeyRoom-Dark-S5-v0",
            "Reach the stairs down (>). They are in a small room behind a locked door (+) inside a dark "
            "room. Find the key (shown as the symbol '('), stand on it and pick it up, stand next to the "
            "door and apply the key toward it to unlock it, walk into the door to open it, then walk to the "
            "stairs.",
            uses_key=True,
        ),
        "river": MiniHackTask(
            "MiniHack-River-Narrow-v0",
            "Reach the stairs down (>) on the far side of a river of water (}). You cannot swim: walk into a "
            "boulder (`) to push it, and push boulders into the water to fill it and make a crossing.",
        ),
        "room-dark-fixed": MiniHackTask(
            "MiniHack-Navigation-Custom-v0",
            "Reach the stairs down (>) in a dark 5x5 room. You only see the squares next to you, so explore.",
            des_file=_fixed_stairs_room(),
        ),
    }
)
"""The tasks by short name (the names used in the paper's tables: Room, Maze, KeyRoom, River; and comprl's own)."""


@dataclass(frozen=True)
class MiniHackScreen:
    """A copy of what the agent saw after its last action (NLE reuses its observation buffers)."""

    glyphs: np.ndarray
    """(21, 79) glyph ids of the map."""
    chars: np.ndarray
    """(21, 79) ASCII codes of the map as NetHack draws it (fog of war: unseen squares are blank)."""
    agent_x: int
    agent_y: int
    message: str
    """The top-line message, with NLE noise removed ("" when none)."""
    picked_up: tuple[str, ...]
    """Inventory lines of items picked up during the episode (letters not used at the start)."""
    official: Mapping[str, np.ndarray]
    """Copies of the NLE arrays the official view reads, by key (empty in the other views)."""


class MiniHackTextEnv(TextEnv):
    """A MiniHack task as a text environment; see the module docstring for the differences from MiniHack."""

    def __init__(
        self, task: str, max_turns: int = DEFAULT_MAX_TURNS, view: str = "full", clock: str = "seed"
    ) -> None:
        """Create the env for `task`, one of `TASKS` ("room", "room-lit", "maze", "keyroom", "river", ...).

        `view` is one of `VIEWS`:

        - ``"official"``: the official code's text (`official_view`: NLE's message, a 9x9 grid around the
          agent, the meaning of the map's symbols; on MazeWalk the official code's "Position" and "Health" lines
          and the inventory instead of the meanings). The paper profile's view.
        - ``"full"`` (comprl's, the default): message, "You see" lines in the manner of BALROG's
          nle-language-wrapper (not its exact text), the seen part of the map and a legend (`text`).
        - ``"brief"`` (comprl's, the cpu profile's): the message and the interesting things in view with their
          distance and direction; no walls, dark area, map or legend: far fewer tokens, for small models on CPU.

        `clock` is one of `CLOCKS`: ``"seed"`` (comprl's default: the moon, Friday the 13th and the hour follow the
        seed, so a run replays on any day) or ``"host"`` (NLE's default and the official code's: the machine's clock).
        """
        super().__init__(max_turns=max_turns)
        if clock not in CLOCKS:
            raise ValueError(f"unknown MiniHack clock {clock!r}; accepted: {', '.join(CLOCKS)}")
        if task not in TASKS:
            raise ValueError(f"unknown MiniHack task {task!r}; accepted: {', '.join(TASKS)}")
        if view not in VIEWS:
            raise ValueError(f"unknown MiniHack view {view!r}; accepted: {', '.join(VIEWS)}")
        self.task = TASKS[task]
        self.view = view
        # APPLY is typed straight into NetHack (see `_apply_key`); ESC declines questions a step leaves open.
        pick_up = (nethack.Command.PICKUP,) if self.task.uses_key else ()
        self._nle_actions = (*DIRECTIONS.values(), *pick_up, nethack.Command.ESC)
        # chars_crop and screen_descriptions cost MiniHack a copy per step: requested only for the official view
        self._official_keys = self.task.official_keys if view == "official" else ()
        level = {} if self.task.des_file is None else {"des_file": self.task.des_file}
        game = gymnasium.make(
            self.task.minihack_id,
            observation_keys=tuple(dict.fromkeys(_VIEW_KEYS + self._official_keys)),
            actions=self._nle_actions,
            max_episode_steps=GAME_STEPS_PER_TURN * max_turns,
            disable_env_checker=True,
            fix_moon_phase=clock == "seed",
            **level,
        )
        self._game = cast(MiniHack, game.unwrapped)
        self._action_words = tuple(DIRECTIONS)
        if self.task.uses_key:
            self._action_words += (PICK_UP, *(f"{APPLY_KEY} {direction}" for direction in DIRECTIONS))
        self._aliases = MappingProxyType(self._build_aliases())
        self._instruction = self._build_instruction()
        self._starting_letters: frozenset[int] = frozenset()
        self._screen: MiniHackScreen | None = None

    @property
    def screen(self) -> MiniHackScreen:
        """What the agent saw after its last action (array copies; for scripted agents and tests)."""
        if self._screen is None:
            raise RuntimeError("no screen yet: call reset() first")
        return self._screen

    @property
    def instruction(self) -> str:
        """Goal, action words and reply format, for the system prompt."""
        return self._instruction

    @property
    def action_words(self) -> tuple[str, ...]:
        """Move words, plus "pick up" and "apply key <direction>" for KeyRoom."""
        return self._action_words

    @property
    def action_aliases(self) -> Mapping[str, str]:
        """Abbreviations ("n", "apply key n"), "go/move <direction>", "pickup", "apply/unlock <direction>"."""
        return self._aliases

    def describe_actions(self) -> str:
        """The action list with the eight apply-key words folded into "apply key <direction>"."""
        shown = [word for word in self.action_words if not word.startswith(APPLY_KEY)]
        if self.task.uses_key:
            shown.append(f"{APPLY_KEY} <direction>")
        return ", ".join(shown)

    def close(self) -> None:
        """Close the NetHack process."""
        self._game.close()
        super().close()

    def _build_aliases(self) -> dict[str, str]:
        aliases: dict[str, str] = {}
        spellings = {direction: [direction] for direction in DIRECTIONS}
        for abbreviation, direction in DIRECTION_ABBREVIATIONS.items():
            spellings[direction].append(abbreviation)
        for direction, names in spellings.items():
            for name in names:
                aliases.update({name: direction, f"go {name}": direction, f"move {name}": direction})
                if self.task.uses_key:
                    for verb in (APPLY_KEY, "apply", "unlock"):
                        aliases[f"{verb} {name}"] = f"{APPLY_KEY} {direction}"
        if self.task.uses_key:
            aliases.update({"pickup": PICK_UP, "pick up key": PICK_UP, "pick up the key": PICK_UP})
        return {alias: word for alias, word in aliases.items() if alias != word}

    def _build_instruction(self) -> str:
        seen = {
            "brief": " and what you see around you (with distance and direction)",
            "full": ", what you see around you (with distance and direction), the map of what you have seen (north is "
            "up) and a legend",
            "official": " and the dungeon around you as a 9x9 grid of symbols (north is up)",
        }[self.view]
        return (
            f"You play NetHack (MiniHack). {self.task.goal} Each turn you get the last game message{seen}. "
            f"Actions: {self.describe_actions()}. You have {self.max_turns} turns. Reply with "
            f"exactly one action as {ANSWER_OPEN}ACTION{ANSWER_CLOSE}, for example "
            f"{ANSWER_OPEN}north{ANSWER_CLOSE}."
        )

    def _reset_game(self) -> str:
        core, disp = (int(value) for value in self.np_random.integers(0, 2**63 - 1, size=2))
        self._game.seed(core, disp, reseed=False)
        observation, _ = self._game.reset()
        self._starting_letters = frozenset(int(letter) for letter in observation["inv_letters"] if letter)
        message = message_text(observation["message"])
        welcome = message.startswith(_WELCOME_MESSAGE_PREFIX)
        self._screen = self._snapshot(observation, "" if welcome else message)
        return self._observe()

    def _observe(self) -> str:
        screen = self.screen
        if self.view == "official":
            return official_text(screen.official)
        picked_up = [f"Picked up: {'; '.join(screen.picked_up)}"] if screen.picked_up else []
        return render_screen(
            screen.glyphs, screen.chars, screen.agent_x, screen.agent_y, screen.message, picked_up,
            brief=self.view == "brief",
        )

    def _play(self, action_word: str) -> GameStep:
        if action_word == PICK_UP:
            return self._game_step(nethack.Command.PICKUP)
        if action_word.startswith(APPLY_KEY):
            return self._apply_key(DIRECTIONS[action_word.removeprefix(APPLY_KEY).strip()])
        return self._game_step(DIRECTIONS[action_word])

    def _apply_key(self, direction: nethack.CompassDirection) -> GameStep:
        """Type NetHack's key sequence: apply, the key's letter, the direction, then "y" to "Unlock it?"."""
        key_letter = self._game.key_in_inventory("key")
        if key_letter is None:
            self._screen = replace(self.screen, message="You are not carrying a key.")
            return GameStep(self._observe(), 0.0, False, False)
        for keypress in (nethack.Command.APPLY, ord(key_letter), direction):
            self._game.nethack.step(int(keypress))
        message = self._live_message()
        if "Unlock it?" in message:
            return self._game_step(CONFIRM_KEY)
        # Nothing to unlock there ("You see no door there.", "Lock it?"): ESC closes any question unanswered.
        return self._game_step(nethack.Command.ESC, fallback_message=message)

    def _game_step(self, nle_action: int, fallback_message: str = "") -> GameStep:
        """One NLE step; declines a yes/no question the step leaves open; returns the text outcome."""
        observation, _, done, _, info = self._game.step(self._nle_actions.index(nle_action))
        message = message_text(observation["message"])
        if not done and self._question_pending():
            observation, _, done, _, info = self._game.step(self._nle_actions.index(nethack.Command.ESC))
        end_status = info["end_status"]
        success = end_status == self._game.StepStatus.TASK_SUCCESSFUL
        if done:
            # NLE has quit the game and zeroed its buffers: describe the end instead of an empty screen.
            if success:
                ending = "You reached the stairs down. Task complete."
            elif end_status == self._game.StepStatus.DEATH:
                ending = "You died. The game is over."
            else:
                ending = "The game is over."
            return GameStep(ending, 1.0 if success else 0.0, True, success)
        self._screen = self._snapshot(observation, message=message or fallback_message)
        return GameStep(self._observe(), 0.0, False, False)

    def _question_pending(self) -> bool:
        """True while NetHack waits for a yes/no answer or a line of text (NLE's `internal` flags)."""
        internal = self._game.last_observation[self._game._internal_index]
        return bool(internal[1] or internal[2])

    def _live_message(self) -> str:
        """The message in NLE's live buffer, also after keys sent straight to `nethack.step`."""
        return message_text(self._game.last_observation[self._game._message_index])

    def _snapshot(self, observation: Mapping[str, Any], message: str) -> MiniHackScreen:
        """Copy the parts of an NLE observation that the text view needs."""
        agent_x, agent_y = (int(value) for value in observation["blstats"][:2])
        picked_up = tuple(
            message_text(line)
            for letter, line in zip(observation["inv_letters"], observation["inv_strs"])
            if letter and int(letter) not in self._starting_letters
        )
        return MiniHackScreen(
            glyphs=observation["glyphs"].copy(),
            chars=observation["chars"].copy(),
            agent_x=agent_x,
            agent_y=agent_y,
            message=_NOISE_MESSAGES.sub("", message).strip(),
            picked_up=picked_up,
            official=MappingProxyType({key: observation[key].copy() for key in self._official_keys}),
        )
