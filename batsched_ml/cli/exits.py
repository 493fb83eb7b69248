"""How a command ends: its exit status for each kind of failure, the signals that stop it, and
a reader of its output that went away.

Every user-facing failure (bad input file, invalid option) ends with one ``batsched-ml:
error:`` line on stderr and exit status 2 (a few have their own status:
:mod:`batsched_ml.errors` lists them all), never a traceback; an internal error shows its
traceback and exits 70.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

from batsched_ml.errors import PeerGone, TransportError, UserError

#: What a user can fix, printed as one line with exit 2 (or the error class's own status, see
#: :mod:`batsched_ml.errors`): the project's own error classes (all derive from
#: :class:`~batsched_ml.errors.UserError`) and the system's refusals of a path the user named
#: (missing file, no permission, full disk). Anything else is a bug: traceback,
#: exit 70 (EX_SOFTWARE), and a line asking to report it.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, OSError)
INTERNAL_ERROR = 70
PEER_GONE = 3  # the peer's connection closed while its answer was awaited (errors.PeerGone)
INTERRUPTED, TERMINATED = 130, 143
#: The reader of standard output went away (``batsched-ml ... | head``): the command ends
#: quietly with the status of a process killed by SIGPIPE, 128 + 13, as ``cat`` or ``grep``
#: do, no error line and no traceback.
BROKEN_PIPE = 141
#: a classified run completed, but its side trainer failed in some weeks, which ran with the last
#: good model or every job large: not the method's run (sysexits' EX_TEMPFAIL: run it again)
DEGRADED = 75


def stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (so a ``BrokenPipeError``
    came from writing to it, not from another pipe or socket)."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced (tests) or closed
        return False
    if not hasattr(select, "poll"):  # no way to tell: standard output is the likely pipe
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def quiet_broken_pipe() -> int:
    """End quietly after the reader of standard output went away: what is still buffered is
    dropped (standard output now writes to /dev/null, so that Python's own flush at exit
    does not print ``Exception ignored ... BrokenPipeError``)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return BROKEN_PIPE


def exit_code(exc: BaseException) -> int:
    """The exit status of a user error: 2, or the class's own (:mod:`batsched_ml.errors`:
    66 for a missing input, 73 for an output folder that must not be written)."""
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 2


class Terminated(KeyboardInterrupt):
    """SIGTERM (``docker stop``, ``kill``), raised where the program is, like Ctrl-C's
    ``KeyboardInterrupt``: the same clean-up runs (run folders marked ``interrupted``, child
    processes stopped), and the exit code tells the two apart (143, 130)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while a command runs (only in the main thread: a
    command run from another thread, e.g. in tests, keeps the process's handlers)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _error(exc: BaseException, code: int) -> tuple[int, str]:
    message = f"batsched-ml: error: {exc}"
    print(message, file=sys.stderr)
    return code, message


def run_command(command: Callable[[], int]) -> tuple[int, str | None]:
    """Run a parsed command; return its exit code and the error line it printed (if any)."""
    try:
        with stop_signals():
            code = int(command())
            # what is still buffered goes now: a reader gone away is found here, in the
            # handling below, rather than by Python's flush at exit (exit 120 and a message)
            sys.stdout.flush()
            return code, None
    except PeerGone as exc:  # a peer whose connection closed while we waited for it: exit 3
        return _error(exc, PEER_GONE)
    except TransportError as exc:  # a peer that went silent or away: exit 1
        return _error(exc, 1)
    except BrokenPipeError as exc:
        if stdout_gone():  # `batsched-ml ... | head`: the reader has what it wanted
            return quiet_broken_pipe(), None
        return _error(exc, exit_code(exc))  # another pipe: a system refusal, as below
    except USER_ERRORS as exc:
        return _error(exc, exit_code(exc))
    except KeyboardInterrupt as exc:
        print("batsched-ml: interrupted", file=sys.stderr)
        return (TERMINATED if isinstance(exc, Terminated) else INTERRUPTED), "interrupted"
    except Exception as exc:
        import traceback

        traceback.print_exc()
        message = (
            f"batsched-ml: internal error: {type(exc).__name__}: {exc} -- a bug in batsched-ml; "
            "please report it with the traceback above"
        )
        print(message, file=sys.stderr)
        return INTERNAL_ERROR, message
