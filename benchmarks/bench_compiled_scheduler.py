"""The scheduler compiled by mypyc against its Python source, the rest the same (the compiled
simulator, the compiled forest): replay time of whole traces, each side in a process of its
own, interleaved (compiled, source, compiled, ...), medians and their ratio, and whether both
wrote the same job table.

    python benchmarks/bench_compiled_scheduler.py                      # full HPC2N, FCFS and SPF
    python benchmarks/bench_compiled_scheduler.py --trace KTH-SP2-1996-2.1-cln --repeat 5

The replay's time is ``run_replay``'s (reading the trace and writing files are the same on
both sides and left out). Needs the compiled scheduler built (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from _common import ROOT, trace_named

#: One replay in a fresh process: the scheduler from its source when asked (before anything of
#: the scheduler is imported), then the replay's time and its job table's digest.
CHILD = """
import hashlib, json, sys, time
from batsched_ml import compiled
if sys.argv[1] == "source":
    compiled.use_scheduler_source("benchmark")
from batsched_ml.runs.pipeline import load
from batsched_ml.runs.replaying import ReplayConfig, run_replay
state = compiled.guard_scheduler()[0]
workload = load(sys.argv[2])
started = time.perf_counter()
result = run_replay(workload, ReplayConfig(policy=sys.argv[3]))
seconds = time.perf_counter() - started
digest = hashlib.sha256("\\n".join(result.rows).encode()).hexdigest()
print(json.dumps({"state": state, "seconds": seconds, "digest": digest}))
"""


def one(side: str, trace: str, policy: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, side, trace, policy],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", default="HPC2N-2002-2.2-cln")
    parser.add_argument("--policies", nargs="+", default=["fcfs", "spf"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trace = str(trace_named(args.trace))
    print("| trace | policy | compiled (s) | source (s) | source / compiled | same jobs.csv |")
    print("|---|---|---:|---:|---:|---|")
    for policy in args.policies:
        runs: dict[str, list[dict]] = {"compiled": [], "source": []}
        for _ in range(args.repeat):
            for side in runs:
                runs[side].append(one(side, trace, policy))
        if {r["state"] for r in runs["compiled"]} != {"compiled"}:
            raise SystemExit("the compiled scheduler is not built here: pip install -e .")
        medians = {side: statistics.median(r["seconds"] for r in rs) for side, rs in runs.items()}
        same = len({r["digest"] for rs in runs.values() for r in rs}) == 1
        print(
            f"| {args.trace} | {policy} | {medians['compiled']:.2f} | {medians['source']:.2f} "
            f"| {medians['source'] / medians['compiled']:.2f} | {'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
