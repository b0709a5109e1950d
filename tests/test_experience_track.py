"""The experience track: extractor replies validated and applied to a real DuckDB bank, or rejected and counted."""

from __future__ import annotations

import pytest
import torch

from comprl.experience.bank import Entry, NewEntry, Write
from comprl.envs import make
from comprl.experience.extractor.track import LESSON_VERBS, episode_actions, lesson_actions
from comprl.actor.rollout import RolloutConfig, run_episodes
from comprl.experience.extractor.trainer import ExtractorConfig, ExtractorSample

ROOM = "comprl/Room-Ultimate-5x5-v0"


@pytest.fixture()
def track(make_track):
    return make_track(ROOM, style="lines", max_new_tokens=8, invalid_reward=-1.0, response_prefix="<answer>\n")


def _sample(kind="distill"):
    return ExtractorSample(kind=kind, step=1)


def test_a_valid_reply_is_applied_and_its_entries_recorded(track):
    (old,) = track.bank.apply([Write("add", entry=NewEntry("Old", "An older lesson."))], step=0, task=ROOM)
    raw = "<answer>\nADD Stairs first :: Walk to the > symbol.\nUPDATE 0 Older, fixed :: A corrected lesson.\n</answer>"
    sample = track.apply_output(_sample(), raw, [old], step=1, source="step1/episode0")
    assert len(sample.entry_ids) == 2 and sample.outcomes == []
    assert track.bank.get(old).deleted and {track.bank.get(i).title for i in sample.entry_ids} == {
        "Stairs first",
        "Older, fixed",
    }
    assert track.bank.get(sample.entry_ids[1]).parents == (old,)
    stats = track.take_stats()
    assert stats["extractor_valid"] == 1 and stats["bank_writes_applied"] == 2 and stats["extractor_rejected"] == 0
    log = track.bank.operations()
    assert set(log.loc[log.step == 1, "source"]) == {"step1/episode0"} and raw in set(log["raw"])


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("I think the agent should go east.", "no_answer"),
        ("<answer>\nADD only a title\n</answer>", None),  # some rejection reason from the validator
        ("<answer>\nUPDATE 3 Wrong :: index out of range\n</answer>", "bad_index"),
        ("<answer>\nDROP TABLE entries; --\n</answer>", "unknown_op"),
    ],
)
def test_an_invalid_reply_is_rejected_whole_counted_and_logged(track, raw, reason):
    (kept,) = track.bank.apply([Write("add", entry=NewEntry("Kept", "Stays as is."))], step=0, task=ROOM)
    before = track.bank.entries()
    sample = track.apply_output(_sample(), raw, [kept], step=1, source="s")
    assert sample.entry_ids == () and sample.outcomes == [-1.0]  # the configured invalid-output reward
    assert track.bank.entries().equals(before)
    stats = track.take_stats()
    assert stats["extractor_rejected"] == 1 and stats["extractor_valid"] == 0
    rejected = [k for k, v in stats.items() if k.startswith("rejected_") and v == 1]
    assert len(rejected) == 1 and (reason is None or rejected == [f"rejected_{reason}"])
    log = track.bank.operations()
    assert list(log.loc[log.step == 1, "op"]) == ["reject"] and list(log.loc[log.step == 1, "raw"]) == [raw]


def test_an_update_of_an_entry_deleted_meanwhile_is_rejected_by_the_bank(track):
    a, b = track.bank.apply([Write("add", entry=NewEntry(t, t + " lesson")) for t in ("A", "B")], step=0, task=ROOM)
    track.bank.apply([Write("discard", targets=(a,))], step=1, task=ROOM)
    sample = track.apply_output(_sample(), "<answer>\nUPDATE 0,1 AB :: Both.\n</answer>", [a, b], step=2, source="s")
    assert sample.entry_ids == () and not track.bank.get(b).deleted
    assert track.take_stats()["rejected_deleted_target"] == 1


