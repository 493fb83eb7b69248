"""Online features (every job finished before the submission) against the paper's
simplification (jobs of previous weeks only), with the default forest set-up, on the same job
stream (see training_setup.py). Prints accuracy, precision and recall per trace and mode.

A third mode, "submitted", is not something a scheduler can do: the classes of all jobs
submitted before, finished or not, feed the features (as an offline pipeline that reads every
runtime from the trace would compute them). It measures how much such leakage inflates quality.

    python feature_modes.py [TRACE ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import KTH, TRACES
from training_setup import evaluate, job_stream

from batsched_ml.predict.forest import ForestParams
from batsched_ml.workload.io import load_workload


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or [KTH, TRACES / "SDSC-SP2-1998-4.2-cln.swf.gz"]
    print(f"{'trace':24} {'mode':8} {'accuracy':>9} {'precision':>9} {'recall':>7}")
    for path in paths:
        workload = load_workload(path)
        for mode in ("online", "weekly", "submitted"):
            acc, prec, rec, _seconds, _jobs = evaluate(
                *job_stream(workload, mode), ForestParams(), 1
            )
            print(f"{workload['trace']:24} {mode:8} {acc:9.1%} {prec:9.1%} {rec:7.1%}", flush=True)


if __name__ == "__main__":
    main()
