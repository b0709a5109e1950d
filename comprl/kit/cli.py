"""``comprl`` command line: run a paper notebook headless through papermill with a profile.

    comprl run 01_single_task --profile cpu
    comprl run 01_single_task --profile smoke -p steps 1 -p env_id comprl/MazeWalk-9x9-v0
    comprl run 01_single_task --profile cpu --resume     # continue the newest such run with a checkpoint
    comprl run 01_single_task --profile cpu -p jobs 2    # two runs at once, one core each (notebooks 01-04)
    comprl run 01_single_task --profile cpu --tracker wandb   # metric rows to W&B (default: TensorBoard)
    comprl profiles
    comprl reproduce --profile cpu               # every notebook, then results/REPORT.md (comprl.kit.reproduce)
    comprl reproduce --profile cpu --jobs 2      # the same, two runs at once, one core each
    comprl reproduce --profile cpu --check       # every notebook cut to one step, one seed: does it all run here?
    comprl reproduce --profile cpu --report      # REPORT.md from what has finished so far, running nothing
    comprl export results/demo/01_single_task/comp_rl_seed0 bundle/    # a run as a bundle (comprl.kit.export)
    comprl eval bundle/ --episodes 32 --csv eval.csv     # held-out success, 95% Wilson intervals (comprl.kit.evaluate)
    comprl compact results/cpu      # finished runs' DuckDB files as checked Parquet (comprl.kit.compact)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from comprl.config import PROFILES
from comprl.kit.notebook_runner import (
    REPO_ROOT, Interrupted, closing_summary, parameters_help, parse_value, paths_from_here, run_notebook,
    with_tracker,
)
from comprl.tracking import TRACKERS


class _RunHelp(argparse.Action):
    """``comprl run --help``: the options, then every notebook's parameters (read from the notebooks)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show this help and every notebook's parameters, exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(parser.format_help() + "\n" + parameters_help())
        parser.exit()


TRACKER_HELP = (
    f"where every run streams its metric rows, one of: {', '.join(TRACKERS)} (default: the profile's, tensorboard; "
    "set through the notebooks' overrides)"
)


def main(argv: list[str] | None = None) -> int:
    """The ``comprl`` command; its exit status. Ctrl-C ends it with one line and status 130 (128 + SIGINT), as a
    shell reports a command it interrupted, instead of a traceback."""
    try:
        return _command(argv)
    except KeyboardInterrupt:
        print("comprl: interrupted", file=sys.stderr)
        return 130


def resume_command(args: argparse.Namespace, output_dir: Path) -> str:
    """The ``comprl run`` line that continues an interrupted one: its notebook, profile, tracker and ``-p`` values
    as given (a resumed run must have the same config), the folder it wrote into, and ``--resume``."""
    words = ["comprl", "run", args.notebook, "--profile", args.profile]
    for name, value in args.param:
        words += ["-p", name, value]
    if args.tracker is not None:
        words += ["--tracker", args.tracker]
    here = Path.cwd()
    folder = output_dir.relative_to(here) if output_dir.is_relative_to(here) else output_dir
    return shlex.join([*words, "--output-dir", str(folder), "--resume"])


