"""The side trainer process: stores finished jobs, trains weekly models, publishes them.

``batsched-ml trainer`` runs :func:`run_trainer`. The finished-job history lives in SQLite
(``history.sqlite``: one row per job, in the order the scheduler sent them) so that a restarted
trainer resumes where it stopped: the scheduler asks how much it has (``hello``) and sends only
the rest. Training uses :func:`batsched_ml.predict.training.fit_week`, the same function as the
in-process trainer, on the first N jobs the scheduler names, so a replay gives the same models,
hence the same schedule, whichever trainer it uses. Each model goes to the :class:`ModelStore`.

Fault injection, for the tests of how a scheduler weathers a failing trainer: a trainer
process started with ``BATSCHED_ML_TRAINER_FAULTS`` in its environment (see
:func:`faults_from_environment`) sleeps in, or crashes while, training the weeks it names. It is
no command-line option: users never see it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from batsched_ml.errors import ConfigError
from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.forest import FastForest, ForestParams
from batsched_ml.predict.training import fit_week
from batsched_ml.trainer.schema import REQUESTS, SchemaError, check_train, decode, encode
from batsched_ml.trainer.store import ModelStore
from batsched_ml.transport.sockets import bind_rep, wait_readable

log = logging.getLogger("batsched_ml.trainer")

#: The environment variable of the test-only fault injection (:func:`faults_from_environment`).
FAULTS_VARIABLE = "BATSCHED_ML_TRAINER_FAULTS"


def faults_from_environment(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The :class:`TrainerService` fault keywords that ``BATSCHED_ML_TRAINER_FAULTS`` asks for:
    items separated by ``;``, each ``delay=WEEK:SECONDS`` (sleep that long before training
    ``WEEK``; repeatable) or ``crash=WEEK`` (exit with status 3 when asked to train ``WEEK``).
    Unset or empty: no fault. A malformed value raises :class:`ConfigError` (the trainer does not
    start), so that a test cannot silently run without the fault it asked for."""
    text = environ.get(FAULTS_VARIABLE, "").strip()
    delays: dict[int, float] = {}
    crash: int | None = None
    for item in filter(None, (part.strip() for part in text.split(";"))):
        kind, _, value = item.partition("=")
        try:
            if kind.strip() == "delay":
                week, seconds = value.split(":")
                delays[int(week)] = float(seconds)
            elif kind.strip() == "crash":
                crash = int(value)
            else:
                raise ValueError(item)
        except ValueError:
            raise ConfigError(
                f"{FAULTS_VARIABLE}: {item!r}: expected delay=WEEK:SECONDS or crash=WEEK"
            ) from None
    faults: dict[str, Any] = {}
    if delays:
        faults["fault_delay"] = delays
    if crash is not None:
        faults["fault_crash_week"] = crash
    return faults


