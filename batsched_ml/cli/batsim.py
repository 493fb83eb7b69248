"""``batsched-ml batsim``: the embedded simulator as Batsim's side of the protocol (a stand-in
for a real Batsim, with its command line)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from batsched_ml.cli import options
from batsched_ml.errors import ConfigError


def add_parser(commands: argparse._SubParsersAction) -> None:
    batsim = commands.add_parser(
        "batsim",
        help="the embedded simulator as a Batsim peer over ZeroMQ (stand-in for real Batsim)",
        description="Play Batsim's side of the protocol over ZeroMQ with the embedded simulator; "
        "options follow Batsim 4.2.1's command line. Writes PREFIX_jobs.csv. With --protocol 5, "
        "Batsim 5.0.0-rc2's protocol (JSON) and outputs: PREFIXjobs.csv (PREFIX out/ by "
        "default), the features from the scheduler's hello.",
    )
    batsim.add_argument(
        "-p",
        "--platform",
        required=True,
        help="SimGrid platform XML: exact links (latency 0, 1 TBps, as `workload convert` "
        "writes them), or link latencies on a flat compute cluster with a one-host master "
        "cluster and one zoneRoute between them; any other platform is refused, naming the "
        "element",
    )
    batsim.add_argument(
        "-w", "--workload", required=True, action="append", help="workload JSON or SWF"
    )
    batsim.add_argument(
        "-e",
        "--export",
        metavar="PREFIX",
        help="write PREFIX_jobs.csv, as Batsim 4 does (default: out), or PREFIXjobs.csv, as "
        "Batsim 5 does (default: out/)",
    )
    batsim.add_argument(
        "-s",
        "--socket-endpoint",
        default="tcp://localhost:28000",
        metavar="ENDPOINT",
        help="the scheduler to connect to",
    )
    batsim.add_argument(
        "--protocol",
        choices=("4", "5"),
        default="4",
        help="speak Batsim 4.2.1's protocol or Batsim 5.0.0-rc2's (JSON serialisation)",
    )
    batsim.add_argument(
        "--init-string",
        default="",
        metavar="TEXT",
        help="with --protocol 5: the init string sent first",
    )
    batsim.add_argument(
        "init",
        nargs="?",
        metavar="INIT_STRING",
        help="with --protocol 5: the init string, as Batsim 5 takes it after the endpoint "
        "(-s ENDPOINT INIT_STRING); the same as --init-string",
    )
    batsim.add_argument("--enable-dynamic-jobs", action="store_true")
    batsim.add_argument("--acknowledge-dynamic-jobs", action="store_true")
    batsim.add_argument("--enable-profile-reuse", action="store_true")
    batsim.add_argument("--forward-profiles-on-submission", action="store_true")
    batsim.add_argument(
        "--timeout",
        type=options.seconds_or_zero,
        default=600.0,
        metavar="SECONDS",
        help="0 waits forever",
    )
    batsim.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.init is not None:
        if args.init_string and args.init != args.init_string:
            raise ConfigError("two init strings: INIT_STRING and --init-string differ")
        args.init_string = args.init
    if args.protocol == "5":
        return run_batsim5(args)
    if args.init_string:
        raise ConfigError("an init string is Batsim 5's (--protocol 5)")
    from batsched_ml.results.textfile import write_jobs_csv
    from batsched_ml.sim.simulator import BatsimSimulator
    from batsched_ml.transport.v4 import run_batsim_peer
    from batsched_ml.workload.io import load_workload, report_dropped
    from batsched_ml.workload.platform import compute_host_names, message_routes

    routes = message_routes(args.platform)  # None: exact; a platform not modelled: refused
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
        routes=routes,
    )
    timeout = None if args.timeout <= 0 else args.timeout
    prefix = args.export or "out"
    out = Path(prefix + "_jobs.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, workload in zip(args.workload, workloads, strict=True):
        report_dropped(workload, path)
    try:
        count = run_batsim_peer(sim, args.socket_endpoint, timeout=timeout)
    except BaseException:
        # the jobs finished so far, under a name no reader takes for a whole run's table
        partial = Path(prefix + "_jobs.partial.csv")
        write_jobs_csv(partial, sim.rows)
        print(f"batsched-ml: the run stopped early; {len(sim.rows)} job(s) in {partial}")
        raise
    write_jobs_csv(out, sim.rows)
    print(json.dumps({"messages": count, "jobs": len(sim.rows), "jobs_csv": str(out)}))
    return 0


def run_batsim5(args: argparse.Namespace) -> int:
    """The stand-in as Batsim 5.0.0-rc2: its init frame and the scheduler's hello first (the
    features it requests set the simulation up), then Batsim 5's messages; ``PREFIXjobs.csv``
    as Batsim 5 names and writes it. Batsim 4's flags for dynamic jobs and profiles are EDC
    features in Batsim 5: refused here. Platforms with link latencies are simulated where their
    shape is the recorded one (:func:`~batsched_ml.workload.platform.message_routes`), else
    refused."""
    from batsched_ml.results.textfile import write_jobs_csv
    from batsched_ml.sim.simulator import Batsim5, BatsimSimulator
    from batsched_ml.transport.v5 import run_batsim5_peer
    from batsched_ml.workload.batsim5 import from_batsim5, to_batsim5
    from batsched_ml.workload.io import is_swf, load_workload, report_dropped
    from batsched_ml.workload.platform import compute_host_names, message_routes

    v4_flags = ("enable_dynamic_jobs", "acknowledge_dynamic_jobs", "enable_profile_reuse")
    given = [f"--{f.replace('_', '-')}" for f in (*v4_flags, "forward_profiles_on_submission")]
    given = [flag for flag in given if getattr(args, flag[2:].replace("-", "_"))]
    if given:
        raise ConfigError(
            f"{', '.join(given)}: Batsim 4 flags; in Batsim 5 the scheduler requests dynamic jobs "
            "and profiles in its hello (--protocol 5 takes them from there)"
        )
    routes = message_routes(args.platform, speed=True)
    workloads = []
    for path in args.workload:
        data = load_workload(path)
        data = from_batsim5(to_batsim5(data) if is_swf(path) else data, path)
        report_dropped(data, path)
        workloads.append(data)
    hosts = compute_host_names(args.platform)
    prefix = "out/" if args.export is None else args.export
    context = {"socket_endpoint": args.socket_endpoint, "export_prefix": prefix}
    arguments = (Path(sys.argv[0]).name, *sys.argv[1:])
    context_json = json.dumps(context, separators=(",", ":"))

    made: list[BatsimSimulator] = []  # once the hello has come

    def simulator(features: dict[str, bool]) -> BatsimSimulator:
        made.append(
            BatsimSimulator(
                workloads,
                hosts,
                workload_paths=[str(Path(p).resolve()) for p in args.workload],
                batsim5=Batsim5(features, arguments, context_json),
                routes=routes,
            )
        )
        return made[0]

    timeout = None if args.timeout <= 0 else args.timeout
    out = Path(prefix + "jobs.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        sim, count = run_batsim5_peer(
            simulator, args.socket_endpoint, init_string=args.init_string, timeout=timeout
        )
    except BaseException:
        if made:  # the jobs finished so far, as the Batsim 4 stand-in keeps them
            partial = Path(prefix + "jobs.partial.csv")
            write_jobs_csv(partial, made[0].rows)
            print(f"batsched-ml: the run stopped early; {len(made[0].rows)} job(s) in {partial}")
        raise
    write_jobs_csv(out, sim.rows)
    print(json.dumps({"messages": count, "jobs": len(sim.rows), "jobs_csv": str(out)}))
    return 0
