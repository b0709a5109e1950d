"""Bank explorer and live training plot, driven headless (no frontend): widget values are set from Python."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from comprl.experience.bank import BankFileError, Embedder, ExperienceBank, NewEntry, Write
from comprl.config import make_config
from comprl.runs import Run
from comprl.kit.widgets import BankExplorer, LiveTrainingPlot

SCRIPT_TITLE = "<script>alert(1)</script> trick"


def _add(title: str, content: str) -> Write:
    return Write("add", entry=NewEntry(title, content))


@pytest.fixture(scope="module")
def run_and_bank(tmp_path_factory):
    """A comp_rl run folder whose bank saw four steps of writes; the writer stays open, as in a running loop.

    Ids: 1-3 added at step 1; 4 replaces 1 at step 2; 2 discarded at step 3; 5 merges 4 and 3, 6 and 7 added at 4.
    """
    run = Run.create(tmp_path_factory.mktemp("runs"), make_config("smoke", method="comp_rl"), name="r")
    bank = ExperienceBank(run.bank_path, Embedder())
    bank.apply(
        [_add("Open doors with keys", "Walk to a door holding a key."), _add("Avoid lava", "Never step on lava."),
         _add(SCRIPT_TITLE, "A title with markup.")],
        step=1, task="room", source="step1/episode0", raw="RAW-ADD",
    )
    bank.log_rejection(step=1, task="room", reason="bad_json", source="step1/episode1", raw="{oops")
    bank.apply(
        [Write("update", targets=(1,), entry=NewEntry("Keys open locked doors", "Pick up the key first."))],
        step=2, task="room", source="step2/episode3", raw="RAW-UPDATE-OUTPUT",
    )
    bank.record_uses([2, 2, 4], [True, False, True], step=2)
    bank.apply([Write("discard", targets=(2,))], step=3, task="room", source="step3/episode0", raw="RAW-DISCARD")
    for _ in range(2):
        bank.log_rejection(step=3, task="room", reason="unknown_op", source="step3/episode1", raw="nonsense")
    bank.apply(
        [Write("update", targets=(4, 3), entry=NewEntry("Doors and keys", "Fetch the key, then open the locked door.")),
         _add("Crossing rivers", "Push a boulder into the water to cross the river."),
         _add("Fighting monsters", "Attack a monster only when your health is high.")],
        step=4, task="room", source="step4/merge", raw="RAW-MERGE", origin="merge",
    )
    bank.apply([], step=4, task="room", source="step4/episode2", raw="[]")
    yield run, bank
    bank.close()


def _digest(run: Run) -> dict[str, str]:
    files = sorted(run.path.glob("bank.duckdb*"))
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.fixture(scope="module")
def explorer(run_and_bank):
    run, _ = run_and_bank
    with BankExplorer(run) as ex:
        yield ex


def test_explorer_never_touches_the_run_file(run_and_bank):
    run, _ = run_and_bank
    before = _digest(run)
    with BankExplorer(run.path) as ex:
        ex.widget
        ex.step_slider.value = 2
        ex.query("locked door", k=1)
    assert _digest(run) == before


def test_step_slider_updates_the_entries_table(run_and_bank, explorer):
    _, bank = run_and_bank
    widget = explorer.widget
    assert explorer.step_slider.max == 4 and explorer.step_slider.value == 4
    assert explorer.steps == (0, 4)
    for step in range(5):
        explorer.step_slider.value = step
        table = explorer.table(step)  # the bank's entries, and whether each states its vault's secret (none here)
        pd.testing.assert_frame_equal(table.drop(columns="states_secret"), bank.at_step(step))
        assert table["states_secret"].isna().all()
        page = explorer.table_view.value
        for title in bank.at_step(step)["title"]:
            if title != SCRIPT_TITLE:
                assert title in page
    explorer.step_slider.value = 2
    page = explorer.table_view.value
    assert "Keys open locked doors" in page and "Avoid lava" in page
    assert "Open doors with keys" not in page  # replaced at step 2
    assert widget.children[-1].titles == ("Entries", "Changes", "Provenance", "Retrieval")


def test_titles_are_escaped(explorer):
    explorer.widget
    explorer.step_slider.value = 1
    page = explorer.table_view.value
    assert "&lt;script&gt;alert(1)&lt;/script&gt; trick" in page
    assert "<script>" not in page


def test_changes_between_steps(explorer):
    one_two = explorer.changes(1, 2)
    assert list(one_two["added"]["id"]) == [4]
    assert list(one_two["removed"]["id"]) == [1]
    assert list(one_two["removed"]["removed_by"]) == ["update"]
    assert list(one_two["changed"]["id"]) == [2]
    two_four = explorer.changes(2, 4)
    assert list(two_four["added"]["id"]) == [5, 6, 7]
    removed_by = dict(zip(two_four["removed"]["id"], two_four["removed"]["removed_by"]))
    assert removed_by == {2: "discard", 3: "update", 4: "update"}
    with pytest.raises(ValueError, match="step_a must be <= step_b, got 4 > 2"):
        explorer.changes(4, 2)

    explorer.widget
    explorer.step_slider.value = 3
    assert explorer.range_slider.value == (2, 3)
    assert "Removed (1)" in explorer.changes_view.value and "Avoid lava" in explorer.changes_view.value
    explorer.range_slider.value = (0, 4)
    assert "Added (3)" in explorer.changes_view.value


def test_counters_from_the_log(explorer):
    assert explorer.counters(1) == {
        "add": 3, "update": 0, "discard": 0, "evict": 0, "none": 0, "uses": 0, "successes": 0,
        "rejected": 1, "rejected_bad_json": 1,
    }
    step3 = explorer.counters(3)
    assert step3["discard"] == 1 and step3["rejected"] == 2 and step3["rejected_unknown_op"] == 2
    assert explorer.counters(2)["uses"] == 3 and explorer.counters(2)["successes"] == 2
    assert explorer.counters(4)["none"] == 1
    explorer.widget
    explorer.step_slider.value = 3
    assert "unknown_op 2" in explorer.counters_view.value


def test_provenance_of_an_updated_entry(explorer):
    info = explorer.provenance(4)
    assert info["parents"] == (1,) and info["children"] == (5,)
    assert info["created"]["source"] == "step2/episode3" and info["created"]["raw"] == "RAW-UPDATE-OUTPUT"
    assert info["created"]["origin"] == "distill" and info["created"]["op"] == "update"
    assert info["removed"]["op"] == "update" and info["removed"]["step"] == 4
    assert info["entry"].uses == 1 and info["entry"].successes == 1
    assert info["uses"].to_dict("records") == [{"step": 2, "uses": 1, "successes": 1}]

    merged = explorer.provenance(5)
    assert merged["parents"] == (4, 3) and merged["ancestors"] == (4, 3, 1)
    assert merged["created"]["origin"] == "merge" and merged["removed"] is None

    explorer.widget
    explorer.entry_picker.value = 4
    page = explorer.provenance_view.value
    assert "step2/episode3" in page and "RAW-UPDATE-OUTPUT" in page and "#1" in page and "#5" in page
    with pytest.raises(KeyError):
        explorer.provenance(99)


def test_query_returns_the_closest_entry(explorer):
    hits = explorer.query("how can I get across the water?", k=2)
    assert list(hits["id"])[0] == 6 and len(hits) == 2
    assert hits["score"].is_monotonic_decreasing
    explorer.widget
    explorer.query_text.value = "the door is locked, what should I do?"
    explorer.query_button.click()
    assert "Doors and keys" in explorer.query_view.value
    with pytest.raises(ValueError, match="non-empty"):
        explorer.query("  ")


def test_reload_sees_new_writes(run_and_bank):
    run, bank = run_and_bank
    with BankExplorer(run) as ex:
        ex.widget
        bank.apply([_add("Read the map", "Look at the map before moving.")], step=5, task="room", source="s", raw="r")
        assert ex.steps == (0, 4)
        ex.reload()
        assert ex.steps == (0, 5) and ex.step_slider.value == 5
        assert "Read the map" in ex.table_view.value


def test_missing_bank_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no experience bank at"):
        BankExplorer(tmp_path)


def _damaged(bank: bytes, kind: str) -> bytes:
    """A bank file's bytes spoiled in one of the ways a copy, a disk or a user spoils them."""
    spoiled = bytearray(bank)
    if kind == "text":
        return b"entries of my own, not a database\n"
    if kind == "empty":
        return b""
    if kind == "truncated":
        return bank[:5000]
    if kind == "magic":
        spoiled[8:12] = b"XXXX"  # DuckDB's magic bytes
    else:
        spoiled[4096:4200] = b"\xff" * 104  # the first database header, whose checksum no longer matches
    return bytes(spoiled)


