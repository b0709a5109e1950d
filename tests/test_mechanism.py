"""The mechanism check (issue 68): its lessons, settings, Stage B tables, report section and notebook 07."""

from __future__ import annotations

import pandas as pd
import pytest

from comprl.envs import lesson_states_secret
from comprl.envs.vault import VAULT_IDS, secret_of
from comprl.kit import mechanism
from comprl.kit.cli import main
from comprl.kit.plans import mechanism as mechanism_plan
from comprl.kit.reproduce import STEPS, dry_run


@pytest.mark.parametrize("env_id", VAULT_IDS)
def test_only_the_correct_lesson_states_each_vaults_secret(env_id):
    for seed in range(mechanism.FAMILY_SIZE):
        verdicts = {
            kind: lesson_states_secret(env_id, seed, "\n".join(mechanism.stage_a_lessons(env_id, kind)[seed]))
            for kind in mechanism.LESSON_KINDS
        }
        assert verdicts == {"correct": True, "wrong": False, "garbage": False}, (env_id, seed)


def test_the_wrong_lesson_names_a_move_that_seals_the_vault_at_once():
    for env_id in VAULT_IDS:
        for vault in mechanism.vaults(env_id):
            first = secret_of(env_id, vault)[0]
            assert mechanism.opposite(first) != first
            assert mechanism.opposite(mechanism.opposite(first)) == first


def test_the_rooms_correct_lesson_alone_names_its_stairs_corner():
    verdicts = [
        lesson_states_secret(mechanism.ROOM_FIXED, 3, "\n".join(mechanism.room_lesson(kind)))
        for kind in mechanism.LESSON_KINDS
    ]
    assert verdicts == [True, False, False]


def test_stage_a_lessons_are_refused_for_a_task_without_a_secret():
    with pytest.raises(ValueError, match="comprl/Vault-v0"):
        mechanism.stage_a_lessons("comprl/Room-Random-5x5-v0", "correct")
    with pytest.raises(ValueError, match="accepted: correct, wrong, garbage"):
        mechanism.vault_lesson("Opal", "vague", ("north",))


def test_the_settings_give_each_task_its_code_length_as_turn_cap_and_refuse_other_profiles():
    assert mechanism.mechanism_config("cpu").max_turns == 1
    assert mechanism.mechanism_config("cpu", env_id="comprl/Vault-Code-v0").max_turns == 3
    room = mechanism.mechanism_config("cpu", env_id=mechanism.ROOM_FIXED)
    assert room.max_turns == 10 and room.env_options[mechanism.ROOM_FIXED] == {"view": "brief"}
    stage_a = mechanism.stage_a_config("cpu", episodes=256, eval_episodes=128, **{"rollout.temperature": 0.5})
    assert (stage_a.eval_episodes, stage_a.experience.warmup, stage_a.extractor.model) == (256, 0, "scripted")
    assert stage_a.rollout.temperature == 0.5  # the notebook's overrides reach Stage A, its own episodes win
    with pytest.raises(ValueError, match="accepted: smoke, cpu"):
        mechanism.mechanism_config("paper")


def test_the_vault_gate_shows_each_vault_its_own_scripted_lesson_and_never_another():
    config = mechanism.mechanism_config("cpu")
    assert config.bank.min_similarity == mechanism.VAULT_GATE
    table = mechanism.scripted_similarity(mechanism.VAULT, config)
    own, other = mechanism.similarity_gap(table)
    assert other < mechanism.VAULT_GATE <= own, (own, other)
    assert mechanism.stage_a_config("cpu").bank.min_similarity is None  # Stage A shows the nearest lesson, always
    assert mechanism.mechanism_config("cpu", env_id=mechanism.FRESH).bank.min_similarity is None


def test_the_plan_runs_every_arm_per_seed_with_its_own_overrides():
    plan = mechanism_plan("smoke", seeds=[0, 1])
    names = list(plan.named())
    assert names[:4] == ["baseline_seed0", "scripted_seed0", "learned_seed0", "learned_grammar_seed0"]
    configs = plan.named()
    assert configs["baseline_seed1"].method == "baseline" and configs["scripted_seed1"].extractor.model == "scripted"
    assert configs["learned_grammar_seed0"].extractor.lesson_grammar
    assert {c.env_id for n, c in configs.items() if not n.startswith("stream")} == {mechanism.VAULT}
    stream = configs["stream_scripted_seed0"]  # test-time experience: vaults never trained on, the actor frozen
    assert (stream.env_id, stream.method, stream.max_turns) == (mechanism.FRESH, "exp_only", 1)
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        mechanism_plan("smoke", arms={"two words": {}})
    # a stream from each seed's trained actor: {seed} in a text value is the run's seed
    trained = {"method": "exp_only", "actor.lora_rank": 4, "actor.init_from": "runs/scripted_seed{seed}"}
    configs = mechanism_plan("smoke", arms={"stream_trained": trained}, seeds=[0, 2]).named()
    assert [c.actor.init_from for c in configs.values()] == ["runs/scripted_seed0", "runs/scripted_seed2"]


def test_the_reproduction_runs_notebook_07_first_and_only_where_a_profile_has_its_settings():
    assert STEPS[0].notebook == "07_mechanism"
    assert STEPS[0].runs_on("cpu") and not STEPS[0].runs_on("paper")
    assert STEPS[0].configs("paper") == []
    assert "07_mechanism: 0 runs" in dry_run("paper")