class History:
    """Finished jobs in SQLite, mirrored in numpy arrays for training."""

    def __init__(self, path: str | Path) -> None:
        self.db = sqlite3.connect(str(path))
        # WAL without a sync per commit: a commit survives the trainer's crash, and a job lost
        # to a machine crash is resent by the scheduler after ``hello``
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS finished ("
            "seq INTEGER PRIMARY KEY, week INTEGER NOT NULL, runtime REAL NOT NULL, "
            "features BLOB NOT NULL)"
        )
        # the run the history belongs to (run id, workload sha256, configuration: see
        # batsched_ml.results.runfolder): a trainer never feeds one run's jobs to another
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self.db.commit()
        row = self.db.execute("SELECT value FROM meta WHERE key = 'run'").fetchone()
        self.run: dict[str, Any] | None = json.loads(row[0]) if row else None
        rows = self.db.execute(
            "SELECT week, runtime, features FROM finished ORDER BY seq"
        ).fetchall()
        n = len(FEATURE_NAMES)
        self.x = np.zeros((max(1024, len(rows)), n), dtype=np.float32)
        self.runtime = np.zeros(len(self.x), dtype=np.float64)
        self.week = np.zeros(len(self.x), dtype=np.int64)
        for i, (week, runtime, blob) in enumerate(rows):
            self.x[i] = np.frombuffer(blob, dtype=np.float32)
            self.runtime[i] = runtime
            self.week[i] = week
        self.size = len(rows)
        self._unsaved: list[tuple[int, int, float, bytes]] = []

    def adopt(self, run: dict[str, Any]) -> str | None:
        """Tie the history to ``run`` (the first run to greet an empty history owns it);
        return why not when it holds another run's jobs."""
        if self.run is None:
            if self.size:
                return (
                    f"the trainer's history holds {self.size} jobs of an unidentified run "
                    "(made before runs had an identity)"
                )
            self.run = dict(run)
            with self.db:
                self.db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('run', ?)",
                    (json.dumps(self.run, sort_keys=True),),
                )
            return None
        if self.run.get("run_id") != run.get("run_id"):
            workload = (self.run.get("workload") or {}).get("name")
            return (
                f"the trainer's history ({self.size} jobs) belongs to run "
                f"{self.run.get('run_id')} (workload {workload}, "
                f"{(self.run.get('config') or {}).get('policy')} "
                f"{(self.run.get('config') or {}).get('variant')}), not to run {run.get('run_id')}"
            )
        return None

    def persist(self) -> None:
        if self._unsaved:
            with self.db:
                self.db.executemany("INSERT INTO finished VALUES (?, ?, ?, ?)", self._unsaved)
            self._unsaved = []

    def extend(
        self,
        first_seq: int,
        weeks: np.ndarray,
        runtimes: np.ndarray,
        features: np.ndarray,
        *,
        persist: bool = True,
    ) -> None:
        """Store jobs ``first_seq``, ``first_seq + 1``, ... (one row of each array per job; see
        :func:`~batsched_ml.trainer.schema.check_train`); jobs already stored are kept.
        With ``persist=False`` they reach SQLite at the next :meth:`persist` (the server does it
        after replying; if it dies in between, the scheduler resends them after ``hello``)."""
        if first_seq > self.size:
            return  # a gap: the caller will be told what is missing
        skip = self.size - first_seq
        weeks, runtimes, features = weeks[skip:], runtimes[skip:], features[skip:]
        if not len(weeks):
            return
        start, needed = self.size, self.size + len(weeks)
        self._unsaved.extend(
            zip(
                range(start, needed),
                weeks.tolist(),
                runtimes.tolist(),
                map(np.ndarray.tobytes, features),
                strict=True,
            )
        )
        if persist:
            self.persist()
        while needed > len(self.runtime):
            self.x = np.concatenate([self.x, np.zeros_like(self.x)])
            self.runtime = np.concatenate([self.runtime, np.zeros_like(self.runtime)])
            self.week = np.concatenate([self.week, np.zeros_like(self.week)])
        self.x[start:needed] = features
        self.runtime[start:needed] = runtimes
        self.week[start:needed] = weeks
        self.size = needed

    def close(self) -> None:
        """Store what is pending and close the database, its write-ahead log folded in: no
        ``-wal`` or ``-shm`` file is left beside it (also after SIGINT or SIGTERM, which end
        the trainer through here)."""
        try:
            self.persist()
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.db.close()


