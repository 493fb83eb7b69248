"""``batsched-ml paper-results``: the paper's evaluation and its results page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batsched_ml.cli import options
from batsched_ml.cli.parsing import write_page
from batsched_ml.registry import POLICIES, VARIANTS
from batsched_ml.workload import archive, shipped


def add_parser(commands: argparse._SubParsersAction) -> None:
    results = commands.add_parser(
        "paper-results",
        help="run the paper's evaluation (traces x policies x variants) and write docs/results.md",
        description="Replay every trace x policy x variant (resumable: finished runs are kept in "
        "--runs), then write the comparison with Zrigui et al. (JPDC 2022).",
    )
    results.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PAGE.md",
        help="the page to write (the repository's: docs/results.md)",
    )
    results.add_argument(
        "--runs", required=True, metavar="DIR", help="where the replays are kept (e.g. runs/paper)"
    )
    results.add_argument(
        "--trace-dir",
        help="where the paper's traces are, as TRACE.swf.gz (default: the folder where "
        "`batsched-ml traces fetch` puts the logs)",
    )
    results.add_argument("--traces", nargs="*", help="default: the paper's five traces at hand")
    results.add_argument("--policies", nargs="*", choices=sorted(POLICIES))
    results.add_argument("--variants", nargs="*", choices=list(VARIANTS))
    results.add_argument("--workers", type=options.count, default=2, help="replays run in parallel")
    results.add_argument(
        "--no-run",
        action="store_true",
        help="write the page from the runs already in --runs (all must be complete; the runs "
        "are taken as they are, whichever code made them)",
    )
    results.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.experiments import paper

    traces = args.traces or list(paper.PAPER_TRACES)
    runs = paper.plan(traces, args.policies or paper.POLICIES, args.variants or paper.VARIANTS)
    if args.no_run:  # the page from the runs already there, every one of them complete
        summaries = paper.load(Path(args.runs), runs)
        absent = [r.folder(Path(args.runs)) for r in runs if r not in summaries]
        if absent:
            raise paper.RunsMissing(
                f"{len(absent)} of {len(runs)} run(s) missing or not complete in {args.runs} "
                f"(first: {absent[0]}); {args.output} not written (run without --no-run)"
            )
        return write_page(args.output, paper.report(summaries, traces))
    trace_dir = Path(args.trace_dir) if args.trace_dir else archive.cache_dir()
    shipped.check_fetched(
        traces, trace_dir
    )  # a log not downloaded: one line saying how to fetch it
    missing = [t for t in traces if not shipped.resolve(t, trace_dir).exists()]
    if missing:
        raise FileNotFoundError(f"no {', '.join(missing)} in {trace_dir}")
    failed = paper.run_all(runs, trace_dir, Path(args.runs), workers=args.workers)
    if failed:  # the page would mix missing cells with figures: not written
        for line in failed:
            print(f"  failed: {line}", file=sys.stderr)
        print(
            f"batsched-ml: {len(failed)} of {len(runs)} replay(s) failed; {args.output} not "
            "written (the runs done are kept: run the command again once fixed)",
            file=sys.stderr,
        )
        return 1
    return write_page(args.output, paper.report(paper.load(Path(args.runs), runs), traces))
