"""``batsched-ml traces``: list, fetch and find the Parallel Workloads Archive's logs.

``list`` prints the logs the project knows and which are at hand; ``fetch`` downloads them into
the per-user cache, each kept only if its uncompressed content has the registry's SHA-256;
``path`` prints where a log is (exit 1 and one line saying how to fetch it when it is not
downloaded). See :mod:`batsched_ml.workload.archive` and docs/traces.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from batsched_ml.workload import archive
from batsched_ml.workload.shipped import DATA

#: ``traces path``'s exit code for a known log that is not downloaded (2: an unknown name).
NOT_FETCHED = 1


def _shipped(trace: archive.Trace) -> Path | None:
    path = DATA / trace.file
    return path if path.is_file() else None


def _where(trace: archive.Trace) -> tuple[Path | None, str]:
    """Where ``trace`` is at hand and how (``shipped``, ``cached``), or ``(None, "")``."""
    shipped = _shipped(trace)
    if shipped is not None:
        return shipped, "shipped"
    cached = archive.cache_dir() / trace.file
    if cached.is_file():
        return cached, "cached"
    return None, ""


def _cmd_list(args: argparse.Namespace) -> int:
    rows = [("NAME", "JOBS", "YEARS", "PROCS", "SIZE", "AT HAND", "MACHINE")]
    for trace in archive.TRACES:
        path, how = _where(trace)
        if path is not None:
            size = archive.human_size(path.stat().st_size)
        elif trace.approx_bytes:
            size = "~" + archive.human_size(trace.approx_bytes)
        else:
            size = "?"
        if not how:
            how = "-" if trace.fetchable else "not in archive"
        machine = trace.machine + (" (paper)" if trace.paper else "")
        procs = f"{trace.max_procs:,}" if trace.max_procs is not None else "-"
        rows.append((trace.name, f"{trace.jobs:,}", trace.years, procs, size, how, machine))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    right = {1, 3, 4}
    for row in rows:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=False))
        ]
        print("  ".join([*cells, row[-1]]))
    print(f"cache: {archive.cache_dir()}  archive: {archive.base_url()}")
    return 0


def _chosen(args: argparse.Namespace) -> list[archive.Trace]:
    if args.all:
        return list(archive.TRACES)
    chosen = archive.paper_traces() if args.paper else []
    for name in args.names:
        trace = archive.lookup(name)
        if not trace.fetchable:
            raise archive.TraceError(archive.not_fetchable(trace))
        chosen.append(trace)
    if not chosen:
        raise archive.TraceError("name the traces to fetch, or --paper, or --all")
    return list(dict.fromkeys(chosen))


def _cmd_fetch(args: argparse.Namespace) -> int:
    failures: list[archive.TraceError] = []
    for trace in _chosen(args):
        path, how = _where(trace)
        if how == "shipped":
            print(f"{trace.name}: shipped with batsched-ml ({path})")
            continue
        if not trace.fetchable:
            print(f"{trace.name}: not in the archive, skipped")
            continue
        try:
            path, new = archive.fetch(trace, progress=not args.quiet)
        except archive.TraceError as exc:
            failures.append(exc)
            continue
        print(f"{trace.name}: {'downloaded to' if new else 'already in'} {path}")
    for failure in failures[:-1]:
        print(f"batsched-ml: error: {failure}", file=sys.stderr)
    if failures:
        raise failures[-1]
    return 0


def _cmd_path(args: argparse.Namespace) -> int:
    trace = archive.lookup(args.name)
    path, _ = _where(trace)
    if path is None:
        print(archive.fetch_hint(trace), file=sys.stderr)
        return NOT_FETCHED
    print(path)
    return 0


def add_parser(commands: Any) -> None:
    """The ``traces`` command and its subcommands, on the main parser's ``commands``."""
    traces = commands.add_parser(
        "traces",
        help="list, download and find the Parallel Workloads Archive's logs",
        description="The Parallel Workloads Archive's logs that batsched-ml knows: list them, "
        "download them into the per-user cache (BATSCHED_ML_TRACES_DIR, else "
        "$XDG_CACHE_HOME/batsched-ml/traces), each checked against the SHA-256 of its content, "
        "and print where one is. BATSCHED_ML_TRACES_URL names a mirror with the archive's "
        "layout. A log at hand is then named by its name wherever a trace's path is accepted.",
    )
    sub = traces.add_subparsers(dest="traces_command", required=True)
    listing = sub.add_parser("list", help="the known logs: jobs, years, size, whether at hand")
    listing.set_defaults(handler=_cmd_list)
    fetch = sub.add_parser(
        "fetch",
        help="download logs into the cache (checked against their SHA-256)",
        description="Download logs into the cache; each is kept only if the SHA-256 of its "
        "uncompressed content is the registry's (so a recompressed mirror passes too).",
    )
    fetch.add_argument("names", nargs="*", metavar="NAME", help="e.g. HPC2N or CTC-SP2")
    fetch.add_argument("--paper", action="store_true", help="the paper's five traces")
    fetch.add_argument("--all", action="store_true", help="every log of the archive listed")
    fetch.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    fetch.set_defaults(handler=_cmd_fetch)
    path = sub.add_parser(
        "path",
        help="print where a log is (exit 1 if it is not downloaded)",
        description="Print the path of a log at hand; exit 1, with one line saying how to "
        "fetch it, if it is not downloaded.",
    )
    path.add_argument("name", metavar="NAME")
    path.set_defaults(handler=_cmd_path)
