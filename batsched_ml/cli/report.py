"""``batsched-ml report``: figures and one HTML page from run folders."""

from __future__ import annotations

import argparse

from batsched_ml.cli.parsing import output_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report",
        help="figures (PNG) and one self-contained HTML page from run folders",
        description="Read every run (summary.json and jobs.csv) under RUN_DIR..., and write the "
        "paper's figures per trace as PNG, index.html (figures inlined, summary tables) and "
        "summary.csv into OUT.",
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
    report.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.report.page import write_report

    page = write_report(args.runs, output_dir(args.output))
    print(f"wrote {page} and the figures next to it")
    return 0
