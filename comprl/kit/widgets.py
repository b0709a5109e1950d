"""Notebook widgets: an explorer for a run's experience bank and a live plot of training metrics.

:class:`BankExplorer` works on a private copy of the bank file, so that it never changes the run's file and can
look at a bank that a training loop still has open. Every panel is also a plain method returning a DataFrame or a
dict, so the same views work without a display (papermill, tests). :class:`LiveTrainingPlot` redraws metric
curves from a run folder, a DataFrame, or one row at a time from the training loop.
"""

from __future__ import annotations

import html
import io
import re
import shutil
import tempfile
import time
import weakref
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import ipywidgets as widgets
import pandas as pd

from comprl import duckdb_files
from comprl.experience.rule_recall import secret_verdicts
from comprl.experience.bank import BankFileError, Embedder, ExperienceBank
from comprl.experience.bank.store import check_bank_file
from comprl.kit.export import RecordedEmbedder, bank_from_bundle, is_bundle
from comprl.runs import Run, copy_bank_file

ENTRY_TABLE_COLUMNS: tuple[str, ...] = (
    "id",
    "task",
    "title",
    "content",
    "uses",
    "successes",
    "created_step",
    "updated_step",
    "parents",
)
"""Columns the explorer's entries table shows."""

DEFAULT_METRICS: tuple[str, ...] = (
    "success_rate",
    "guided_success_rate",
    "free_success_rate",
    "bank_size",
    "extractor_valid",
    "extractor_rejected",
)
"""Metrics :class:`LiveTrainingPlot` draws unless told otherwise (missing ones show an empty panel)."""

_APPLIED_OPS = ("add", "update", "discard", "evict", "none")
_REMOVING_OPS = ("update", "discard", "evict")
_HISTORY_COLUMNS = ["seq", "step", "op", "origin", "source", "targets", "entry_id", "result", "uses", "successes"]
_SCROLL = '<div style="max-height: 480px; overflow: auto; white-space: pre-wrap">{}</div>'


def _html_table(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """``frame`` as an HTML table with every header and cell escaped (entry texts are model output)."""
    columns = list(frame.columns if columns is None else columns)
    if frame.empty:
        return "<p><i>none</i></p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(value)}</td>" for value in row) + "</tr>"
        for row in frame[columns].itertuples(index=False)
    )
    return f'<table class="comprl-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(value: Any) -> str:
    """One escaped table cell; missing values are blank, parent tuples read ``#3, #4``."""
    if isinstance(value, tuple):
        return ", ".join(f"#{v}" for v in value)
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() else f"{value:.3f}"
    return html.escape(str(value))


def _shown_title(title: str, content: str) -> str:
    """The title as the HTML views show it beside its content: blank when the content begins with it, as a
    note-style entry's title (its content's first words, :mod:`comprl.experience.extractor.prompts`) always does,
    so that a reader does not read the same words twice."""
    return "" if content.startswith(title) else title


