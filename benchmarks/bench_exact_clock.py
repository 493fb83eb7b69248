"""What SimGrid's floating-point clock costs a whole replay (issue 17): the same command run by
this checkout and by an earlier revision, in turn (A B A B ...), median wall time, the median of
the pairwise ratios, and each side's peak memory::

    python benchmarks/bench_exact_clock.py                       # full HPC2N, FCFS-EASY, 3 pairs
    python benchmarks/bench_exact_clock.py --base 32fe01f --runs 5 --trace KTH-SP2-1996-2.1-cln

The earlier revision (default: 32fe01f, the last one whose simulator applied grouping rules
instead of emulating SimGrid's kernel) is checked out with ``git worktree`` into a temporary
folder and run with ``python -m batsched_ml`` from there. Both write their job tables; the script
says whether they are identical (on HPC2N they are not: the rules parted from real Batsim).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import TRACES, need

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and the child's peak resident memory in MiB."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)  # the child's own rusage
    seconds = time.perf_counter() - started
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", default="32fe01f", help="the earlier revision (default: %(default)s)"
    )
    parser.add_argument("--trace", default="HPC2N-2002-2.2-cln", help="a trace of ../shared/traces")
    parser.add_argument("--runs", type=int, default=3, help="pairs of runs (default: %(default)s)")
    args = parser.parse_args()
    trace = need(TRACES / f"{args.trace}.swf.gz")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-f", str(base), args.base],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            sides = {
                "this checkout": (ROOT, Path(tmp) / "a"),
                f"revision {args.base}": (base, Path(tmp) / "b"),
            }
            seconds: dict[str, list[float]] = {name: [] for name in sides}
            peaks: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.runs):
                for name, (code, out) in sides.items():
                    command = [sys.executable, "-m", "batsched_ml", "replay", str(trace)]
                    command += ["-q", "--force", "-o", str(out)]
                    wall, peak = timed(command, code)
                    seconds[name].append(wall)
                    peaks[name].append(peak)
            a, b = sides
            ratios = [x / y for x, y in zip(seconds[a], seconds[b], strict=True)]
            print(f"{args.trace}, FCFS-EASY, whole command, {args.runs} pairs (median):")
            for name in sides:
                print(
                    f"  {name:>22}: {statistics.median(seconds[name]):6.1f} s, "
                    f"peak {statistics.median(peaks[name]):5.0f} MiB"
                )
            print(f"  ratio (pairwise median): {statistics.median(ratios):.2f}")
            same = filecmp.cmp(sides[a][1] / "jobs.csv", sides[b][1] / "jobs.csv", shallow=False)
            print(f"  job tables {'identical' if same else 'differ'}")
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True
            )


if __name__ == "__main__":
    main()
