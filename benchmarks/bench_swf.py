"""Time reading and converting SWF traces (issue: HPC2N under 2 s to read)."""

from __future__ import annotations

import time

from _common import HPC2N, KTH, need, peak_rss_mib

from batsched_ml.workload.convert import convert_trace
from batsched_ml.workload.swf import read_swf


def main() -> None:
    for path in (KTH, need(HPC2N)):
        best_read = best_convert = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            trace = read_swf(path)
            best_read = min(best_read, time.perf_counter() - start)
            start = time.perf_counter()
            workload = convert_trace(trace)
            best_convert = min(best_convert, time.perf_counter() - start)
        print(
            f"{trace.name}: {len(trace):,} jobs, read {best_read:.2f} s, "
            f"convert {best_convert:.2f} s ({workload.report.kept_jobs:,} kept), "
            f"peak RSS {peak_rss_mib():.0f} MiB (best of 3)"
        )


if __name__ == "__main__":
    main()
