"""The two walks that grow with a trace when nothing is compiled: how long they are.

Without compiled parts (``BATSCHED_ML_KERNEL=python``: the script runs itself again with it
set, since the package reads it when it loads), two loops run over a number of items that
grows with how many jobs run and wait at once, not with the trace's length alone:

* the Python kernel's clock step (``simgrid.Kernel.solve``) takes the step off every pending
  sleep, one per running job (SimGrid's rounding, kept exact), at every step;
* EASY's walk behind the head (``easy._backfill``, or ``easy._backfill_blocks`` over a long
  kept queue's blocks) tests every job that fits the free machines with
  :func:`~batsched_ml.scheduler.easy.backfill_room` (under WFP, the kinetic groups' tests
  count too); the walks by blocks are also counted apart.

For each trace this replays it once (``run_replay``, FCFS-EASY unless ``--policy``) with both
counted, and prints: the jobs, the clock steps and the sleeps updated per step (mean and
largest), the walks behind the head and the jobs tested per walk, and the replay's seconds
(which the counting slows). Compiled, each update and test is a native operation; interpreted,
each is a Python operation or call: these counts say where a Python-only replay's time grows.

Usage::

    python benchmarks/python_walks.py                           # KTH-SP2, full HPC2N, RICC
    python benchmarks/python_walks.py --traces HPC2N-2002-2.2-cln --policy spf
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from _common import trace_path

from batsched_ml.compiled import VARIABLE as KERNEL_VARIABLE
from batsched_ml.compiled import guard_scheduler
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.scheduler import easy, kinetic
from batsched_ml.sim import simgrid
from batsched_ml.workload.io import load_workload

TRACES = ("KTH-SP2-1996-2.1-cln", "HPC2N-2002-2.2-cln", "RICC-2010-2")


def counted_replay(path: Path, policy: str) -> dict[str, Any]:
    """One replay of ``path`` under ``policy``, the two walks counted."""
    counts = {"steps": 0, "sleeps": 0, "largest": 0, "walks": 0, "by_blocks": 0, "tests": 0}
    solve, room, backfill = simgrid.Kernel.solve, easy.backfill_room, easy._backfill
    by_blocks = easy._backfill_blocks

    def counted_solve(kernel: simgrid.Kernel) -> bool:
        pending = len(kernel._ms)
        counts["steps"] += 1
        counts["sleeps"] += pending
        counts["largest"] = max(counts["largest"], pending)
        return solve(kernel)

    def counted_room(*args: Any) -> int:
        counts["tests"] += 1
        return room(*args)

    inside: list[bool] = []  # within a walk by blocks, which walks its parts with _backfill

    def counted_backfill(*args: Any, **kwargs: Any) -> tuple[int, int]:
        if not inside:
            counts["walks"] += 1
        return backfill(*args, **kwargs)

    def counted_by_blocks(*args: Any) -> int:
        counts["walks"] += 1
        counts["by_blocks"] += 1
        inside.append(True)
        try:
            return by_blocks(*args)
        finally:
            inside.pop()

    workload = load_workload(path)
    simgrid.Kernel.solve = counted_solve  # type: ignore[method-assign]
    easy.backfill_room, easy._backfill = counted_room, counted_backfill
    easy._backfill_blocks = counted_by_blocks
    kinetic.backfill_room = counted_room
    try:
        started = time.perf_counter()
        result = run_replay(workload, ReplayConfig(policy=policy))
        seconds = time.perf_counter() - started
    finally:
        simgrid.Kernel.solve = solve  # type: ignore[method-assign]
        easy.backfill_room, easy._backfill = room, backfill
        easy._backfill_blocks = by_blocks
        kinetic.backfill_room = room
    if result.engine != "python" or guard_scheduler()[0] != "python":
        raise SystemExit(f"the replay ran on compiled parts ({result.engine}): nothing counted")
    return {"trace": path.name, "jobs": len(workload["jobs"]), "seconds": seconds, **counts}


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| trace | jobs | clock steps | sleeps per step (largest) | walks behind the head "
        "| of which by blocks | jobs tested per walk | replay, counted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        per_step = row["sleeps"] / max(row["steps"], 1)
        per_walk = row["tests"] / max(row["walks"], 1)
        lines.append(
            f"| {row['trace'].removesuffix('.swf.gz')} | {row['jobs']:,} | {row['steps']:,} | "
            f"{per_step:.0f} ({row['largest']:,}) | {row['walks']:,} | {row['by_blocks']:,} | "
            f"{per_walk:.0f} | "
            f"{row['seconds']:.1f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", nargs="+", default=list(TRACES), help="names or SWF files")
    parser.add_argument("--policy", default="fcfs")
    args = parser.parse_args(argv)
    if os.environ.get(KERNEL_VARIABLE) != "python":  # this process loaded the compiled parts
        arguments = [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv)]
        os.execve(sys.executable, arguments, {**os.environ, KERNEL_VARIABLE: "python"})
    paths = [trace_path(t) for t in args.traces]
    print(render([counted_replay(path, args.policy) for path in paths]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
