"""What each compiled part buys a replay: the replay alone (``run_replay``, the workload already
loaded) with every compiled part, then with one part after the other replaced by its Python
reference, each side in a process of its own, interleaved, median of ``--repeat``:

* ``compiled``: the compiled simulator (``_csim``) and the scheduler compiled by mypyc;
* ``scheduler source``: the scheduler from its ``.py`` files, the simulator compiled;
* ``Python actors``: the Python simulator (:mod:`batsched_ml.sim.simulator`, Batsim's actors as
  generators) on the compiled SimGrid kernel (``_ckernel``), the scheduler compiled;
* ``Python actors and kernel``: the same on the Python kernel (:mod:`batsched_ml.sim.simgrid`);
* ``nothing compiled``: ``BATSCHED_ML_KERNEL=python``, what an install without a C compiler runs.

Every side must write the same job table (its digest is compared). Printed: a row per trace and
policy with each side's seconds and its ratio to ``compiled``. The differences say where a
replay without a compiler spends the time the compiled parts save: the scheduler interpreted,
the actors interpreted, the kernel interpreted (the three add up to about the whole, not
exactly: they are measured apart).

Usage::

    python benchmarks/compiled_parts.py                      # KTH-SP2 and full HPC2N, FCFS
    python benchmarks/compiled_parts.py --traces KTH-SP2-1996-2.1-cln --policies fcfs spf \
        --repeat 5 --json parts.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import ROOT, kernel_environment, trace_path

#: One replay in a fresh process, the parts asked for replaced by their references before
#: anything of the scheduler or the simulator is imported; prints the replay's seconds, the
#: engine that ran and the job table's digest.
CHILD = """
import hashlib, json, sys, time
from batsched_ml import compiled
side, trace, policy = sys.argv[1:4]
if side == "scheduler source":
    compiled.use_scheduler_source("benchmark")
from batsched_ml.runs.pipeline import load
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.sim import csim, simgrid, simulator
if side in ("Python actors", "Python actors and kernel"):
    csim.module = lambda: None
if side == "Python actors and kernel":
    simulator.Kernel = simgrid.Kernel
workload = load(trace)
started = time.perf_counter()
result = run_replay(workload, ReplayConfig(policy=policy))
seconds = time.perf_counter() - started
digest = hashlib.sha256("\\n".join(result.rows).encode()).hexdigest()
print(json.dumps({"seconds": seconds, "engine": result.engine,
                  "scheduler": compiled.guard_scheduler()[0], "digest": digest}))
"""

SIDES = (
    "compiled",
    "scheduler source",
    "Python actors",
    "Python actors and kernel",
    "nothing compiled",
)

#: what each side must have run: (simulator engine, scheduler)
EXPECTED = {
    "compiled": ("compiled", "compiled"),
    "scheduler source": ("compiled", "python"),
    "Python actors": ("python", "compiled"),
    "Python actors and kernel": ("python", "compiled"),
    "nothing compiled": ("python", "python"),
}


def one(side: str, trace: Path, policy: str) -> dict:
    """One replay of ``trace`` under ``policy`` with ``side``'s parts, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, side, str(trace), policy],
        cwd=ROOT,
        env=kernel_environment(side == "nothing compiled"),
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    if (result["engine"], result["scheduler"]) != EXPECTED[side]:
        raise SystemExit(
            f"{side}: ran the {result['engine']} simulator and the {result['scheduler']} "
            "scheduler: the compiled parts are not all built here (pip install -e .)"
        )
    return result


def render(figures: dict) -> str:
    """The table of ``figures`` (what :func:`main` measured or saved)."""
    head = "| trace, policy | " + " | ".join(SIDES) + " | same job table |"
    lines = [head, "|---|" + "---|" * len(SIDES) + "---|"]
    for row in figures["rows"]:
        base = row["seconds"]["compiled"]
        cells = [f"{base:.2f} s"] + [
            f"{row['seconds'][side]:.2f} s ({row['seconds'][side] / base:.1f} x)"
            for side in SIDES[1:]
        ]
        same = "yes" if row["same"] else "**no**"
        label = f"{row['trace']}, {row['policy'].upper()}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {same} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--traces", nargs="+", default=["KTH-SP2-1996-2.1-cln", "HPC2N-2002-2.2-cln"]
    )
    parser.add_argument("--policies", nargs="+", default=["fcfs"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures (speed_page.py)")
    args = parser.parse_args()
    rows = []
    for name in args.traces:
        trace = trace_path(name)
        for policy in args.policies:
            runs: dict[str, list[dict]] = {side: [] for side in SIDES}
            for _ in range(args.repeat):
                for side in SIDES:
                    runs[side].append(one(side, trace, policy))
            rows.append(
                {
                    "trace": trace.name.removesuffix(".swf.gz"),
                    "policy": policy,
                    "seconds": {
                        side: statistics.median(r["seconds"] for r in found)
                        for side, found in runs.items()
                    },
                    "same": len({r["digest"] for found in runs.values() for r in found}) == 1,
                }
            )
    figures = {
        "date": datetime.date.today().isoformat(),
        "cores": os.cpu_count(),
        "repeat": args.repeat,
        "rows": rows,
    }
    print(render(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    if not all(row["same"] for row in rows):
        raise SystemExit("the sides wrote different job tables")


if __name__ == "__main__":
    main()
