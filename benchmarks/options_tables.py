"""The tables of docs/closing-the-gap.md's section on the classifier's other options, from the
results of their campaigns.

Usage::

    python benchmarks/options_tables.py runs/classifier-options-kth/results.csv \\
        runs/closing-the-gap-options/results.csv
    python benchmarks/options_tables.py ... --page docs/closing-the-gap.md

Reads the campaigns' ``results.csv`` (one row per run, each made with its base and ceiling
beside it) and prints, from the same gap rows as the campaigns' ``gap.md``
(:func:`batsched_ml.results.gap.rows_from_results`: means over the shaken copies ± the half
width of the 95 % Student-t interval, paired per copy):

* ``options-kth``: ``campaigns/classifier-options-kth.toml``'s options (threshold, small-queue
  order, divider quantile) beside the paper's method, gain over the base and share of the
  ceiling, per policy;
* ``options-TRACE`` for each trace of ``campaigns/closing-the-gap-options.toml``: the cost rule,
  its controls, the leaky features and the drift monitor, with the mean bounded slowdown, the
  share of the ceiling, the jobs killed per run and the core-hours of the killed attempts in %
  of the machine (``wasted_share``: of the machines x the makespan).

With ``--page``, each table replaces the text between the page's markers
(``<!-- options-kth:begin -->`` and ``<!-- options-kth:end -->``, ...) instead of being printed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import print_or_write

from batsched_ml.experiments.paper import short
from batsched_ml.results.gap import BASE, CEILING, GapRow, rows_from_results
from batsched_ml.results.table import read_results

METHOD = "classification-idempotent"
#: what the options' labels say of them on the page
NOTES = {"threshold=0.05": "control", "threshold=0.0": "control"}


def label(method: str, first: bool) -> str:
    """The page's name of a gap row's method (``first``: the first row of the table)."""
    if method == BASE:
        return "base ([EASY](glossary.md#easy))" if first else "base (EASY)"
    if method == CEILING:
        return "class-clairvoyant (the ceiling)"
    if method == METHOD:
        return "classification-idempotent (the paper's method, default)"
    if method.startswith(f"{METHOD} + [") and method.endswith("]"):
        options = method[len(METHOD) + 4 : -1]
        note = NOTES.get(options) or ("LEAKY" if options.startswith("leaky_features") else "")
        return f"+ {options}" + (f" ({note})" if note else "")
    if method.startswith(f"{CEILING} + [") and method.endswith("]"):
        return f"class-clairvoyant + {method[len(CEILING) + 4 : -1]}"
    return method


def share_text(row: GapRow) -> str:
    if row.method == CEILING:
        return "100"
    if row.method == BASE:
        return "0"
    return "n/a" if row.share is None else row.share.text()


def by_policy(rows: list[GapRow]) -> list[GapRow]:
    """The rows policy by policy (in their order), each policy's as the base, the paper's
    method, its options, the ceiling, then the ceiling's options."""

    def rank(row: GapRow) -> int:
        if row.method in (BASE, METHOD, CEILING):
            return {BASE: 0, METHOD: 1, CEILING: 3}[row.method]
        return 4 if row.method.startswith(CEILING) else 2

    policies = list(dict.fromkeys(row.policy for row in rows))
    return sorted(rows, key=lambda row: (policies.index(row.policy), rank(row)))


def kth_table(rows: list[GapRow]) -> str:
    """Gain and share of each option of the KTH-SP2 campaign, per policy."""
    lines = [
        "| policy | method | gain over base (%) | share of the ceiling (%) | kills per run |",
        "|---|---|---:|---:|---:|",
    ]
    for row in by_policy(rows):
        if row.method == BASE:
            continue
        kills = "n/a" if row.kills is None else f"{row.kills:,.0f}"
        lines.append(
            f"| {row.policy} | {label(row.method, False)} | {row.gain.text()} "
            f"| {share_text(row)} | {kills} |"
        )
    return "\n".join(lines)


def trace_table(rows: list[GapRow]) -> str:
    """Mean bounded slowdown, share, kills and waste of each method on one trace."""
    lines = [
        "| policy | method | mean bounded slowdown | share of the ceiling (%) | kills per run "
        "| wasted (% of the machine) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in by_policy(rows):
        bsld = "n/a" if row.mean_bsld is None else f"{row.mean_bsld:.2f}"
        kills = "n/a" if row.kills is None else f"{row.kills:,.0f}"
        waste = "n/a" if row.wasted_share is None else f"{100 * row.wasted_share:.2f}"
        share = share_text(row)
        if row.copies != max(r.copies for r in rows):
            share += f" ({row.copies} copies)"
        first = len(lines) == 2
        lines.append(
            f"| {row.policy} | {label(row.method, first)} | {bsld} | {share} | {kills} | {waste} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kth", type=Path, help="classifier-options-kth's results.csv")
    parser.add_argument("options", type=Path, help="closing-the-gap-options's results.csv")
    parser.add_argument("--page", type=Path, help="write the tables into this page's markers")
    args = parser.parse_args()

    tables = {
        "options-kth": kth_table(rows_from_results(read_results(args.kth).to_dict("records")))
    }
    rows = rows_from_results(read_results(args.options).to_dict("records"))
    for trace in dict.fromkeys(row.trace for row in rows):
        mine = [row for row in rows if row.trace == trace]
        tables[f"options-{short(trace)}"] = trace_table(mine)

    return print_or_write(args.page, tables)


if __name__ == "__main__":
    raise SystemExit(main())
