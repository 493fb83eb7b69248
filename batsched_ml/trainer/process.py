"""Starting, supervising and stopping a side trainer process for a replay or a serve run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from batsched_ml.predict.forest import ForestParams


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


class TrainerProcess:
    """A side trainer process owned by one run: started on a free loopback port, restarted on
    the same port if it dies (with its database, so it resumes from the stored history), and
    stopped at the end. Its output goes to ``STORE/trainer.log``. ``environment``: variables
    added to this process's environment for it (the tests' fault injection,
    :data:`~batsched_ml.trainer.server.FAULTS_VARIABLE`)."""

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
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen:
        command = trainer_command(self.endpoint, self.store_dir, self.db_path, self.params)
        with (self.store_dir / "trainer.log").open("ab") as log:
            # its own session: a Ctrl-C at the terminal reaches the run, which stops it
            return subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **self.environment} if self.environment else None,
            )

    def exit_code(self) -> int | None:
        """``None`` while it runs."""
        return self.process.poll()

    def restart(self) -> None:
        self.process = self._spawn()
        self.restarts += 1

    def kill(self) -> None:
        """Stop it now (the run was interrupted: no model it trains will be used)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """Wait for it to exit (after a ``stop`` request), killing it after ``timeout``."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_trainer(
    store_dir: Path, db_path: Path, params: ForestParams
) -> tuple[subprocess.Popen, str]:
    """A trainer process on a free loopback port; returns it and its endpoint."""
    endpoint = free_tcp_endpoint()
    store_dir.mkdir(parents=True, exist_ok=True)
    log = (store_dir / "trainer.log").open("ab")
    process = subprocess.Popen(
        trainer_command(endpoint, store_dir, db_path, params), stdout=log, stderr=subprocess.STDOUT
    )
    return process, endpoint
