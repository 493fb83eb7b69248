"""``batsched-ml batsim``: the embedded simulator as Batsim's side of the protocol (a stand-in
for a real Batsim, with its command line)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
    batsim = commands.add_parser(
        "batsim",
        help="the embedded simulator as a Batsim peer over ZeroMQ (stand-in for real Batsim)",
        description="Play Batsim's side of the protocol over ZeroMQ with the embedded simulator; "
        "options follow Batsim 4.2.1's command line. Writes PREFIX_jobs.csv.",
    )
    batsim.add_argument("-p", "--platform", required=True, help="SimGrid platform XML")
    batsim.add_argument(
        "-w", "--workload", required=True, action="append", help="workload JSON or SWF"
    )
    batsim.add_argument(
        "-e",
        "--export",
        default="out",
        metavar="PREFIX",
        help="write PREFIX_jobs.csv, as Batsim does",
    )
    batsim.add_argument(
        "-s",
        "--socket-endpoint",
        default="tcp://localhost:28000",
        metavar="ENDPOINT",
        help="the scheduler to connect to",
    )
    batsim.add_argument("--enable-dynamic-jobs", action="store_true")
    batsim.add_argument("--acknowledge-dynamic-jobs", action="store_true")
    batsim.add_argument("--enable-profile-reuse", action="store_true")
    batsim.add_argument("--forward-profiles-on-submission", action="store_true")
    batsim.add_argument(
        "--timeout", type=float, default=600.0, metavar="SECONDS", help="0 waits forever"
    )
    batsim.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.sim import jobs_csv
    from batsched_ml.sim.simulator import BatsimSimulator
    from batsched_ml.transport import run_batsim_peer
    from batsched_ml.workload.io import load_workload, report_dropped
    from batsched_ml.workload.platform import compute_host_names

    workloads = [load_workload(path) for path in args.workload]
    hosts = compute_host_names(args.platform)
    sim = BatsimSimulator(
        workloads,
        hosts,
        dynamic_jobs=args.enable_dynamic_jobs,
        acknowledge_dynamic_jobs=args.acknowledge_dynamic_jobs,
        profile_reuse=args.enable_profile_reuse,
        forward_profiles=args.forward_profiles_on_submission,
        workload_paths=[str(Path(p).resolve()) for p in args.workload],
    )
    timeout = None if args.timeout <= 0 else args.timeout
    out = Path(args.export + "_jobs.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, workload in zip(args.workload, workloads, strict=True):
        report_dropped(workload, path)
    try:
        count = run_batsim_peer(sim, args.socket_endpoint, timeout=timeout)
    except BaseException:
        # the jobs finished so far, under a name no reader takes for a whole run's table
        partial = Path(args.export + "_jobs.partial.csv")
        jobs_csv.write_jobs_csv(partial, sim.rows)
        print(f"batsched-ml: the run stopped early; {len(sim.rows)} job(s) in {partial}")
        raise
    jobs_csv.write_jobs_csv(out, sim.rows)
    print(json.dumps({"messages": count, "jobs": len(sim.rows), "jobs_csv": str(out)}))
    return 0
