"""Running the paper's notebooks through papermill: where they are, their declared parameters and the checks a
``-p`` value passes before any kernel starts, and the execution itself (`run_notebook`). The ``comprl`` command
(:mod:`comprl.kit.cli`) and the reproduction (:mod:`comprl.kit.reproduce`) both call it."""

from __future__ import annotations

import ast
import atexit
import dataclasses
import functools
import json
import logging
import math
import os
import reprlib
import shutil
import sys
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

from comprl import console
from comprl.config import PROFILES, ExperimentConfig, make_config
from comprl.tracking import TRACKERS

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"


def notebook_path(name: str) -> Path:
    """A notebook by name (``01_single_task``), file name, or path: an ``.ipynb`` file (``../README.md`` is not
    one, though it is a file from ``notebooks/``)."""
    candidates = [Path(name), NOTEBOOKS / name, NOTEBOOKS / f"{name}.ipynb"]
    for path in candidates:
        if path.is_file() and path.suffix == ".ipynb":
            return path.resolve()
    available = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    raise SystemExit(f"comprl: unknown notebook {name!r}; available: {', '.join(available) or '(none found)'}")


def parse_value(text: str) -> object:
    """A ``-p`` value as written: JSON (``4``, ``1e-5``, ``[0, 1]``, ``{"a": true}``, ``null``), else a Python
    literal (``None``, ``True``, ``'a'``), else the text itself as a string (``comprl/MazeWalk-9x9-v0``). What
    comes out is checked against the notebook by :func:`check_parameters` before any kernel starts."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        raise SystemExit(f"comprl: a -p value nests deeper than Python reads; accepted: at most {MAX_DEPTH} levels")
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


JSON_LIKE = "None, True/False, an int, a finite float, a str, and lists and dicts (with str keys) of them"
"""The values a notebook parameter accepts: plain data that papermill writes into the notebook as a literal."""

CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(ExperimentConfig))
"""Names of :class:`~comprl.config.ExperimentConfig` fields: a notebook parameter of that name with a None default
is the field's value (None: the profile's), checked by making a config (:func:`check_parameters`)."""

SET_BY_COMMAND = {"profile": "--profile", "output_dir": "--output-dir"}
"""Notebook parameters that :func:`run_notebook` sets itself, and the option that gives each."""


def declared_parameters(notebook: Path) -> dict[str, object]:
    """The parameters of a notebook's ``parameters`` cell (papermill reads it) and their default values, Python
    literals, whose types are the parameters' (:func:`check_parameters`)."""
    import papermill

    found = papermill.inspect_notebook(str(notebook))
    return {name: ast.literal_eval(parameter["default"]) for name, parameter in found.items()}


def parameters_help() -> str:
    """Every paper notebook and its parameters (type, default, the comment beside it), for ``comprl run --help``."""
    import papermill

    lines = ["notebooks and their parameters (-p NAME VALUE; type = default  meaning):"]
    for notebook in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        lines.append(f"\n  {notebook.stem}")
        for name, parameter in papermill.inspect_notebook(str(notebook)).items():
            default = ast.literal_eval(parameter["default"])
            kind = "any" if default is None else _kind(default)
            comment = f"  {parameter['help']}" if parameter["help"] else ""
            lines.append(f"    {name}: {kind} = {parameter['default']}{comment}")
    return "\n".join(lines) + "\n"


