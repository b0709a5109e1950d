"""``comprl`` command line: run a paper notebook headless through papermill with a profile.

    comprl run 01_single_task --profile cpu
    comprl run 01_single_task --profile smoke -p steps 1 -p env_id comprl/MazeWalk-9x9-v0
    comprl profiles
"""

from __future__ import annotations

import argparse
import ast
import logging
import sys
from datetime import datetime, timezone
from pathlib import Path

from comprl.config import PROFILES

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO_ROOT / "notebooks"


def notebook_path(name: str) -> Path:
    """A notebook by name (``01_single_task``), file name, or path."""
    candidates = [Path(name), NOTEBOOKS / name, NOTEBOOKS / f"{name}.ipynb"]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    available = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    raise SystemExit(f"comprl: unknown notebook {name!r}; available: {', '.join(available) or '(none found)'}")


def parse_value(text: str) -> object:
    """A notebook parameter value: a Python literal (``4``, ``[0, 1]``, ``None``) or else the plain string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def run_notebook(name: str, profile: str, params: dict[str, object], output_dir: Path | None) -> Path:
    """Execute a notebook with papermill; return the folder holding the executed copy and the results."""
    import papermill

    if profile not in PROFILES:
        raise SystemExit(f"comprl: unknown profile {profile!r}; accepted: {', '.join(PROFILES)}")
    notebook = notebook_path(name)
    if output_dir is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        output_dir = REPO_ROOT / "results" / f"{notebook.stem}_{profile}_{stamp}"
    accepted = papermill.inspect_notebook(str(notebook))
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise SystemExit(f"comprl: unknown parameter(s) {unknown} for {notebook.stem}; accepted: {', '.join(accepted)}")
    output_dir = output_dir.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)  # only once the call is known to be valid
    parameters = {"profile": profile, "output_dir": str(output_dir), **params}
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output_dir / notebook.name),
            parameters=parameters,
            cwd=str(notebook.parent),
            log_output=True,
            progress_bar=False,
        )
    except papermill.PapermillExecutionError as err:
        raise SystemExit(f"comprl: {notebook.stem} failed: {err.ename}: {err.evalue} (executed copy: {output_dir / notebook.name})")
    return output_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="comprl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute a notebook headless with a profile")
    run.add_argument("notebook", help="notebook name, e.g. 01_single_task")
    run.add_argument("--profile", default="smoke", help=f"one of: {', '.join(PROFILES)}")
    run.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="notebook parameter")
    run.add_argument("--output-dir", type=Path, default=None, help="where the executed notebook and results go")
    sub.add_parser("profiles", help="list profiles and their main settings")
    args = parser.parse_args(argv)

    if args.command == "profiles":
        for name, config in PROFILES.items():
            print(f"{name:6s} model={config.model} steps={config.steps} rollouts/step={config.batch_instances * config.group_size} "
                  f"max_turns={config.max_turns} device={config.device}")
        return 0
    params = {key: parse_value(value) for key, value in args.param}
    # papermill streams the kernel's output (log lines, progress bars) through its logger at INFO level
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    out = run_notebook(args.notebook, args.profile, params, args.output_dir)
    print(f"comprl: results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
