"""``batsched-ml report``: figures and one HTML page from run folders."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report",
        help="figures (PNG) and one self-contained HTML page from run folders",
        description="Read every run (summary.json and jobs.csv) under RUN_DIR... (any mix of "
        "traces, policies, variants, predictors, dispatchers and options; the shaken copies of "
        "one setting are shown as means with 95 % intervals) and write into DIR: figures per "
        "trace as PNG with their values as CSV, index.html (figures inlined, tables of means "
        "with kills, wasted core-hours and useful utilisation beside every gain), summary.csv "
        "(one row per run) and means.csv. Two runs of the same settings on the same copy are "
        "refused, and nothing is written.",
    )
    report.add_argument(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="a run folder (replay, collect), a campaign's output folder, or a folder holding "
        "run folders at any depth",
    )
    report.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder for index.html and figures"
    )
    report.add_argument(
        "--baseline",
        metavar="LABEL",
        help="a run label (as the page shows it, e.g. 'fcfs (base)', or its words joined by "
        "hyphens, fcfs-base): every other setting's differences from it, paired by trace and "
        "copy, in the page and differences.csv",
    )
    report.add_argument(
        "--gantt-window",
        type=gantt_window,
        metavar="START:END",
        help="the Gantt chart's window in seconds of the trace (default: 12 hours from 2 hours "
        "before the first killed attempt, or from the first submission)",
    )
    report.set_defaults(handler=run)


def gantt_window(text: str) -> tuple[float, float]:
    """``START:END`` in seconds of the trace, START < END."""
    try:
        begin, end = (float(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: START:END in seconds of the trace, e.g. 86400:129600"
        ) from None
    if not 0 <= begin < end:
        raise argparse.ArgumentTypeError(f"{text!r}: START must be at least 0 and below END")
    return begin, end


def run(args: argparse.Namespace) -> int:
    from batsched_ml.report.page import load_report, write_report
    from batsched_ml.results.runfolder import writable_folder

    report = load_report(args.runs, args.baseline)  # refused before the folder exists
    page = write_report(report, writable_folder(args.output), gantt_window=args.gantt_window)
    print(f"wrote {page} and the figures next to it")
    return 0
