"""The ``batsched-ml`` command line: a thin layer that wires the modules together.

Every user-facing failure (bad input file, invalid option) ends with one ``batsched-ml: error:``
line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from batsched_ml import __version__
from batsched_ml.workload.convert import convert_trace
from batsched_ml.workload.io import WorkloadError, write_converted
from batsched_ml.workload.swf import SwfError, read_swf

USER_ERRORS: tuple[type[Exception], ...] = (SwfError, WorkloadError, FileNotFoundError)


def _cmd_workload_convert(args: argparse.Namespace) -> int:
    trace = read_swf(args.trace, lenient=args.lenient)
    workload = convert_trace(trace, machine_size=args.machine_size)
    name = args.name or trace.name
    workload_path, platform_path = write_converted(workload, args.output, name)
    for line in workload.report.lines():
        print(line)
    print(f"wrote {workload_path} ({workload.report.kept_jobs} jobs)")
    print(f"wrote {platform_path} ({workload.nb_res} hosts + master)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="batsched-ml",
        description="Batsim scheduling with online job-size classification.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
        type=int,
        metavar="N",
        help="processors of the machine (default: the header's MaxProcs, else MaxNodes)",
    )
    convert.add_argument(
        "--lenient",
        action="store_true",
        help="skip and count malformed lines instead of stopping at the first",
    )
    convert.set_defaults(handler=_cmd_workload_convert)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except USER_ERRORS as exc:
        print(f"batsched-ml: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("batsched-ml: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
