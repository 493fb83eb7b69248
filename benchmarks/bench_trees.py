"""Two code trees, the same whole replay command, in turn (A B B A A B ...): each side's median
wall time, user CPU and peak memory, and the median of the pairwise ratios NEW / BASE (on a
shared machine the user CPU scatters far less than the wall time)::

    python benchmarks/bench_trees.py /tmp/base_tree /tmp/new_tree --runs 5
    python benchmarks/bench_trees.py /tmp/base_tree /tmp/new_tree --trace KTH-SP2-1996-2.1-cln

Each tree is a ``git archive`` export (with the compiled kernel copied in, or each side runs the
Python kernel), run as ``nice -n 5 python -m batsched_ml replay TRACE -q --force -o DIR`` with
``PYTHONPATH`` set to it. Unlike ``bench_exact_clock.py``, whose earlier revisions are fresh
``git worktree`` checkouts (no compiled kernel in them), both sides here are what the caller
built. Says at the end whether both wrote identical ``jobs.csv``, ``summary.json`` and
``predictions.csv``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the reference tree")
    parser.add_argument("new", type=Path, help="the measured tree")
    parser.add_argument("--trace", default="HPC2N-2002-2.2-cln", help="a trace of ../shared/traces")
    parser.add_argument("--runs", type=int, default=5, help="pairs of runs (default: %(default)s)")
    args = parser.parse_args()
    trace = need(TRACES / f"{args.trace}.swf.gz")
    sides = {"base": args.base.resolve(), "new": args.new.resolve()}
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.runs):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            for name in order:
                code = sides[name]
                command = ["nice", "-n", "5", sys.executable, "-m", "batsched_ml", "replay"]
                command += [str(trace), "-q", "--force", "-o", str(Path(tmp) / name)]
                started = time.perf_counter()
                env = {**os.environ, "PYTHONPATH": str(code)}
                process = subprocess.Popen(command, cwd=code, env=env, stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(process.pid, 0)
                if status != 0:
                    sys.exit(f"failed ({status}): {' '.join(command)}")
                wall = time.perf_counter() - started
                runs[name].append((wall, usage.ru_utime, usage.ru_maxrss / 1024))
            print(index, {name: tuple(round(x, 2) for x in runs[name][-1]) for name in sides})
        print(f"{args.trace}, FCFS-EASY, whole command, {args.runs} pairs in turn (median):")
        for name in sides:
            wall, cpu, peak = (statistics.median(run[j] for run in runs[name]) for j in range(3))
            print(f"  {name}: wall {wall:.2f} s, user CPU {cpu:.2f} s, peak {peak:.0f} MiB")
        for j, what in enumerate(("wall", "user CPU", "peak memory")):
            ratios = [new[j] / base[j] for new, base in zip(runs["new"], runs["base"], strict=True)]
            pairs = " ".join(f"{ratio:.3f}" for ratio in ratios)
            print(f"  new / base {what}: median {statistics.median(ratios):.3f} (pairs {pairs})")
        for file in ("jobs.csv", "summary.json", "predictions.csv"):
            same = filecmp.cmp(Path(tmp) / "base" / file, Path(tmp) / "new" / file, shallow=False)
            print(f"  {file}: {'identical' if same else 'differ'}")


if __name__ == "__main__":
    main()
