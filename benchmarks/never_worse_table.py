"""The "never worse than the base" table of docs/closing-the-gap.md: for each of the 13 traces of
``../shared/traces`` and each policy, copy 0 (the trace itself): the base's mean bounded
slowdown, the paper's method's and the class-clairvoyant ceiling's gain over the base (reduction
of the cumulative bounded slowdown), the share of the ceiling, the jobs the paper's method kills
once, and the cost rule's gain and kills where it was run.

    python benchmarks/never_worse_table.py RUNS_DIR [RUNS_DIR ...]

Each RUNS_DIR is a campaign's output (``campaigns/paper.toml`` or
``campaigns/closing-the-gap-study.toml`` for the five paper traces, ``campaigns/never-worse.toml``
for the eight others); the first that holds a complete run is used. Printed: the Markdown table,
then the cells where the paper's method is worse than its base, and the cells missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TRACES = [
    "KTH-SP2-1996-2.1-cln",
    "CTC-SP2-1996-3.1-cln",
    "SDSC-SP2-1998-4.2-cln",
    "SDSC-BLUE-2000-4.2-cln",
    "HPC2N-2002-2.2-cln",
    "CEA-Curie-2011-2.1-cln",
    "LANL-CM5-1994-4.1-cln",
    "RICC-2010-2",
    "LLNL-Atlas-2006-2.1-cln",
    "OSC-Clust-2000-3.1-cln",
    "SDSC-Par-1996-3.1-cln",
    "NASA-iPSC-1993-3.1-cln",
    "lublin_256",
]
POLICIES = ("fcfs", "spf", "wfp", "saf")


def summary(roots: list[Path], trace: str, folder: str) -> dict[str, Any] | None:
    for root in roots:
        run = root / trace / folder
        try:
            if json.loads((run / "run.json").read_text())["status"] == "complete":
                return json.loads((run / "summary.json").read_text())
        except (OSError, ValueError, KeyError):
            continue
    return None


def main() -> None:
    roots = [Path(a) for a in sys.argv[1:]]
    if not roots:
        raise SystemExit(__doc__)
    print(
        "| trace | policy | base: mean bounded slowdown | paper's method: gain (%) "
        "| ceiling: gain (%) | share of the ceiling (%) | paper's method: jobs killed "
        "| cost rule: gain (%), jobs killed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    worse, missing = [], []
    for trace in TRACES:
        for policy in POLICIES:
            base = summary(roots, trace, f"{policy}-base")
            paper = summary(roots, trace, f"{policy}-classification-idempotent")
            ceiling = summary(roots, trace, f"{policy}-class-clairvoyant")
            cost = summary(roots, trace, f"{policy}-classification-idempotent-threshold_rule=cost")
            if not (base and paper and ceiling):
                missing.append(f"{trace} {policy}")
                continue
            b = base["cumulative_bsld"]
            gain = 100 * (b - paper["cumulative_bsld"]) / b
            top = 100 * (b - ceiling["cumulative_bsld"]) / b
            share = f"{100 * gain / top:.0f}" if top > 0.05 else "n/a"
            kills = f"{100 * paper['kills'] / paper['workload_jobs']:.1f} %"
            priced = ""
            if cost:
                priced = (
                    f"{100 * (b - cost['cumulative_bsld']) / b:+.1f}, "
                    f"{100 * cost['kills'] / cost['workload_jobs']:.0f} %"
                )
            if gain < 0:
                worse.append(f"{trace} {policy}: {gain:+.1f} %")
            print(
                f"| {trace.removesuffix('-cln')} | {policy} | {base['mean_bsld']:.2f} | "
                f"{gain:+.1f} | {top:+.1f} | {share} | {kills} | {priced} |"
            )
    print(f"\nworse than the base ({len(worse)}): " + ("; ".join(worse) or "none"))
    print(f"missing ({len(missing)}): " + ("; ".join(missing) or "none"))


if __name__ == "__main__":
    main()
