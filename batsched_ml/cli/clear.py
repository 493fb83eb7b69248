"""``batsched-ml clear``: empty a run folder (the docker compose set-up's first step)."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    clear = commands.add_parser(
        "clear",
        help="empty a run folder (the docker compose set-up's first step)",
        description="Create FOLDER if needed, check it can be written, and remove a run's "
        "files from it (run.json and what runs write, whichever run they belong to). A folder "
        "holding anything else is refused and left as it is. The docker compose set-up runs "
        "it on OUT_DIR before anything else, so that a failed `up` never leaves an earlier "
        "run's results there.",
    )
    clear.add_argument("folder", metavar="FOLDER")
    clear.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.results.runfolder import empty_run_folder

    removed = empty_run_folder(args.folder)
    if removed:
        print(f"{args.folder}: removed an earlier run's {', '.join(removed)}")
    else:
        print(f"{args.folder}: empty")
    return 0