def test_distill_and_merge_with_a_real_model_account_for_every_reply(track, tiny_engine):
    track.bank.apply(
        [Write("add", entry=NewEntry(f"Lesson {i}", f"Content {i}.")) for i in range(6)], step=0, task=ROOM
    )
    envs = [make(ROOM, max_turns=2) for _ in range(3)]
    torch.manual_seed(0)
    trajectories = run_episodes(
        tiny_engine, envs, [3, 3, 4], RolloutConfig(max_new_tokens=4), guided=[True, False, True],
        retrieve=lambda queries: [hits[0].entry for hits in track.bank.search(queries, task=ROOM)],
    )
    assert [len(t.experience_ids) for t in trajectories] == [1, 0, 1]
    samples = track.distill([t.episode(1) for t in trajectories], step=1) + track.merge(step=1)
    assert [s.kind for s in samples] == ["distill"] * 3 + ["merge"]  # 6 live entries: chunks of 5 and 1 (skipped)
    for sample in samples:
        assert sample.num_action_tokens > 0 and len(sample.logprobs) == len(sample.token_ids)
    stats = track.take_stats()
    assert stats["extractor_outputs"] == 4 == stats["extractor_valid"] + stats["extractor_rejected"]
    log = track.bank.operations()
    assert (log.step == 1).sum() >= 4  # every reply is in the log once: applied, "none", or rejected


def test_the_lesson_grammar_begins_every_lesson_with_a_verb_and_an_action_of_its_episode(
    make_track, tiny, tiny_engine, assert_logprobs_match_fresh_pass
):
    track = make_track(ROOM, style="note", lesson_grammar=True, max_new_tokens=8, temperature=1.0)
    envs = [make(ROOM, max_turns=3) for _ in range(3)]
    torch.manual_seed(0)
    played = run_episodes(tiny_engine, envs, [3, 3, 4], RolloutConfig(max_new_tokens=16, constrained_actions=True))
    episodes = [t.episode(1) for t in played]
    samples = track.distill(episodes, step=1)
    for episode, sample in zip(episodes, samples):
        actions = episode_actions(episode)
        assert actions
        (entry,) = sample.entry_ids
        content = track.bank.get(entry).content
        assert any(content.startswith(f"{verb} {action} when") for verb in LESSON_VERBS for action in actions), content
        assert any(len(allowed) > 1 for allowed in sample.choices.values())  # the verb and the action were choices
    assert_logprobs_match_fresh_pass(tiny[0], tiny[1].pad_token_id, samples, track.config.temperature)
    lessons = [track.bank.get(i) for s in samples for i in s.entry_ids]
    named = lesson_actions(lessons)
    assert named == list(dict.fromkeys(content.split(" when")[0].split(" ", 1)[1] for content in
                                       (lesson.content for lesson in lessons)))
    merges = track.merge(step=1)  # 3 live entries: one chunk, whose lesson may name an action its lessons name
    assert [s.kind for s in merges] == ["merge"]
    (merged,) = merges[0].entry_ids
    content = track.bank.get(merged).content
    assert any(content.startswith(f"{verb} {action} when") for verb in LESSON_VERBS for action in named), content


def test_lesson_actions_are_the_actions_the_grammars_lessons_name():
    def entry(content):
        return Entry(0, ROOM, content[:10], content, created_step=0, updated_step=0, uses=0, successes=0, parents=(),
                     deleted=False)

    lessons = [entry("Prefer east when the stairs are east."), entry("Avoid north when"), entry("Go east."),
               entry("Prefer east when lit."), entry("Prefer  when empty."), entry("Avoid south")]
    assert lesson_actions(lessons) == ["east", "north"]


def test_episode_actions_are_the_answers_its_replies_gave_once_each():
    from comprl.experience.interface import Episode

    messages = (
        {"role": "system", "content": "Reach the stairs."}, {"role": "user", "content": "You see a room."},
        {"role": "assistant", "content": "<answer>East.</answer>"}, {"role": "user", "content": "Moved."},
        {"role": "assistant", "content": "<search>stairs</search>"}, {"role": "user", "content": "No entry."},
        {"role": "assistant", "content": "I think <ANSWER>east</ANSWER>"}, {"role": "user", "content": "Moved."},
        {"role": "assistant", "content": "<answer>north</answer>"},
    )
    episode = Episode(ROOM, 0, 1, 0, "Reach the stairs.", messages)
    assert episode_actions(episode) == ["east", "north"]


def test_the_lesson_grammar_needs_the_note_style():
    with pytest.raises(ValueError, match="lesson_grammar=True with style='json'.*accepted: style='note'"):
        ExtractorConfig(style="json", lesson_grammar=True)
