"""Simulate the full HPC2N trace in the embedded simulator with a trivial FCFS driver
(no backfilling), and print events/s and peak memory. Measures the simulator alone, with the
kernel it runs by default (the compiled one when built; ``BATSCHED_ML_KERNEL=python`` for the
pure-Python one)."""

from __future__ import annotations

import time

from _common import HPC2N, need, peak_rss_mib

from batsched_ml.sim import simulator
from batsched_ml.sim.loop import SerialFcfs, drive
from batsched_ml.sim.simulator import BatsimSimulator
from batsched_ml.workload.convert import convert_trace
from batsched_ml.workload.swf import read_swf


def main() -> None:
    workload = convert_trace(read_swf(need(HPC2N))).data
    hosts = [f"host{i}" for i in range(workload["nb_res"])]
    sim = BatsimSimulator([workload], hosts)
    start = time.perf_counter()
    messages = drive(sim, SerialFcfs(len(hosts)))
    elapsed = time.perf_counter() - start
    kernel = "compiled" if simulator.Kernel.__module__.endswith("_ckernel") else "Python"
    print(
        f"HPC2N ({kernel} kernel): {len(workload['jobs']):,} jobs, {messages:,} messages, "
        f"{sim.events_sent:,} events in {elapsed:.2f} s "
        f"= {sim.events_sent / elapsed:,.0f} events/s, "
        f"{len(workload['jobs']) / elapsed:,.0f} jobs/s; peak RSS {peak_rss_mib():.0f} MiB"
    )


if __name__ == "__main__":
    main()
