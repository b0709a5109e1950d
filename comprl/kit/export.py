"""A run as a self-describing bundle: ``comprl export RUN DIR``, and reading one back.

A bundle is a folder anyone can read without comprl (Parquet, JSON, safetensors) and comprl can open as a run:

``actor_adapters.safetensors``  the trained actor's LoRA adapters, copied from the run (LoRA runs only)
``bank_entries.parquet``        the experience bank's ``entries`` table, embeddings included (runs with a bank)
``bank_operations.parquet``     its append-only ``operations`` log
``bank_meta.parquet``           its ``meta`` rows (embedder, dimension, schema version)
``metrics.parquet``             the run's metric rows (``run.duckdb``'s ``metrics`` table), when it has them
``config.json``                 the run's config
``machines.jsonl``              where the run's calls computed (:data:`comprl.runs.MACHINES`), when recorded
``versions.json``               the versions of Python and the packages that wrote the run's numbers
``README.md``                   a model card in the Hugging Face layout (front matter, results, usage, citation)
``bundle.json``                 the manifest: format, version, and every other file with its size and sha256

:func:`open_bundle` rebuilds the run folder (``config.json``, adapters, ``bank.duckdb``, ``run.duckdb``) from a
bundle after checking that it holds exactly the regular files its manifest lists, each of its hash, and reads its
tables by column name, their columns and types checked (:func:`check_table`), so that whatever reads a run
(``comprl eval``, :func:`comprl.loop.trained_actor`, :class:`comprl.kit.widgets.BankExplorer`) reads a bundle the
same way; :func:`opened` does it in a temporary folder. A compacted run folder (:mod:`comprl.kit.compact`) holds
its rows in the same Parquet files, without a manifest, and is read back by the same functions. Nothing here
touches the network: uploading is the one ``hf upload`` command the card names.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

import pandas as pd

import comprl
from comprl import duckdb_files
from comprl.checkpoint import ACTOR_ADAPTERS
from comprl.config import ExperimentConfig
from comprl.experience.bank import Embedder, ExperienceBank
from comprl.experience.bank.store import check_bank_file, parquet_columns
from comprl.runs import BANK_FILES, BANK_TABLES, MACHINES, METRIC_KEYS, METRIC_TYPES, METRICS_FILE, Run

MANIFEST = "bundle.json"
FORMAT = "comprl run bundle"
FORMAT_VERSION = 1
"""Layout of the bundle this code writes and reads (the files of the module docstring); stored in the manifest."""

RUN_FILES = ("config.json", ACTOR_ADAPTERS, MACHINES, METRICS_FILE, *BANK_FILES.values())
"""The files of a run folder a bundle holds alike; read from a run folder, each must be its own (no link)."""

VERSIONS = "versions.json"
PACKAGES = ("torch", "transformers", "peft", "duckdb", "comprl")
"""Packages whose versions a bundle records (with Python's)."""

HUB_IDS = {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct", "gemma3-270m": "google/gemma-3-270m"}
"""The Hugging Face id of each built-in model (the card's ``base_model``); ``tiny-random`` has none."""

PAPER = "https://arxiv.org/abs/2603.17621"


class BundleError(ValueError):
    """A folder that is not a readable bundle: no manifest, another format or version, or a file whose size or
    hash differs from the manifest's."""


def is_bundle(path: str | Path) -> bool:
    """Whether ``path`` is a bundle folder (it holds a manifest)."""
    return (Path(path) / MANIFEST).is_file()


def export_run(run_dir: str | Path, out_dir: str | Path) -> Path:
    """Write the bundle of the run folder ``run_dir`` into ``out_dir`` (created; an existing bundle there is
    replaced, any other non-empty folder refused) and return ``out_dir``. A run file that is a link is refused
    (:class:`BundleError`): the bundle holds the run's own files."""
    run, out = Run(Path(run_dir)), Path(out_dir)
    if not (run.path / "config.json").is_file():
        raise FileNotFoundError(f"{run.path} is not a run folder: it has no config.json")
    _refuse_odd_files(run.path, [*RUN_FILES, run.db_path.name, run.bank_path.name])
    if out.exists() and any(out.iterdir()) and not is_bundle(out):
        raise FileExistsError(f"{out} is not empty and holds no bundle; accepted: a new, empty or bundle folder")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    _copy_run_files(run.path, out)
    if run.bank_path.is_file():
        bank_to_parquet(run.bank_path, out)
    else:  # a compacted run's bank is in the bundle's files already
        for file in run.bank_files:
            if file.is_file():
                shutil.copyfile(file, out / file.name)
    metrics_to_parquet(run, out / METRICS_FILE)
    metrics = run.metrics()
    (out / VERSIONS).write_text(json.dumps(package_versions(), indent=2) + "\n")
    card = model_card(run.config(), metrics, run.path.name, sorted(p.name for p in out.iterdir()))
    (out / "README.md").write_text(card)
    files = {p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)} for p in sorted(out.iterdir())}
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "run": run.path.name, "files": files}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def metrics_to_parquet(run: Run, target: Path) -> bool:
    """Write the run's metric rows to the Parquet file ``target``, ordered by step and phase, with ``run.duckdb``'s
    column types (a compacted run's file is copied); False, writing nothing, when the run has no rows."""
    if not run.db_path.is_file():
        if run.metrics_file.is_file():
            shutil.copyfile(run.metrics_file, target)
        return run.metrics_file.is_file()
    with duckdb_files.connect() as con:
        con.execute(f"ATTACH {sql_path(run.db_path)} AS run (READ_ONLY)")
        if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'run' AND table_name = "
                           "'metrics'").fetchone()[0]:
            return False
        con.execute(f"COPY (FROM run.metrics ORDER BY step, phase) TO {sql_path(target)} (FORMAT parquet)")
    return True


