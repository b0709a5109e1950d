"""The mechanism check (issue 68): can experience matter at a laptop's scale, and does the pipeline show it?

The paper's tasks at the cpu profile's scale cannot show the mechanism: on the lit Room the observation already says
where the stairs are, so nothing one episode learns is missing from the next one's. The vault tasks
(:mod:`comprl.envs.vault`) hold knowledge that persists across episodes and is absent from the observation (each
vault's secret moves), and that a lesson can state in words the actor can copy. They check the machinery; they are
not tasks of the paper.

**Stage A** (:func:`stage_a`, no training, minutes): the untrained actor plays the same held-out episodes free and
guided by three banks of one lesson per vault, each in the same words: the right moves (``correct``), the opposite
moves (``wrong``), and a sentence that names the vault but no move (``garbage``). Each guided pass is compared with
the free pass on the same episodes (:func:`comprl.kit.stats.paired_comparison`), which is the one pre-declared
comparison per lesson kind: correct above free, wrong below free, garbage within noise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from comprl.config import ExperimentConfig, make_config
from comprl.envs import lesson_states_secret
from comprl.envs.base import ANSWER_CLOSE, ANSWER_OPEN
from comprl.envs.minihack.hidden import TURN_CAP
from comprl.envs.vault import VAULT_IDS, secret_of, vault_of
from comprl.kit.reference_bank import write_lesson_bank
from comprl.kit.report import markdown_table
from comprl.kit.stats import paired_comparison, welch_comparison
from comprl.runs import Run

if TYPE_CHECKING:  # the guidance module loads torch; notebook plans and `comprl reproduce --dry-run` do not
    from comprl.kit.guidance import Passes

LESSON_KINDS: tuple[str, ...] = ("correct", "wrong", "garbage")
"""Stage A's banks, in the order they are played: one lesson per vault, stating its secret, the opposite moves,
or no move at all."""

ORIGIN = "mechanism"
"""The origin (and source prefix) of Stage A's lessons in their banks."""

COMPASS = ("north", "northeast", "east", "southeast", "south", "southwest", "west", "northwest")
"""The eight moves in compass order: the opposite of a move is four places on."""

STAGE_A_EPISODES = 256
"""Held-out episodes per pass in Stage A (issue 68: at least 256 paired episodes)."""

FAMILY_SIZE = 8
"""Vaults per vault id; the seed picks the vault (seed mod 8), so seeds 0..7 name them all."""


VAULT = "comprl/Vault-v0"
"""The task of the mechanism check: 8 vaults, each opened by one secret move of 8 (free success 1/8)."""

ROOM_FIXED = "comprl/Room-Dark-Fixed-5x5-v0"
"""The MiniHack variant: a dark room whose stairs always stand in its south-east corner."""

VAULT_GATE = 0.639
"""``bank.min_similarity`` on :data:`VAULT` (comprl's option, not the paper's): midway between the lowest
similarity of a vault's query to its own scripted lesson, 0.648, and the highest to another vault's, 0.630
(MiniLM, note style; :func:`scripted_similarity`, printed by ``benchmarks/vault_gate.py`` and checked by
``tests/test_mechanism.py``). Without it a guided episode on a vault whose lesson no win has written yet is shown
the nearest lesson, another vault's, and copies its move (Stage A: the wrong lesson costs 0.043), which is what
sank the second cpu run's positive control (NOTES.md). ``Vault-Fresh-v0`` and ``Vault-Code-v0`` get no gate: their gaps
(0.6677 over 0.6667; 0.7749 over 0.7744) are too thin to hold across machines' rounding."""

TASK_SETTINGS: dict[str, dict[str, Any]] = {
    **{
        env_id: {"max_turns": len(secret_of(env_id, vault_of(env_id, 0)))}
        | ({"bank.min_similarity": VAULT_GATE} if env_id == VAULT else {})
        for env_id in VAULT_IDS
    },
    ROOM_FIXED: {"max_turns": TURN_CAP, "env_options": {ROOM_FIXED: {"view": "brief"}}},
}
"""Per task of the check: the turn cap (a vault's code length: one wrong move seals it anyway, and a turn more
would only let an invalid reply be retried; the Room's cap from :data:`comprl.envs.minihack.hidden.TURN_CAP`), env
options (the Room in the cpu profile's brief view) and :data:`VAULT`'s similarity gate (:data:`VAULT_GATE`)."""

