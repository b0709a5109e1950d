"""A reference bank: lessons written from the environments' experts, to ask "can the actor use good experience?"

The cpu runs cannot answer that question from their own banks, whose lessons the 135M extractor writes badly. A
reference bank holds lessons that are good by construction: :func:`write_reference_bank` plays each task's expert
on training seeds (never the held-out ones, ``EVAL_SEED_OFFSET`` on), turns what it did into short lessons in our
own words, and writes them as ``add`` operations (origin ``"reference"``) into a bank file with the bank's own
embedder, the one ``config.bank.embedder`` names, as the experience manager does. A run starts from a copy of it
with ``bank.init_from`` (method ``static``: the extractor never trains) and `benchmarks/reference_bank.py`
compares guided with free evaluation on it.

The experts (:func:`expert`): MiniHack, the screen-reading `StairsSeeker` (it also fetches KeyRoom's key and opens
the door); Sokoban, a shortest solution from `comprl.envs.sokoban.solver.solve`; ALFWorld, the walkthrough
`comprl.envs.alfworld.official.expert_plan`; WebShop, `webshop_expert` (a shopper who knows the goal). How each
task's lessons are made from their play on the training seeds:

- **MiniHack** (lit Room, dark Room, MazeWalk, KeyRoom): every expert turn is filed under the kind of thing in the
  observation's "You see:" list that decides the move, in this order: the stairs down; for KeyRoom, the key under
  the player (the turn it picks it up), a closed door next to it (the turn it applies the key), else the key or a
  door in view; else "nothing useful". Each kind met on at least ``MIN_TURNS`` turns makes one rule lesson: per
  direction the view names (the 16 winds), the expert's commonest move there, grouped by move
  ("north/north-northeast/north-northwest: north; ..."), and on how many of those turns it made that move. The
  "nothing useful" lesson says to explore unexplored squares and gives the expert's commonest moves and its
  median turns. One lesson per kind, not per direction: a query is the whole instruction plus the first
  observation, and the embedder ranks per-direction lessons by the instruction (every lit Room query retrieved the
  "northwest" lesson), so each lesson must hold the whole rule. The lit Room thus gets one lesson, fewer than the
  default warm-up (``experience.warmup=5``): a run from this bank needs a warm-up of at most the task's count.
- **Sokoban**: three rules counted over the expert's moves: how often it pushes when a box stands next to the
  player with a free target right behind it, the share of its moves that push (the rest walk round to the far side
  of a box), and how many of its pushes end in a corner that is not a target (none: it never does).
- **ALFWorld**: one lesson per goal type: the expert plan with every name replaced by its role (``[object]``,
  ``[where it lies]``, ``[target]``, ``[where the lamp is]``, others by their kind) and its ``open`` steps left
  out (one rule says to open closed receptacles), the commonest such abstract plan among the training games of
  that type, and how many of them it covers.
- **WebShop**: two lessons from the shopper's sessions: search with the instruction's words and page to the goal
  product (how often it was on the first page), then open it, click each option the instruction names and buy
  (how many goals had options; median turns).

Every lesson is at most ``MAX_LESSON_TOKENS`` tokens of the extractor's tokenizer (title and content together;
checked, an error otherwise). ``seed`` picks the training seeds (``episodes`` distinct ones per task, drawn from
``[0, TRAIN_SEED_RANGE)``) and the order in which the tasks and their lessons are written.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from comprl.config import ExperimentConfig, make_config
from comprl.envs import ENV_IDS, make
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN, EVAL_SEED_OFFSET
from comprl.envs.mixture import MIXTURES, task_name

MINIHACK_IDS = frozenset(env_id for env_id in ENV_IDS if "minihack" in str(gymnasium.spec(env_id).entry_point))
"""The MiniHack env ids, played by the `StairsSeeker`."""
SOKOBAN, ALFWORLD, WEBSHOP = "comprl/Sokoban-6x6-2box-v0", "comprl/ALFWorld-v0", "comprl/WebShop-Small-v0"
ROOM_LIT = "comprl/Room-Random-5x5-v0"
REFERENCE_TASKS: tuple[str, ...] = (ROOM_LIT, *MIXTURES["6-task"])
"""The cpu profile's single task (the lit Room) and the 6-task mixture's tasks (dark Room, WebShop, ALFWorld,
MazeWalk, KeyRoom, Sokoban): the tasks :func:`write_reference_bank` has experts for."""
TASK_OPTIONS: dict[str, dict[str, Any]] = {ROOM_LIT: {"view": "brief"}}
"""Env options the experts play with when the config gives none (the cpu profile's brief view of the lit Room)."""
MAX_LESSON_TOKENS = 120
"""The longest lesson (title and content) in tokens of the extractor's tokenizer: the lesson cap planned for the
cpu design (issue 46), so that the reference lessons are as long as the extractor may write."""
TRAIN_SEED_RANGE = 100_000
"""Training seeds are drawn from ``[0, TRAIN_SEED_RANGE)``, far below ``EVAL_SEED_OFFSET``."""
DEFAULT_EPISODES = 48
"""Expert episodes played per task (distinct training seeds)."""
MIN_TURNS = 3
"""A kind of MiniHack situation gets its own lesson only when the expert met it on at least this many turns."""
EXPERT_TURNS = 40
"""The turn cap the experts play under (the longest ALFWorld plans need 11 steps; the MiniHack seeker ~20)."""
ORIGIN = "reference"
"""The ``origin`` of the bank's ``add`` operations, which tells reference lessons from distilled ones."""

Policy = Callable[[dict[str, Any]], "str | None"]
"""An episode's policy: the next action given the latest ``info``; None when it has nothing left to play."""


def webshop_expert(env: Any) -> Iterator[str]:
    """Shop for the goal the way a user who knows it would: search its instruction, page through the results to
    the goal product, open it, select the goal's options, buy. Reads the env's public state (`goal`,
    `action_words`) between moves; stops (gives up) when the product is not among the search's results."""
    goal = env.goal
    yield f"search[{goal.instruction}]"
    product = f"click[{goal.asin.lower()}]"
    while product not in env.action_words:
        if "click[next >]" not in env.action_words:
            return
        yield "click[next >]"
    yield product
    for value in goal.options.values():
        yield f"click[{value.lower()}]"
    yield "click[buy now]"


def expert(env_id: str, env: Any) -> Policy:
    """The expert policy of one episode of `env_id`, just reset (`env` is the unwrapped env)."""
    if env_id in MINIHACK_IDS:
        from comprl.envs.minihack.solvers import StairsSeeker  # Needs nle, like the env itself.

        seeker = StairsSeeker()
        return lambda info: seeker.act(env)
    if env_id == SOKOBAN:
        from comprl.envs.sokoban.solver import solve

        moves: Iterator[str] = iter(solve(env.level.room, env.state) or ())
    elif env_id == ALFWORLD:
        from comprl.envs.alfworld.official import expert_plan

        moves = iter(expert_plan(env.scene))
    elif env_id == WEBSHOP:
        moves = webshop_expert(env)
    else:
        raise ValueError(f"no expert for {env_id!r}; accepted: MiniHack ids, {SOKOBAN}, {ALFWORLD}, {WEBSHOP}")
    return lambda info: next(moves, None)


@dataclass(frozen=True)
class Turn:
    """One expert turn: the observation it answered and its action."""

    observation: str
    action: str


@dataclass(frozen=True)
class ExpertEpisode:
    """One expert episode on a training seed; ``facts``: what the lessons need of its start (:func:`_facts`)."""

    seed: int
    turns: tuple[Turn, ...]
    won: bool
    facts: dict[str, Any]


def play_expert(env_id: str, seed: int, options: dict[str, Any] | None = None) -> ExpertEpisode:
    """Play `env_id`'s expert once on training seed `seed` (refused if it is a held-out seed)."""
    if not 0 <= seed < EVAL_SEED_OFFSET:
        raise ValueError(f"seed {seed} is not a training seed; accepted: 0 <= seed < {EVAL_SEED_OFFSET}")
    env = make(env_id, max_turns=EXPERT_TURNS, **(options or {}))
    try:
        observation, info = env.reset(seed=seed)
        facts = _facts(env_id, env.unwrapped)
        policy = expert(env_id, env.unwrapped)
        turns: list[Turn] = []
        while (action := policy(info)) is not None:
            turns.append(Turn(observation, action))
            observation, _, terminated, truncated, info = env.step(f"{ANSWER_OPEN}{action}{ANSWER_CLOSE}")
            if terminated or truncated:
                break
        return ExpertEpisode(seed, tuple(turns), bool(info["success"]), facts)
    finally:
        env.close()


def _facts(env_id: str, env: Any) -> dict[str, Any]:
    """What the lessons need of an episode's start beyond its turns (ALFWorld: the scene's roles)."""
    if env_id == ALFWORLD:
        from comprl.envs.alfworld.scenes import kind_of

        scene = env.scene
        return {"task_type": scene.goal.task_type, "roles": _alfworld_roles(scene, kind_of)}
    if env_id == WEBSHOP:
        return {"options": len(env.goal.options)}
    return {}


# ---------------------------------------------------------------------------------------------------------------
# MiniHack: the expert's answer per situation the "You see:" list shows
# ---------------------------------------------------------------------------------------------------------------

_SEEN = re.compile(r"^(?P<label>.+?) (?P<distance>adjacent|very near|near|very far|far) (?P<directions>.+)$")
_WIND_ORDER = {wind: i for i, wind in enumerate((
    "north", "north-northeast", "northeast", "east-northeast", "east", "east-southeast", "southeast", "south-southeast",
    "south", "south-southwest", "southwest", "west-southwest", "west", "west-northwest", "northwest", "north-northwest",
))}
"""The 16 winds the view names directions with, clockwise from north (the order of a lesson's rule)."""
_TITLES = {ROOM_LIT: "Lit room", "comprl/Room-Ultimate-5x5-v0": "Dark room", "comprl/MazeWalk-9x9-v0": "Maze",
           "comprl/KeyRoom-Dark-S5-v0": "Key room", "comprl/River-Narrow-v0": "River"}


def seen(observation: str) -> dict[str, tuple[str, str]]:
    """The things a MiniHack observation's "You see:" list names: label -> (distance, directions)."""
    lines = observation.split("You see:\n", 1)[-1].splitlines()
    found: dict[str, tuple[str, str]] = {}
    for line in lines:
        match = _SEEN.match(line)
        if match is None:
            break
        found.setdefault(match["label"], (match["distance"], match["directions"]))
    return found


def situation(turn: Turn) -> tuple[str, str | None]:
    """What decided a MiniHack expert turn: the kind of thing in view (module docstring) and its direction."""
    view = seen(turn.observation)
    if "stairs down" in view:
        return "the stairs down", view["stairs down"][1]
    if turn.action == "pick up":
        return "the key under you", None
    if turn.action.startswith("apply key"):
        return "a closed door next to you", turn.action.removeprefix("apply key ")
    for label, kind in (("skeleton key", "the key"), ("closed door", "a closed door"), ("open door", "an open door"),
                        ("doorway", "a doorway")):
        if label in view and (label != "skeleton key" or "Picked up" not in turn.observation):
            return kind, view[label][1]
    return "nothing useful", None


def minihack_lessons(env_id: str, episodes: Sequence[ExpertEpisode]) -> list[tuple[str, str]]:
    """(title, content) per kind of situation met on ``MIN_TURNS`` or more expert turns (module docstring)."""
    answers: dict[str, dict[str | None, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for episode in episodes:
        for turn in episode.turns:
            kind, direction = situation(turn)
            answers[kind][direction][turn.action] += 1
    won = [len(e.turns) for e in episodes if e.won]
    title = _TITLES.get(env_id, task_name(env_id))
    where = f"{len(episodes)} training levels"
    lessons = []
    for kind, by_direction in sorted(answers.items()):
        total = sum(sum(counts.values()) for counts in by_direction.values())
        if total < MIN_TURNS:
            continue
        if kind == "nothing useful":
            counts = by_direction[None]
            common = ", ".join(f"{move} {n / total:.0%}" for move, n in counts.most_common(3))
            lessons.append((f"{title}: when nothing useful is in view", (
                f"Explore: walk toward the nearest dark, unexplored squares; do not go back. Expert play on {where}: "
                f"commonest moves {common}; it won {len(won)} in a median of {statistics.median(won) if won else 0:g} "
                f"turns."
            )))
            continue
        if None in by_direction:  # the one move for this kind ("pick up")
            move, n = by_direction[None].most_common(1)[0]
            lessons.append((f"{title}: {kind}", f"Answer <answer>{move}</answer>. Expert play on {where}: {move} on "
                                                f"{n} of {total} such turns."))
            continue
        moves: dict[str, list[str]] = defaultdict(list)
        agree = 0
        for direction, counts in sorted(by_direction.items(), key=lambda item: _WIND_ORDER.get(item[0], 99)):
            move, n = counts.most_common(1)[0]
            moves[move].append(direction)
            agree += n
        rule = "; ".join(f"{'/'.join(directions)}: {move}" for move, directions in moves.items())
        lessons.append((
            f"{title}: {kind}" + ("" if kind.endswith("next to you") else " in view"),
            f"Answer by where the view puts {kind}: {rule}. The expert's move on {agree} of {total} turns.",
        ))
    return lessons


def rule_moves(content: str) -> dict[str, str]:
    """The direction -> move table of a MiniHack rule lesson as :func:`minihack_lessons` writes it ({} for any
    other lesson), to check whether an actor's move follows the lesson it was shown."""
    match = re.match(r"Answer by where the view puts [^:]+: (.*?)\. The expert's move", content)
    if match is None:
        return {}
    table = {}
    for pair in match[1].split("; "):
        directions, move = pair.split(": ")
        table.update(dict.fromkeys(directions.split("/"), move))
    return table


# ---------------------------------------------------------------------------------------------------------------
# Sokoban: three rules counted over the solver's moves
# ---------------------------------------------------------------------------------------------------------------

_STEP = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def sokoban_map(observation: str) -> list[str]:
    """The map rows of a Sokoban observation."""
    block = observation.split("Map:\n", 1)[1]
    return block.split("\nLegend", 1)[0].splitlines()


def _at(rows: list[str], r: int, c: int) -> str:
    return rows[r][c] if 0 <= r < len(rows) and 0 <= c < len(rows[r]) else "#"


def sokoban_lessons(episodes: Sequence[ExpertEpisode]) -> list[tuple[str, str]]:
    """(title, content) of the three Sokoban rules (module docstring)."""
    chances = taken = pushes = moves = cornered = 0
    for episode in episodes:
        for turn in episode.turns:
            rows = sokoban_map(turn.observation)
            r, c = next((r, row.index(ch)) for r, row in enumerate(rows) for ch in "PS" if ch in row)
            move = turn.action.lower()
            for direction, (dr, dc) in _STEP.items():
                if _at(rows, r + dr, c + dc) == "X" and _at(rows, r + 2 * dr, c + 2 * dc) == "O":
                    chances += 1
                    taken += move == direction
            dr, dc = _STEP[move]
            moves += 1
            if _at(rows, r + dr, c + dc) in "X√":
                pushes += 1
                br, bc = r + 2 * dr, c + 2 * dc
                walls = [_at(rows, br + a, bc + b) == "#" for a, b in _STEP.values()]
                corner = (walls[0] or walls[1]) and (walls[2] or walls[3])
                cornered += corner and _at(rows, br, bc) != "O"
    won = [len(e.turns) for e in episodes if e.won]
    where = f"{len(episodes)} training levels"
    return [
        ("Sokoban: push a box onto a target right behind it",
         f"When a box (X) is next to you and a free target (O) lies just beyond it in the same direction, walk into "
         f"the box that way. Expert play on {where}: it did so in {taken} of {chances} such turns."),
        ("Sokoban: get behind the box before pushing",
         f"You can only push, so first walk round to the side of the box opposite its target. Expert play on "
         f"{where}: {pushes} of {moves} moves were pushes, the rest walking; it won {len(won)} levels in a median "
         f"of {statistics.median(won) if won else 0:g} moves."),
        ("Sokoban: never push a box into a corner",
         f"A box pushed into a corner that is not a target is stuck for good. Expert play on {where}: {cornered} of "
         f"{pushes} pushes ended in such a corner."),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# ALFWorld: one abstract plan per goal type
# ---------------------------------------------------------------------------------------------------------------


def _alfworld_roles(scene: Any, kind_of: Callable[[str], str]) -> dict[str, str]:
    """Every name in the scene's expert plan -> its role placeholder."""
    goal = scene.goal
    roles: dict[str, str] = {}
    objects = [obj for obj, _ in scene.placements if kind_of(obj) == goal.object_type]
    for obj, host in scene.placements:
        if "lamp" in kind_of(obj):
            roles.setdefault(host, "[where the lamp is]")
        if kind_of(obj) == goal.object_type:
            roles[obj] = "[object]" if len(objects) == 1 or goal.count == 1 else f"[object {objects.index(obj) + 1}]"
            roles.setdefault(host, "[where it lies]")
    for receptacle in scene.receptacles:
        if kind_of(receptacle) == goal.target_type:
            roles[receptacle] = "[target]"
        roles.setdefault(receptacle, f"[{kind_of(receptacle)}]")
    for obj, _ in scene.placements:
        roles.setdefault(obj, f"[{kind_of(obj)}]")
    return roles


def _abstract(command: str, roles: dict[str, str]) -> str:
    """A plan command with each name replaced by its role (longest names first, so "mug 10" beats "mug 1")."""
    for name in sorted(roles, key=len, reverse=True):
        command = re.sub(rf"\b{re.escape(name)}\b", roles[name], command)
    return command


def alfworld_lessons(episodes: Sequence[ExpertEpisode]) -> list[tuple[str, str]]:
    """(title, content) per goal type: its commonest abstract expert plan (module docstring)."""
    plans: dict[str, Counter] = defaultdict(Counter)
    for episode in episodes:
        roles = episode.facts["roles"]
        steps = tuple(_abstract(t.action, roles) for t in episode.turns if not t.action.startswith("open "))
        plans[episode.facts["task_type"]][steps] += 1
    lessons = []
    for task_type, counts in sorted(plans.items()):
        plan, n = counts.most_common(1)[0]
        steps = "; ".join(plan)
        lessons.append((
            f"ALFWorld {task_type.replace('_', ' ')}: the plan",
            f"Use real names for [roles]; open closed receptacles first. Steps: {steps}. Expert: this plan in {n} of "
            f"{sum(counts.values())} training games.",
        ))
    return lessons


# ---------------------------------------------------------------------------------------------------------------
# WebShop: search, page, open, options, buy
# ---------------------------------------------------------------------------------------------------------------


def webshop_lessons(episodes: Sequence[ExpertEpisode]) -> list[tuple[str, str]]:
    """(title, content) of the two WebShop lessons (module docstring)."""
    first_page = sum(not any(t.action == "click[next >]" for t in e.turns) for e in episodes if e.won)
    won = [e for e in episodes if e.won]
    with_options = [e.facts["options"] for e in won if e.facts["options"]]
    where = f"{len(episodes)} training goals"
    median_turns = statistics.median(len(e.turns) for e in won) if won else 0
    return [
        ("WebShop: search with the instruction's own words",
         f"Search with the words of the instruction (product, colour, size, price limit). If the wanted product is "
         f"not listed, click[next >]. Shopper on {where}: the product was on the first page in {first_page} of "
         f"{len(won)} sessions won."),
        ("WebShop: open the product, pick its options, buy",
         f"Click the product whose name matches the instruction, click each option the instruction asks for "
         f"(size, colour), then click[buy now]. Shopper on {where}: {len(with_options)} of {len(won)} goals had "
         f"options; median {median_turns:g} turns in all."),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# The bank file
# ---------------------------------------------------------------------------------------------------------------


def training_seeds(env_id: str, episodes: int, seed: int) -> list[int]:
    """`episodes` distinct training seeds for `env_id`, drawn by `seed` (and the task, so tasks differ)."""
    rng = np.random.default_rng([seed, REFERENCE_TASKS.index(env_id)])
    return sorted(int(s) for s in rng.choice(TRAIN_SEED_RANGE, size=episodes, replace=False))


def reference_lessons(
    env_id: str, seeds: Sequence[int], options: dict[str, Any] | None = None
) -> list[tuple[str, str]]:
    """The (title, content) lessons of `env_id` from its expert played on the training `seeds`."""
    if env_id not in REFERENCE_TASKS:
        raise ValueError(f"no reference lessons for {env_id!r}; accepted: {', '.join(REFERENCE_TASKS)}")
    options = options if options is not None else TASK_OPTIONS.get(env_id, {})
    episodes = [play_expert(env_id, s, options) for s in seeds]
    if env_id in MINIHACK_IDS:
        return minihack_lessons(env_id, episodes)
    if env_id == SOKOBAN:
        return sokoban_lessons(episodes)
    if env_id == ALFWORLD:
        return alfworld_lessons(episodes)
    return webshop_lessons(episodes)


def write_reference_bank(
    path: str | Path, tasks: Sequence[str] = REFERENCE_TASKS, seed: int = 0, config: ExperimentConfig | None = None,
    episodes: int = DEFAULT_EPISODES,
) -> dict[str, list[int]]:
    """Write a new bank file at `path` holding each task's reference lessons; return each task's entry ids.

    ``config`` (default: the cpu profile) gives the embedder, the bank's settings, the extractor's tokenizer for
    the length check and the env options of its tasks. ``seed`` draws the training seeds and the order in which
    tasks and lessons are written. A lesson over ``MAX_LESSON_TOKENS`` tokens, an unknown task or an existing file
    is an error.
    """
    config = config or make_config("cpu")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; write_reference_bank writes a new bank file")
    unknown = [task for task in tasks if task not in REFERENCE_TASKS]
    if unknown or not tasks:
        raise ValueError(f"tasks {list(tasks)}: accepted a non-empty list of {', '.join(REFERENCE_TASKS)}")
    rng = np.random.default_rng([seed, len(REFERENCE_TASKS)])
    order = [tasks[i] for i in rng.permutation(len(tasks))]
    lessons: dict[str, list[tuple[str, str]]] = {}
    for env_id in order:
        options = config.env_options.get(env_id, TASK_OPTIONS.get(env_id, {}))
        written = reference_lessons(env_id, training_seeds(env_id, episodes, seed), options)
        lessons[env_id] = [written[i] for i in rng.permutation(len(written))]
    return write_lesson_bank(path, lessons, config, ORIGIN)


def write_lesson_bank(
    path: str | Path, lessons: dict[str, list[tuple[str, str]]], config: ExperimentConfig, origin: str,
) -> dict[str, list[int]]:
    """Write a new bank file at `path` holding `lessons` (task -> its (title, content) lessons, in the order
    given) as ``add`` operations of `origin`, embedded with ``config.bank.embedder`` as the experience manager
    embeds; return each task's entry ids. A lesson over ``MAX_LESSON_TOKENS`` tokens of ``config``'s extractor
    tokenizer (SmolLM2's for a scripted extractor) or an existing file is an error."""
    from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
    from comprl.llm import load_tokenizer

    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; a lesson bank is written into a new file")
    tokenizer = load_tokenizer(config.model if config.extractor.scripted else config.extractor.model)
    for env_id, task_lessons in lessons.items():
        for title, content in task_lessons:
            length = lesson_tokens(tokenizer, title, content)
            if length > MAX_LESSON_TOKENS:
                raise ValueError(f"{env_id} lesson {title!r} has {length} tokens; at most {MAX_LESSON_TOKENS}")
    written: dict[str, list[int]] = {}
    embedder = Embedder(config.bank.embedder, device="cpu")
    with ExperienceBank(path, embedder, capacity=config.bank.capacity, use_vss=config.bank.use_vss) as bank:
        for env_id, task_lessons in lessons.items():
            writes = [Write("add", entry=NewEntry(title, content)) for title, content in task_lessons]
            written[env_id] = bank.apply(writes, step=0, task=env_id, source=f"{origin}/{task_name(env_id)}",
                                         origin=origin)
    return written


def lesson_tokens(tokenizer: Any, title: str, content: str) -> int:
    """A lesson's length in tokens as the actor is shown it (title, newline, content)."""
    return len(tokenizer(f"{title}\n{content}", add_special_tokens=False)["input_ids"])
