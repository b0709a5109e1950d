"""ALFWorld built in: a pure-Python household simulator with ALFWorld's commands, texts and six task types.

``comprl/ALFWorld-v0`` plays the official ALFWorld goals (`comprl.envs.alfworld.goals`: the paper's 1,466
training goals and ALFWorld's 134 out-of-distribution ones), each set in a generated room of its official
floorplan's type (`comprl.envs.alfworld.scenes`): a kitchen, bathroom, bedroom or living room with numbered
receptacles and objects. The goal sentence is the official game's. The first observation reads like
ALFWorld's::

    -= Welcome to TextWorld, ALFRED! =-

    You are in the middle of a room. Looking quickly around you, you see a cabinet 2, a fridge 1, ...

    Your task is to: put a clean mug in coffeemachine.

Commands (lower-case, names as printed, e.g. "mug 1", "countertop 2"):

- ``go to R``: walk to receptacle R and see it ("You arrive at R. On the R, you see a mug 1, and a fork 2.");
  a closed openable receptacle (cabinet, drawer, fridge, microwave, safe) hides its contents
  until ``open R`` ("You open the R. The R is open. In it, you see ..."); ``close R`` closes it again;
- ``take O from R`` (hands hold one object), ``move O to R`` (``put O in R`` / ``put O on R`` /
  ``put O in/on R`` are accepted aliases of it);
- ``heat O with microwave N``, ``cool O with fridge N``, ``clean O with sinkbasin N``: at that appliance
  (open or closed, as ALFWorld's engine allows), holding O;
- ``use desklamp N``: switch the lamp next to you on (as in ALFWorld, a lamp once switched on counts as on:
  every use answers "You turn on ...");
- ``examine R`` (the receptacle at hand) / ``examine O`` (the object held), ``inventory``, ``look``, ``help``.

A well-formed command whose preconditions fail (an absent object, a receptacle not next to the agent, a
closed receptacle, full hands) gets "Nothing happens." and costs a turn, as in ALFWorld; it is not counted
in ``info["invalid_action"]``. A reply that is no command at all (empty, unknown verb, malformed answer tags)
is answered with `TextEnv`'s invalid-action feedback and counted. ``info["admissible_actions"]`` lists the
commands whose preconditions hold, computed like ALFWorld's; all of them parse.

Goals (checked after every command, as the PDDL goals of ALFWorld): an object of the goal type, clean / hot /
cool where the task says so, inside a receptacle of the target type (two such objects in the same receptacle
for pick_two_obj_and_place); for look_at_obj_in_light, holding an object of the goal type next to a desk
lamp that is on.

Reward: +1.0 on the command that reaches the goal (the episode terminates); -1.0 on the step that truncates
the episode at `max_turns` without success (whatever that step was, a command or an invalid reply); 0.0 on
every other step. ALFWorld's goals cannot fail earlier, so -1 is only given at truncation.

Seeds (``split`` argument): ``"auto"`` (default, the registered id) maps ``reset(seed=s)`` with
``s < EVAL_SEED_OFFSET`` to training scene ``s mod 1466`` (official training goal ``s mod 1466``, the ``id`` of
``rl_train.jsonl``) and ``s >= EVAL_SEED_OFFSET`` (the training loop's evaluation seeds) to evaluation scene
``(s - EVAL_SEED_OFFSET) mod 134`` (the ``id`` of ``test.jsonl``, ALFWorld's ``valid_unseen``); ``"train"``
and ``"eval"`` map every seed to ``s mod`` their size. ``task`` restricts scenes to one task type (``"all"``
keeps every scene): the seed then indexes that type's scenes of the split. ``seed=None`` draws a scene from
the env's generator. ``reset(options={"scene": Scene})`` plays a hand-built scene.

Deviations from ALFWorld (alfworld 0.4, TextWorld PDDL engine), all deliberate:

- Goals are the official ones (task type, object, target, sentence, floorplan number; every one of the
  1,600 is expressible, `comprl.envs.alfworld.scenes.unsupported_games`), but rooms are generated: the
  receptacle set and numbering and the objects and their starting places are drawn from hand-written tables
  (`comprl.envs.alfworld.scenes`), not taken from the ALFRED trial, which the goal lists do not record. Out
  of distribution means the unseen ``valid_unseen`` floorplans, as in ALFWorld.
- Any object fits in any receptacle (ALFWorld limits some pairs with ``canContain``).
- No slicing (no ``slice`` command, no sliced objects), no floor lamps, one desk lamp per bedroom and
  living room; ``examine O`` never reports states; heating clears "cool" and cooling clears "hot".
- ``put`` aliases answer with the ``move`` sentence; ``look`` when not at a receptacle repeats the room
  overview.
- Episode cap: `max_turns` (default 40 for single-task training; the paper's multi-task runs use 30).

`comprl.envs.alfworld.official` plays the official games (``ALFWORLD_DATA``, the ``alfworld`` extra) and exports
these scenes as ALFWorld PDDL games; ``tests/test_alfworld_official.py`` checks, where the extra is installed,
that the official engine and this simulator list the same admissible commands and agree on wins along random
walks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from comprl.envs.alfworld.goals import TASK_TYPES
from comprl.envs.alfworld.scenes import (
    LAMP,
    OBJECT_TYPES,
    RECEPTACLE_TYPES,
    TREATMENT_APPLIANCES,
    TREATMENTS,
    Goal,
    Scene,
    kind_of,
    scene,
    split_size,
    split_task_types,
)
from comprl.envs.base import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    GameStep,
    TextEnv,
    choose_by_seed,
    extract_answer,
    seed_split,
)

DEFAULT_MAX_TURNS = 40
"""Actions per single-task ALFWorld episode."""

SPLIT_CHOICES = ("auto", "train", "eval")
TASK_CHOICES = ("all", *TASK_TYPES)

WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING_HAPPENS = "Nothing happens."
_ROOM_OVERVIEW = "You are in the middle of a room. Looking quickly around you, you see {}."

_COMMANDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), canonical)
    for pattern, canonical in (
        (r"go to (?P<r>.+)", "go to {r}"),
        (r"open (?P<r>.+)", "open {r}"),
        (r"close (?P<r>.+)", "close {r}"),
        (r"take (?P<o>.+?) from (?P<r>.+)", "take {o} from {r}"),
        (r"move (?P<o>.+?) to (?P<r>.+)", "move {o} to {r}"),
        (r"put (?P<o>.+?) (?:in/on|in|on) (?P<r>.+)", "move {o} to {r}"),
        (r"heat (?P<o>.+?) with (?P<r>.+)", "heat {o} with {r}"),
        (r"cool (?P<o>.+?) with (?P<r>.+)", "cool {o} with {r}"),
        (r"clean (?P<o>.+?) with (?P<r>.+)", "clean {o} with {r}"),
        (r"use (?P<o>.+)", "use {o}"),
        (r"examine (?P<o>.+)", "examine {o}"),
        (r"inventory", "inventory"),
        (r"look", "look"),
        (r"help", "help"),
    )
)
"""Command patterns (on normalised text) and the canonical command each maps to."""

HELP_TEXT = (
    "Available commands: look (describe where you are), inventory (what you carry), go to [receptacle], "
    "open [receptacle], close [receptacle], take [object] from [receptacle], move [object] to [receptacle], "
    "heat [object] with [microwave], cool [object] with [fridge], clean [object] with [sinkbasin], "
    "use [desklamp], examine [object or receptacle], help."
)

_VERB_FEEDBACK = {"heat": "You heat the {o} using the {r}.", "cool": "You cool the {o} using the {r}.",
                  "clean": "You clean the {o} using the {r}."}


def listing(names: list[str] | tuple[str, ...]) -> str:
    """ALFWorld's enumeration: "nothing", "a mug 1", "a mug 1, and a fork 2", "a mug 1, a cup 1, and a fork 2"."""
    items = [f"a {name}" for name in names]
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f", and {items[-1]}"


