"""The vault envs (issue 68): secrets fixed per vault and hidden from the actor, their rules, the closed-form
chance level, and the check that says whether a lesson states a vault's secret."""

from __future__ import annotations

import math
import warnings

import pytest
from gymnasium.utils.env_checker import check_env

import comprl.envs
from comprl.envs import ENV_IDS, lesson_states_secret, random_policy_success
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.envs.mixture import task_name
from comprl.envs.vault import (
    FAMILIES,
    MOVES,
    VAULT_IDS,
    VaultTextEnv,
    free_success,
    named_moves,
    secret_of,
    states_secret,
    vault_of,
)

VAULT, CODE, FRESH = "comprl/Vault-v0", "comprl/Vault-Code-v0", "comprl/Vault-Fresh-v0"


def family(env_id: str):
    return next(family for family in FAMILIES.values() if family.env_id == env_id)


def answer(move: str) -> str:
    return f"<answer>{move}</answer>"


def wrong_move(secret_move: str) -> str:
    return next(move for move in MOVES if move != secret_move)


def test_the_three_vault_ids_are_registered_with_short_names_and_build_the_vault_env():
    assert VAULT_IDS == (VAULT, CODE, FRESH) and set(VAULT_IDS) <= set(ENV_IDS)
    assert [task_name(env_id) for env_id in VAULT_IDS] == ["vault", "vault_code", "vault_fresh"]
    for env_id in VAULT_IDS:
        env = comprl.envs.make(env_id)
        assert isinstance(env.unwrapped, VaultTextEnv) and env.unwrapped.family.env_id == env_id


def test_the_families_have_8_vaults_each_and_no_name_in_two_families():
    names = [vault for family in FAMILIES.values() for vault in family.vaults]
    assert all(len(family.vaults) == 8 for family in FAMILIES.values()) and len(set(names)) == 24
    assert [family(env_id).code_length for env_id in VAULT_IDS] == [1, 3, 1]


def test_the_seed_picks_the_vault_mod_8_and_held_out_seeds_meet_the_same_vaults():
    env = comprl.envs.make(CODE)
    for seed in (0, 5, 13, 99_999):
        env.reset(seed=seed)
        assert env.unwrapped.vault == vault_of(CODE, seed) == family(CODE).vaults[seed % 8]
        assert vault_of(CODE, EVAL_SEED_OFFSET + seed) == vault_of(CODE, seed)
    assert {vault_of(VAULT, EVAL_SEED_OFFSET + i) for i in range(8)} == set(family(VAULT).vaults)


def test_the_secrets_are_fixed_constants():
    # sha256 of (env id, position, move): the same in every process, platform and numpy version
    assert {vault: secret_of(VAULT, vault) for vault in family(VAULT).vaults} == {
        "Opal": ("south",), "Garnet": ("east",), "Topaz": ("southeast",), "Jade": ("north",),
        "Amber": ("west",), "Onyx": ("northeast",), "Pearl": ("northwest",), "Coral": ("southwest",),
    }
    assert secret_of(CODE, "Copper") == ("southwest", "east", "south")
    assert secret_of(FRESH, "Maple") == ("east",)


@pytest.mark.parametrize("env_id", VAULT_IDS)
def test_every_position_of_the_secrets_is_a_permutation_of_the_8_moves(env_id):
    secrets = [secret_of(env_id, vault) for vault in family(env_id).vaults]
    assert all(len(secret) == family(env_id).code_length for secret in secrets)
    for position in range(family(env_id).code_length):
        assert sorted(secret[position] for secret in secrets) == sorted(MOVES)


def test_always_playing_one_move_wins_one_vault_in_8_on_the_held_out_seeds():
    env = comprl.envs.make(VAULT)
    for move in MOVES:
        wins = 0
        for i in range(16):
            env.reset(seed=EVAL_SEED_OFFSET + i)
            wins += env.step(answer(move))[1]
        assert wins == 2


def test_the_vault_families_have_different_secrets():
    assert [secret_of(VAULT, v) for v in family(VAULT).vaults] != [secret_of(FRESH, v) for v in family(FRESH).vaults]


