"""What SimGrid's floating-point clock costs a whole replay (issue 17): the same command run by
this checkout and by earlier revisions or code trees, in turn (A B C, then C B A, ...), median
wall and user CPU
times, the medians of the pairwise ratios this checkout / each revision (wall and user CPU: on
a shared machine the CPU time scatters less), and each side's peak memory::

    python benchmarks/bench_exact_clock.py                       # full HPC2N, FCFS-EASY, 3 runs
    python benchmarks/bench_exact_clock.py --base 32fe01f --runs 5 --trace KTH-SP2-1996-2.1-cln
    python benchmarks/bench_exact_clock.py --base 32fe01f --base 89696d3 --checkout /tmp/tree
    python benchmarks/bench_exact_clock.py --base-tree /tmp/before --checkout /tmp/after --runs 5

The earlier revisions (default: 32fe01f, the last one whose simulator applied grouping rules
instead of emulating SimGrid's kernel) are checked out with ``git worktree`` into a temporary
folder and run with ``python -m batsched_ml`` from there (``PYTHONPATH`` set to each side's
code). ``--checkout`` measures another folder as "this checkout", e.g. a ``git archive`` export
of one commit while others edit the working tree. ``--base-tree`` adds a folder as it is (an
export with the compiled kernel copied in: a ``git worktree`` of a revision has no build, so it
runs the pure-Python kernel). All write their job tables and ``summary.json``; the script says
whether each is identical to this checkout's (on HPC2N 32fe01f's is not: the rules parted from
real Batsim).
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


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, the child's user CPU seconds and its peak resident memory in MiB."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)  # the child's own rusage
    seconds = time.perf_counter() - started
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}")
    return seconds, usage.ru_utime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base",
        action="append",
        help="an earlier revision; repeat to run several in turn (default: 32fe01f)",
    )
    parser.add_argument(
        "--checkout",
        type=Path,
        default=ROOT,
        help="the code measured as 'this checkout', e.g. an exported tree (default: this one)",
    )
    parser.add_argument(
        "--base-tree",
        action="append",
        type=Path,
        default=[],
        help="a code tree to compare with, as it is (e.g. an export with the kernel built)",
    )
    parser.add_argument("--trace", default="HPC2N-2002-2.2-cln", help="a trace of ../shared/traces")
    parser.add_argument("--runs", type=int, default=3, help="pairs of runs (default: %(default)s)")
    args = parser.parse_args()
    bases: list[str] = args.base or ([] if args.base_tree else ["32fe01f"])
    trace = need(TRACES / f"{args.trace}.swf.gz")
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"this checkout": (args.checkout.resolve(), Path(tmp) / "out0")}
        trees: list[Path] = []
        try:
            for index, revision in enumerate(bases, 1):
                tree = Path(tmp) / f"base{index}"
                subprocess.run(
                    ["git", "worktree", "add", "--detach", "-f", str(tree), revision],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                )
                trees.append(tree)
                sides[f"revision {revision}"] = (tree, Path(tmp) / f"out{index}")
            for index, folder in enumerate(args.base_tree, len(bases) + 1):
                sides[f"tree {folder}"] = (folder.resolve(), Path(tmp) / f"out{index}")
            seconds: dict[str, list[float]] = {name: [] for name in sides}
            user: dict[str, list[float]] = {name: [] for name in sides}
            peaks: dict[str, list[float]] = {name: [] for name in sides}
            for turn in range(args.runs):
                order = list(sides) if turn % 2 == 0 else list(reversed(sides))
                for name in order:  # A B C, then C B A: neither side always runs first
                    code, out = sides[name]
                    command = [sys.executable, "-m", "batsched_ml", "replay", str(trace)]
                    command += ["-q", "--force", "-o", str(out)]
                    # the measured code, not an installed copy, whatever the current folder
                    env = {**os.environ, "PYTHONPATH": str(code)}
                    wall, cpu, peak = timed(command, code, env)
                    seconds[name].append(wall)
                    user[name].append(cpu)
                    peaks[name].append(peak)
            print(f"{args.trace}, FCFS-EASY, whole command, {args.runs} runs in turn (median):")
            first = next(iter(sides))
            for name in sides:
                ratios = [x / y for x, y in zip(seconds[first], seconds[name], strict=True)]
                cpu_ratios = [x / y for x, y in zip(user[first], user[name], strict=True)]
                print(
                    f"  {name:>22}: {statistics.median(seconds[name]):6.1f} s, "
                    f"user CPU {statistics.median(user[name]):6.1f} s, "
                    f"peak {statistics.median(peaks[name]):5.0f} MiB"
                    + (
                        ""
                        if name == first
                        else f", {first} / it: wall {statistics.median(ratios):.2f}, "
                        f"user CPU {statistics.median(cpu_ratios):.2f}"
                    )
                )
            for name in sides:
                print(
                    f"  {name:>22} per run: wall "
                    + " ".join(f"{x:.1f}" for x in seconds[name])
                    + ", user CPU "
                    + " ".join(f"{x:.1f}" for x in user[name])
                )
            for name in list(sides)[1:]:
                for file in ("jobs.csv", "summary.json"):
                    same = filecmp.cmp(sides[first][1] / file, sides[name][1] / file, shallow=False)
                    print(f"  {file}, {first} and {name}: {'identical' if same else 'differ'}")
        finally:
            for tree in trees:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)],
                    cwd=ROOT,
                    capture_output=True,
                )


if __name__ == "__main__":
    main()