MECHANISM_SETTINGS: dict[str, dict[str, Any]] = {
    # a couple of steps of the tiny random models: every code path of notebook 07 in CI
    "smoke": {"env_id": VAULT, "steps": 2, "eval_episodes": 8},
    # SmolLM2-135M on the vault task, sized for the notebook's two hours on 2 cores: 2 vaults x 8 rollouts a step
    # (halves of 4 with experience, as the cpu profile), every trajectory distilled (a success is rare, 1 in 8 at
    # first, and it is the only one that holds the secret), 128 held-out episodes (16 per vault, at the profile's
    # evaluation temperature 0.7; 64 in the first two runs, whose seeds differed by more than the positive control
    # could afford). Rollouts keep the cpu profile's temperature 2.0: at 1.0 (the first cpu run of this notebook,
    # NOTES.md) the untrained actor's moves were so lopsided (north and south far above the rest) that in 16 steps
    # its wins opened only 1-3 of the 8 vaults, so the bank, which only a win can fill, never held a lesson for the
    # other 5-7 and the positive control failed (held-out guided - free +0.057 [-0.063, +0.177] over 3 seeds); at
    # 2.0 without the similarity gate (VAULT_GATE) it opened 2-4 and failed again (+0.130 [-0.118, +0.379]). Even
    # at 2.0 the untrained actor plays northeast, north and south 85% of the time and east, southwest, west and
    # northwest 6% (benchmarks/vault_reach.py, 384 rollouts), so only 4 vaults are within its reach at first; GRPO
    # at the cpu profile's learning rate 2e-4 then narrowed its moves onto the first vaults won within a few steps
    # (a seed that opened Jade and Opal stopped winning Onyx, which the untrained actor opens 1 time in 3), and with
    # the gate alone the banks held 4, 2 and 2 vaults. The actor learns at a quarter of the profile's rate here
    # (5e-5), so that the bank, which only a win can fill, keeps up with the vaults the actor can reach: 4, 5 and 5
    # vaults, and the positive control passed (NOTES.md)
    "cpu": {
        "env_id": VAULT, "steps": 16, "batch_instances": 2, "group_size": 8, "eval_episodes": 128,
        "extractor.distill_per_step": 0, "actor.learning_rate": 5e-5,
    },
}
"""The mechanism check's settings per profile, over the profile's own (:func:`mechanism_config`)."""

FRESH = "comprl/Vault-Fresh-v0"
"""The test-time stream's task: vaults no arm trains on."""

STAGE_B_ARMS: dict[str, dict[str, Any]] = {
    "baseline": {"method": "baseline"},
    "scripted": {"method": "comp_rl", "extractor.model": "scripted"},
    "learned": {"method": "comp_rl"},
    "learned_grammar": {"method": "comp_rl", "extractor.lesson_grammar": True},
    "stream_scripted": {"method": "exp_only", "extractor.model": "scripted", "env_id": FRESH},
}
"""Stage B's arms: GRPO alone; Complementary RL with the scripted extractor (the positive control: it writes the literal
winning move of each successful episode, so credit, bank, retrieval and warm-up are checked end to end with lessons
known to be right); with the profile's learned extractor, free text and under the lesson grammar. ``stream_scripted`` is
test-time experience: a stream of episodes on vaults never trained on, the actor frozen (method ``exp_only``), the
scripted extractor writing from the stream; its free half is what a frozen actor without experience does there (chance),
its guided half what the stream's bank adds. Its actor is the untrained one; a stream from each seed's trained actor is
an arm with ``"actor.init_from": "<folder>/scripted_seed{seed}"`` (comp_rl's actor) or ``.../baseline_seed{seed}``
(GRPO's), run after those (:func:`comprl.kit.plans.mechanism`). ``{"method": "comp_rl", "extractor.model": "scripted",
"bank.candidates": 1}`` shows each guided episode its single nearest lesson (the re-ranking's popularity, recency and
dropout terms have nothing to choose among): in the first cpu run it changed nothing the noise could tell (NOTES.md),
since what sent guided episodes to another vault's lesson was a bank that held none for theirs. A learned-extractor
stream (``{"method": "exp_only", "env_id": FRESH}``) can be added as an arm; it is left out of the default for the
notebook's two hours, and so are the learned extractor's levers that are not the paper's: the per-instance reward
(``{"method": "comp_rl", "extractor.reward": "over_free"}``, :attr:`~comprl.config.ExtractorConfig.reward`) and the
larger extractor (``{"method": "comp_rl", "extractor.model": "gemma3-270m"}``): NOTES.md has the reward's runs and
the larger extractor's lessons before training (``benchmarks/extractor_recall.py``)."""


