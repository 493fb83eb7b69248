"""``batsched-ml related-work``: the related work's predictors x dispatchers, and their page."""

from __future__ import annotations

import argparse
from pathlib import Path

from batsched_ml.cli import campaign as campaign_command
from batsched_ml.cli import options

#: The repository's campaign of the related work (beside the package in a clone).
DEFAULT_CAMPAIGN = Path(__file__).resolve().parents[2] / "campaigns" / "related-work.toml"


def add_parser(commands: argparse._SubParsersAction) -> None:
    related = commands.add_parser(
        "related-work",
        help="run the related work's predictors x dispatchers and write docs/related-work.md",
        description="Run the runs of CAMPAIGN.toml not made yet (as `campaign` does), then "
        "write the page of prediction quality, mean bounded slowdown and wait per predictor x "
        "dispatcher and correction, the classification beside them, and the comparison with "
        "the papers' published figures. NOTES, hand-written analysis, is included after the "
        "comparison.",
    )
    related.add_argument(
        "config",
        nargs="?",
        default=str(DEFAULT_CAMPAIGN),
        metavar="CAMPAIGN.toml",
        help="default: campaigns/related-work.toml",
    )
    related.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PAGE.md",
        help="the page to write (the repository's: docs/related-work.md); a page holding more "
        "runs than the new one is kept unless --force",
    )
    related.add_argument(
        "--force", action="store_true", help="write the page even with fewer runs than it holds"
    )
    related.add_argument(
        "--notes",
        default="docs/related-work-notes.md",
        help="Markdown included in the page, if the file exists",
    )
    related.add_argument(
        "--no-run", action="store_true", help="write the page from the runs already made"
    )
    related.add_argument("--workers", type=options.count, metavar="N", help="local Dask workers")
    related.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    related.set_defaults(handler=run, scheduler=None)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.experiments.campaign import load_campaign
    from batsched_ml.report.related_work import collect, render, runs_on_page
    from batsched_ml.results.runfolder import OutputFolderError

    status = 0
    if not args.no_run:
        status = campaign_command.run(args)
    campaign = load_campaign(args.config)
    table = collect(campaign)
    notes = Path(args.notes)
    page = render(table, campaign, notes.read_text() if notes.is_file() else "")
    out = Path(args.output)
    made = int((table["status"] != "missing").sum())
    held = runs_on_page(out.read_text(), len(table)) if out.is_file() else None
    if held is not None and made < held and not args.force:
        raise OutputFolderError(
            f"{out} holds {held} runs and these runs make {made}: not overwriting it (the runs "
            f"are not here? see {campaign.output}); --force to write it anyway"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    print(f"wrote {out}: {made} of {len(table)} runs")
    return status