class AlfWorldTextEnv(TextEnv):
    """ALFWorld-style household tasks as a comprl text environment (see the module docstring)."""

    unsolved_truncation_reward = -1.0

    def __init__(self, task: str = "all", split: str = "auto", max_turns: int = DEFAULT_MAX_TURNS,
                 action_prompt: bool = True) -> None:
        """Create the env; `task` is "all" or one task type, `split` one of "auto", "train" or "eval"."""
        super().__init__(max_turns=max_turns, action_prompt=action_prompt)
        if task not in TASK_CHOICES:
            raise ValueError(f"unknown ALFWorld task {task!r}; accepted: {', '.join(TASK_CHOICES)}")
        if split not in SPLIT_CHOICES:
            raise ValueError(f"unknown ALFWorld split {split!r}; accepted: {', '.join(SPLIT_CHOICES)}")
        self.task = task
        self.split = split
        self._scene: Scene | None = None
        self._location: str | None = None
        self._contents: dict[str, list[str]] = {}
        self._open: set[str] = set()
        self._holding: str | None = None
        self._states: dict[str, set[str]] = {}
        self._lamps_on: set[str] = set()

    # ---- public state -------------------------------------------------------------------------------------

    @property
    def scene(self) -> Scene:
        """The scene being played."""
        if self._scene is None:
            raise RuntimeError("no scene yet: call reset() first")
        return self._scene

    @property
    def goal(self) -> Goal:
        """The goal of the current episode."""
        return self.scene.goal

    @property
    def location(self) -> str | None:
        """The receptacle the agent stands at, or None in the middle of the room."""
        return self._location

    @property
    def holding(self) -> str | None:
        """The object in the agent's hands, or None."""
        return self._holding

    @property
    def instruction(self) -> str:
        """The household setting, the command syntax and the reply format, for the system prompt."""
        return (
            "You are a household robot in a text world. Each observation describes what you see; the first one "
            "ends with your task. Commands: go to [receptacle], open [receptacle], close [receptacle], take "
            "[object] from [receptacle], move [object] to [receptacle], heat [object] with [microwave], cool "
            "[object] with [fridge], clean [object] with [sinkbasin], use [desklamp], examine [something], "
            "inventory, look. Name things exactly as the text does, with their number (e.g. mug 1, cabinet 3). "
            "You can carry one object at a time; closed receptacles must be opened to see or take what is "
            f"inside. You have {self.max_turns} actions. Reply with exactly one command as {ANSWER_OPEN}COMMAND"
            f"{ANSWER_CLOSE}, for example {ANSWER_OPEN}go to countertop 1{ANSWER_CLOSE}."
        )

    @property
    def action_words(self) -> tuple[str, ...]:
        """The admissible commands of the current state, in ALFWorld's order."""
        commands = [f"go to {name}" for name in self.scene.receptacles if name != self._location]
        here = self._location
        if here is not None:
            if self._openable(here):
                commands.append(f"close {here}" if here in self._open else f"open {here}")
            if self._accessible(here):
                items = self._contents[here]
                if self._holding is None:
                    commands.extend(f"take {o} from {here}" for o in items if kind_of(o) != LAMP)
                else:
                    commands.append(f"move {self._holding} to {here}")
                commands.extend(f"use {o}" for o in items if kind_of(o) == LAMP)
            if self._holding is not None:
                for verb, appliances in TREATMENT_APPLIANCES.items():
                    if kind_of(here) in appliances and self._can(verb, self._holding):
                        commands.append(f"{verb} {self._holding} with {here}")
            commands.append(f"examine {here}")
        if self._holding is not None:
            commands.append(f"examine {self._holding}")
        commands.extend(("inventory", "look", "help"))
        return tuple(commands)

    def describe_actions(self) -> str:
        """The admissible commands, comma-separated."""
        return ", ".join(self.action_words)

    def parse_action(self, text: str) -> str | None:
        """The canonical command for a well-formed reply (its names need not exist), else None."""
        candidate = extract_answer(text)
        if not candidate:
            return None
        for pattern, canonical in _COMMANDS:
            match = pattern.fullmatch(candidate)
            if match is not None:
                return canonical.format(**match.groupdict())
        return None

    def _info(self, invalid_action: bool) -> dict[str, Any]:
        info = super()._info(invalid_action)
        info["task_type"] = self.goal.task_type
        return info

    # ---- game ---------------------------------------------------------------------------------------------

    def _choose_scene(self) -> Scene:
        """``options["scene"]`` when given, else the scene the seed picks (see the module docstring)."""
        chosen = self._options.get("scene")
        if chosen is not None:
            if not isinstance(chosen, Scene):
                raise TypeError(f"options['scene'] must be a Scene, got {type(chosen).__name__}")
            return chosen
        split, seed = seed_split(self.split, self._seed, "eval")
        return scene(split, choose_by_seed(scene_indices(split, self.task), seed, self.np_random))

    def _reset_game(self) -> str:
        chosen = self._choose_scene()
        self._scene = chosen
        self._location = None
        self._contents = {name: [] for name in chosen.receptacles}
        for obj, host in chosen.placements:
            self._contents[host].append(obj)
        self._open = set()
        self._holding = None
        self._states = {}
        self._lamps_on = set()
        return f"{WELCOME}\n\n{self._room_overview()}\n\nYour task is to: {chosen.goal.text}"

    def _observe(self) -> str:
        where = self._room_overview() if self._location is None else self._view(self._location)
        return f"{where}\nYour task is to: {self.goal.text}"

    def _play(self, action_word: str) -> GameStep:
        feedback = self._execute(action_word)
        success = self._goal_reached()
        return GameStep(feedback, 1.0 if success else 0.0, success, success)

    def _execute(self, command: str) -> str:
        for pattern, canonical in _COMMANDS:
            match = pattern.fullmatch(command)
            if match is not None:
                handler = self._handlers()[canonical.split(" ", 1)[0]]
                return handler(**match.groupdict()) or NOTHING_HAPPENS
        raise ValueError(f"not a canonical ALFWorld command: {command[:80]!r}")

    def _handlers(self) -> dict[str, Callable[..., str | None]]:
        return {
            "go": self._go, "open": self._open_it, "close": self._close, "take": self._take, "move": self._move,
            "heat": lambda o, r: self._treat("heat", o, r), "cool": lambda o, r: self._treat("cool", o, r),
            "clean": lambda o, r: self._treat("clean", o, r), "use": self._use, "examine": self._examine,
            "inventory": self._inventory, "look": self._look, "help": lambda: HELP_TEXT,
        }

    def _go(self, r: str) -> str | None:
        if r not in self._contents or r == self._location:
            return None
        self._location = r
        return f"You arrive at {r}. {self._view(r)}"

    def _open_it(self, r: str) -> str | None:
        if r != self._location or not self._openable(r) or r in self._open:
            return None
        self._open.add(r)
        return f"You open the {r}. The {r} is open. In it, you see {listing(self._contents[r])}."

    def _close(self, r: str) -> str | None:
        if r != self._location or r not in self._open:
            return None
        self._open.discard(r)
        return f"You close the {r}."

    def _take(self, o: str, r: str) -> str | None:
        if (r != self._location or not self._accessible(r) or self._holding is not None
                or o not in self._contents[r] or kind_of(o) == LAMP):
            return None
        self._contents[r].remove(o)
        self._holding = o
        return f"You pick up the {o} from the {r}."

    def _move(self, o: str, r: str) -> str | None:
        if r != self._location or not self._accessible(r) or self._holding != o:
            return None
        self._contents[r].append(o)
        self._holding = None
        return f"You move the {o} to the {r}."

    def _treat(self, verb: str, o: str, r: str) -> str | None:
        if (r != self._location or self._holding != o or kind_of(r) not in TREATMENT_APPLIANCES[verb]
                or not self._can(verb, o)):
            return None
        states = self._states.setdefault(o, set())
        states.difference_update({"heat": {"cool"}, "cool": {"heat"}}.get(verb, set()))
        states.add(verb)
        return _VERB_FEEDBACK[verb].format(o=o, r=r)

    def _use(self, o: str) -> str | None:
        here = self._location
        if here is None or kind_of(o) != LAMP or not self._accessible(here) or o not in self._contents[here]:
            return None
        self._lamps_on.add(o)
        return f"You turn on the {o}."

    def _examine(self, o: str) -> str | None:
        here = self._location
        if o == here:
            return self._view(o)
        return f"There's nothing special about {o}." if o == self._holding else None

    def _inventory(self) -> str:
        if self._holding is None:
            return "You are not carrying anything."
        return f"You are carrying: a {self._holding}."

    def _look(self) -> str:
        if self._location is None:
            return self._room_overview()
        return f"You are facing the {self._location}. Next to it, you see nothing."

    # ---- helpers ------------------------------------------------------------------------------------------

    def _room_overview(self) -> str:
        return _ROOM_OVERVIEW.format(listing(self.scene.receptacles))

    def _view(self, r: str) -> str:
        if not self._openable(r):
            return f"On the {r}, you see {listing(self._contents[r])}."
        if r not in self._open:
            return f"The {r} is closed."
        return f"The {r} is open. In it, you see {listing(self._contents[r])}."

    def _openable(self, r: str) -> bool:
        return RECEPTACLE_TYPES[kind_of(r)].openable

    def _accessible(self, r: str) -> bool:
        return not self._openable(r) or r in self._open

    def _can(self, verb: str, o: str) -> bool:
        kind = OBJECT_TYPES.get(kind_of(o))
        return kind is not None and kind.can(verb)

    def _goal_reached(self) -> bool:
        goal = self.goal
        if goal.task_type == "look_at_obj_in_light":
            here = self._location
            return (self._holding is not None and kind_of(self._holding) == goal.object_type and here is not None
                    and any(lamp in self._lamps_on for lamp in self._contents[here]))
        state = TREATMENTS.get(goal.task_type)
        for name, items in self._contents.items():
            if kind_of(name) != goal.target_type:
                continue
            matching = [o for o in items if kind_of(o) == goal.object_type
                        and (state is None or state in self._states.get(o, set()))]
            if len(matching) >= goal.count:
                return True
        return False


@lru_cache(maxsize=None)
def scene_indices(split: str, task: str) -> tuple[int, ...]:
    """The indices of `split`'s scenes of task type `task` ("all": every scene)."""
    if task == "all":
        return tuple(range(split_size(split)))
    return tuple(i for i, task_type in enumerate(split_task_types(split)) if task_type == task)
