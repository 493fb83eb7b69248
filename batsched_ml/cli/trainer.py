"""``batsched-ml trainer``: the side trainer, serving weekly models over ZeroMQ."""

from __future__ import annotations

import argparse
from pathlib import Path

from batsched_ml.cli import options
from batsched_ml.predict.params import ForestParams


def add_parser(commands: argparse._SubParsersAction) -> None:
    trainer = commands.add_parser(
        "trainer",
        help="the side trainer: stores finished jobs, trains and publishes weekly models",
        description="Serve weekly training requests over ZeroMQ; models go to STORE (skops files "
        "and manifest.json), the finished-job history to an SQLite database.",
    )
    trainer.add_argument(
        "--socket",
        default="tcp://127.0.0.1:28100",
        help="where to listen for the scheduler (default: tcp://127.0.0.1:28100, this machine "
        "only; tcp://*:28100 listens on every interface, as the docker compose set-up does). "
        "Only the run that owns the trainer (the first to greet it) can stop it",
    )
    trainer.add_argument(
        "--store", default="models", metavar="DIR", help="model store (relative to here)"
    )
    trainer.add_argument(
        "--db", metavar="FILE", help="history database (default STORE/history.sqlite)"
    )
    options.add_forest_options(trainer)
    trainer.add_argument(
        "--divider-quantile",
        type=float,
        default=ForestParams.divider_quantile,
        metavar="Q",
        help="the divider: this quantile of the finished runtimes (default %(default)s, the "
        "median); the runs it trains for must ask the same (--classifier-option "
        "divider_quantile=Q)",
    )
    trainer.add_argument(
        "--idle-timeout",
        type=options.seconds,
        metavar="SECONDS",
        help="stop after this long without a request (default: never)",
    )
    trainer.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import logging

    from batsched_ml.trainer.server import run_trainer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s trainer %(levelname)s %(message)s")
    store = Path(args.store)
    run_trainer(
        args.socket,
        store,
        Path(args.db) if args.db else store / "history.sqlite",
        ForestParams(
            n_estimators=args.trees,
            window=args.window,
            max_samples=args.max_samples,
            divider_quantile=args.divider_quantile,
        ),
        idle_timeout=args.idle_timeout,
        on_bound=lambda endpoint: print(f"trainer listening on {endpoint}", flush=True),
    )
    return 0
