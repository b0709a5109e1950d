"""The scripted extractor (the positive control of issue 68) and the rule-recall metrics.

Real vault envs play the episodes, MiniLM embeds, a DuckDB file stores the bank; the actor of the runs is the tiny
random model, choosing among the admissible moves.
"""

from __future__ import annotations

import functools
import math

import pandas as pd
import pytest

from comprl import checkpoint, loop
from comprl.actor.rollout import Trajectory, retrieval_query
from comprl.checkpoint import load_torch
from comprl.config import make_config
from comprl.envs import lesson_states_secret, make
from comprl.envs.vault import secret_of, vault_of
from comprl.experience import manager as manager_module
from comprl.experience.bank import ExperienceBank, NewEntry, Write
from comprl.experience.extractor.prompts import ExtractorFormat, parse_distill
from comprl.experience.extractor.scripted import MORE, ScriptedTrack, scripted_lesson, scripted_reply
from comprl.config import ExtractorConfig
from comprl.experience.interface import Episode
from comprl.experience.manager import ExperienceManager
from comprl.experience.rule_recall import RuleRecall
from comprl.kit import mechanism
from comprl.runs import Run

VAULT = "comprl/Vault-v0"
CODE = "comprl/Vault-Code-v0"


played = functools.partial(mechanism.played, step=1)
"""The episode a real env makes of replies, as the rollout records it (at step 1)."""


def answers(moves) -> list[str]:
    return [f"<answer>{move}</answer>" for move in moves]


def secret(env_id: str, seed: int) -> tuple[str, ...]:
    return secret_of(env_id, vault_of(env_id, seed))


@pytest.fixture()
def track(tmp_path, embedder):
    bank = ExperienceBank(tmp_path / "bank.duckdb", embedder)
    yield ScriptedTrack(bank, ExtractorConfig(model="scripted", style="note"), task=CODE)
    bank.close()


def test_a_successful_episode_gets_one_lesson_of_its_literal_moves_and_a_failed_one_none(track):
    code = secret(CODE, 3)
    wrong = next(m for m in ("north", "south") if m != code[0])
    won = played(CODE, 3, ["<answer>banana</answer>", *answers(code)])  # the invalid reply is no move
    lost = played(CODE, 4, answers([wrong]), index=1)
    assert won.success and not lost.success
    samples = track.distill([won, lost], step=1)
    live = track.bank.entries()
    assert len(samples) == 1 and len(live) == 1 and samples[0].entry_ids == (int(live["id"][0]),)
    content = live["content"][0]
    assert content == (
        f"You stand before the vault {vault_of(CODE, 3)}. Its lock takes 3 moves. Winning moves: "
        + " then ".join(answers(code))
    )
    log = track.bank.operations()
    assert log.loc[log["op"] == "add", "source"].tolist() == [won.source]
    stats = track.take_stats()
    assert stats["extractor_outputs"] == stats["extractor_valid"] == 1 and stats["extractor_scripted_skipped"] == 1
    assert track.merge(step=2) == [] and len(track.bank.entries()) == 1


@pytest.mark.parametrize("style", ["note", "json"])
def test_the_lesson_is_written_as_a_reply_its_styles_parser_reads_as_one_add_of_it(style):
    fmt = ExtractorFormat(style=style)
    lesson = scripted_lesson(played(CODE, 5, answers(secret(CODE, 5))), fmt.max_content_chars)
    parsed = parse_distill(scripted_reply(lesson, fmt), 0, fmt)
    assert parsed.valid and [(op.op, op.content) for op in parsed.operations] == [("add", lesson)]


def test_a_forced_vault_success_gives_a_lesson_that_states_its_own_vaults_secret_only():
    for seed in range(8):
        lesson = scripted_lesson(played(VAULT, seed, answers(secret(VAULT, seed))), 1000)
        assert f"vault {vault_of(VAULT, seed)}." in lesson
        assert lesson_states_secret(VAULT, seed, lesson)
        assert not lesson_states_secret(VAULT, seed + 1, lesson)