def _metrics(guided_after: dict[int, float]) -> pd.DataFrame:
    """Two steps of training and two evaluations per seed of a scripted arm and of a baseline."""
    rows = []
    for arm, method in (("scripted", "comp_rl"), ("baseline", "baseline")):
        for seed, guided in guided_after.items():
            run = f"{arm}_seed{seed}"
            for step, recall in ((1, 0.25), (2, 0.5)):
                rows.append({"run": run, "method": method, "seed": seed, "step": step, "phase": "train",
                             "episodes": 16, "success_rate": 0.9 if step == 2 else 0.1,
                             "guided_minus_free": 0.2 if method == "comp_rl" else float("nan"),
                             "rule_recall_live": recall, "rule_recall_shown": recall})
            for step, free, with_bank in ((0, 0.125, 0.125), (2, 0.125, guided)):
                rows.append({"run": run, "method": method, "seed": seed, "step": step, "phase": "eval",
                             "episodes": 64, "success_rate": free,
                             "guided_success_rate": with_bank if method == "comp_rl" else float("nan")})
    return pd.DataFrame(rows)


def test_stage_b_tables_each_seed_and_judges_the_positive_control_by_welchs_t(tmp_path):
    metrics = _metrics({0: 0.5, 1: 0.45, 2: 0.55})
    arm_of = {run: run.rsplit("_seed", 1)[0] for run in metrics.run.unique()}
    table = mechanism.stage_b_table(metrics, arm_of)
    scripted = table[table.arm == "scripted"]
    assert list(scripted.guided_minus_free_after.round(3)) == [0.375, 0.325, 0.425]
    assert (scripted.steps_to_ready == 2).all() and (scripted.rule_recall_live == 0.5).all()
    claims = mechanism.stage_b_claims(table)
    assert list(claims.arm) == ["scripted"]  # the baseline has no guided pass to compare
    assert claims.verdict.iloc[0] == "shown (guided above free)"
    table.to_csv(tmp_path / "stage_b.csv", index=False)
    claims.to_csv(tmp_path / "stage_b_claims.csv", index=False)
    assert any(line.startswith("**Positive control: passed.**") for line in mechanism.report_section(tmp_path))
    (tmp_path / "scripted_seed0").mkdir()
    (tmp_path / "scripted_seed0" / "config.json").write_text(mechanism.mechanism_config("cpu").to_json())
    settings = [line for line in mechanism.report_section(tmp_path) if line.startswith("Stage B's settings")]
    assert settings and "actor learning rate 5e-05" in settings[0] and "`bank.min_similarity` = 0.639" in settings[0]


def test_a_positive_control_within_the_noise_fails_the_gate_in_the_report(tmp_path):
    metrics = _metrics({0: 0.5, 1: 0.0, 2: 0.125})
    arm_of = {run: run.rsplit("_seed", 1)[0] for run in metrics.run.unique()}
    claims = mechanism.stage_b_claims(mechanism.stage_b_table(metrics, arm_of))
    assert claims.verdict.iloc[0] == "inconclusive (interval spans 0)"
    claims.to_csv(tmp_path / "stage_b_claims.csv", index=False)
    gate = [line for line in mechanism.report_section(tmp_path) if "Positive control" in line]
    assert gate and gate[0].startswith("**Positive control: FAILED.**") and "no null result below counts" in gate[0]


def test_one_seed_gives_no_verdict_and_no_run_says_so():
    metrics = _metrics({0: 0.5})
    arm_of = {run: run.rsplit("_seed", 1)[0] for run in metrics.run.unique()}
    claims = mechanism.stage_b_claims(mechanism.stage_b_table(metrics, arm_of))
    assert claims.verdict.iloc[0] == "no verdict (no interval)"
    assert mechanism.report_section("/nonexistent/07_mechanism")[2].startswith("Not run")


def test_notebook_07_runs_stage_a_and_every_arm_and_writes_its_tables_and_figure(tmp_path):
    out = tmp_path / "nb07"
    args = ["run", "07_mechanism", "--profile", "smoke", "--output-dir", str(out), "-p", "seeds", "[0]",
            "-p", "stage_a_episodes", "8"]
    assert main(args) == 0
    stage_a = pd.read_csv(out / "stage_a.csv")
    assert list(stage_a.lesson) == list(mechanism.LESSON_KINDS) and (stage_a.episodes == 8).all()
    assert (stage_a.shown == 8).all()  # every guided episode was answered (no warm-up gate)
    stage_b = pd.read_csv(out / "stage_b.csv")
    assert sorted(stage_b.arm) == sorted(mechanism.STAGE_B_ARMS)
    claims = pd.read_csv(out / "stage_b_claims.csv")
    assert sorted(claims.arm) == sorted(set(mechanism.STAGE_B_ARMS) - {"baseline"})  # every arm with a bank
    metrics = pd.read_csv(out / "metrics.csv")
    assert "rule_recall_live" in metrics and "rule_recall_shown" in metrics
    for name in ("mechanism.png", "mechanism.pdf", "lessons.csv", "07_mechanism.ipynb"):
        assert (out / name).stat().st_size > 0, name