def mechanism_config(profile: str, env_id: str | None = None, **overrides: Any) -> ExperimentConfig:
    """``profile``'s config with the mechanism settings of :data:`MECHANISM_SETTINGS` and the task's of
    :data:`TASK_SETTINGS`, then ``overrides`` (``None`` values keep the settings'); ``env_id`` another task of the
    check (e.g. ``comprl/Vault-Code-v0``)."""
    if profile not in MECHANISM_SETTINGS:
        raise ValueError(f"profile {profile!r} has no mechanism settings; accepted: {', '.join(MECHANISM_SETTINGS)}")
    given = {k: v for k, v in {"env_id": env_id, **overrides}.items() if v is not None}
    task = given.get("env_id", MECHANISM_SETTINGS[profile]["env_id"])
    return make_config(profile, **{**MECHANISM_SETTINGS[profile], **TASK_SETTINGS.get(task, {}), **given})


def vaults(env_id: str) -> list[str]:
    """The vaults of a vault id, in the order seeds 0, 1, ... meet them."""
    return [vault_of(env_id, seed) for seed in range(FAMILY_SIZE)]


def opposite(move: str) -> str:
    """The compass move opposite `move` (always a wrong move of a vault whose secret is `move`)."""
    return COMPASS[(COMPASS.index(move) + 4) % len(COMPASS)]


def lesson_title(vault: str) -> str:
    """The title of every Stage A lesson about `vault`."""
    return f"Vault {vault}"


def vault_lesson(vault: str, kind: str, secret: tuple[str, ...]) -> tuple[str, str]:
    """The (title, content) of one Stage A lesson about `vault`, of `kind` (:data:`LESSON_KINDS`): the moves
    written as the actor writes its replies (``<answer>MOVE</answer>``), which a small actor copies."""
    if kind not in LESSON_KINDS:
        raise ValueError(f"lesson kind {kind!r}; accepted: {', '.join(LESSON_KINDS)}")
    title = lesson_title(vault)
    if kind == "garbage":
        return title, f"Vault {vault} is one of the vaults here; stay calm and take your time before you move."
    moves = secret if kind == "correct" else tuple(opposite(m) for m in secret)
    said = " then ".join(f"{ANSWER_OPEN}{m}{ANSWER_CLOSE}" for m in moves)
    return title, f"Vault {vault} opens with {said}."


def room_lesson(kind: str) -> tuple[str, str]:
    """The (title, content) of one Stage A lesson about the fixed dark Room (:mod:`comprl.envs.minihack.hidden`),
    of `kind`: where its stairs stand (the south-east corner), the opposite corner, or nothing."""
    if kind not in LESSON_KINDS:
        raise ValueError(f"lesson kind {kind!r}; accepted: {', '.join(LESSON_KINDS)}")
    title = "Stairs of the dark room"
    if kind == "garbage":
        return title, "This dark room is quiet; stay calm and take your time before you move."
    corner = "south-east" if kind == "correct" else "north-west"
    move = "southeast" if kind == "correct" else "northwest"
    return title, (
        f"The stairs down always stand in the room's {corner} corner: move {ANSWER_OPEN}{move}{ANSWER_CLOSE} "
        "until the stone stops you, then along the wall to the corner."
    )