class TrainerService:
    """The trainer's state and request handling, without the socket (tested directly)."""

    def __init__(
        self,
        store: ModelStore,
        history: History,
        params: ForestParams,
        *,
        fault_delay: dict[int, float] | None = None,
        fault_crash_week: int | None = None,
    ) -> None:
        self.store = store
        self.history = history
        self.params = params
        self.fault_delay = fault_delay or {}
        self.fault_crash_week = fault_crash_week
        self.previous: tuple[int, FastForest, float] | None = None  # (week, forest, divider)
        self._published: tuple[int, FastForest, float] | None = None
        self._pending: tuple[dict[str, Any], int] | None = None
        self.payload: bytes | None = None  # the skops bytes of the model just trained

    def handle(self, data: bytes) -> tuple[bytes, bool]:
        """Answer one request; the flag says whether to stop afterwards."""
        try:
            message = decode(data, REQUESTS)
        except SchemaError as exc:
            log.warning("refused a message: %s", exc)
            return encode("error", error=str(exc)), False
        kind = message["type"]
        if kind == "hello":
            run = message.get("run")
            if run is not None:
                if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
                    return encode("error", error="hello: field 'run' must name a run_id"), False
                refusal = self.history.adopt(run)
                if refusal is not None:
                    log.error("refused run %s: %s", run["run_id"], refusal)
                    return encode("refused", error=refusal), False
            return encode("hello", history=self.history.size, params=self.params.as_dict()), False
        if kind == "stop":
            return self._stop(message.get("run"))
        try:
            arrays = check_train(message, len(FEATURE_NAMES))
        except SchemaError as exc:
            return encode("error", error=str(exc)), False
        self.history.extend(message["first_seq"], *arrays, persist=False)
        wanted = message["history"]
        if self.history.size < wanted:
            return encode("missing", history=self.history.size), False
        expires = message.get("expires")
        if expires is not None and time.time() > expires:
            log.warning("week %d: the scheduler stopped waiting, not training it", message["week"])
            return encode("expired", history=self.history.size), False
        entry = self.train(message["week"], wanted)
        return encode("model", entry=entry, history=self.history.size), False

    def _stop(self, run: Any) -> tuple[bytes, bool]:
        """Obey ``stop`` only from the run that owns the trainer: the run its history belongs
        to (the first run to greet it, or to ask it to stop, kept in the database). A request
        that names no run, or another run, is refused and the trainer goes on."""
        if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
            log.warning("refused a stop request that names no run")
            return encode("refused", error="stop: field 'run' must name the owner's run_id"), False
        refusal = self.history.adopt(run)
        if refusal is not None:
            log.warning("refused a stop request from run %s: %s", run["run_id"], refusal)
            return encode("refused", error=f"stop refused: {refusal}"), False
        log.info("stop requested by run %s, which owns this trainer", run["run_id"])
        return encode("bye"), True

    def after_reply(self) -> None:
        """Work that the scheduler need not wait for: rate the previous week's model on its
        week and record the manifest entry of the model just published."""
        self.history.persist()
        pending, self._pending = self._pending, None
        data, self.payload = self.payload, None
        if pending is None:
            return
        entry, size = pending
        entry["previous_week_quality"] = self._previous_quality(size)
        if data is not None:
            self.store.write(entry, data)
        else:
            self.store.record(entry)
        if entry.get("file") is not None:
            self.previous = self._published

    def train(self, week: int, size: int) -> dict[str, Any]:
        """Train the model of ``week`` on the first ``size`` jobs and serialise it
        (:attr:`payload`); :meth:`after_reply` writes it and rates the previous model."""
        if week == self.fault_crash_week:
            log.error("fault injection: crashing while training week %d", week)
            raise SystemExit(3)
        if week in self.fault_delay:
            time.sleep(self.fault_delay[week])
        history = self.history
        model = fit_week(history.x[:size], history.runtime[:size], week, self.params)
        meta = {
            "divider": model.divider,
            "n_train": model.n_train,
            "train_seconds": round(model.train_seconds, 3),
            "previous_week_quality": None,  # filled in after the reply
            "importances": model.importances,
        }
        if model.predictor is None:
            entry = {
                "week": week,
                "file": None,
                "sha256": None,
                "features": list(FEATURE_NAMES),
                **meta,
            }
        else:
            assert model.divider is not None  # with a forest
            entry, self.payload = self.store.serialise(week, model.predictor.arrays, meta)
            self._published = (week, model.predictor, model.divider)
        self._pending = (dict(entry), size)
        return entry

    def _previous_quality(self, size: int) -> dict[str, float | None] | None:
        """Accuracy, precision and recall of the previous model on the jobs submitted during
        its week that have finished, labelled with its divider."""
        if self.previous is None:
            return None
        week, forest, divider = self.previous
        mask = self.history.week[:size] == week
        if not mask.any():
            return None
        predicted = forest.predict(self.history.x[:size][mask])
        actual = self.history.runtime[:size][mask] < divider
        ts = int((predicted & actual).sum())
        fs = int((predicted & ~actual).sum())
        fl = int((~predicted & actual).sum())
        n = int(mask.sum())
        return {
            "jobs": n,
            "accuracy": round(float((predicted == actual).mean()), 6),
            "precision": round(ts / (ts + fs), 6) if ts + fs else None,
            "recall": round(ts / (ts + fl), 6) if ts + fl else None,
        }


def run_trainer(
    endpoint: str,
    store_dir: str | Path,
    db_path: str | Path,
    params: ForestParams,
    *,
    idle_timeout: float | None = None,
    on_bound: Any = None,
) -> None:
    """Serve training requests on ``endpoint`` until a ``stop`` request from the run that owns
    the trainer (or ``idle_timeout`` seconds without any request, or SIGINT / SIGTERM). The
    faults of ``BATSCHED_ML_TRAINER_FAULTS``, if set, are injected (tests only)."""
    faults = faults_from_environment()
    if faults:
        log.warning("fault injection (%s): %s", FAULTS_VARIABLE, faults)
    service = TrainerService(ModelStore(store_dir), History(db_path), params, **faults)

    try:
        socket = bind_rep(endpoint, on_bound)
    except Exception:
        service.history.close()
        raise
    if params.n_estimators:
        # before answering ``hello``: the scheduler waits for a starting trainer without a
        # deadline, but for a training with one (a first training that imported scikit-learn
        # itself could miss a short ``--trainer-deadline``)
        _import_training_libraries()
    try:
        log.info("trainer on %s, %d finished jobs stored", endpoint, service.history.size)
        while True:
            if not wait_readable(socket, idle_timeout):  # signals acted on meanwhile
                log.warning("no request for %g s: stopping", idle_timeout)
                return
            reply, stop = service.handle(socket.recv())
            if service.payload is not None:  # the model's bytes travel with the reply
                socket.send_multipart([reply, service.payload])
            else:
                socket.send(reply)
            service.after_reply()
            if stop:
                return
    finally:
        socket.close()
        service.history.close()


def _import_training_libraries() -> None:
    """What training needs, before the first request: the compiled grower, or scikit-learn
    without it (:func:`batsched_ml.predict.forest.train_forest`; the scheduler's process never
    needs either). The model store writes its files without skops."""
    from batsched_ml.predict.grow import grower

    if grower() is None:
        import sklearn.ensemble  # noqa: F401
