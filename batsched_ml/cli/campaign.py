"""``batsched-ml campaign``: a grid of replays as Dask tasks, resumable."""

from __future__ import annotations

import argparse

from batsched_ml.cli import options


def add_parser(commands: argparse._SubParsersAction) -> None:
    campaign = commands.add_parser(
        "campaign",
        help="run traces x policies x variants (x seeds) as Dask tasks, resumable",
        description="Expand CONFIG.toml (see campaigns/paper.toml) into replays and run them on "
        "a local Dask cluster sized to the machine, or on the cluster at --scheduler. Runs "
        "already done are skipped; a failing run is recorded and the others go on. Writes "
        "OUTPUT/results.parquet and results.csv (exit 1 if a run failed).",
    )
    campaign.add_argument("config", metavar="CONFIG.toml")
    campaign.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask cluster")
    campaign.add_argument("--workers", type=options.count, metavar="N", help="local Dask workers")
    campaign.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    campaign.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from batsched_ml.experiments.campaign import (
        check_inputs,
        dropped_by_trace,
        load_campaign,
        run_campaign,
    )
    from batsched_ml.results.runfolder import writable_folder
    from batsched_ml.workload.io import print_dropped

    campaign = load_campaign(args.config)
    if args.scheduler is not None:
        campaign.scheduler = args.scheduler
    if args.workers is not None:
        campaign.workers = args.workers
    check_inputs(campaign)  # every trace there before anything runs or is written
    writable_folder(campaign.output)
    with tqdm(total=len(campaign.runs), unit="run", disable=args.quiet) as bar:

        def progress(row: dict, done: int, total: int) -> None:
            bar.update(1)
            bar.set_postfix_str(f"{row['trace']} {row['policy']} {row['variant']} {row['status']}")

        table = run_campaign(campaign, progress=progress)
    counts = table["status"].value_counts().to_dict()
    reasons = table.loc[
        table["rerun_reason"].map(lambda v: v if isinstance(v, str) else "") != "", "rerun_reason"
    ]
    rerun = (
        f" ({len(reasons)} rerun: "
        + ", ".join(f"{n} {why}" for why, n in reasons.value_counts().sort_index().items())
        + ")"
        if len(reasons)
        else ""
    )
    linked = f"{counts['linked']} linked from the reused folders, " if "linked" in counts else ""
    print(
        f"{len(table)} runs: {counts.get('done', 0)} done{rerun}, {counts.get('existing', 0)} "
        f"already there, {linked}{counts.get('failed', 0)} failed; wrote "
        f"{campaign.output / 'results.parquet'} and results.csv"
    )
    for row in table[table["status"] == "failed"].to_dict("records"):
        print(f"  failed: {row['trace']} {row['policy']} {row['variant']}: {row['error']}")
    for trace, dropped in dropped_by_trace(table, campaign.output).items():
        print_dropped(dropped, trace)
    return 1 if counts.get("failed") else 0