def check_parameters(notebook: Path, params: dict[str, object], profile: str = "smoke") -> None:
    """Refuse, before a kernel starts, a parameter the notebook does not declare, a value that is not
    :data:`JSON_LIKE` data, and one of another type than the parameter's default.

    Papermill writes any other object (a tuple, set, bytes, complex number) into the notebook's code as its
    ``str`` between double quotes, unescaped: a quote inside ends the string and the rest runs as code. The
    default's type is the parameter's: a bool, int or str default takes that type only (an int no bool), a float
    default an int or float, a list default a list whose items are of its items' types (any, if it is empty), a
    dict default a dict, and a None default any value, except where the parameter is named after a config field
    (``steps``, ``env_id``: the notebooks hand it to :func:`comprl.config.make_config`), whose value must make a
    config of ``profile``: ``-p steps thirty`` is refused here, not in the kernel after its start-up."""
    defaults = declared_parameters(notebook)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise SystemExit(f"comprl: unknown parameter(s) {unknown} for {notebook.stem}; accepted: {', '.join(defaults)}")
    for name, value in params.items():
        if why := _not_json_like(value):
            raise SystemExit(
                f"comprl: parameter {name}={reprlib.repr(value)}: {why}; accepted: {JSON_LIKE} (as JSON or a Python "
                "literal)"
            )
        if not _fits(value, defaults[name]):
            raise SystemExit(
                f"comprl: parameter {name}={value!r} is of type {type(value).__name__}; {notebook.stem} declares "
                f"{name} = {defaults[name]!r}: accepted: {_kind(defaults[name])}"
            )
        if defaults[name] is None and name in CONFIG_FIELDS:
            try:
                make_config(profile, **{name: value})
            except ValueError as err:
                raise SystemExit(f"comprl: -p {name}: {err}")


def check_tracker(tracker: str | None) -> None:
    """Refuse a ``--tracker`` that is not one of :data:`comprl.tracking.TRACKERS` (None: the config's own)."""
    if tracker is not None and tracker not in TRACKERS:
        raise SystemExit(f"comprl: --tracker {tracker!r} is unknown; accepted: {', '.join(TRACKERS)}")


def with_tracker(params: dict[str, object], tracker: str | None) -> dict[str, object]:
    """``params`` whose ``overrides`` (every paper notebook's config overrides) also set ``tracker``: where every
    run of the notebook streams its rows (:mod:`comprl.tracking`). None leaves ``params`` as they are; a tracker the
    ``overrides`` already name otherwise is refused."""
    check_tracker(tracker)
    if tracker is None:
        return params
    overrides = params.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise SystemExit(f"comprl: --tracker needs overrides to be a dict; given {overrides!r}")
    if overrides.get("tracker", tracker) != tracker:
        raise SystemExit(
            f"comprl: --tracker {tracker!r} and overrides' tracker {overrides['tracker']!r} differ; give one of them"
        )
    return {**params, "overrides": {**overrides, "tracker": tracker}}


MAX_DEPTH = 32
"""The deepest nesting of lists and dicts a parameter value may have: papermill writes a value into the notebook
recursively, and a few hundred levels exhaust Python's recursion limit after the results folder is made (the
configs nest four levels at most)."""


def _not_json_like(value: object, depth: int = 0) -> str | None:
    """What in ``value`` (itself, an item, a key) is not :data:`JSON_LIKE` data, or nests deeper than
    :data:`MAX_DEPTH`; None if nothing is."""
    if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
        return None
    if depth == MAX_DEPTH:
        return f"lists and dicts nest deeper than {MAX_DEPTH} levels"
    if type(value) is list:
        parts = value
    elif type(value) is dict:
        if keys := [key for key in value if type(key) is not str]:
            return f"the dict key {keys[0]!r} is not a str"
        parts = list(value.values())
    else:
        return f"{value!r} is of type {type(value).__name__}"
    return next((why for part in parts if (why := _not_json_like(part, depth + 1))), None)


def _fits(value: object, default: object) -> bool:
    """Whether a JSON-like ``value`` is of the type that ``default`` declares (see :func:`check_parameters`)."""
    if default is None:
        return True
    if type(default) is float:
        return type(value) in (int, float)
    if type(default) is list and default:
        return type(value) is list and all(any(_fits(item, like) for like in default) for item in value)
    return type(value) is type(default)


def _kind(default: object) -> str:
    """The accepted type that ``default`` declares, in words."""
    if type(default) is float:
        return "float or int"
    if type(default) is list and default:
        return f"list of {' or '.join(sorted({_kind(like) for like in default}))}"
    return type(default).__name__


RESULTS_LAYOUT = "results/<set>/<notebook>/<run>/"
"""Where every command writes: ``<set>`` is the profile for ``comprl reproduce``, ``<profile>-<UTC time>`` for a
``comprl run`` without ``--output-dir``, ``demo`` (``demo-smoke``) for ``make demo`` (``make smoke``) and ``lab`` for
a notebook run by hand in JupyterLab (its ``output_dir`` default); ``<run>`` is ``<method>_seed<n>`` and the like."""