def bank_to_parquet(bank_file: Path, out: Path) -> None:
    """The bank's tables as Parquet files in the folder ``out`` (``bank_<table>.parquet``), read from a private
    copy (the run's file is never opened for writing)."""
    with tempfile.TemporaryDirectory(prefix="comprl-export-") as folder:
        copy = Path(folder) / bank_file.name
        shutil.copyfile(bank_file, copy)
        if bank_file.with_name(bank_file.name + ".wal").exists():  # commits not yet checkpointed
            shutil.copyfile(bank_file.with_name(bank_file.name + ".wal"), copy.with_name(copy.name + ".wal"))
        with duckdb_files.connect(str(copy)) as con:
            check_bank_file(con, con.execute("SELECT current_database()").fetchone()[0], bank_file)
            order = {"entries": "id", "operations": "seq", "meta": "key"}
            for table in BANK_TABLES:
                target = sql_path(out / BANK_FILES[table])
                con.execute(f"COPY (FROM {table} ORDER BY {order[table]}) TO {target} (FORMAT parquet)")


def package_versions() -> dict[str, str | None]:
    """Python's version and each of :data:`PACKAGES`' (None when not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = comprl.__version__ if name == "comprl" else None
    return found


def model_card(config: ExperimentConfig, metrics: pd.DataFrame, name: str, files: list[str]) -> str:
    """The bundle's README.md: YAML front matter for the Hugging Face Hub, then what the run is, how it was
    trained, its held-out results, how to use it and what to cite."""
    tasks = list(config.mixture().batch)
    base = HUB_IDS.get(config.model, config.model if "/" in config.model else None)
    front = ["---", "library_name: comprl", "license: apache-2.0"]
    if base is not None:
        front.append(f"base_model: {base}")
    front += ["tags:", *(f"- {tag}" for tag in ["reinforcement-learning", "complementary-rl", config.method, *tasks])]
    front.append("---")
    adapters = ACTOR_ADAPTERS in files
    has_bank = "bank_entries.parquet" in files
    trained = [
        ("method", config.method), ("tasks", ", ".join(tasks)), ("actor model", config.model),
        ("steps", config.steps), ("task instances per step", config.batch_instances),
        ("rollouts per instance", config.group_size), ("turns per episode", config.max_turns),
        ("actor learning rate", config.actor.learning_rate), ("LoRA rank", config.actor.lora_rank or "full"),
        ("sampling temperature", config.rollout.temperature),
        ("constrained choice", config.rollout.constrained_actions), ("seed", config.seed),
    ]
    if config.uses_experience:
        trained += [("extractor model", config.extractor.model), ("bank embedder", config.bank.embedder)]
    lines = [
        *front, "", f"# {name}: a Complementary RL run made with comprl", "",
        f"A run of comprl, the reproduction kit of Complementary RL ([arXiv 2603.17621]({PAPER})), in which "
        "an LLM actor trained with GRPO learns alongside an experience extractor that writes lessons into a bank "
        "the actor reads. This bundle holds "
        + ", ".join(
            part for part, present in [
                ("the actor's LoRA adapters (`actor_adapters.safetensors`, float16)", adapters),
                ("the final experience bank as Parquet (`bank_entries.parquet` with the embeddings, "
                 "`bank_operations.parquet`, the log of every change)", has_bank),
                ("the metric rows (`metrics.parquet`)", METRICS_FILE in files),
            ] if present
        )
        + " and the run's `config.json`; `versions.json` names the packages that produced it and `bundle.json` "
        "lists every file with its sha256.",
        "", "## Training", "", "| setting | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in trained),
        "", "The full configuration is `config.json` (`comprl.config.ExperimentConfig.from_dict` reads it).",
        "", "## Held-out results", "", *_results(metrics, config),
        "", "## Use", "", "```bash", "pip install comprl",
        "comprl eval ./BUNDLE --episodes 32                     # success with 95% Wilson intervals, per task",
        "comprl eval ./BUNDLE --without-experience --csv eval.csv",
        "```", "", "```python",
        "from comprl.kit.export import opened", "from comprl.kit.widgets import BankExplorer",
        "from comprl.loop import trained_actor", "",
        "explorer = BankExplorer(\"./BUNDLE\")           # the bank, step by step" if has_bank else "",
        "with opened(\"./BUNDLE\") as run:               # the bundle as a run folder",
        "    engine, config = trained_actor(run)       # base model + adapters, ready to generate" if adapters
        else "    config = run.config()",
        "```", "",
        "Upload (needs `pip install huggingface_hub` and a token; comprl never uploads on its own):", "",
        "```bash", f"hf upload YOUR_NAME/{name} ./BUNDLE .   # or: huggingface-cli upload YOUR_NAME/{name} ./BUNDLE .",
        "```", "",
        "## Citation", "",
        f"The method is the one of the Complementary RL paper, arXiv 2603.17621 ({PAPER}); cite it for the method, "
        "and the base model's own card for the weights.", "",
        "```bibtex", "@misc{complementary_rl_2603_17621,", "  eprint = {2603.17621},", "  archivePrefix = {arXiv},",
        f"  url = {{{PAPER}}},", "}", "```", "",
    ]
    return "\n".join(line for line in lines if line is not None)


def _results(metrics: pd.DataFrame, config: ExperimentConfig) -> list[str]:
    """The evaluation rows of the metrics as a table (step, success without and with experience)."""
    if metrics.empty or "phase" not in metrics or not (metrics["phase"] == "eval").any():
        return ["The run folder held no evaluation rows; `comprl eval` measures them."]
    rows = metrics[metrics["phase"] == "eval"]
    guided = "guided_success_rate" in rows
    out = [
        f"Success rate on {config.eval_episodes} held-out episodes per task (seeds from "
        f"`comprl.envs.base.EVAL_SEED_OFFSET`), sampled at temperature {config.eval_temperature}:", "",
        "| after step | without experience |" + (" with experience |" if guided else ""),
        "|---|---|" + ("---|" if guided else ""),
    ]
    for row in rows.itertuples(index=False):
        cells = [f"{row.success_rate:.3f}"]
        if guided:
            cells.append("" if _missing(row.guided_success_rate) else f"{row.guided_success_rate:.3f}")
        out.append(f"| {row.step} | " + " | ".join(cells) + " |")
    return out


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def read_manifest(bundle: str | Path) -> dict:
    """The bundle's manifest, after checking its format, that it lists exactly the regular files beside it (none
    missing, none more, no link, folder or special file; each a plain name) and every file's size and sha256
    (:class:`BundleError` naming the first file that differs)."""
    bundle = Path(bundle)
    if not is_bundle(bundle):
        raise BundleError(f"{bundle} is not a bundle: it has no {MANIFEST} (comprl export RUN DIR writes one)")
    _refuse_odd_files(bundle, [entry.name for entry in bundle.iterdir()])
    try:
        manifest = json.loads((bundle / MANIFEST).read_text())
        files = manifest["files"]
        expected = {str(name): (int(entry["bytes"]), str(entry["sha256"])) for name, entry in files.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BundleError(f"{bundle}: {MANIFEST} is unreadable ({error!r}); comprl export RUN DIR writes one") from None
    if (manifest.get("format"), manifest.get("format_version")) != (FORMAT, FORMAT_VERSION):
        raise BundleError(
            f"{bundle}: format {manifest.get('format')!r} version {manifest.get('format_version')!r}; this comprl "
            f"reads {FORMAT!r} version {FORMAT_VERSION}"
        )
    for name in expected:
        if name in (MANIFEST, "", ".", "..") or Path(name).name != name or "\\" in name:
            raise BundleError(f"{bundle}: {MANIFEST} lists {name!r}; accepted: the plain names of the bundle's files")
    present = {entry.name for entry in bundle.iterdir()} - {MANIFEST}
    if extra := sorted(present - set(expected)):
        raise BundleError(f"{bundle}: {extra[0]} is not listed in {MANIFEST} (a bundle holds its listed files only)")
    if missing := sorted(set(expected) - present):
        raise BundleError(f"{bundle}: {missing[0]} is listed in {MANIFEST} but missing")
    if "config.json" not in expected:
        raise BundleError(f"{bundle}: {MANIFEST} lists no config.json (every bundle holds the run's config)")
    for name, (size, digest) in expected.items():
        path = bundle / name
        if path.stat().st_size != size or _sha256(path) != digest:
            raise BundleError(f"{bundle}: {name} differs from the sha256 in {MANIFEST} (changed or damaged)")
    return manifest


def _refuse_odd_files(folder: Path, names: list[str]) -> None:
    """Raise :class:`BundleError` naming the first of ``names`` in ``folder`` that is there but not a regular file
    of its own (a link, a folder, a FIFO...): what is read must not lead out of the folder, nor block."""
    for name in sorted(names):
        path = folder / name
        if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            kind = f"a link to {path.resolve()}" if path.is_symlink() else "not a regular file"
            raise BundleError(f"{folder}: {name} is {kind}; accepted: the run's files themselves, no links")


def check_table(file: Path, expected: dict[str, str]) -> None:
    """Raise :class:`BundleError` unless the Parquet file ``file`` has exactly the columns ``expected`` (name: DuckDB
    type), in any order: its readers select them by name, so a permuted file reads right, a renamed or retyped one
    is refused."""
    found = _columns(file)
    for column, kind in expected.items():
        if column not in found:
            raise BundleError(f"{file}: the table has no column {column} ({kind}); it has {', '.join(found)}")
        if found[column] != kind:
            raise BundleError(f"{file}: the table's column {column} is {found[column]}, expected {kind}")
    if extra := [column for column in found if column not in expected]:
        raise BundleError(
            f"{file}: the table has a column {extra[0]} ({found[extra[0]]}), not one of {', '.join(expected)}"
        )


def check_metrics_table(file: Path) -> None:
    """:func:`check_table` for ``metrics.parquet``: the key columns of :data:`comprl.runs.METRIC_KEYS`, and every
    other column one metric of a type of :data:`comprl.runs.METRIC_TYPES`."""
    metrics = {column: kind if kind in METRIC_TYPES else METRIC_TYPES[0] for column, kind in _columns(file).items()}
    check_table(file, {**metrics, **METRIC_KEYS})


def _columns(file: Path) -> dict[str, str]:
    """The Parquet file's columns with their DuckDB types, in order."""
    with duckdb_files.connect() as con:
        query = f"SELECT column_name, column_type FROM (DESCRIBE FROM read_parquet({sql_path(file)}))"
        return dict(con.execute(query).fetchall())