@pytest.mark.parametrize("env_id", VAULT_IDS)
def test_nothing_the_actor_reads_depends_on_the_secret(env_id):
    env = comprl.envs.make(env_id)
    first_seen, instructions, infos = set(), set(), []
    for seed in range(8):
        observation, info = env.reset(seed=seed)
        vault = env.unwrapped.vault
        first_seen.add(observation.replace(vault, "VAULT"))
        instructions.add(info["instruction"])
        infos.append(info)
        for move in secret_of(env_id, vault)[:-1]:  # the clicks of a code read the same in every vault
            observation, _, _, _, info = env.step(answer(move))
            first_seen.add(observation)
            infos.append(info)
    assert len(first_seen) == family(env_id).code_length and len(instructions) == 1
    assert len({repr(sorted(info.items())) for info in infos}) == family(env_id).code_length


def test_the_first_observation_names_the_vault_and_a_code_says_how_many_moves_its_lock_takes():
    env = comprl.envs.make(CODE)
    observation, info = env.reset(seed=2)
    assert observation.startswith("You stand before the vault Iron. Its lock takes 3 moves.\n")
    assert "secret code of 3 moves" in info["instruction"] and "<answer>ACTION</answer>" in info["instruction"]
    observation, _ = comprl.envs.make(VAULT).reset(seed=2)
    assert observation.startswith("You stand before the vault Topaz.\n")


def test_the_right_move_opens_a_one_move_vault():
    env = comprl.envs.make(VAULT)
    env.reset(seed=3)
    observation, reward, terminated, truncated, info = env.step(answer(secret_of(VAULT, "Jade")[0]))
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert observation == "Click. The vault Jade opens."


def test_a_wrong_move_seals_the_vault():
    env = comprl.envs.make(FRESH)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(answer(wrong_move(secret_of(FRESH, "Maple")[0])))
    assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)
    assert observation == "Wrong move. The vault Maple is sealed."


def test_a_code_clicks_on_each_right_move_and_opens_on_the_last():
    env = comprl.envs.make(CODE)
    env.reset(seed=0)
    first, second, third = secret_of(CODE, "Copper")
    observation, reward, terminated, _, info = env.step(answer(first))
    assert observation.startswith("Click, 1 of 3.\n") and (reward, terminated, info["success"]) == (0.0, False, False)
    observation, reward, terminated, _, _ = env.step(answer(second))
    assert observation.startswith("Click, 2 of 3.\n") and (reward, terminated) == (0.0, False)
    assert env.step(answer(third))[1:3] == (1.0, True)


def test_a_wrong_move_after_clicks_seals_the_code():
    env = comprl.envs.make(CODE)
    env.reset(seed=0)
    first, second, _ = secret_of(CODE, "Copper")
    env.step(answer(first))
    observation, reward, terminated, _, info = env.step(answer(wrong_move(second)))
    assert observation == "Wrong move. The vault Copper is sealed."
    assert (reward, terminated, info["success"]) == (0.0, True, False)


def test_an_invalid_reply_costs_a_turn_and_does_not_seal_the_vault():
    env = comprl.envs.make(CODE, max_turns=3)
    env.reset(seed=0)
    first, second, _ = secret_of(CODE, "Copper")
    env.step(answer(first))
    observation, reward, terminated, truncated, info = env.step("<answer>up</answer>")
    assert info["invalid_action"] and info["invalid_actions"] == 1 and not (terminated or truncated)
    assert "Invalid action" in observation and "Click, 1 of 3." in observation
    _, _, terminated, truncated, _ = env.step(answer(second))
    assert (terminated, truncated) == (False, True)  # the cap, not a seal, ended it


def test_minihacks_abbreviations_and_go_move_spellings_are_accepted():
    env = comprl.envs.make(VAULT).unwrapped
    assert env.parse_action("<answer>NE</answer>") == "northeast"
    assert env.parse_action("go north") == "north" and env.parse_action("move sw") == "southwest"
    assert env.parse_action("<answer>up</answer>") is None


def test_the_moves_are_minihacks_direction_words():
    minihack_env = pytest.importorskip("comprl.envs.minihack.env", exc_type=ImportError)
    assert MOVES == tuple(minihack_env.DIRECTIONS)


