"""``batsched-ml workload convert``: an SWF trace into a Batsim workload and platform."""

from __future__ import annotations

import argparse
from pathlib import Path

from batsched_ml.cli import options
from batsched_ml.cli.parsing import not_a_run_folder
from batsched_ml.workload import shipped


def add_parser(commands: argparse._SubParsersAction) -> None:
    workload = commands.add_parser("workload", help="work with SWF traces and Batsim workloads")
    workload_commands = workload.add_subparsers(dest="workload_command", required=True)
    convert = workload_commands.add_parser(
        "convert",
        help="convert an SWF trace into a Batsim workload JSON and platform XML",
        description="Convert an SWF trace (plain or .gz) into DIR/NAME.json and "
        "DIR/NAME_platform.xml, printing how many jobs each cleaning rule dropped or changed.",
    )
    convert.add_argument("trace", help="SWF file, plain or gzipped")
    convert.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    convert.add_argument("--name", help="base name of the output files (default: the trace's)")
    convert.add_argument(
        "--machine-size",
        type=options.count,
        metavar="N",
        help="processors of the machine (default: the header's MaxProcs, else MaxNodes)",
    )
    convert.add_argument(
        "--lenient",
        action="store_true",
        help="skip and count malformed lines instead of stopping at the first",
    )
    convert.add_argument(
        "--batsim",
        type=int,
        choices=(4, 5),
        default=4,
        help="write the workload for Batsim 4 or for Batsim 5 (profile type DelayProfile, the "
        "jobs' fields Batsim 5 does not read in extra_data)",
    )
    convert.set_defaults(handler=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    from batsched_ml.results.runfolder import writable_folder
    from batsched_ml.workload.convert import convert_trace
    from batsched_ml.workload.io import write_converted
    from batsched_ml.workload.swf import read_swf

    not_a_run_folder(Path(args.output))
    trace = read_swf(shipped.resolve(args.trace), lenient=args.lenient)
    workload = convert_trace(trace, machine_size=args.machine_size)  # no jobs: nothing written
    if args.batsim == 5:  # profile types renamed, the jobs' other fields in extra_data
        from batsched_ml.workload.batsim5 import to_batsim5

        workload.data = to_batsim5(workload.data)
    writable_folder(args.output)
    name = args.name or trace.name
    workload_path, platform_path = write_converted(workload, args.output, name)
    for line in workload.report.lines():
        print(line)
    print(f"wrote {workload_path} ({workload.report.kept_jobs} jobs)")
    print(f"wrote {platform_path} ({workload.nb_res} hosts + master)")
    return 0
