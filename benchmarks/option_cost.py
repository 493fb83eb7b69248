"""What a dispatcher option costs per job, against EASY: microseconds per job of the whole
replay (the simulator, the scheduler and the dispatcher, compiled parts as installed), on
KTH-SP2 (FCFS).

    python benchmarks/option_cost.py [--repeats 3] [--trace NAME]

Each option runs ``--repeats`` times, the options interleaved (EASY, then each option, then EASY
again, ...) so that the machine's drift touches them alike; the table gives the median and the
ratio of the medians to EASY's, all from this one run (compare ratios, not absolute times of two
runs). Writes ``benchmarks/results/option-cost.json``.

The dispatcher's own share is not timed apart: EASY is compiled with the scheduler (mypyc), and
a compiled object's methods cannot be wrapped by a timer; a stand-in object around it would
leave the scheduler's paths for EASY (it tests the dispatcher's type) and time another run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from _common import ROOT, trace_named

from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload

#: the options measured: (label, dispatcher, its options)
OPTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("easy", "easy", {}),
    ("probabilistic", "probabilistic", {}),
    ("probabilistic epsilon=0.3", "probabilistic", {"epsilon": 0.3}),
]


def measure(workload: dict[str, Any], dispatcher: str, params: dict[str, Any]) -> float:
    """One replay's wall time per job, in microseconds."""
    config = ReplayConfig(dispatcher=dispatcher, dispatcher_params=params)
    started = time.perf_counter()
    result = run_replay(workload, config)
    seconds = time.perf_counter() - started
    return seconds / len(result.rows) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trace", default="KTH-SP2-1996-2.1-cln")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / "option-cost.json",
        help="where the figures go (default: the probabilistic page's, benchmarks/results/)",
    )
    args = parser.parse_args()
    workload = load_workload(trace_named(args.trace))
    samples: dict[str, list[float]] = {label: [] for label, _, _ in OPTIONS}
    for _ in range(args.repeats):
        for label, dispatcher, params in OPTIONS:
            samples[label].append(measure(workload, dispatcher, params))
    easy = statistics.median(samples["easy"])
    rows = []
    print(f"{args.trace}, FCFS, median of {args.repeats} (µs per job; ratio to EASY)")
    for label, _, _ in OPTIONS:
        replay_us = statistics.median(samples[label])
        row = {"option": label, "replay_us": round(replay_us, 2)}
        row["replay_ratio"] = round(replay_us / easy, 2)
        rows.append(row)
        print(f"{label:28} replay {row['replay_us']:8.2f} ({row['replay_ratio']:.2f})")
    args.out.write_text(
        json.dumps({"trace": args.trace, "repeats": args.repeats, "rows": rows}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