def new_output(notebook: Path, profile: str) -> Path:
    """A new ``results/<profile>-<UTC time>/<notebook>`` folder name for ``comprl run`` (:data:`RESULTS_LAYOUT`)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return REPO_ROOT / "results" / f"{profile}-{stamp}" / notebook.stem


CHECKPOINT_FOLDERS = ("checkpoint", "checkpoint.old")
"""A run folder's checkpoint (:mod:`comprl.checkpoint`, named here so that the command loads no torch): the folder,
or its previous copy where a kill came between the renames; each is complete once its ``manifest.json`` is there."""


def checkpointed_runs(output_dir: Path) -> list[Path]:
    """The run folders at any depth under a notebook's ``output_dir`` that hold a complete checkpoint: what
    ``--resume`` continues from (finished runs keep theirs, so they count as well)."""
    found = {
        manifest.parent.parent
        for folder in CHECKPOINT_FOLDERS
        for manifest in output_dir.glob(f"**/{folder}/manifest.json")
    }
    return sorted(found)


def latest_output(notebook: Path, profile: str) -> Path:
    """The newest ``results/<profile>-<time>/<notebook>`` folder holding a run with a checkpoint (what ``--resume``
    continues, named on stderr): a newer folder without one (a run stopped before its first checkpoint, or a
    command refused before training) has nothing to continue from."""
    pattern = f"{profile}-[0-9]*/{notebook.stem}"
    found = sorted((REPO_ROOT / "results").glob(pattern))
    for folder in reversed(found):
        if runs := checkpointed_runs(folder):
            names = ", ".join(str(run.relative_to(folder)) for run in runs)
            skipped = f"; newer without a checkpoint: {found[-1].parent.name}" if folder != found[-1] else ""
            print(f"comprl: --resume continues {folder} (runs with a checkpoint: {names}){skipped}", file=sys.stderr)
            return folder
    raise SystemExit(
        f"comprl: --resume: no run of {notebook.stem} with profile {profile} under {REPO_ROOT / 'results'}/{pattern} "
        f"has a checkpoint to continue from ({len(found)} such folder(s) looked at); start it afresh without --resume"
    )


@functools.cache
def kernel_manager_class() -> type:
    """The kernel manager papermill starts each notebook's kernel with. On POSIX the kernel listens on Unix sockets
    in a private folder of this process (removed at exit) instead of TCP ports: jupyter_client finds free ports,
    lets go of them, and the kernel binds them a moment later, so on a busy machine another process can take one in
    between (seen in CI: the kernel's heartbeat thread died with 'Address already in use' and its traceback landed
    in the run's output)."""
    from jupyter_client.manager import AsyncKernelManager  # nbclient's default

    if os.name != "posix":
        return AsyncKernelManager
    folder = tempfile.mkdtemp(prefix="comprl-kernels-")
    atexit.register(shutil.rmtree, folder, True)

    class UnixSocketKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: object) -> None:
            # each kernel's sockets are <folder>/<name>-1 ... -5: a short path (Unix socket paths stop near 104 bytes)
            super().__init__(transport="ipc", ip=os.path.join(folder, uuid.uuid4().hex[:12]), **kwargs)

    return UnixSocketKernelManager