def _titles_shown(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (with title and content columns) with each title as :func:`_shown_title` shows it."""
    titles = [_shown_title(t, c) for t, c in zip(frame["title"], frame["content"])]
    return frame.assign(title=titles)


EXPLORED = "a run folder, its bank.duckdb, a bundle or a compacted run"
"""What :class:`BankExplorer` opens, for its errors."""


def _bank_file(run_or_path: Run | str | Path) -> Path:
    """The bank file of a run, a run folder, or a bank file given directly; the folder of a bundle or of a
    compacted run (whose bank is in Parquet files) as it is."""
    path = run_or_path.path if isinstance(run_or_path, Run) else Path(run_or_path)
    if is_bundle(path) or Run(path).compacted:
        return path
    path = Run(path).bank_path if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"no experience bank at {path} (runs of method 'baseline' have none)")
    return path


def _bank_meta(copy: Path, source: Path) -> dict[str, str]:
    """The ``meta`` table of a copied bank, checked by :func:`check_bank_file`; this also folds the copied log
    into the copy (never into ``source``)."""
    with duckdb_files.connect(str(copy)) as con:
        meta = check_bank_file(con, con.execute("SELECT current_database()").fetchone()[0], source)
    if meta is None:
        raise BankFileError(source, "is not an experience bank: it holds no tables")
    return meta


def _naming_source(problem: str, folder: str, source: Path) -> str:
    """``problem`` with every path inside the explorer's private ``folder`` (its copy of the bank) replaced by
    ``source``, the file the user gave: DuckDB's messages name the file it opened, which is the copy."""
    return re.sub(re.escape(folder) + r"[^\s\"']*", lambda _: str(source), problem)


def _close_snapshot(bank: ExperienceBank, folder: str) -> None:
    """Close the explorer's copy of the bank and delete it."""
    bank.close()
    shutil.rmtree(folder, ignore_errors=True)


class BankExplorer:
    """Browse a run's experience bank step by step: entries, changes, provenance, retrieval, log counters.

    ``run_or_path`` is a :class:`~comprl.runs.Run`, a run folder, a bank file, or a bundle
    (:mod:`comprl.kit.export`) or compacted run (:mod:`comprl.kit.compact`), whose bank is rebuilt from Parquet.
    The explorer opens a copy of the file (and of its write-ahead log), taken when it is built and again on
    :meth:`reload`; the run's file is only read, so a training loop may keep writing to it. A copy taken while the
    writer checkpoints may fail to open: reload. A file that is not a bank, of another schema version or damaged
    is refused with :class:`~comprl.experience.bank.BankFileError` naming it. ``embedder`` serves the retrieval
    panel; by default the model recorded in the bank, loaded on the first query. Search is exact (brute force),
    i.e. the oracle for what the actor's HNSW lookup returns.

    Display the explorer (or its :attr:`widget`) in a notebook; the same views are methods: :meth:`table`,
    :meth:`changes`, :meth:`provenance`, :meth:`query`, :meth:`counters`.
    """

    def __init__(self, run_or_path: Run | str | Path, embedder: Embedder | None = None, max_rows: int = 200) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        self.path = _bank_file(run_or_path)
        self.max_rows = max_rows
        self._embedder = embedder
        self._widget: widgets.VBox | None = None
        self._open_snapshot()

    # ---------------------------------------------------------------------------------------------------------
    # Snapshot
    # ---------------------------------------------------------------------------------------------------------

    def _open_snapshot(self) -> None:
        folder = tempfile.mkdtemp(prefix="comprl-bank-")
        try:
            if self.path.is_dir():  # a bundle or a compacted run: the bank rebuilt from its Parquet files
                copy = bank_from_bundle(self.path, Path(folder) / "bank.duckdb")
            else:
                copy = copy_bank_file(self.path, Path(folder))
            meta = _bank_meta(copy, self.path)
            bank = ExperienceBank(
                copy, RecordedEmbedder(meta["embedder"], int(meta["dim"])), use_vss=False, index="exact"
            )
        except BaseException as error:
            shutil.rmtree(folder, ignore_errors=True)
            if isinstance(error, (BankFileError, duckdb.Error)):  # name the run's file, not the private copy
                problem = error.problem if isinstance(error, BankFileError) else (
                    f"cannot be opened as a bank: {error}; accepted: {EXPLORED}"
                )
                raise BankFileError(self.path, _naming_source(problem, folder, self.path)) from error
            raise
        self.bank = bank
        self.taken_at = datetime.now()
        self._release = weakref.finalize(self, _close_snapshot, bank, folder)
        self._ops = bank.operations()
        self._all_entries = bank.entries(include_deleted=True)

    def reload(self) -> None:
        """Take a fresh copy of the bank file (to see what a running loop wrote since) and redraw the widgets."""
        self._release()
        self._open_snapshot()
        if self._widget is not None:
            self._sync_widgets()

    def close(self) -> None:
        """Close and delete the copy; the explorer is unusable afterwards."""
        self._release()

    def __enter__(self) -> "BankExplorer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder:
        """The embedder for retrieval queries (the given one, or the bank's recorded model, loaded lazily)."""
        return self.bank.embedder if self._embedder is None else self._embedder

    @property
    def steps(self) -> tuple[int, int]:
        """Smallest and largest step the explorer offers: 0 (or an earlier logged step) to the last logged step."""
        if self._ops.empty:
            return 0, 0
        return min(0, int(self._ops["step"].min())), int(self._ops["step"].max())

    # ---------------------------------------------------------------------------------------------------------
    # Views as data
    # ---------------------------------------------------------------------------------------------------------

    def table(self, step: int) -> pd.DataFrame:
        """The live entries at the end of ``step`` (rebuilt from the operations log), ordered by id, with
        ``states_secret``: on a task that hides a fact per instance (the vaults), whether the entry states the fact
        of the episode it was written from (:func:`comprl.experience.rule_recall.secret_verdicts`; missing where
        not judged: other tasks, merged entries)."""
        table = self.bank.at_step(step)
        verdicts = secret_verdicts(table, self._ops) if len(table) else {}
        return table.assign(states_secret=pd.array([verdicts.get(int(i)) for i in table["id"]], dtype="boolean"))

    def changes(self, step_a: int, step_b: int) -> dict[str, pd.DataFrame]:
        """What changed in the live bank from the end of ``step_a`` to the end of ``step_b``.

        ``added``, ``removed`` and ``changed`` (use counts) as in :meth:`ExperienceBank.diff`; ``removed`` also
        says which operation removed each entry (``removed_by``: update, discard or evict) and at which step.
        """
        if step_a > step_b:
            raise ValueError(f"step_a must be <= step_b, got {step_a} > {step_b}")
        diff = self.bank.diff(step_a, step_b)
        removed = diff["removed"]
        removals = self._removals()
        removed["removed_by"] = [removals.get(i, (None, None))[0] for i in removed["id"]]
        removed["removed_step"] = pd.array([removals.get(i, (None, None))[1] for i in removed["id"]], dtype="Int64")
        return diff

    def _removals(self) -> dict[int, tuple[str, int]]:
        """Entry id -> (operation, step) of the log row that deleted it."""
        found: dict[int, tuple[str, int]] = {}
        for row in self._ops[self._ops["op"].isin(_REMOVING_OPS)].itertuples(index=False):
            for target in row.targets or ():
                found.setdefault(target, (row.op, int(row.step)))
        return found

    def counters(self, step: int) -> dict[str, int]:
        """What the operations log records at ``step``.

        Log rows per applied operation (``add``, ``update``, ``discard``, ``evict``, ``none`` for a valid answer
        with nothing to do), ``uses``/``successes`` (episodes that retrieved an entry, and how many succeeded),
        ``rejected`` answers and ``rejected_<reason>`` per reason.
        """
        rows = self._ops[self._ops["step"] == step]
        counts = {op: int((rows["op"] == op).sum()) for op in _APPLIED_OPS}
        used = rows[rows["op"] == "use"]
        counts["uses"] = int(used["uses"].sum())
        counts["successes"] = int(used["successes"].sum())
        rejected = rows[rows["op"] == "reject"]
        counts["rejected"] = len(rejected)
        reasons = rejected["result"].str.removeprefix("rejected:").value_counts().sort_index()
        counts.update({f"rejected_{reason}": int(n) for reason, n in reasons.items()})
        return counts

    def provenance(self, entry_id: int) -> dict[str, Any]:
        """Where an entry came from and what happened to it, from the operations log.

        Keys: ``entry`` (the :class:`~comprl.experience.bank.Entry`, with its use/success counts), ``created`` (the
        log row that wrote it: step, op, origin such as distill or merge, source trajectory, task, the extractor's raw
        output), ``parents`` (ids it replaced), ``ancestors`` (all earlier versions, nearest first), ``children``
        (entries that replaced it), ``removed`` (the log row that deleted it, or None), ``uses`` (per step) and
        ``history`` (every log row that names it).
        """
        entry = self.bank.get(entry_id)
        ops = self._ops
        writes = ops[ops["op"].isin(("add", "update"))]
        parents_of = {int(r.entry_id): tuple(r.targets or ()) for r in writes.itertuples(index=False)}
        names_it = ops["targets"].map(lambda targets: targets is not None and entry.id in targets)
        history = ops[(ops["entry_id"] == entry.id) | names_it]
        created = writes[writes["entry_id"] == entry.id]
        removing = ops[names_it & ops["op"].isin(_REMOVING_OPS)]
        replacing = ops[names_it & (ops["op"] == "update")]
        ancestors: list[int] = []
        frontier = list(entry.parents)
        while frontier:
            parent = frontier.pop(0)
            if parent not in ancestors:
                ancestors.append(parent)
                frontier.extend(parents_of.get(parent, ()))
        used = history[history["op"] == "use"]
        return {
            "entry": entry,
            "created": _log_row(created),
            "parents": entry.parents,
            "ancestors": tuple(ancestors),
            "children": tuple(int(i) for i in replacing["entry_id"]),
            "removed": _log_row(removing),
            "uses": used[["step", "uses", "successes"]].reset_index(drop=True),
            "history": history[_HISTORY_COLUMNS].reset_index(drop=True),
        }

    def query(self, text: str, k: int = 3, task: str | None = None) -> pd.DataFrame:
        """The ``k`` live entries (of the latest copy) closest to ``text``: rank, score (cosine), id and texts."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"query text must be a non-empty string, got {text!r}")
        hits = self.bank.search_vectors(self.embedder.encode([text]), k=k, task=task, exact=True)[0]
        rows = [
            (rank, hit.score, hit.entry.id, hit.entry.task, hit.entry.title, hit.entry.content, hit.entry.uses,
             hit.entry.successes)
            for rank, hit in enumerate(hits, start=1)
        ]
        return pd.DataFrame(rows, columns=["rank", "score", "id", "task", "title", "content", "uses", "successes"])

    # ---------------------------------------------------------------------------------------------------------
    # Views as HTML
    # ---------------------------------------------------------------------------------------------------------

    def table_html(self, step: int) -> str:
        """The entries table at ``step``, newest first, at most ``max_rows`` rows."""
        table = self.table(step).sort_values("id", ascending=False)
        note = f"<p>{len(table)} live entries at the end of step {step}"
        if len(table) > self.max_rows:
            note += f"; showing the newest {self.max_rows}"
        shown = _titles_shown(table.head(self.max_rows))
        return note + "</p>" + _SCROLL.format(_html_table(shown, ENTRY_TABLE_COLUMNS))

    def changes_html(self, step_a: int, step_b: int) -> str:
        """The changes between two steps as three tables."""
        diff = self.changes(step_a, step_b)
        parts = [f"<p>From the end of step {step_a} to the end of step {step_b}:</p>"]
        for name, columns in (
            ("added", ["id", "task", "title", "content", "parents", "created_step"]),
            ("removed", ["id", "title", "removed_by", "removed_step", "uses", "successes"]),
            ("changed", ["id", "title", "uses_before", "uses", "successes_before", "successes"]),
        ):
            frame = _titles_shown(diff[name]) if name == "added" else diff[name]
            parts.append(f"<h4>{name.capitalize()} ({len(frame)})</h4>" + _html_table(frame, columns))
        return _SCROLL.format("".join(parts))

    def provenance_html(self, entry_id: int) -> str:
        """An entry's provenance: its text, the answer that created it, its lineage and its use."""
        info = self.provenance(entry_id)
        entry, created, removed = info["entry"], info["created"], info["removed"]
        lines = [
            f"<h4>#{entry.id} {html.escape(_shown_title(entry.title, entry.content))}</h4>",
            f"<pre>{html.escape(entry.content)}</pre>",
            f"<p>task {html.escape(entry.task)} · uses {entry.uses} · successes {entry.successes}"
            f" · created at step {entry.created_step}</p>",
        ]
        if created:
            lines.append(
                f"<p>written by <b>{html.escape(created['op'])}</b> (origin {html.escape(str(created['origin']))})"
                f" from source {html.escape(str(created['source']))} at step {created['step']}</p>"
            )
            raw = "(not recorded)" if created["raw"] is None else created["raw"]
            lines.append(f"<p>extractor output:</p><pre>{html.escape(raw)}</pre>")
        for key, label in (("parents", "replaces"), ("ancestors", "earlier versions"), ("children", "replaced by")):
            if info[key]:
                lines.append(f"<p>{label}: {_cell(info[key])}</p>")
        if removed:
            lines.append(f"<p>deleted by <b>{html.escape(removed['op'])}</b> at step {removed['step']}</p>")
        lines.append("<h4>Log rows naming it</h4>" + _html_table(info["history"]))
        return _SCROLL.format("".join(lines))

    def query_html(self, text: str, k: int = 3) -> str:
        """Retrieval results for ``text`` as a table."""
        hits = self.query(text, k)
        return f"<p>top {k} of the latest bank for {html.escape(text)!r}:</p>" + _html_table(hits)

    def counters_html(self, step: int) -> str:
        """One line of operation counts at ``step``."""
        c = self.counters(step)
        applied = ", ".join(f"{op} {c[op]}" for op in _APPLIED_OPS)
        reasons = ", ".join(
            f"{key.removeprefix('rejected_')} {n}" for key, n in c.items() if key.startswith("rejected_")
        )
        return (
            f"<p><b>step {step}</b> · applied: {html.escape(applied)} · uses {c['uses']}, {c['successes']} successful"
            f" · rejected {c['rejected']}" + (f" ({html.escape(reasons)})" if reasons else "") + "</p>"
        )

    # ---------------------------------------------------------------------------------------------------------
    # Widgets
    # ---------------------------------------------------------------------------------------------------------

    @property
    def widget(self) -> widgets.VBox:
        """The explorer as one widget: header, step slider, counters, and tabs for the four views."""
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.widget._repr_mimebundle_(**kwargs)

    def _build(self) -> widgets.VBox:
        first, last = self.steps
        self.header = widgets.HTML()
        self.reload_button = widgets.Button(description="Reload", tooltip="copy the bank file again")
        self.step_slider = widgets.IntSlider(
            min=first, max=last, value=last, description="step", continuous_update=False
        )
        self.counters_view = widgets.HTML()
        self.table_view = widgets.HTML()
        self.range_slider = widgets.IntRangeSlider(min=first, max=last, description="from, to", continuous_update=False)
        self.changes_view = widgets.HTML()
        self.entry_picker = widgets.Dropdown(description="entry")
        self.provenance_view = widgets.HTML()
        self.query_text = widgets.Text(placeholder="a situation the actor might be in", description="query")
        self.query_k = widgets.BoundedIntText(value=3, min=1, max=50, description="top k")
        self.query_button = widgets.Button(description="Search")
        self.query_view = widgets.HTML()

        self.step_slider.observe(self._on_step, names="value")
        self.range_slider.observe(self._on_range, names="value")
        self.entry_picker.observe(self._on_entry, names="value")
        self.query_button.on_click(self._on_query)
        self.reload_button.on_click(lambda _: self.reload())

        tabs = widgets.Tab(
            children=[
                self.table_view,
                widgets.VBox([self.range_slider, self.changes_view]),
                widgets.VBox([self.entry_picker, self.provenance_view]),
                widgets.VBox([widgets.HBox([self.query_text, self.query_k, self.query_button]), self.query_view]),
            ],
            titles=("Entries", "Changes", "Provenance", "Retrieval"),
        )
        header = widgets.HBox([self.header, self.reload_button])
        box = widgets.VBox([header, self.step_slider, self.counters_view, tabs])
        self._sync_widgets()
        return box

    def _sync_widgets(self) -> None:
        """Point the widgets at the current copy: slider range, entry list, and every view redrawn."""
        first, last = self.steps
        at_end = self.step_slider.value == self.step_slider.max
        self.header.value = (
            f"<b>{html.escape(str(self.path))}</b> · copied {self.taken_at:%H:%M:%S} · steps {first}..{last}"
            f" · {len(self._all_entries)} entries ever written, {int((~self._all_entries['deleted']).sum())} live"
        )
        entries = self._all_entries.sort_values("id", ascending=False)
        self.entry_picker.options = [
            (f"#{r.id} {r.title[:60]}" + (f" (deleted at step {r.deleted_step})" if r.deleted else ""), int(r.id))
            for r in entries.itertuples(index=False)
        ]
        for slider in (self.range_slider, self.step_slider):
            # The log only grows, so the new last step is >= the old minimum and max can move first.
            slider.max = last
            slider.min = first
        if at_end and self.step_slider.value != last:
            self.step_slider.value = last  # the observer redraws the step views
        else:
            self._on_step({"new": self.step_slider.value})

    def _on_step(self, change: dict[str, Any]) -> None:
        step = int(change["new"])
        self.table_view.value = self.table_html(step)
        self.counters_view.value = self.counters_html(step)
        previous = (max(self.step_slider.min, step - 1), step)
        if self.range_slider.value != previous:
            self.range_slider.value = previous  # the observer redraws the changes
        else:
            self._on_range({"new": previous})

    def _on_range(self, change: dict[str, Any]) -> None:
        step_a, step_b = change["new"]
        self.changes_view.value = self.changes_html(int(step_a), int(step_b))

    def _on_entry(self, change: dict[str, Any]) -> None:
        entry_id = change["new"]
        self.provenance_view.value = "" if entry_id is None else self.provenance_html(int(entry_id))

    def _on_query(self, _: widgets.Button) -> None:
        if not self.query_text.value.strip():
            self.query_view.value = "<p>Type a query first.</p>"
            return
        try:
            self.query_view.value = self.query_html(self.query_text.value, self.query_k.value)
        except Exception as error:  # shown in the panel: a button callback's exception would only reach the log
            self.query_view.value = f"<p>query failed: {html.escape(f'{type(error).__name__}: {error}')}</p>"


def _log_row(rows: pd.DataFrame) -> dict[str, Any] | None:
    """The first of some operations-log rows as a dict of the fields provenance shows, or None if there are none."""
    if rows.empty:
        return None
    row = rows.iloc[0]
    return {
        "seq": int(row["seq"]),
        "step": int(row["step"]),
        "op": row["op"],
        "origin": row["origin"],
        "source": row["source"],
        "task": row["task"],
        "raw": row["raw"] if isinstance(row["raw"], str) else None,  # a write with no reply logs NULL, read as NaN
        "batch": int(row["batch"]),
    }


class LiveTrainingPlot:
    """Training curves that redraw while a run is going: one panel per metric, one line per phase.

    Feed it a whole run (:meth:`update` with a :class:`~comprl.runs.Run`, a run folder or a metrics DataFrame) or
    one row at a time from the training loop (:meth:`callback`). Redraws are rate-limited to one per
    ``min_interval_s`` seconds; :meth:`draw` redraws now (call it once after the loop so the last rows show).
    The figure is rendered to PNG inside an ``ipywidgets.Image``, so it updates in place in JupyterLab and also
    works with no frontend at all.
    """

    def __init__(
        self,
        metrics: Sequence[str] = DEFAULT_METRICS,
        min_interval_s: float = 5.0,
        ncols: int = 3,
        dpi: int = 90,
    ) -> None:
        metrics = tuple(metrics)
        if not metrics or not all(isinstance(m, str) and m for m in metrics):
            raise ValueError(f"metrics must be a non-empty sequence of metric names, got {metrics!r}")
        if min_interval_s < 0:
            raise ValueError(f"min_interval_s must be >= 0, got {min_interval_s}")
        if ncols < 1:
            raise ValueError(f"ncols must be >= 1, got {ncols}")
        self.metrics = metrics
        self.min_interval_s = min_interval_s
        self.ncols = ncols
        self.dpi = dpi
        self.frame = pd.DataFrame(columns=["step", "phase"])
        self.figure: Any = None
        self.status = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.widget = widgets.VBox([self.status, self.image])
        self._drawn_at = float("-inf")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.widget._repr_mimebundle_(**kwargs)

    def update(self, run_or_df: Run | str | Path | pd.DataFrame) -> None:
        """Replace the data by a run's metrics (or a DataFrame with ``step`` and ``phase``) and redraw if due."""
        if isinstance(run_or_df, pd.DataFrame):
            frame = run_or_df.copy()
        else:
            frame = (run_or_df if isinstance(run_or_df, Run) else Run(Path(run_or_df))).metrics()
        missing = [c for c in ("step", "phase") if c not in frame.columns]
        if missing:
            raise ValueError(f"metrics frame lacks the columns {missing}")
        self.frame = frame.reset_index(drop=True)
        self._maybe_draw()

    def callback(self, step: int, metrics: dict[str, Any], phase: str = "train") -> None:
        """Append one row (``step``, ``phase`` and the metrics) and redraw if due; pass it to the training loop."""
        row = pd.DataFrame([{"step": int(step), "phase": phase, **metrics}])
        self.frame = row if self.frame.empty else pd.concat([self.frame, row], ignore_index=True)
        self._maybe_draw()

    def _maybe_draw(self) -> None:
        if time.monotonic() - self._drawn_at >= self.min_interval_s:
            self.draw()

    def draw(self) -> None:
        """Redraw the figure from the current rows now and show it."""
        from matplotlib.figure import Figure

        nrows = -(-len(self.metrics) // self.ncols)
        ncols = min(self.ncols, len(self.metrics))
        figure = Figure(figsize=(3.6 * ncols, 2.6 * nrows), layout="constrained")
        colors = {phase: f"C{i}" for i, phase in enumerate(sorted(self.frame["phase"].astype(str).unique()))}
        for index, metric in enumerate(self.metrics):
            self._plot(figure.add_subplot(nrows, ncols, index + 1), metric, colors)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=self.dpi)
        self.figure = figure
        self.image.value = buffer.getvalue()
        self._drawn_at = time.monotonic()
        self.status.value = self._status()

    def _plot(self, ax: Any, metric: str, colors: dict[str, str]) -> None:
        """One panel: ``metric`` against step, one line per phase (same colour per phase in every panel)."""
        from matplotlib.ticker import MaxNLocator

        ax.set_title(metric.replace("_", " "), fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if metric in self.frame.columns:
            for phase, rows in self.frame.groupby(self.frame["phase"].astype(str), sort=True):
                values = pd.to_numeric(rows[metric], errors="coerce")
                keep = values.notna()
                if keep.any():
                    steps = rows["step"][keep]
                    ax.plot(steps, values[keep], marker="o", markersize=3, label=phase, color=colors[phase])
        if ax.has_data():
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes, color="gray")

    def _status(self) -> str:
        """The newest training row's values (or the newest row's, before any training row)."""
        if self.frame.empty:
            return "<p>no metrics yet</p>"
        train = self.frame[self.frame["phase"] == "train"]
        last = (train if len(train) else self.frame).iloc[-1]
        shown = [
            f"{m} {_cell(pd.to_numeric(last[m], errors='coerce'))}"
            for m in self.metrics
            if m in self.frame.columns and pd.notna(last[m])
        ]
        where = f"step {int(last['step'])} ({last['phase']})"
        return f"<p>{html.escape(' · '.join([where, *shown]))}</p>"