def check_parquet_run(folder: str | Path) -> None:
    """Check that ``folder`` holds a run as Parquet files: a bundle (:func:`read_manifest` checks its files and
    every hash) or a compacted run folder (``metrics.parquet`` in place of ``run.duckdb``) whose files read are
    its own, not links, and that its metric rows have the columns of metric rows (:func:`check_metrics_table`);
    :class:`BundleError` otherwise. The bank's tables are checked as they are read (:func:`bank_from_parquet`)."""
    folder = Path(folder)
    if is_bundle(folder):  # first: a bundle holds metrics.parquet and no run.duckdb, as a compacted run does
        read_manifest(folder)
    elif Run(folder).compacted:
        _refuse_odd_files(folder, RUN_FILES)
    else:
        raise BundleError(
            f"{folder} is neither a bundle (it has no {MANIFEST}; comprl export RUN DIR writes one) nor a compacted "
            f"run folder (it has no {METRICS_FILE} in place of run.duckdb; comprl compact RUN writes one)"
        )
    if (folder / METRICS_FILE).is_file():
        check_metrics_table(folder / METRICS_FILE)


def bank_from_bundle(bundle: str | Path, bank_file: str | Path) -> Path:
    """Rebuild the bank of a bundle or of a compacted run folder (:func:`check_parquet_run`) as the DuckDB bank
    ``bank_file`` (a new file), with :func:`bank_from_parquet`."""
    check_parquet_run(bundle)
    return bank_from_parquet(bundle, bank_file)