def executed_profile(executed: Path) -> str | None:
    """The profile an executed copy of a notebook ran with, from the parameters papermill records in it; None where
    there is no copy or it records none."""
    try:
        return json.loads(executed.read_text())["metadata"]["papermill"]["parameters"]["profile"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while :func:`run_notebook` executed a notebook into ``output_dir``, the folder to resume."""

    def __init__(self, output_dir: Path) -> None:
        super().__init__(str(output_dir))
        self.output_dir = output_dir


def run_notebook(
    name: str, profile: str, params: dict[str, object], output_dir: Path | None, resume: bool = False
) -> Path:
    """Execute a notebook with papermill; return the folder holding the executed copy and the results.

    Notebooks skip the finished runs they find in their output folder and continue killed ones, so running one
    again on the same ``output_dir`` resumes it; ``resume`` without ``output_dir`` picks the newest one with a
    checkpoint (:func:`latest_output`). Every check of the call comes before the output folder is made; Ctrl-C
    during the execution raises :class:`Interrupted`, naming the folder to resume.
    """
    import papermill

    if profile not in PROFILES:
        raise SystemExit(f"comprl: unknown profile {profile!r}; accepted: {', '.join(PROFILES)}")
    if fixed := sorted(set(params) & set(SET_BY_COMMAND)):
        option = SET_BY_COMMAND[fixed[0]]
        raise SystemExit(f"comprl: -p {fixed[0]} is not accepted: the command sets it from {option}; give {option}")
    notebook = notebook_path(name)
    check_parameters(notebook, params, profile)
    if output_dir is None and resume:
        output_dir = latest_output(notebook, profile)
    elif output_dir is None:
        output_dir = new_output(notebook, profile)
    ran = executed_profile(output_dir / notebook.name)
    if ran not in (None, profile):
        raise SystemExit(
            f"comprl: {output_dir} holds {notebook.stem} executed with profile {ran}: continue it with --profile "
            f"{ran}, or give another --output-dir (profile {profile} there would replace its executed copy, and its "
            "runs, of another config, are refused)"
        )
    output_dir = output_dir.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)  # only once the call is known to be valid
    parameters = {"profile": profile, "output_dir": str(output_dir), **params}
    # The kernel's printed lines and progress bars come through as they are written; rich outputs (tables,
    # figures, widgets) only go into the executed notebook, and the kernel's own start-up notices are off.
    os.environ[console.HEADLESS] = "1"
    logging.getLogger("papermill").setLevel(logging.WARNING)
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output_dir / notebook.name),
            parameters=parameters,
            cwd=str(notebook.parent),
            progress_bar=False,
            stdout_file=sys.stdout,
            stderr_file=sys.stderr,
            extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            kernel_manager_class=kernel_manager_class(),
        )
    except papermill.PapermillExecutionError as err:
        raise SystemExit(
            f"comprl: {notebook.stem} failed: {err.ename}: {err.evalue} (executed copy: {output_dir / notebook.name})"
        )
    except KeyboardInterrupt:
        raise Interrupted(output_dir) from None
    finally:
        repository_relative(output_dir / notebook.name)
    return output_dir


def repository_relative(executed: Path) -> None:
    """Rewrite the executed copy's paths inside the repository (its parameters, papermill's metadata, printed lines)
    relative to the repository's root, so that a committed copy names no folder of the machine it ran on."""
    if not executed.is_file():
        return
    text = executed.read_text()
    root = json.dumps(str(REPO_ROOT))[1:-1]  # as the path appears inside a JSON string
    relative = text.replace(root + "/", "").replace(f'"{root}"', '"."')
    if relative != text:
        executed.write_text(relative)


HEADLINE_TABLES = ("summary.csv", "table1_vs_paper.csv", "table1.csv", "overhead.csv")
"""The table a notebook's run ends on, the first of these it wrote: 01, 03 and 04 write ``summary.csv`` (success
before and after, with and without experience, and a random policy's), 02 Table 1 beside the paper's, 05 the
rollout overhead per mode and batch size."""


def closing_summary(output_dir: Path) -> str:
    """What ``comprl run`` prints after a notebook: its headline table (:data:`HEADLINE_TABLES`) and the paths of
    its figures; empty when it wrote neither."""
    import pandas as pd

    parts = []
    table = next((output_dir / name for name in HEADLINE_TABLES if (output_dir / name).is_file()), None)
    if table is not None:
        frame = pd.read_csv(table)
        parts.append(f"comprl: {table.name}\n" + frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    figures = sorted(p for p in output_dir.iterdir() if p.suffix in (".png", ".pdf"))
    if figures:
        parts.append("comprl: figures\n" + "\n".join(f"  {p}" for p in figures))
    return "\n".join(parts)


PATH_PARAMS = ("reuse", "reference_dir", "run_dir", "results_dir")
"""Notebook parameters that name folders. A notebook runs in ``notebooks/``, so a relative path given on the
command line is made absolute against the caller's working directory first (the notebooks' defaults stay relative
to ``notebooks/``)."""


def paths_from_here(name: str, value: object) -> object:
    if name not in PATH_PARAMS or not value:
        return value
    if isinstance(value, list):
        return [str(Path(item).resolve()) if isinstance(item, str) else item for item in value]
    return str(Path(value).resolve()) if isinstance(value, str) else value