@pytest.mark.parametrize("kind", ["text", "empty", "truncated", "magic", "header"])
def test_a_file_that_is_no_bank_is_refused_naming_the_users_file_not_the_explorers_copy(run_and_bank, tmp_path, kind):
    run, _ = run_and_bank
    path = tmp_path / "bank.duckdb"
    path.write_bytes(_damaged(run.bank_path.read_bytes(), kind))
    with pytest.raises(BankFileError) as refused:
        BankExplorer(path)
    said = str(refused.value)
    assert said.startswith(f"{path} cannot be opened as a bank: ") and "comprl-bank-" not in said, said
    assert said.endswith("; accepted: a run folder, its bank.duckdb, a bundle or a compacted run")


def test_a_sqlite_file_given_as_a_bank_or_a_run_makes_duckdb_download_nothing(tmp_path):
    """DuckDB installs an extension a file needs from its web site by default: a SQLite file given as a bank made
    the explorer, the bank and a run's metrics try to download ``sqlite_scanner`` from extensions.duckdb.org."""
    sqlite3 = pytest.importorskip("sqlite3")
    path = tmp_path / "bank.duckdb"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE entries (id INTEGER)")
    run = Run(tmp_path / "run")
    run.path.mkdir()
    path_of_run = run.db_path
    path_of_run.write_bytes(path.read_bytes())
    for open_it in [lambda: BankExplorer(path), lambda: ExperienceBank(path, Embedder()), run.metrics]:
        with pytest.raises(Exception) as refused:  # noqa: PT011 - each reader wraps DuckDB's error its own way
            open_it()
        assert "extensions.duckdb.org" not in str(refused.value) and "download" not in str(refused.value).lower()


def test_live_plot_callback_and_throttle(tmp_path):
    plot = LiveTrainingPlot(min_interval_s=0)
    plot.callback(1, {"success_rate": 0.25, "bank_size": 3.0})
    plot.callback(2, {"success_rate": 0.5, "bank_size": 5.0})
    assert len(plot.frame) == 2 and list(plot.frame["step"]) == [1, 2]
    assert plot.figure is not None and bytes(plot.image.value).startswith(b"\x89PNG")
    assert "step 2" in plot.status.value

    slow = LiveTrainingPlot(metrics=("success_rate",), min_interval_s=3600)
    slow.callback(1, {"success_rate": 0.1})
    first = slow.image.value
    slow.callback(2, {"success_rate": 0.9})
    assert slow.image.value == first  # throttled
    slow.draw()
    assert slow.image.value != first

    run = Run.create(tmp_path, make_config("smoke", method="comp_rl"), name="m")
    run.log(1, "train", {"success_rate": 0.2})
    run.log(1, "eval", {"success_rate": 0.3})
    plot.update(run)
    assert len(plot.frame) == 2 and set(plot.frame["phase"]) == {"train", "eval"}
    with pytest.raises(ValueError, match="metrics must be a non-empty"):
        LiveTrainingPlot(metrics=())
