"""``batsched-ml replay``: a trace replayed in the embedded simulator."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from batsched_ml.cli import options
from batsched_ml.errors import ConfigError
from batsched_ml.registry import SHAKE_SECONDS
from batsched_ml.workload import shipped


def add_parser(commands: argparse._SubParsersAction) -> None:
    replay = commands.add_parser(
        "replay",
        help="replay a trace in the embedded simulator and write jobs.csv and summary.json",
        description="Replay an SWF trace (converted on the fly) or a Batsim workload JSON in the "
        "embedded Batsim-compatible simulator; write DIR/jobs.csv (Batsim's format) and "
        "DIR/summary.json, and print a summary.",
    )
    replay.add_argument(
        "workload",
        nargs="?",
        help="SWF trace (.swf, .swf.gz) or Batsim workload (.json); default: the shipped KTH-SP2",
    )
    replay.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="the run's folder: new or empty, or holding this same run (run again)",
    )
    options.add_force_option(replay)
    options.add_scheduler_options(replay)
    replay.add_argument(
        "--zmq",
        metavar="ENDPOINT",
        help="serve the scheduler over ZeroMQ on this endpoint (e.g. tcp://127.0.0.1:*) "
        "instead of in process; same results",
    )
    replay.add_argument(
        "--batsim",
        type=int,
        choices=(4, 5),
        default=4,
        help="the Batsim to play: 4 (4.2.1) or 5 (5.0.0-rc2: its protocol's JSON between "
        "simulator and scheduler, its jobs.csv columns; the workload read as Batsim 5 reads it)",
    )
    options.add_trainer_options(replay)
    replay.add_argument("--lenient", action="store_true", help="skip malformed SWF lines")
    replay.add_argument(
        "--shake",
        type=int,
        default=0,
        metavar="SEED",
        help="replay a shaken copy of the trace (Tsafrir et al.'s input shaking): each job's "
        "submission moves by a random whole number of seconds, seeded; 0 (default): the trace",
    )
    replay.add_argument(
        "--shake-seconds",
        type=int,
        metavar="S",
        help="with --shake: the largest move of a shaken copy, either way (default "
        f"{SHAKE_SECONDS} s)",
    )
    replay.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    replay.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.results.outputs import summary_table
    from batsched_ml.runs.pipeline import replay_into

    started = time.perf_counter()
    path = shipped.resolve(args.workload)
    config = options.config(args)
    seconds = SHAKE_SECONDS if args.shake_seconds is None else args.shake_seconds
    if args.shake < 0 or seconds < 0:
        raise ConfigError("--shake and --shake-seconds take 0 or a positive number")
    if args.shake_seconds is not None and not args.shake:  # else replayed unshaken, silently
        raise ConfigError("--shake-seconds goes with --shake SEED (a shaken copy of the trace)")
    shaking = {"seed": args.shake, "seconds": seconds} if args.shake else None
    label = f"{path.name} {config.policy}"
    result, summary = replay_into(
        args.output,
        path,
        config,
        lenient=args.lenient,
        shaking=shaking,
        force=args.force,
        progress=lambda total: options.progress_bar(args.quiet, total, label),
        trainer=lambda folder: options.trainer_for(
            args, config, Path(args.output), folder.identity.as_dict()
        ),
        zmq_endpoint=args.zmq,
        batsim=args.batsim,
    )
    elapsed = time.perf_counter() - started
    print(summary_table(summary))
    capped = getattr(getattr(result.scheduler, "planner", None), "wall_capped", 0)
    if capped:
        print(
            f"batsched-ml: warning: {capped:,} CPH decision(s) stopped by wall_limit: this run "
            "depends on the machine's load and may not be reproduced (see timing.json)",
            file=sys.stderr,
        )
    if summary.get("skipped_lines"):
        print(f"skipped {summary['skipped_lines']:,} malformed line(s) of {path.name} (--lenient)")
    print(f"wrote {Path(args.output) / 'jobs.csv'} and summary.json in {elapsed:.1f} s")
    return options.trainer_faults(summary.get("trainer_events"))