def _command(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="comprl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="execute a notebook headless with a profile", add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("-h", "--help", action=_RunHelp)
    run.add_argument("notebook", help="notebook name, e.g. 01_single_task")
    run.add_argument("--profile", default="smoke", help=f"one of: {', '.join(PROFILES)}")
    run.add_argument(
        "-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="notebook parameter"
    )
    run.add_argument("--output-dir", type=Path, default=None, help="where the executed notebook and results go")
    run.add_argument(
        "--resume", action="store_true",
        help="continue the newest results/<profile>-<time>/<notebook> holding a run with a checkpoint (or "
        "--output-dir): finished runs are skipped, killed ones continue from their checkpoints",
    )
    run.add_argument("--tracker", default=None, metavar="NAME", help=TRACKER_HELP)
    listing = sub.add_parser("profiles", help="list profiles and their main settings")
    table = listing.add_mutually_exclusive_group()
    table.add_argument("--markdown", action="store_true", help="the profiles side by side as a Markdown table")
    table.add_argument("--readme", action="store_true", help="put that table into README.md's Profiles section")
    again = sub.add_parser("reproduce", help="every notebook in dependency order, then results/REPORT.md")
    again.add_argument("--profile", default="smoke", help=f"one of: {', '.join(PROFILES)}")
    again.add_argument(
        "--results", type=Path, default=REPO_ROOT / "results", help="where results/<profile>/ and REPORT.md go"
    )
    again.add_argument(
        "--only", nargs="+", default=None, metavar="NOTEBOOK", help="these notebooks only (e.g. 01_single_task)"
    )
    again.add_argument(
        "--force",
        action="store_true",
        help="execute notebooks that finished before (their finished runs are still skipped)",
    )
    again.add_argument("--tracker", default=None, metavar="NAME", help=TRACKER_HELP)
    again.add_argument(
        "--jobs", type=int, default=1, metavar="N",
        help="runs at once in notebooks 01-04, each in its own process on a core of its own (at most the cores this "
        "process may use; 1, the default, runs them one after another); with --dry-run, the plan's wall time for N "
        "runs at once",
    )
    again.add_argument(
        "--check", action="store_true",
        help="execute every notebook with the profile's runs cut to one training step, one seed and a few held-out "
        "episodes (comprl.kit.reproduce.shrunk), into RESULTS/check/ (emptied first): minutes, to see that the whole "
        "reproduction runs on this machine before its hours; its numbers mean nothing",
    )
    again.add_argument(
        "--dry-run", action="store_true",
        help="validate every config of the profile, say how far the reproduction under --results has come, and print "
        "the resource plan: memory, GPUs, tokens and time per step",
    )
    again.add_argument(
        "--report", action="store_true",
        help="write RESULTS/REPORT.md from what the notebooks have written under RESULTS/<profile>/ so far, running "
        "nothing: while the reproduction is under way the report says which notebooks have not finished",
    )
    again.add_argument(
        "--throughput", type=Path, default=None, metavar="FILE",
        help="with --dry-run: a measurement of benchmarks/rollout_throughput.py --json to turn the token budget into "
        "step times (default: the files in RESULTS/throughput/ measured on the profile's kind of device)",
    )
    ev = sub.add_parser(
        "eval", help="success with 95%% Wilson intervals of a run, bundle or base model on fixed held-out seeds",
        description="Plays each task's first N held-out seeds, each episode alone on a random stream of its own, "
        "so that results never depend on batch size, workers or chunking (comprl.kit.evaluate); writes the "
        "per-episode CSV and the seed manifest beside it.",
    )
    ev.add_argument("source", metavar="RUN_OR_BUNDLE_OR_MODEL", help="a run folder, a bundle, or a model name")
    ev.add_argument("--episodes", type=int, default=None, help="held-out seeds per task (default: the config's)")
    ev.add_argument("--tasks", nargs="+", default=None, metavar="ENV_ID", help="these tasks only (default: all)")
    mode = ev.add_mutually_exclusive_group()
    mode.add_argument("--with-experience", dest="experience", action="store_const", const="with",
                      help="only the episodes guided by the run's final bank")
    mode.add_argument("--without-experience", dest="experience", action="store_const", const="without",
                      help="only the experience-free episodes (default: both when the run has a bank)")
    ev.add_argument("--profile", default="cpu", help=f"a base model's settings, one of: {', '.join(PROFILES)}")
    ev.add_argument("--csv", type=Path, default=None,
                    help="per-episode rows (default: eval_<name>.csv here); the seed manifest goes beside it")
    export = sub.add_parser("export", help="write a run as a self-describing bundle (Parquet bank, card, hashes)")
    export.add_argument("run", type=Path, help="the run folder")
    export.add_argument("dir", type=Path, help="the bundle's folder (new, empty, or an older bundle)")
    pack = sub.add_parser(
        "compact", help="store finished runs as Parquet: DuckDB files checked against it, then deleted",
        description="For every finished run folder at or under the paths: metrics.parquet and the bank's Parquet "
        "files (a bundle's layout), read back and checked against run.duckdb and bank.duckdb, which are then "
        "deleted; every reader reads a compacted run alike (comprl.kit.compact). Unfinished runs and links to "
        "runs stored elsewhere are skipped; a compacted run is left as it is.",
    )
    pack.add_argument(
        "paths", nargs="*", type=Path, default=[REPO_ROOT / "results"], metavar="PATH",
        help="run folders, or folders holding them at any depth (default: results/)",
    )
    args = parser.parse_args(argv)

    if args.command == "eval":
        from comprl.kit import evaluate

        try:
            rows, record = evaluate.evaluate_source(
                args.source, args.episodes, args.tasks, args.experience, args.profile, progress=True
            )
        except (FileNotFoundError, ValueError) as err:  # the source, its tasks or its bank, as given
            raise SystemExit(f"comprl: {err}")
        csv = args.csv or Path(f"eval_{Path(args.source).name}.csv")
        beside = evaluate.write(rows, record, csv)
        print(evaluate.report(evaluate.summary(rows)))
        print(f"comprl: per-episode rows in {csv}, seed manifest in {beside}")
        return 0

    if args.command == "export":
        from comprl.kit.export import BundleError, export_run

        try:
            print(f"comprl: bundle in {export_run(args.run, args.dir)}")
        except (FileNotFoundError, FileExistsError, BundleError) as err:  # the run folder or the bundle's, as given
            raise SystemExit(f"comprl: {err}")
        return 0

    if args.command == "compact":
        from comprl.kit.compact import CompactError, compact_paths

        before = after = 0
        try:
            for outcome in compact_paths(args.paths):
                print(outcome.line())
                before, after = before + outcome.before, after + outcome.after
        except (CompactError, FileNotFoundError) as err:
            raise SystemExit(f"comprl: {err}")
        print(f"comprl: run folders {before:,} -> {after:,} bytes")
        return 0


    if args.command == "reproduce":
        from comprl.kit import reproduce
        from comprl.kit.planner import ThroughputError

        if sum((args.dry_run, args.check, args.report)) > 1:
            parser.error("--check executes a cut-down reproduction, --dry-run plans the whole one and --report writes "
                         "the report of what has run: give one")
        if args.throughput is not None and not args.dry_run:
            parser.error("--throughput only applies with --dry-run")
        if args.report:
            print(f"comprl: report in {reproduce.write_report(args.profile, args.results.resolve())}")
            return 0
        if args.dry_run:
            try:
                print(
                    reproduce.dry_run(
                        args.profile, args.throughput, args.results / "throughput", args.results.resolve(), args.jobs
                    )
                )
            except (ThroughputError, ValueError) as err:  # a bad measurement, --jobs, or a config the profile builds
                raise SystemExit(f"comprl: {err}")
            return 0
        report = reproduce.reproduce(
            args.profile, args.results.resolve(), force=args.force, only=args.only, jobs=args.jobs,
            tracker=args.tracker, check=args.check,
        )
        print(f"comprl: report in {report}")
        return 0

    if args.command == "profiles" and (args.markdown or args.readme):
        from comprl.kit import profile_table

        if args.markdown:
            print(profile_table.markdown(), end="")
        else:
            changed = profile_table.rewrite_readme()
            print(f"comprl: {profile_table.README} {'updated' if changed else 'already up to date'}")
        return 0
    if args.command == "profiles":
        for name, config in PROFILES.items():
            print(
                f"{name:6s} model={config.model} steps={config.steps} "
                f"rollouts/step={config.batch_instances * config.group_size} "
                f"max_turns={config.max_turns} device={config.device}"
            )
        return 0
    params = with_tracker({key: paths_from_here(key, parse_value(value)) for key, value in args.param}, args.tracker)
    try:
        out = run_notebook(args.notebook, args.profile, params, args.output_dir, resume=args.resume)
    except Interrupted as stop:
        print(f"comprl: interrupted; to continue where it stopped: {resume_command(args, stop.output_dir)}",
              file=sys.stderr)
        return 130
    print(f"comprl: results in {out}")
    if summary := closing_summary(out):
        print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
