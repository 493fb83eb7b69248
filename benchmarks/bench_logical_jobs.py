"""The folding of attempts into workload jobs (``frames.logical_jobs``, which every figure of a
classified run goes through) on a job table, median of ``--repeat``, and a digest of the table
it gives. Run it with another tree first on ``PYTHONPATH`` to compare two versions on the same
table (the digests must be equal).

Usage::

    python benchmarks/bench_logical_jobs.py                   # replays full HPC2N classified first
    python benchmarks/bench_logical_jobs.py --table OUT/jobs.csv
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import trace_named

from batsched_ml.results import frames


def table_of(trace: str, folder: Path) -> Path:
    path = trace_named(trace)
    subprocess.run(
        [
            *(sys.executable, "-m", "batsched_ml", "replay", str(path), "-q", "-o", str(folder)),
            *("--variant", "classification-idempotent"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return folder / "jobs.csv"


def timed(function: Any, *args: Any, repeat: int) -> tuple[float, Any]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = function(*args)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", type=Path)
    parser.add_argument("--trace", default="HPC2N-2002-2.2-cln")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.table or table_of(args.trace, Path(tmp) / "out")
        jobs = frames.read_jobs_csv(path)
        folded, table = timed(frames.logical_jobs, jobs, repeat=args.repeat)
    digest = hashlib.sha256(table.to_csv(index=False).encode()).hexdigest()[:16]
    print(f"{path}: {len(jobs):,} rows, {len(table):,} workload jobs")
    print(f"logical_jobs  {folded:.3f} s (median of {args.repeat}), table sha256 {digest}")


if __name__ == "__main__":
    main()
