"""FCFS-EASY replays in process: KTH-SP2 and the full HPC2N trace.

Prints, per trace: wall time of each phase (load = read + convert, replay, outputs), jobs/s of
the replay, and the process's peak memory. Targets (issue 4): full HPC2N under 10 s end to end
and under 1 GiB on this 2-core machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from _common import HPC2N, KTH, need, peak_rss_mib

from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload


def measure(path, policy: str) -> None:
    t0 = time.perf_counter()
    workload = load_workload(need(path))
    t1 = time.perf_counter()
    result = run_replay(workload, ReplayConfig(policy=policy))
    t2 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        summary = write_replay(result, out)
    t3 = time.perf_counter()
    jobs = len(workload["jobs"])
    print(
        f"{workload['trace']} {policy}: {jobs:,} jobs; load {t1 - t0:.2f} s, replay {t2 - t1:.2f} s "
        f"({jobs / (t2 - t1):,.0f} jobs/s, {result.messages:,} messages), outputs {t3 - t2:.2f} s; "
        f"total {t3 - t0:.2f} s; peak RSS {peak_rss_mib():.0f} MiB; mean bsld {summary['mean_bsld']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="fcfs")
    parser.add_argument("--only", choices=["kth", "hpc2n"])
    args = parser.parse_args()
    if args.only != "hpc2n":
        measure(KTH, args.policy)
    if args.only != "kth":
        measure(HPC2N, args.policy)


if __name__ == "__main__":
    main()
