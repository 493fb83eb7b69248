"""``batsched-ml collect``: a served run checked and written as a replay's results."""

from __future__ import annotations

import argparse
from pathlib import Path

from batsched_ml.cli import options


def add_parser(commands: argparse._SubParsersAction) -> None:
    collect = commands.add_parser(
        "collect",
        help="check a served run and write its job table, summary and report",
        description="Wait for the scheduler's serve.json and Batsim's _jobs.csv, check the run "
        "is whole (status complete, every workload job finished exactly once), and write "
        "OUT/jobs.csv, OUT/summary.json and OUT/report.md, as a replay does. The settings and "
        "the calendar are those serve recorded; the scheduler options given here are checked "
        "against them (a folder holding another run is refused).",
    )
    collect.add_argument("--batsim-jobs", required=True, metavar="CSV", help="Batsim's _jobs.csv")
    collect.add_argument("--workload", required=True, help="the workload Batsim ran (JSON or SWF)")
    collect.add_argument(
        "--scheduler", required=True, metavar="DIR", help="the output folder of `serve`"
    )
    collect.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="the collected run's folder"
    )
    options.add_force_option(collect)
    first = len(collect._actions)
    options.add_scheduler_options(collect)
    for action in collect._actions[first:]:  # not given: the served run's (no default)
        action.default = argparse.SUPPRESS
        if action.help:
            for phrase, instead in (
                (" (default %(default)s)", ""),
                ("(default %(default)s: ", "("),
            ):
                action.help = action.help.replace(phrase, instead)
            action.help += " (default: the served run's; given: checked against it)"
    collect.add_argument(
        "--wait",
        type=options.seconds_or_zero,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for the run to end (default: it has ended)",
    )
    collect.add_argument(
        "--status-dir",
        metavar="DIR",
        help="where the other services write their BATSCHED_ML_STATUS_FILE: stop waiting, "
        "with the reason, as soon as one of them failed",
    )
    collect.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.results.outputs import summary_table
    from batsched_ml.serving.collect import collect

    given = options.settings(args)  # only the options given: the rest are the served run's
    summary = collect(
        args.batsim_jobs,
        args.workload,
        args.scheduler,
        args.output,
        wait=args.wait,
        status_dir=args.status_dir,
        settings=given or None,
        force=args.force,
    )
    print(summary_table(summary))
    print(f"wrote {Path(args.output) / 'jobs.csv'}, summary.json and report.md")
    return 0
