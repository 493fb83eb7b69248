"""The errors a user can fix: the command line prints them as one ``batsched-ml: error:`` line
(exit 2, or the class's :attr:`UserError.exit_code`); anything else escaping a command is a bug
in batsched-ml and keeps its traceback.

Exit statuses of the command line: 0 done; 1 a run failed or a peer went silent; 2 a user
error; 66 an input named in a campaign is missing (:class:`InputMissing`, sysexits'
EX_NOINPUT); 69 an optional compiled part a command needs is not built (:class:`NotBuilt`,
EX_UNAVAILABLE); 70 a bug (EX_SOFTWARE); 73 an output folder that holds a run and must not be
written into (:class:`OutputHoldsRun`, EX_CANTCREAT); 75 a classified run completed without
the side trainer's models in some weeks (EX_TEMPFAIL: said in one line, the weeks in
``summary.json``'s ``trainer_events``); 130 / 143 interrupted (SIGINT / SIGTERM);
141 the reader of standard output went away (``| head``: quiet, as a process that SIGPIPE
ends).

Each module's own error classes (``SwfError``, ``WorkloadError``, ``ProtocolError``, ...)
derive from :class:`UserError` as well as from the built-in class they always were, so that
code catching ``ValueError`` keeps working. A plain ``ValueError`` or ``KeyError`` raised
deep inside is *not* a user error: it would otherwise be reported as bad input and hidden.
"""

from __future__ import annotations

import math


class UserError(Exception):
    """Something in what the user gave (a file, an option, a folder, a peer) is wrong; the
    message names it."""

    #: the command line's exit status for it
    exit_code: int = 2


class InputMissing(UserError, FileNotFoundError):
    """Inputs that a command checks before it starts (a campaign's traces) are missing: the
    message names them, and nothing is written (exit 66, EX_NOINPUT)."""

    exit_code = 66


class OutputHoldsRun(UserError, ValueError):
    """The output folder of a command that does not make runs (``workload convert``) holds a
    run (``run.json``, ``jobs.csv``): writing there would mix its files with the run's
    (exit 73, EX_CANTCREAT)."""

    exit_code = 73


class NotBuilt(UserError):
    """An optional compiled part that a command cannot do without was not built at install
    (no C compiler, no shared libpython) or was built from another source: ``batsched-ml
    edc-library`` and Batsim 5's library (exit 69, EX_UNAVAILABLE)."""

    exit_code = 69


class SchedulerError(UserError, RuntimeError):
    """Batsim told the scheduler something inconsistent with what it knows (raised by
    :class:`batsched_ml.scheduler.core.BatchScheduler`; here, outside the scheduler's compiled
    modules, because a compiled class cannot derive from two built-in exception classes)."""


class TransportError(RuntimeError):
    """The peer went silent, or the connection failed (:mod:`batsched_ml.transport.v4`; here so
    that the command line catches it without importing ZeroMQ for every command): exit 1."""


class ConfigError(UserError, ValueError):
    """A setting that cannot be used: unknown name, wrong type, value out of range, or two
    settings that do not go together."""


def check_integer(what: str, value: object, least: int | None = None) -> None:
    """A setting's check of a whole number (at least ``least``): :class:`ConfigError` naming it
    otherwise. Constructors and the forest's parameters call it when made, so that a count of 0
    or a negative seed is one line before a run, not a run that fails, hangs or learns nothing."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{what} must be an integer, not {value!r}")
    if least is not None and value < least:
        raise ConfigError(f"{what} must be an integer >= {least}, not {value}")


def check_positive(what: str, value: object) -> None:
    """A setting's check of a positive, finite number (seconds, a weight): a NaN or a negative
    one would otherwise run, wrong, or stop the replay half-way."""
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and math.isfinite(value) and value > 0
    ):
        raise ConfigError(f"{what} must be a positive number, not {value}")


class PeerGone(TransportError):
    """The peer closed its connection while an answer from it was awaited (its process ended):
    no answer can come. Exit 3, told apart from a peer that is only silent (exit 1)."""
