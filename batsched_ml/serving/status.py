"""Service status files: how the docker compose services tell the experiment that one of them
failed, and which ``up`` each record belongs to.

With ``BATSCHED_ML_STATUS_FILE=DIR/NAME.json`` set, a command writes its exit code and error line
there when it ends (:func:`record_exit`); ``collect --status-dir DIR`` stops waiting, with that
line, as soon as one record says a service failed (:func:`failed_service`).

Compose's ``reset`` step writes a fresh token into ``DIR/run`` (:data:`RUN_TOKEN`) at the start
of every ``up``. A command reads it when it starts and records it with its exit; a process that
began before the current ``up`` (a container of an earlier ``up``, stopped only when compose
recreates it, after the reset) finds another token when it ends and writes nothing, and a record
bearing another token is ignored: the experiment judges its own run by its own services only.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

#: The environment variable naming a command's status file.
STATUS_FILE_VARIABLE = "BATSCHED_ML_STATUS_FILE"

#: The file, beside the status files, holding the current run's token.
RUN_TOKEN = "run"


#: The status file and the run token this process started with (:func:`begin`).
_started: dict[str, Any] = {}


def begin() -> tuple[Path | None, str | None]:
    """The status file named by ``BATSCHED_ML_STATUS_FILE`` (``None`` without one) and the
    run's token now, remembered as this process's (:func:`replaced`)."""
    named = os.environ.get(STATUS_FILE_VARIABLE)
    path = Path(named) if named else None
    token = run_token(path.parent) if path is not None else None
    _started.update(path=path, token=token)
    return path, token


def replaced() -> bool:
    """Whether this process belongs to an earlier ``up``: the status folder it started with
    holds another run's token now. Such a process acts on nothing of the new run: it records
    no exit, and a scheduler stopped then (compose recreates it after the new ``up``'s trainer)
    does not ask the trainer, the new run's by then, to stop."""
    path = _started.get("path")
    return path is not None and run_token(path.parent) != _started.get("token")


def run_token(folder: Path) -> str | None:
    """The token of the run the status folder belongs to now (``None`` without one)."""
    try:
        return (folder / RUN_TOKEN).read_text().strip() or None
    except OSError:
        return None


def record_exit(path: Path, record: dict[str, Any], token: str | None) -> bool:
    """Write ``record`` (with ``token``, the run's token when the command started) to ``path``,
    unless the folder now belongs to another run; whether it was written."""
    if run_token(path.parent) != token:
        return False  # a later `up` reset the folder: this process belongs to an earlier one
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**record, "run": token}) + "\n")
        return True
    return False


def failed_service(status_dir: Path | None) -> str | None:
    """The first service of the current run whose status file records a failure, described
    with its error line (records of another run's token are ignored)."""
    if status_dir is None or not status_dir.is_dir():
        return None
    token = run_token(status_dir)
    for path in sorted(status_dir.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written
        if not isinstance(record, dict) or record.get("run") != token:
            continue
        if record.get("exit_code") not in (0, None):
            return f"{path.stem} failed (exit {record['exit_code']}): {record.get('error')}"
    return None
