"""A label is not a lesson (issue 68): note-style replies of a label line alone ("Task:") are refused and counted by
the experience track and never reach a real DuckDB bank; a label followed by its lesson is stored joined; the bank
explorer shows a note's title, its content's first words, once."""

from __future__ import annotations

import pytest

from comprl.experience.bank import NewEntry, Write
from comprl.experience.extractor.prompts import NOTE_STOP
from comprl.experience.extractor.trainer import ExtractorSample
from comprl.kit.widgets import BankExplorer

ROOM = "comprl/Room-Random-5x5-v0"


@pytest.fixture()
def track(make_track):
    return make_track(ROOM, style="note", max_new_tokens=8, invalid_reward=-1.0)


def test_a_note_track_stops_its_replies_past_label_lines(track):
    assert track.sampling.stop == NOTE_STOP and "\n" not in NOTE_STOP and ":\n" not in NOTE_STOP


def test_label_only_replies_are_refused_counted_logged_and_never_stored(track):
    (old, other) = track.bank.apply(
        [Write("add", entry=NewEntry("Old", "Go east.")), Write("add", entry=NewEntry("Other", "Go west."))],
        step=0, task=ROOM,
    )
    replies = [
        ("distill", "Task:\n", []),
        ("distill", "Sure. Here is the lesson:\n\n", []),
        ("merge", "Lessons:\n", [old, other]),
    ]
    for kind, raw, ids in replies:
        sample = track.apply_output(ExtractorSample(kind=kind, step=1), raw, ids, step=1, source="s")
        assert sample.entry_ids == () and sample.outcomes == [-1.0]
    assert sorted(track.bank.entries()["content"]) == ["Go east.", "Go west."]
    log = track.bank.operations()
    assert log.loc[log["op"] == "reject", "result"].tolist() == ["rejected:label_only"] * 3
    stats = track.take_stats()
    assert (stats["rejected_label_only"], stats["extractor_valid"], stats["extractor_empty"]) == (3, 0, 0)


def test_a_label_and_its_lesson_are_stored_as_one_entry(track):
    raw = "Task:\nReach the stairs down (>) east.\n"
    sample = track.apply_output(ExtractorSample(kind="distill", step=1), raw, [], step=1, source="s")
    (entry_id,) = sample.entry_ids
    entry = track.bank.get(entry_id)
    assert (entry.title, entry.content) == ("Task: Reach the stairs down (>) east.",) * 2
    assert track.bank.operations()["raw"].tolist()[-1] == raw  # the reply is logged as the model wrote it


def test_the_explorer_shows_a_notes_title_once_and_a_separate_title_as_it_is(track):
    reply = "Task:\nReach the stairs down (>) east, then stop.\n"
    (note,) = track.apply_output(ExtractorSample(kind="distill", step=1), reply, [], step=1, source="s").entry_ids
    (separate,) = track.bank.apply([Write("add", entry=NewEntry("Stairs first", "Go east."))], step=1, task=ROOM)
    track.bank.close()  # the explorer reads the file
    with BankExplorer(track.bank.path) as explorer:
        assert explorer.table(1).set_index("id").loc[note, "title"] == "Task: Reach the stairs down (>) east, then"
        table = explorer.table_html(1)
        assert table.count("Task: Reach the stairs down") == 1 and "<td>Stairs first</td>" in table
        assert f"<h4>#{note} </h4>" in explorer.provenance_html(note)
        assert f"<h4>#{separate} Stairs first</h4>" in explorer.provenance_html(separate)