def stage_a_lessons(env_id: str, kind: str) -> list[tuple[str, str]]:
    """Stage A's lessons of `kind` for `env_id`: one per vault of a vault id, one for the fixed dark Room."""
    if env_id == ROOM_FIXED:
        return [room_lesson(kind)]
    if env_id not in VAULT_IDS:
        raise ValueError(f"no Stage A lessons for {env_id!r}; accepted: {', '.join((*VAULT_IDS, ROOM_FIXED))}")
    return [vault_lesson(v, kind, secret_of(env_id, v)) for v in vaults(env_id)]


def won_episodes(env_id: str) -> tuple[list[str], list[Any]]:
    """(the retrieval query, an :class:`~comprl.experience.interface.Episode` that plays the secret and wins)
    of each vault of `env_id`, seed by seed (:func:`vaults`' order), played on the real env."""
    from comprl.actor.rollout import retrieval_query
    from comprl.envs import make

    queries, episodes = [], []
    for seed, vault in enumerate(vaults(env_id)):
        queries.append(retrieval_query(*make(env_id).reset(seed=seed)))
        episode = played(env_id, seed, [f"{ANSWER_OPEN}{move}{ANSWER_CLOSE}" for move in secret_of(env_id, vault)],
                         step=0, index=seed)
        if not episode.success:
            raise RuntimeError(f"{env_id}: the secret of vault {vault} did not open it")
        episodes.append(episode)
    return queries, episodes


def played(env_id: str, seed: int, replies: Sequence[str], step: int = 0, index: int = 0) -> Any:
    """The :class:`~comprl.experience.interface.Episode` the real env `env_id` makes of `replies` from `seed`,
    played until it ends (a reply left over is not sent), recorded as the rollout records one."""
    from comprl.envs import make
    from comprl.experience.interface import Episode

    env = make(env_id)
    observation, info = env.reset(seed=seed)
    messages = [{"role": "system", "content": info["instruction"]}, {"role": "user", "content": observation}]
    for reply in replies:
        observation, _, terminated, truncated, info = env.step(reply)
        messages.append({"role": "assistant", "content": reply})
        if terminated or truncated:
            break
        messages.append({"role": "user", "content": observation})
    return Episode(env_id, seed, step, index, info["instruction"], tuple(messages), info["success"])


def scripted_similarity(env_id: str, config: ExperimentConfig) -> pd.DataFrame:
    """Cosine similarity of each vault's retrieval query (rows) to the scripted lesson of each vault (columns),
    under ``config``'s embedder and extractor style: each vault's winning episode (:func:`won_episodes`), its
    lesson written by :class:`~comprl.experience.extractor.scripted.ScriptedTrack` into a scratch bank, and
    embedded as the bank embeds it. A gate (``bank.min_similarity``) that shows each vault its own lesson and
    never another's lies above every off-diagonal value and at or below every diagonal one
    (:func:`similarity_gap`)."""
    import tempfile

    from comprl.experience.bank import Embedder, ExperienceBank
    from comprl.experience.extractor.scripted import ScriptedTrack

    names = vaults(env_id)
    embedder = Embedder(config.bank.embedder)
    queries, episodes = won_episodes(env_id)
    with tempfile.TemporaryDirectory() as folder:
        bank = ExperienceBank(Path(folder) / "bank.duckdb", embedder)
        try:
            ScriptedTrack(bank, config.extractor, task=env_id).distill(episodes, step=0)
            live = bank.entries().sort_values("id")
        finally:
            bank.close()
    lessons = embedder.encode([f"{t}\n{c}" for t, c in zip(live["title"], live["content"])])
    return pd.DataFrame(embedder.encode(queries) @ lessons.T, index=names, columns=names)