def bank_from_parquet(folder: str | Path, bank_file: str | Path) -> Path:
    """Rebuild the bank whose tables are the ``bank_<table>.parquet`` files in ``folder`` as the DuckDB bank
    ``bank_file`` (a new file): each Parquet file's columns are checked against the store's tables
    (:func:`check_table`), the store makes the empty bank, its tables are filled from the Parquet files by column
    name, and it is opened once more to check it. :func:`bank_from_bundle` checks the folder first."""
    folder, bank_file = Path(folder), Path(bank_file)
    if not (folder / BANK_FILES["entries"]).is_file():
        raise FileNotFoundError(f"{folder} holds no experience bank (runs of method 'baseline' have none)")
    if bank_file.exists():
        raise FileExistsError(f"{bank_file} exists; bank_from_parquet writes a new file")
    check_table(folder / BANK_FILES["meta"], parquet_columns(1)["meta"])
    with duckdb_files.connect() as con:
        meta = dict(con.execute(f"SELECT key, value FROM read_parquet({sql_path(folder / BANK_FILES['meta'])})")
                    .fetchall())
    if not str(meta.get("dim")).isdigit() or "embedder" not in meta:
        raise BundleError(f"{folder / BANK_FILES['meta']}: no embedder and dim rows (found {sorted(meta)})")
    embedder = RecordedEmbedder(meta["embedder"], int(meta["dim"]))
    for table in ("entries", "operations"):
        check_table(folder / BANK_FILES[table], parquet_columns(embedder.dim)[table])
    ExperienceBank(bank_file, embedder, use_vss=False, index="exact").close()  # the store's own empty bank
    with duckdb_files.connect(str(bank_file)) as con:
        for table in ("entries", "operations"):  # by column name: a file's column order does not matter
            con.execute(f"INSERT INTO {table} BY NAME FROM read_parquet({sql_path(folder / BANK_FILES[table])})")
    ExperienceBank(bank_file, embedder, use_vss=False, index="exact").close()  # checks the file it made
    return bank_file


