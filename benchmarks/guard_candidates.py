"""The guard's candidate measures, compared before one was chosen (docs/guarded.md).

Usage::

    python benchmarks/guard_candidates.py RUNS [--weeks 2]

``RUNS`` holds campaign run folders ``TRACE/POLICY-base`` and
``TRACE/POLICY-classification-idempotent`` (copy 0; e.g. ``campaigns/guarded.toml``'s output).
For each trace and policy with both, the paper's method's gain is split by week: a week's gain
is the cumulative bounded slowdown of the jobs submitted in it under the base minus under the
method (the weeks are not independent, a backlog carries over, so this is an approximation of
what switching a week off would cost). Each candidate measure is computed at each week's start
from the jobs that finished in the last ``--weeks`` weeks of the method's run (what the guard
sees while it is on): their first waits (before any kill) and final runtimes. A rule "on iff
measure >= threshold" keeps the gain of its weeks on; printed as a markdown table, per trace and
policy, the share of the method's whole gain kept (%) / the share of weeks on (%).

The candidates: the mean first wait in units of the week's divider (the exchange rate of a
true small's saving against a false small's loss in seconds), the mean first wait in hours,
the mean bounded slowdown of those jobs with their first waits (what the gain is made of), and
that mean at 2 together with the share of the jobs whose own bounded slowdown is at least 2
(the guard's rule: a burst that few jobs wait through moves the mean, not the share).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from batsched_ml.experiments.paper import short
from batsched_ml.predict.training import WEEK
from batsched_ml.results.frames import logical_jobs, read_jobs_csv, with_job_metrics
from batsched_ml.results.metrics import bounded_slowdown

METHOD = "classification-idempotent"
#: (label, column, thresholds)
CANDIDATES = (
    ("mean wait / divider", "wait_dividers", (1.0, 3.0)),
    ("mean wait (h)", "wait_hours", (0.5, 1.0)),
    ("mean bounded slowdown", "slowdown", (1.5, 2.0, 3.0)),
    ("mean bounded slowdown >= 2 and share waiting", "waiting_share", (0.03, 0.05, 0.08)),
)


def jobs(folder: Path) -> pd.DataFrame:
    """One row per workload job of a run: submission, final runtime and bounded slowdown, first
    wait, finish, keyed by ``workload!job``."""
    attempts = read_jobs_csv(folder / "jobs.csv")
    done = with_job_metrics(logical_jobs(attempts))
    done.index = done["workload_name"].astype(str) + "!" + done["job_id"].astype(str)
    original = attempts[~attempts["workload_name"].astype(str).str.endswith("_resub")]
    first = original["starting_time"] - original["submission_time"]
    first.index = original["workload_name"].astype(str) + "!" + original["job_id"].astype(str)
    done["first_wait"] = first.reindex(done.index).to_numpy()
    return done


def weekly(base_dir: Path, method_dir: Path, window: int) -> pd.DataFrame:
    base, method = jobs(base_dir), jobs(method_dir)
    classes = pd.read_csv(method_dir / "classification.csv", dtype={"job_id": str})
    divider = classes.groupby("week")["divider"].first()
    method["week"] = (method["submission_time"] // WEEK).astype(int)
    method["gain"] = base["bsld"].reindex(method.index).to_numpy() - method["bsld"]
    finish = method["finish_time"].to_numpy()
    rows = []
    for week, submitted in method.groupby("week"):
        start = week * WEEK
        seen = method[(finish < start) & (finish >= start - window * WEEK)]
        div = divider.get(week, np.nan)
        waits, runtimes = seen["first_wait"].to_numpy(), seen["runtime"].to_numpy()
        slowdowns = bounded_slowdown(waits, runtimes)
        rows.append(
            {
                "week": week,
                "gain": float(submitted["gain"].sum()),
                "wait_dividers": float(waits.mean() / div) if len(seen) and div > 0 else np.nan,
                "wait_hours": float(waits.mean() / 3600) if len(seen) else np.nan,
                "slowdown": float(slowdowns.mean()) if len(seen) else np.nan,
                # the share at 2 where the mean is at least 2 (else 0: off with the mean)
                "waiting_share": float((slowdowns >= 2.0).mean())
                if len(seen) and slowdowns.mean() >= 2.0
                else 0.0,
            }
        )
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", type=Path)
    parser.add_argument("--weeks", type=int, default=2, help="the window (default 2)")
    args = parser.parse_args()
    header = ["trace", "policy", "method's gain (%)"]
    header += [f"{label} >= {t:g}" for label, _, ts in CANDIDATES for t in ts]
    print("| " + " | ".join(header) + " |")
    print("|---|---|" + "---:|" * (len(header) - 2))
    for trace in sorted(p for p in args.runs.iterdir() if p.is_dir()):
        for policy in ("fcfs", "spf"):
            base_dir, method_dir = trace / f"{policy}-base", trace / f"{policy}-{METHOD}"
            if not (base_dir / "jobs.csv").exists() or not (method_dir / "jobs.csv").exists():
                continue
            table = weekly(base_dir, method_dir, args.weeks)
            total = table["gain"].sum()
            base_total = float(jobs(base_dir)["bsld"].sum())
            cells = [short(trace.name), policy, f"{100 * total / base_total:+.1f}"]
            for _, column, thresholds in CANDIDATES:
                for threshold in thresholds:
                    on = (table[column] >= threshold).to_numpy()
                    kept = table.loc[on, "gain"].sum() / total if total else np.nan
                    cells.append(f"{100 * kept:.0f} / {100 * on.mean():.0f}")
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
