"""What each runtime predictor costs: one FCFS-EASY replay per predictor of a trace.

Prints, per predictor: the replay's wall time, the time spent predicting and learning per job
(``MeasuredPredictor``: ``estimate`` and ``observe``, weekly retraining included) and the
prediction quality (APA, UR), which must not move when the code gets faster.

    python bench_predictors.py                                   # KTH-SP2, every predictor
    python bench_predictors.py --trace ../../shared/traces/SDSC-SP2-1998-4.2-cln.swf.gz su
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import KTH, need

from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.scheduler.predictors import PREDICTORS
from batsched_ml.workload.io import load_workload


def measure(workload: dict, predictor: str) -> None:
    started = time.perf_counter()
    result = run_replay(workload, ReplayConfig(predictor=predictor))
    elapsed = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as out:
        quality = write_replay(result, out)["prediction"]
    measured = result.scheduler.predictor
    per_job = 1e6 * measured.seconds / max(1, len(measured.predictions))
    print(
        f"{predictor:<10} replay {elapsed:7.1f} s  {per_job:9.1f} µs per job  "
        f"APA {quality['APA']:.3f}  UR {quality['UR']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("predictors", nargs="*", default=list(PREDICTORS))
    parser.add_argument("--trace", type=Path, default=KTH)
    args = parser.parse_args()
    workload = load_workload(need(args.trace))
    print(f"{args.trace.name}: {len(workload['jobs']):,} jobs")
    for predictor in args.predictors:
        measure(workload, predictor)


if __name__ == "__main__":
    main()