def similarity_gap(similarity: pd.DataFrame) -> tuple[float, float]:
    """(the lowest similarity of a vault's query to its own lesson, the highest to another vault's) of
    :func:`scripted_similarity`'s table: a gate between them separates the vaults."""
    values = similarity.to_numpy()
    own = values.diagonal()
    other = values[~np.eye(len(values), dtype=bool)]
    return float(own.min()), float(other.max())


def write_stage_a_banks(
    folder: str | Path, env_id: str, config: ExperimentConfig, kinds: Sequence[str] = LESSON_KINDS
) -> dict[str, Path]:
    """One bank per lesson kind of `kinds` under `folder` (``<kind>.duckdb``) holding :func:`stage_a_lessons`,
    written anew each time (a bank left by an interrupted Stage A is replaced: its lessons are the same)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    banks = {}
    for kind in kinds:
        banks[kind] = folder / f"{kind}.duckdb"
        for stale in (banks[kind], banks[kind].with_name(f"{kind}.duckdb.wal")):
            stale.unlink(missing_ok=True)
        write_lesson_bank(banks[kind], {env_id: stage_a_lessons(env_id, kind)}, config, f"{ORIGIN}-{kind}")
    return banks


def stage_a_config(
    profile: str, env_id: str | None = None, episodes: int = STAGE_A_EPISODES, **overrides: Any
) -> ExperimentConfig:
    """The untrained actor of the mechanism settings of `profile` on `env_id`'s held-out seeds, every guided episode
    answered (no warm-up gate), the extractor scripted (Stage A trains and writes nothing, so no extractor model
    is loaded), no similarity gate (every guided episode is shown the nearest lesson of its bank, whatever it
    says). `overrides` (the notebook's, for every run) give way to these and to `episodes`."""
    stage_a = {"method": "static", "eval_episodes": episodes, "experience.warmup": 0, "extractor.model": "scripted"}
    config = mechanism_config(profile, env_id=env_id, **{**overrides, **stage_a})
    return dataclasses.replace(config, bank=dataclasses.replace(config.bank, min_similarity=None))


@dataclass
class StageA:
    """Stage A's passes and their comparison with the free pass."""

    free: list
    passes: dict[str, Passes]
    table: pd.DataFrame
    """One row per lesson kind: success free and guided, the paired difference with its SE, t, df, p and 95%
    interval, the exact McNemar p, and the share of guided episodes shown the lesson of their own vault."""


def stage_a(
    config: ExperimentConfig, folder: str | Path, kinds: Sequence[str] = LESSON_KINDS, progress: bool = False
) -> StageA:
    """Stage A on ``config``'s task (a vault id or the fixed dark Room; :func:`stage_a_config`): write the banks
    of `kinds` into `folder`, play the free pass and one guided pass per bank, compare each with the free pass on
    the same episodes (the paired t is the test; the exact McNemar p is shown beside it)."""
    from comprl.kit.guidance import guided_by_banks

    env_id = config.env_id
    banks = write_stage_a_banks(folder, env_id, config, kinds)
    free, passes = guided_by_banks(config, banks, progress=progress)
    rows = []
    free_wins = [float(t.success) for t in free]
    for kind, result in passes.items():
        guided_wins = [float(t.success) for t in result.guided]
        test = paired_comparison(guided_wins, free_wins)
        shown = [t for t in result.guided if t.experience is not None]
        own = [_own_lesson(env_id, t.seed, t.experience) for t in shown]
        states = [bool(lesson_states_secret(env_id, t.seed, t.experience)) for t in shown]
        rows.append({
            "lesson": kind, "episodes": len(free), "free_success": sum(free_wins) / len(free),
            "guided_success": sum(guided_wins) / len(guided_wins), **dataclasses.asdict(test),
            "shown": len(shown), "shown_own_vault": _share(own), "shown_states_secret": _share(states),
        })
    return StageA(free, passes, pd.DataFrame(rows))


def _own_lesson(env_id: str, seed: int, shown: str) -> bool:
    """Whether the lesson shown to an episode of `seed` is about its own vault (always, on the one-lesson Room)."""
    return env_id == ROOM_FIXED or shown.startswith(f"{lesson_title(vault_of(env_id, seed))}\n")


def _share(flags: list[bool]) -> float:
    """The share of true flags (NaN for none)."""
    return sum(flags) / len(flags) if flags else float("nan")


READY = 0.8
"""Training success a run must reach for ``steps_to_ready`` (issue 68: steps to reach 0.8)."""


def stage_b_table(metrics: pd.DataFrame, arm_of: dict[str, str]) -> pd.DataFrame:
    """One row per Stage B run (``arm_of``: run name -> arm): held-out success at step 0 and after the last step,
    free and guided (NaN for an arm without experience); the last step's ``rule_recall_live`` and
    ``rule_recall_shown`` (the step's guided rollouts shown an entry that states their own vault's secret); training
    guided minus free averaged over the run's steps that had one; the first step whose training success reached
    :data:`READY` (NaN: never)."""
    rows = []
    for run, frame in metrics.groupby("run", sort=False):
        evals = frame[frame.phase == "eval"].sort_values("step")
        train = frame[frame.phase == "train"].sort_values("step")
        first, last = evals.iloc[0], evals.iloc[-1]
        ready = train.loc[train.success_rate >= READY, "step"]
        rows.append({
            "arm": arm_of[run], "seed": int(first.seed), "run": run, "steps": int(last.step),
            "free_step0": first.success_rate, "free_after": last.success_rate,
            "guided_after": last.get("guided_success_rate", float("nan")),
            "guided_minus_free_after": last.get("guided_success_rate", float("nan")) - last.success_rate,
            "rule_recall_live": _last(train, "rule_recall_live"),
            "rule_recall_shown": _last(train, "rule_recall_shown"),
            "train_guided_minus_free": _mean(train, "guided_minus_free"),
            "steps_to_ready": float(ready.iloc[0]) if len(ready) else float("nan"),
        })
    return pd.DataFrame(rows)


def _last(frame: pd.DataFrame, column: str) -> float:
    """The last non-missing value of ``column`` (NaN where the column or every value is missing)."""
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return float(values.iloc[-1]) if len(values) else float("nan")


def _mean(frame: pd.DataFrame, column: str) -> float:
    """The mean of ``column`` over its non-missing values (NaN where there are none)."""
    return float(frame[column].mean()) if column in frame else float("nan")


def stage_b_claims(table: pd.DataFrame) -> pd.DataFrame:
    """The pre-declared comparison of Stage B, one per arm with experience: its held-out success guided minus free
    after training, over seeds, by Welch's t (:func:`comprl.kit.stats.welch_comparison`). For the scripted arm
    this is the positive control: the pipeline must show an effect where the lessons are right by construction."""
    rows = []
    for arm, runs in table.groupby("arm", sort=False):
        if runs["guided_after"].isna().all():
            continue
        test = welch_comparison(list(runs["guided_after"]), list(runs["free_after"]))
        rows.append({"arm": arm, "seeds": len(runs), **dataclasses.asdict(test), "verdict": _verdict(test)})
    return pd.DataFrame(rows)


def _verdict(test: Any) -> str:
    """"shown" where the 95% interval lies above 0, "shown against" below 0, else "inconclusive"; no verdict
    without an interval (one seed, or no spread)."""
    if test.low is None or test.high is None or test.se in (None, 0.0):
        return "no verdict (no interval)"
    if test.low > 0:
        return "shown (guided above free)"
    if test.high < 0:
        return "shown against (guided below free)"
    return "inconclusive (interval spans 0)"


def plot_mechanism(metrics: pd.DataFrame, arm_of: dict[str, str]) -> Any:
    """Rule recall (live bank, shown lessons) and training guided minus free per step: each seed a point, each arm
    one colour (the same in every panel), its mean over seeds a line; the n of each point in the panel's title."""
    import matplotlib.pyplot as plt

    train = metrics[metrics.phase == "train"].assign(arm=lambda f: f.run.map(arm_of))
    panels = [  # column, title, the range the value can take
        ("rule_recall_live", "live lessons stating their vault's secret", (0, 1)),
        ("rule_recall_shown", "shown lessons stating the episode's secret", (0, 1)),
        ("guided_minus_free", "guided minus free success (training)", (-1, 1)),
    ]
    arms = list(dict.fromkeys(arm_of.values()))
    colours = dict(zip(arms, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), sharex=True)
    per_point = int(train["episodes"].median()) if "episodes" in train and len(train) else 0
    for ax, (column, label, (low, high)) in zip(axes, panels):
        for arm in arms:
            rows = train[(train.arm == arm)]
            if column not in rows or rows[column].isna().all():
                continue
            ax.scatter(rows.step, rows[column], s=12, alpha=0.5, color=colours[arm])
            mean = rows.groupby("step")[column].mean()
            ax.plot(mean.index, mean.values, color=colours[arm], label=f"{arm} ({rows.seed.nunique()} seeds)")
        ax.set_title(label, fontsize=10)
        ax.set_ylim(low - 0.05, high + 0.05)
        ax.set_xlabel("actor step")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.axhline(0, color="grey", lw=0.5)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Stage B: each point one seed's step ({per_point} training episodes a step)", fontsize=10)
    fig.tight_layout()
    return fig


def final_lessons(runs: dict[tuple[Any, ...], Any]) -> pd.DataFrame:
    """The live lessons of each Stage B run with a bank after its last step (``runs``: the plan's ``(arm, seed)``
    -> run), with the bank explorer's ``states_secret`` (True/False, or missing where not judged)."""
    from comprl.kit.widgets import BankExplorer

    tables = []
    for (arm, seed), run in runs.items():
        if not run.config().uses_experience:
            continue
        with BankExplorer(run) as explorer:
            tables.append(explorer.table(explorer.steps[1]).assign(arm=arm, seed=seed))
    columns = ["arm", "seed", "id", "title", "content", "uses", "successes", "states_secret"]
    return pd.concat(tables, ignore_index=True)[columns] if tables else pd.DataFrame(columns=columns)


STAGE_A_EXPECTED = {"correct": "above", "wrong": "below", "garbage": "within noise"}
"""Stage A's pre-declared reading of each bank against the free pass."""

POSITIVE_CONTROL = "scripted"
"""The Stage B arm whose effect must show for a null result of another arm to count."""


def report_section(folder: str | Path) -> list[str]:
    """REPORT.md's opening section, from the tables notebook 07 wrote into `folder`: Stage A per bank, whether
    the positive control passed, Stage B's claims and rule recall per seed, the figure. Markdown lines."""
    folder = Path(folder)
    lines = ["## The mechanism check (notebook 07): would this pipeline show an effect where one exists?", ""]
    if not folder.is_dir():
        return [*lines, "Not run: no claim below can be told from a broken pipeline.", ""]
    lines += [
        "On the vault task (`comprl/Vault-v0`: each vault's secret move is fixed and never shown; a check of the "
        "machinery, not a task of the paper), with this profile's actor.",
        "",
    ]
    configs = sorted(folder.glob(f"{POSITIVE_CONTROL}_seed*/config.json"))
    if configs:
        config = Run(configs[0].parent).config()
        gate = config.bank.min_similarity
        lines += [
            f"Stage B's settings (`comprl.kit.mechanism`): {config.steps} steps of {config.batch_instances} vaults x "
            f"{config.group_size} rollouts, actor learning rate {config.actor.learning_rate:g}, rollout temperature "
            f"{config.rollout.temperature:g}, {config.eval_episodes} held-out episodes; retrieval's similarity gate "
            + ("none (the paper's)." if gate is None else f"`bank.min_similarity` = {gate:g} (comprl's option, not "
               "the paper's: a guided episode with no lesson that near is shown none)."),
            "",
        ]
    stage_a = folder / "stage_a.csv"
    if stage_a.is_file():
        lines += ["**Stage A** (the untrained actor, paired held-out episodes, guided minus free; paired t):", ""]
        for row in pd.read_csv(stage_a).itertuples():
            in_se = row.difference / row.se if row.se else float("nan")
            lines.append(
                f"- {row.lesson} lesson (expected {STAGE_A_EXPECTED[row.lesson]}): {row.guided_success:.3f} vs free "
                f"{row.free_success:.3f} on {row.episodes} episodes, difference {row.difference:+.3f} "
                f"[{row.low:+.3f}, {row.high:+.3f}] = {in_se:+.1f} SE, t({row.df:.0f}) p = {row.p:.3g}; "
                f"shown its own vault's lesson {row.shown_own_vault:.2f}"
            )
        lines.append("")
    claims = folder / "stage_b_claims.csv"
    if claims.is_file():
        frame = pd.read_csv(claims)
        control = frame[frame.arm == POSITIVE_CONTROL]
        if control.empty:
            lines += ["**Positive control: not run** (no scripted arm).", ""]
        else:
            row = control.iloc[0]
            passed = str(row.verdict).startswith("shown (")
            lines += [
                f"**Positive control: {'passed' if passed else 'FAILED'}.** The scripted extractor's held-out "
                f"success guided minus free after training: {row.difference:+.3f} [{row.low:+.3f}, {row.high:+.3f}] "
                f"over {row.seeds} seeds, Welch t({row.df:.1f}) p = {row.p:.3g}: {row.verdict}."
                + ("" if passed else " The pipeline did not show an effect that exists, so no null result below "
                   "counts."),
                "",
            ]
        lines += ["Stage B, one pre-declared comparison per arm (held-out guided minus free after training, Welch):",
                  "", markdown_table(frame), ""]
    table = folder / "stage_b.csv"
    if table.is_file():
        columns = ["arm", "seed", "free_step0", "free_after", "guided_after", "rule_recall_live", "rule_recall_shown",
                   "train_guided_minus_free", "steps_to_ready"]
        lines += ["Per seed:", "", markdown_table(pd.read_csv(table)[columns]), ""]
    for figure in sorted(folder.glob("mechanism.png")):
        lines += [f"![mechanism]({figure.parent.parent.name}/{figure.parent.name}/{figure.name})", ""]
    return lines


def plot_stage_a(table: pd.DataFrame) -> Any:
    """Stage A at a glance: held-out success free and guided by each bank, each bar with its 95% Wilson interval
    and its n, and the paired difference with its 95% interval written over each guided bar."""
    import matplotlib.pyplot as plt

    from comprl.kit.evaluate import wilson_interval

    n = int(table["episodes"].iloc[0])
    labels = ["free", *(f"{kind} lesson" for kind in table["lesson"])]
    rates = [float(table["free_success"].iloc[0]), *table["guided_success"]]
    intervals = [wilson_interval(round(rate * n), n) for rate in rates]
    fig, ax = plt.subplots(figsize=(1.6 * len(labels) + 1, 3.6))
    colours = ["#888888", *plt.rcParams["axes.prop_cycle"].by_key()["color"][: len(table)]]
    ax.bar(labels, rates, color=colours, yerr=[[r - lo for r, (lo, _) in zip(rates, intervals)],
                                               [hi - r for r, (_, hi) in zip(rates, intervals)]], capsize=4)
    for i, row in enumerate(table.itertuples(), start=1):
        ax.annotate(f"{row.difference:+.2f}\n[{row.low:+.2f}, {row.high:+.2f}]", (i, intervals[i][1]),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
    ax.set_ylabel("held-out success")
    ax.set_ylim(0, min(1.0, max(hi for _, hi in intervals) + 0.15))
    ax.set_title(f"Stage A: the untrained actor, the same {n} held-out episodes per bar (95% Wilson intervals;"
                 "\nover each guided bar: guided minus free, paired, with its 95% interval)", fontsize=9)
    fig.tight_layout()
    return fig
