"""The parser every command shares: one-line errors, defaults in ``--help``, and the checks of
an output folder made before any work goes into it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from batsched_ml.errors import OutputHoldsRun


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default when it has one that its help does not already state."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if (
            text is None
            or "default" in text
            or action.default in (None, False, argparse.SUPPRESS)
            or action.required
            or not action.option_strings
        ):
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage block, sometimes ten lines, is one ``--help``
    away; the line names it), and the defaults in ``--help``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file=None) -> None:
        """argparse's, except that a reader of ``--help`` gone away is not ignored: the command
        line ends as any command whose reader went away (exit 141)."""
        if message:
            try:
                (file or sys.stderr).write(message)
            except BrokenPipeError:
                raise
            except (AttributeError, OSError):
                pass

    def error(self, message: str) -> NoReturn:
        line = f"batsched-ml: error: {message} (see: {self.prog} --help)"
        print(line, file=sys.stderr)
        raise UsageError(line)


class UsageError(SystemExit):
    """A command line argparse refused (exit code 2); ``line`` is the error printed."""

    def __init__(self, line: str) -> None:
        super().__init__(2)
        self.line = line


#: Files that only a run writes: a folder holding one of them is a run's folder.
RUN_MARKERS = ("run.json", "jobs.csv", "summary.json")


def not_a_run_folder(out: Path) -> None:
    """Refuse an output folder that holds a run (exit 73): a converted workload written into
    it would mix with the run's files (and a later ``--force`` of the run would refuse the
    folder for holding files no run writes)."""
    found = [name for name in RUN_MARKERS if (out / name).exists()]
    if found:
        raise OutputHoldsRun(
            f"{out} holds a run ({', '.join(found)}): not writing a workload there; choose "
            "another folder for -o"
        )


def write_page(output: str, text: str) -> int:
    """Write a generated page (its folder made if needed) and say so."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0