class RecordedEmbedder(Embedder):
    """The embedder named in a bank, with the vector size the bank records.

    Knowing the size lets :class:`ExperienceBank` open the bank without loading the model; the model loads on the
    first :meth:`encode`, i.e. the first retrieval query.
    """

    def __init__(self, model: str, dim: int) -> None:
        super().__init__(model)
        self._dim = dim

    @property
    def dim(self) -> int:
        """Embedding size as recorded in the bank."""
        return self._dim


def _copy_run_files(source: Path, target: Path) -> None:
    """The files a run folder and a bundle hold alike: ``config.json``, and the adapters and machine record where
    there are."""
    shutil.copyfile(source / "config.json", target / "config.json")
    for name in (ACTOR_ADAPTERS, MACHINES):
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)


def open_bundle(bundle: str | Path, into: str | Path) -> Run:
    """The run folder a bundle was made from, or a compacted run folder, rebuilt with DuckDB files in ``into`` (a
    new or empty folder): ``config.json``, the adapters, ``bank.duckdb`` and ``run.duckdb``, after
    :func:`check_parquet_run` checked the source."""
    bundle, run = Path(bundle), Run(Path(into))
    check_parquet_run(bundle)
    if run.path.exists() and any(run.path.iterdir()):
        raise FileExistsError(f"{run.path} is not empty; open_bundle writes a run folder into a new or empty one")
    run.path.mkdir(parents=True, exist_ok=True)
    _copy_run_files(bundle, run.path)
    if (bundle / BANK_FILES["entries"]).is_file():
        bank_from_parquet(bundle, run.bank_path)
    if (bundle / METRICS_FILE).is_file():
        with duckdb_files.connect(str(run.db_path)) as con:
            con.execute(f"CREATE TABLE metrics AS FROM read_parquet({sql_path(bundle / METRICS_FILE)})")
    return run


@contextlib.contextmanager
def opened(run_or_bundle: str | Path | Run) -> Iterator[Run]:
    """A run folder as it is, or a bundle or compacted run rebuilt as one with DuckDB files (:func:`open_bundle`)
    in a temporary folder deleted on exit."""
    path = run_or_bundle.path if isinstance(run_or_bundle, Run) else Path(run_or_bundle)
    if not (is_bundle(path) or Run(path).compacted):
        yield Run(path)
        return
    with tempfile.TemporaryDirectory(prefix="comprl-bundle-") as folder:
        yield open_bundle(path, Path(folder) / path.name)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sql_path(path: Path) -> str:
    """A path as a DuckDB string literal."""
    return "'" + str(path).replace("'", "''") + "'"
