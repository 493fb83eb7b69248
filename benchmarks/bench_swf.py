"""Time reading and converting SWF traces: ``read_swf`` with the compiled reader
(``batsched_ml/workload/_cswf.c``: the lines split and their numbers parsed in one pass) and
with its reference, the reader's own steps and numpy's parser (the compiled parts turned off),
in turn, median of ``--repeat``, and whether both read the same jobs; then
``convert_trace``.

Usage::

    python benchmarks/bench_swf.py                      # KTH-SP2, full HPC2N, RICC, CEA-Curie
    python benchmarks/bench_swf.py --traces KTH-SP2-1996-2.1-cln --repeat 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _common import trace_named

from batsched_ml.compiled import VARIABLE
from batsched_ml.workload.convert import convert_trace
from batsched_ml.workload.swf import SwfTrace, read_swf

TRACES = ("KTH-SP2-1996-2.1-cln", "HPC2N-2002-2.2-cln", "RICC-2010-2", "CEA-Curie-2011-2.1-cln")


def timed_read(path: object, reference: bool) -> tuple[float, SwfTrace]:
    """One ``read_swf`` of ``path``, by the reference parser or not."""
    saved = os.environ.get(VARIABLE)
    if reference:
        os.environ[VARIABLE] = "python"
    else:
        os.environ.pop(VARIABLE, None)
    try:
        start = time.perf_counter()
        trace = read_swf(path)  # type: ignore[arg-type]
        return time.perf_counter() - start, trace
    finally:
        if saved is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", nargs="+", default=list(TRACES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        "| trace | jobs | read, compiled parser | read, numpy (reference) | ratio | same jobs | convert |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.traces:
        path = trace_named(name)
        compiled: list[float] = []
        reference: list[float] = []
        same = True
        for _ in range(args.repeat):
            seconds, ours = timed_read(path, reference=False)
            compiled.append(seconds)
            seconds, theirs = timed_read(path, reference=True)
            reference.append(seconds)
            same = same and all(
                ours.jobs[name].dtype == theirs.jobs[name].dtype
                and ours.jobs[name].tobytes() == theirs.jobs[name].tobytes()
                for name in ours.jobs
            )
        start = time.perf_counter()
        convert_trace(ours)
        convert = time.perf_counter() - start
        ratio = statistics.median(compiled) / statistics.median(reference)
        print(
            f"| {ours.name} | {len(ours):,} | {statistics.median(compiled):.3f} s | "
            f"{statistics.median(reference):.3f} s | {ratio:.2f} | {same} | {convert:.2f} s |"
        )


if __name__ == "__main__":
    main()
