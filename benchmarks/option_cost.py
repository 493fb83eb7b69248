"""What a dispatcher option costs per job, against EASY: microseconds per job of the dispatcher
(its decisions, and its learning from finished jobs for one that learns) and of the whole
replay, on KTH-SP2 (FCFS).

    python benchmarks/option_cost.py [--repeats 3] [--trace NAME]

Each option runs ``--repeats`` times, the options interleaved (EASY, then each option, then EASY
again, ...) so that the machine's drift touches them alike; the table gives the median and the
ratio of the medians to EASY's, all from this one run (compare ratios, not absolute times of two
runs). Writes ``benchmarks/results/option-cost.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import ROOT, trace_named

from batsched_ml.runs import replaying
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload

#: the options measured: (label, dispatcher, its options)
OPTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("easy", "easy", {}),
    ("probabilistic", "probabilistic", {}),
    ("probabilistic epsilon=0.3", "probabilistic", {"epsilon": 0.3}),
]


class Clock:
    """Seconds spent in the wrapped methods."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args)
            finally:
                self.seconds += time.perf_counter() - started

        return timed


def measure(workload: dict[str, Any], dispatcher: str, params: dict[str, Any]) -> dict[str, float]:
    """One replay: microseconds per job in the dispatcher and in the whole replay."""
    clock = Clock()
    make = replaying.make_dispatcher

    def timed_dispatcher(*args: Any, **kwargs: Any) -> Any:
        made = make(*args, **kwargs)
        made.decide = clock.wrap(made.decide)  # type: ignore[method-assign]
        if hasattr(made, "observe"):  # learns from finished jobs (the core calls on_completed)
            made.on_completed = clock.wrap(made.on_completed)  # type: ignore[method-assign]
        return made

    replaying.make_dispatcher = timed_dispatcher  # type: ignore[assignment]
    try:
        config = ReplayConfig(dispatcher=dispatcher, dispatcher_params=params)
        started = time.perf_counter()
        result = run_replay(workload, config)
        seconds = time.perf_counter() - started
    finally:
        replaying.make_dispatcher = make  # type: ignore[assignment]
    jobs = len(result.rows)
    return {"dispatcher_us": clock.seconds / jobs * 1e6, "replay_us": seconds / jobs * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trace", default="KTH-SP2-1996-2.1-cln")
    args = parser.parse_args()
    workload = load_workload(trace_named(args.trace))
    samples: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in OPTIONS}
    for _ in range(args.repeats):
        for label, dispatcher, params in OPTIONS:
            samples[label].append(measure(workload, dispatcher, params))
    rows = []
    easy = {
        key: statistics.median(s[key] for s in samples["easy"])
        for key in ("dispatcher_us", "replay_us")
    }
    print(f"{args.trace}, FCFS, median of {args.repeats} (µs per job; ratio to EASY)")
    for label, _, _ in OPTIONS:
        row: dict[str, Any] = {"option": label}
        for key in ("dispatcher_us", "replay_us"):
            row[key] = round(statistics.median(s[key] for s in samples[label]), 2)
            row[key.replace("_us", "_ratio")] = round(row[key] / easy[key], 2)
        rows.append(row)
        print(
            f"{label:28} dispatcher {row['dispatcher_us']:8.2f} ({row['dispatcher_ratio']:.2f})"
            f"   replay {row['replay_us']:8.2f} ({row['replay_ratio']:.2f})"
        )
    out = ROOT / "benchmarks" / "results" / "option-cost.json"
    out.write_text(
        json.dumps({"trace": args.trace, "repeats": args.repeats, "rows": rows}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
