"""The ``batsched-ml`` command line: a thin layer that wires the modules together, one module
per command (its options in ``add_parser``, its work in ``run``).

Every user-facing failure (bad input file, invalid option) ends with one ``batsched-ml: error:``
line on stderr and exit status 2 (a few have their own status: :mod:`batsched_ml.errors` lists
them all), never a traceback (:mod:`batsched_ml.cli.exits`). The command modules import what a
command runs only when it runs, so that ``--help`` and a mistyped option answer at once.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from batsched_ml import __version__
from batsched_ml.cli import (
    batsim,
    campaign,
    clear,
    collect,
    edc_library,
    paper_results,
    related_work,
    replay,
    report,
    serve,
    traces,
    trainer,
    workload,
)
from batsched_ml.cli.exits import quiet_broken_pipe, run_command, stdout_gone
from batsched_ml.cli.parsing import HelpFormatter, Parser, UsageError

__all__ = ["HelpFormatter", "UsageError", "build_parser", "main", "program"]

#: The commands, in the order ``--help`` lists them.
COMMANDS = (
    workload,
    traces,
    replay,
    serve,
    edc_library,
    trainer,
    batsim,
    collect,
    clear,
    report,
    campaign,
    related_work,
    paper_results,
)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each command module adds its own subcommand."""
    parser = Parser(
        prog="batsched-ml",
        description="Batsim scheduling with online job-size classification.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def _run(argv: Sequence[str] | None) -> tuple[int, str | None]:
    """Run a command; return its exit code and the error line it printed (if any)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return 2, exc.line
    except SystemExit as exc:  # --help, --version
        code = exc.code if isinstance(exc.code, int) else 0
        try:
            sys.stdout.flush()  # `--help | head`: found here rather than in Python's exit
        except BrokenPipeError:
            return quiet_broken_pipe(), None
        return code, None
    except BrokenPipeError:  # --help | head, the help longer than the pipe's buffer
        if not stdout_gone():
            raise
        return quiet_broken_pipe(), None
    return run_command(lambda: args.handler(args))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. With ``BATSCHED_ML_STATUS_FILE`` set, the exit code and the error line
    are also written there as JSON when the command ends: in the docker compose set-up, the
    ``experiment`` service reads them to fail at once, with the reason, when another service
    failed (:mod:`batsched_ml.serving.status`; not written when a later ``up`` has reset the
    folder)."""
    from batsched_ml.serving.status import begin, record_exit

    status_file, token = begin()
    code: int = 1
    error: str | None = "crashed (see its output)"
    try:
        code, error = _run(argv)
        if error is None and code != 0:
            error = f"exit code {code}"
        return code
    finally:
        if status_file:
            command = list(sys.argv[1:] if argv is None else argv)[:2]
            record = {"command": command, "exit_code": code, "error": error}
            record_exit(status_file, record, token)


def program(argv: Sequence[str] | None = None) -> int:
    """The ``batsched-ml`` program (its script and ``python -m batsched_ml``): :func:`main`, for
    a process that ends when it returns.

    Then every object left is frozen (``gc.freeze``), so that the interpreter's exit does not
    traverse them all in the collector's last passes: a classified replay keeps millions of
    objects to its end (its records, the scheduler's state), and those passes took about a
    second of full HPC2N's command (``benchmarks/exit_time.py``). Nothing waits on them: every
    file is written and closed, and the trainer stopped, before :func:`main` returns; the
    objects are still freed one by one as the modules are cleared, and the system takes back
    the memory. Only for a process that exits: :func:`main`, called in a process that goes on
    (the tests, a notebook), leaves the collector as it was."""
    code = main(argv)
    gc.freeze()
    return code