def test_a_long_winning_path_is_cut_at_a_move_to_the_content_limit():
    moves = ["north", "east"] * 10
    messages = [{"role": "user", "content": "Room 7."}]
    for reply in answers(moves):
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "You moved."}]
    episode = Episode(VAULT, 0, 1, 0, "", tuple(messages[:-1]), success=True)
    lesson = scripted_lesson(episode, 120)
    assert len(lesson) <= 120 and lesson.endswith("</answer>" + MORE)
    assert lesson.startswith("Room 7. Winning moves: <answer>north</answer> then <answer>east</answer> then")


@pytest.mark.parametrize(
    "overrides",
    [
        {"extractor.share_actor": True},
        {"extractor.style": "lines"},
        {"extractor.lesson_grammar": True},
        {"experience.search_and_ask": True},
    ],
)
def test_the_scripted_extractor_refuses_what_needs_a_model(overrides):
    with pytest.raises(ValueError, match="scripted"):
        make_config("smoke", method="comp_rl", **{"extractor.model": "scripted", **overrides})


def _no_model(*args, **kwargs):
    raise AssertionError("the scripted extractor loaded a model or tokenizer")


@pytest.mark.parametrize("background", [False, True], ids=["sync", "background"])
def test_a_scripted_manager_loads_no_model_trains_nothing_and_writes_through_the_bank(
    tmp_path, monkeypatch, background
):
    monkeypatch.setattr(manager_module, "load_model", _no_model)
    monkeypatch.setattr(manager_module, "load_tokenizer", _no_model)
    config = make_config(
        "smoke", env_id=VAULT, method="comp_rl", **{"extractor.model": "scripted", "experience.warmup": 1}
    )
    assert not config.trains_extractor and not config.extractor_shares_base
    manager = ExperienceManager(config, tmp_path / "bank.duckdb", background=background)
    try:
        assert manager.trainer is None and manager.engine is None
        manager.submit([played(VAULT, 2, answers(secret(VAULT, 2))), played(VAULT, 3, ["<answer>x</answer>"] * 30)])
        assert manager.flush(timeout=60)
        stats = manager.stats()
        assert stats["bank_size"] == 1 and stats["extractor_scripted_skipped"] == 1
        assert stats["rule_recall_live"] == 1.0 and stats["rule_recall_judged"] == 1
        query = retrieval_query(*make(VAULT).reset(seed=2 + 8))  # the same vault, another seed
        (entry,) = manager.search([query], [VAULT], seeds=[10])
        assert entry is not None and lesson_states_secret(VAULT, 10, entry.text)
    finally:
        manager.close()


def test_rule_recall_live_judges_the_entries_that_name_a_seed_against_that_seed(tmp_path, embedder):
    with ExperienceBank(tmp_path / "bank.duckdb", embedder) as bank:
        def add(content: str, source: str) -> int:
            return bank.apply([Write("add", entry=NewEntry("t", content))], step=1, task=VAULT, source=source)[0]

        right = " ".join(answers(secret(VAULT, 1)))
        add(right, "step1/episode0/seed1")
        add(right, "step1/episode1/seed2")  # seed 2 meets another vault
        add(right, "reference")  # no seed: not judged
        recall = RuleRecall((VAULT,))
        assert recall.live(bank) == {"rule_recall_live": 0.5, "rule_recall_judged": 2.0}
        assert RuleRecall(("comprl/Room-Ultimate-5x5-v0",)).live(bank) == {}
        several = RuleRecall((VAULT, CODE)).live(bank)
        assert several["vault_rule_recall_live"] == 0.5 and math.isnan(several["vault_code_rule_recall_live"])
    from comprl.kit.widgets import BankExplorer

    with BankExplorer(tmp_path / "bank.duckdb") as explorer:  # the explorer marks the same verdicts per lesson
        marked = explorer.table(1)["states_secret"].tolist()
    assert marked[:2] == [True, False] and pd.isna(marked[2])


