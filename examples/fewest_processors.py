"""A custom queue order: the narrowest jobs first.

A queue order is a class with ``key(job, now) -> tuple`` (smaller first) and ``dynamic`` (whether
the key changes with ``now``; if not, the queue is kept sorted as jobs arrive). ``job`` is the
scheduler's queue entry: ``res`` (processors), ``subtime``, ``seq`` (arrival order), ``rank_est``
(the runtime the predictor gave). Ties must end on ``seq``, so that a schedule is a function of
the event stream. The class rank of classification, and starving jobs, still go first: this order
applies within them.

Run it in the embedded simulator against FCFS, then with classification::

    python examples/fewest_processors.py --jobs 5000

Serve it, unchanged, to Batsim (real or the stand-in ``batsched-ml batsim``)::

    PYTHONPATH=examples batsched-ml serve --socket tcp://127.0.0.1:28000 \\
        --policy fewest_processors:FewestProcessorsFirst -o served
"""

from __future__ import annotations

import argparse
from importlib.resources import files
from typing import Any


class FewestProcessorsFirst:
    """Fewest requested processors first; equal widths in submission order."""

    dynamic = False

    def key(self, job: Any, now: float) -> tuple[float, float, int]:
        return (job.res, job.subtime, job.seq)


def main(argv: list[str] | None = None) -> dict[str, float]:
    import batsched_ml
    from batsched_ml.workload.io import load_workload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=None, help="replay the first JOBS jobs only")
    args = parser.parse_args(argv)
    workload = load_workload(files("batsched_ml") / "data" / "KTH-SP2-1996-2.1-cln.swf.gz")
    if args.jobs is not None:
        workload["jobs"] = workload["jobs"][: args.jobs]
    order = "fewest_processors:FewestProcessorsFirst"
    figures = {
        "fcfs": batsched_ml.replay(workload, policy="fcfs").summary["mean_bsld"],
        "fewest-processors": batsched_ml.replay(workload, policy=order).summary["mean_bsld"],
    }
    for name, value in figures.items():
        print(f"{name:>18}: mean bounded slowdown {value:.2f}")
    return figures


if __name__ == "__main__":
    main()