@pytest.mark.parametrize("env_id, episodes", [(VAULT, 4000), (CODE, 8000), (FRESH, 4000)])
def test_free_success_is_random_plays_success_within_binomial_noise(env_id, episodes):
    expected = free_success(env_id)
    assert expected == (1 / 8) ** family(env_id).code_length
    measured = random_policy_success(env_id, max_turns=30, episodes=episodes)
    assert abs(measured - expected) <= 4 * math.sqrt(expected * (1 - expected) / episodes), measured


def test_free_success_is_zero_when_the_cap_is_shorter_than_the_code():
    assert free_success(CODE, max_turns=2) == 0.0 and free_success(VAULT, max_turns=1) == 1 / 8
    assert random_policy_success(CODE, max_turns=2, episodes=200) == 0.0


def test_named_moves_reads_whole_words_case_insensitively_and_in_answer_tags():
    assert named_moves("Go NorthEast, then north; <answer>southwest</answer>") == ("northeast", "north", "southwest")
    assert named_moves("northern easts, n, ne, up") == ()
    assert named_moves("north-east") == ("north", "east")


def test_states_secret_accepts_the_secret_stated_in_words_or_answer_tags():
    jade = secret_of(VAULT, "Jade")[0]  # seed 3
    assert jade == "north"
    assert states_secret(VAULT, 3, "Vault Jade opens to NORTH.")
    assert states_secret(VAULT, 3, "Jade: <answer>north</answer>")
    assert states_secret(VAULT, EVAL_SEED_OFFSET + 3, "play north, always north")


def test_states_secret_refuses_other_moves_extra_moves_and_no_moves():
    assert not states_secret(VAULT, 3, "Vault Jade opens to northeast.")  # northeast is not north
    assert not states_secret(VAULT, 3, "north, or else east")
    assert not states_secret(VAULT, 3, "Vault Jade: the secret move is fixed.")
    assert not states_secret(VAULT, 4, "north")  # seed 4 meets Amber (west)


@pytest.mark.parametrize(
    "lesson",
    ["Avoid north when you can.", "Never play north at Jade.", "Don't go north.", "Do not answer north.",
     "north is wrong here", "north seals Jade"],
)
def test_a_lesson_that_turns_the_secret_away_does_not_state_it(lesson):
    assert not states_secret(VAULT, 3, lesson)  # Jade's secret is north
    assert states_secret(VAULT, 3, "Prefer north when you stand before Jade.")  # the grammar's other verb


def test_states_secret_of_a_code_needs_its_moves_in_order():
    first, second, third = secret_of(CODE, "Copper")  # seed 0
    assert states_secret(CODE, 0, f"Copper: {first}, {second}, {third}.")
    assert states_secret(CODE, 0, f"{first} {second} {third}; " + "".join(map(answer, (first, second, third))))
    assert not states_secret(CODE, 0, f"{third}, {second}, {first}")
    assert not states_secret(CODE, 0, f"{first}, {second}")
    assert not states_secret(CODE, 0, f"{first}, {second}, {third}, {first}")


def test_lesson_states_secret_checks_vault_ids_and_has_no_answer_for_other_envs():
    assert lesson_states_secret(VAULT, 3, "north") is True
    assert lesson_states_secret(VAULT, 3, "south") is False
    assert lesson_states_secret("comprl/Sokoban-6x6-2box-v0", 3, "north") is None
    with pytest.raises(ValueError, match="comprl/Vault-v9"):
        lesson_states_secret("comprl/Vault-v9", 3, "north")


def test_unknown_ids_tasks_and_vaults_are_refused_naming_the_accepted_ones():
    with pytest.raises(ValueError, match="Vault-Code-v0"):
        vault_of("comprl/Sokoban-6x6-2box-v0", 0)
    with pytest.raises(ValueError, match="Opal"):
        secret_of(VAULT, "Copper")
    with pytest.raises(ValueError, match="single, code, fresh"):
        VaultTextEnv(task="triple")


@pytest.mark.parametrize("env_id", VAULT_IDS)
def test_gymnasiums_env_checker_passes(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(comprl.envs.make(env_id).unwrapped)