def test_rule_recall_shown_judges_each_guided_rollout_shown_an_entry_against_its_own_seed():
    right = " ".join(answers(secret(VAULT, 1)))
    rollouts = [
        Trajectory(VAULT, 1, 0, True, right, (1,)),
        Trajectory(VAULT, 2, 1, True, right, (1,)),
        Trajectory(VAULT, 3, 2, True),  # shown nothing
        Trajectory(VAULT, 1, 0, False),
    ]
    assert loop.rule_recall_shown(rollouts) == {"rule_recall_shown": 0.5}
    assert math.isnan(loop.rule_recall_shown(rollouts[2:])["rule_recall_shown"])
    assert loop.rule_recall_shown([Trajectory("comprl/Room-Ultimate-5x5-v0", 1, 0, True, right, (1,))]) == {}


def scripted_run():
    """comp_rl on Vault with the scripted extractor, the actor choosing among the moves (1 win in 8 by chance)."""
    return make_config(
        "smoke", env_id=VAULT, method="comp_rl", steps=2, batch_instances=4, eval_episodes=0, tracker="none",
        **{"extractor.model": "scripted", "rollout.constrained_actions": True, "rollout.response_prefix": "<answer>",
           "bank.use_vss": False},
    )


def rows(run: Run) -> pd.DataFrame:
    metrics = run.metrics()
    return metrics[[c for c in metrics.columns if "seconds" not in c and "per_second" not in c and "_ms_" not in c]]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manager_module, "load_model", _no_model)
        patch.setattr(manager_module, "load_tokenizer", _no_model)
        return loop.run_experiment(scripted_run(), tmp_path_factory.mktemp("whole"), name="run", progress=False)


def test_a_comp_rl_run_with_the_scripted_extractor_trains_the_actor_and_logs_rule_recall(whole):
    train = rows(whole)
    train = train[train["phase"] == "train"]
    assert whole.finished and len(train) == 2 and (train["actor_trained_sequences"] > 0).any()
    assert train["bank_size"].iloc[-1] > 0 and train["guided_with_entry"].iloc[1:].gt(0).all()
    assert train["extractor_updates"].sum() == 0 and train["extractor_valid"].sum() == train["bank_size"].iloc[-1]
    assert train["rule_recall_live"].iloc[-1] == 1.0 and train["rule_recall_shown"].iloc[1:].notna().all()
    state = load_torch(checkpoint.latest(whole.path).experience / "manager.pt")
    assert state["trainer"] is None


def test_a_scripted_managers_checkpoint_restores_its_bank_and_holds_no_extractor(tmp_path, monkeypatch):
    monkeypatch.setattr(manager_module, "load_model", _no_model)
    config = scripted_run()
    manager = ExperienceManager(config, tmp_path / "bank.duckdb")
    manager.submit([played(VAULT, 5, answers(secret(VAULT, 5)))])
    manager.save_checkpoint(tmp_path / "checkpoint")
    manager.wait_checkpoint()
    manager.close()
    assert load_torch(tmp_path / "checkpoint" / "manager.pt")["trainer"] is None
    restored = ExperienceManager(config, tmp_path / "resumed.duckdb", checkpoint=tmp_path / "checkpoint")
    try:
        assert restored.trainer is None and len(restored.bank) == 1
        restored.submit([played(VAULT, 6, answers(secret(VAULT, 6)))])
        stats = restored.stats()
        assert stats["bank_size"] == 2 and stats["rule_recall_live"] == 1.0 and stats["rule_recall_judged"] == 2
    finally:
        restored.close()


def test_the_plan_of_a_scripted_run_sizes_and_prices_no_extractor_model():
    from comprl.kit import planner

    config = make_config("cpu", env_id=VAULT, method="comp_rl", **{"extractor.model": "scripted"})
    throughput = planner.load_throughput(planner.THROUGHPUT_DIR / "cpu-amd-epyc-float32-1-thread.json")
    plan = planner.resource_plan([config], [throughput], profile="cpu")
    budget = planner.step_budget(config)
    assert "scripted" not in plan and "extraction" not in plan and "unknown size" not in plan
    assert budget.distill_calls == 0 and budget.extractor_train == 0
    assert "extractor" not in planner.placement_roles(config)
