"""Starting and stopping a side trainer process for a replay or a serve run."""

from __future__ import annotations

import socket
import subprocess
import sys
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
    return command


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
