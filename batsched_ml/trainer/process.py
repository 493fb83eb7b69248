"""Starting, supervising and stopping a side trainer process for a replay or a serve run."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from batsched_ml.predict.forest import ForestParams
from batsched_ml.trainer.store import close_history


def free_tcp_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def trainer_command(
    endpoint: str, store_dir: Path, db_path: Path, params: ForestParams
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "batsched_ml",
        "trainer",
        "--socket",
        endpoint,
        "--store",
        str(store_dir),
        "--db",
        str(db_path),
        "--trees",
        str(params.n_estimators),
        "--window",
        "all" if params.window is None else str(params.window),
        "--idle-timeout",
        "3600",
    ]
    command += ["--max-samples", "all" if params.max_samples is None else repr(params.max_samples)]
    if params.divider_quantile != 0.5:  # the median otherwise, the trainer's default
        command += ["--divider-quantile", repr(params.divider_quantile)]
    return command


@contextlib.contextmanager
def held_stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs, then delivered as they came.

    Why: a Ctrl-C or SIGTERM that lands inside ``subprocess.Popen`` after the fork (while it
    waits for the child's ``exec``) raises out of ``Popen`` and loses the only handle on a
    child that runs on, in its own session, for an hour: an orphaned trainer. Held back, the
    signal is raised only once the handle is stored where the run's clean-up finds it. Only
    the main thread receives signals, so elsewhere this holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in stops}
    try:
        for sig in stops:
            if previous[sig] not in (signal.SIG_IGN, None):
                signal.signal(sig, lambda signum, frame: caught.append(signum))
        yield
    finally:
        for sig in stops:
            if previous[sig] is not None:
                signal.signal(sig, previous[sig])
        if caught:  # the first is enough: it interrupts the run
            signal.raise_signal(caught[0])


class TrainerProcess:
    """A side trainer process owned by one run: started on a free loopback port, restarted on
    the same port if it dies (with its database, so it resumes from the stored history), and
    stopped at the end. Its output goes to ``STORE/trainer.log``. ``environment``: variables
    added to this process's environment for it (the tests' fault injection,
    :data:`~batsched_ml.trainer.server.FAULTS_VARIABLE`).

    Constructing it starts nothing: :meth:`start` does, so that the owner holds the object
    (and can :meth:`kill` it) before any child exists."""

    def __init__(
        self,
        store_dir: Path,
        db_path: Path,
        params: ForestParams,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.store_dir = Path(store_dir)
        self.db_path = Path(db_path)
        self.params = params
        self.environment = dict(environment or {})
        self.endpoint = free_tcp_endpoint()
        self.restarts = 0
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the process (again, on the same port, if it had died)."""
        command = trainer_command(self.endpoint, self.store_dir, self.db_path, self.params)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        with (self.store_dir / "trainer.log").open("ab") as log, held_stop_signals():
            # its own process group, not its own session: a Ctrl-C at the terminal reaches
            # the run (the foreground group), which stops it; and it stays in the run's
            # session, so in the run's scheduling group where Linux groups CPU time by session
            # (autogroup): in a session of its own, the trainer got one share against every
            # busy process of the run's session, and a week's forest grew on one core instead
            # of two (+46 % on full HPC2N with a campaign running beside it)
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
                env={**os.environ, **self.environment} if self.environment else None,
            )

    def exit_code(self) -> int | None:
        """``None`` while it runs."""
        assert self.process is not None, "not started"
        return self.process.poll()

    def restart(self) -> None:
        self.start()
        self.restarts += 1

    def kill(self) -> None:
        """Stop it now (the run was interrupted: no model it trains will be used), and close
        its history as it would have (:func:`~batsched_ml.trainer.store.close_history`: no
        SQLite ``-wal`` or ``-shm`` left in the run's folder)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close_history()

    def stop(self, timeout: float = 30.0) -> None:
        """Wait for it to exit (after a ``stop`` request), killing it after ``timeout``."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._close_history()

    def _close_history(self) -> None:
        close_history(self.db_path)
