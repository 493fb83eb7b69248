"""The scheduler's side of the side trainer: a :class:`Trainer` that trains out of process.

:class:`RemoteTrainer` keeps every finished job it was given (so it can resend what a restarted
trainer lacks), and at each week boundary sends the new ones with a ``train`` request, waits for
the reply up to ``deadline`` seconds, and loads the published model from the store (checked:
sha256, trusted types). Whatever goes wrong (no trainer, a crash, a late reply, a rejected file,
a refused message) the scheduler goes on with the last good model, or with every job large if
there is none; the failure is logged and listed in :attr:`events` (``summary.json`` reports them),
and the next week tries again, so newer models are picked up when they come.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import zmq

from batsched_ml.errors import UserError
from batsched_ml.predict.forest import ForestParams
from batsched_ml.predict.training import WeeklyModel
from batsched_ml.trainer import DEADLINE
from batsched_ml.trainer.process import TrainerProcess
from batsched_ml.trainer.schema import REPLIES, SchemaError, decode, encode, finished_field
from batsched_ml.trainer.store import ModelRejected, ModelStore

log = logging.getLogger("batsched_ml.trainer")


class TrainerUnavailable(RuntimeError):
    pass


class TrainerRefused(UserError, RuntimeError):
    """The trainer's history belongs to another run: the run cannot go on with it (unlike a
    missing trainer, this is not weathered with the last good model)."""


def stop_trainer(endpoint: str, run: dict[str, Any] | None, timeout: float = 5.0) -> bool:
    """Ask the trainer at ``endpoint`` to stop, as the run ``run`` (its identity, as sent with
    ``hello``: a ``stop`` request on a fresh connection, no greeting needed); whether it said
    goodbye within ``timeout`` seconds. The trainer obeys only the run that owns it (the run its
    history belongs to; a trainer no run has spoken to yet is the first one's), and answers
    anyone else ``refused``. A dedicated trainer (docker compose) ends with its run this way,
    even a run that did not need it."""
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    try:
        socket.connect(endpoint)
        socket.send(encode("stop", run=run) if run is not None else encode("stop"))
        if not socket.poll(int(timeout * 1000)):
            log.warning("the trainer at %s did not answer the stop request", endpoint)
            return False
        try:
            reply = decode(socket.recv_multipart()[0], REPLIES)
        except SchemaError:
            return False
        if reply["type"] == "refused":
            log.warning("the trainer at %s refused to stop: %s", endpoint, reply.get("error"))
        return reply["type"] == "bye"
    finally:
        socket.close(linger=0)


class RemoteTrainer:
    def __init__(
        self,
        endpoint: str,
        store_dir: str | Path,
        params: ForestParams,
        *,
        deadline: float = DEADLINE,
        process: TrainerProcess | None = None,
        run: dict[str, Any] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.run = run  # the run identity sent with ``hello`` (batsched_ml.results.runfolder)
        self.process = process
        self.store = ModelStore(store_dir)
        self.params = params
        self.deadline = deadline
        self.records: list[list[Any]] = []
        self.acked = 0  # how many of our records the trainer holds, as far as we know
        self.events: list[dict[str, Any]] = []
        self.last_good: WeeklyModel | None = None
        self._socket: zmq.Socket | None = None
        self._greeted = False

    # --- the Trainer interface ------------------------------------------------------------

    def add_finished(self, features: list[float], runtime: float, week: int) -> None:
        self.records.append([week, runtime, features])

    def model_for(self, week: int) -> WeeklyModel:
        try:
            entry = self._train(week)
            if entry.get("file") is None:
                model = WeeklyModel(
                    week, entry.get("divider"), None, n_train=entry.get("n_train", 0)
                )
            else:
                model = WeeklyModel(
                    week,
                    entry["divider"],
                    self.store.load(entry, entry.get("_payload")),
                    n_train=entry.get("n_train", 0),
                    train_seconds=entry.get("train_seconds", 0.0),
                    importances=entry.get("importances"),
                    params=self.params.as_dict(),
                )
            self.last_good = model
            return model
        except (TrainerUnavailable, ModelRejected, SchemaError) as exc:
            kind = {
                TrainerUnavailable: "trainer_unavailable",
                ModelRejected: "model_rejected",
                SchemaError: "refused",
            }[type(exc)]
            fallback = "last good model" if self.last_good is not None else "every job large"
            log.warning("week %d: %s (%s); going on with the %s", week, kind, exc, fallback)
            self.events.append({"week": week, "event": kind, "detail": str(exc), "using": fallback})
            if self.last_good is None:
                return WeeklyModel(week, None, None)
            return self.last_good

    def close(self, stop: bool = False) -> bool:
        """Close the connection; with ``stop``, ask the trainer to stop too (whether or not
        this run ever reached it), as this run: whether it agreed."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        return stop_trainer(self.endpoint, self.run) if stop else False

    # --- the conversation -----------------------------------------------------------------

    def _connect(self) -> zmq.Socket:
        if self._socket is None:
            socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
            socket.setsockopt(zmq.LINGER, 0)
            # a trainer process just started binds a moment after this connects: ZeroMQ's
            # next attempt came 100 ms later (its default interval), which every classified
            # run waited; 10 ms, doubling up to a second while a trainer stays away
            socket.setsockopt(zmq.RECONNECT_IVL, 10)
            socket.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
            socket.connect(self.endpoint)
            self._socket = socket
        return self._socket

    def _request(self, data: bytes, timeout: float) -> dict[str, Any]:
        socket = self._connect()
        socket.send(data)
        if not socket.poll(int(timeout * 1000)):
            # a REQ socket that missed its reply is stuck: drop it, reconnect next time
            socket.close(linger=0)
            self._socket = None
            self._greeted = False
            raise TrainerUnavailable(
                f"no reply from the trainer at {self.endpoint} within {timeout:g} s"
            )
        parts = socket.recv_multipart()
        reply = decode(parts[0], REPLIES)
        reply["_payload"] = parts[1] if len(parts) > 1 else None
        if reply["type"] == "error":
            raise SchemaError(f"the trainer refused a message: {reply.get('error')}")
        if reply["type"] == "refused":
            raise TrainerRefused(
                f"the trainer at {self.endpoint} refused this run: {reply.get('error')}"
            )
        return reply

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Greet the trainer, waiting up to ``timeout`` seconds for it to start (a process just
        launched needs a few seconds to import its libraries; that is not a fault)."""
        self._greet(timeout)

    def _greet(self, timeout: float | None = None) -> None:
        fields: dict[str, Any] = {"params": self.params.as_dict()}
        if self.run is not None:
            fields["run"] = self.run
        reply = self._request(encode("hello", **fields), timeout or self.deadline)
        theirs = reply.get("params")
        if theirs != self.params.as_dict():
            raise SchemaError(f"the trainer's forest set-up {theirs} differs from ours")
        self.acked = min(int(reply["history"]), len(self.records))
        self._greeted = True

    def _supervise(self, week: int) -> None:
        """A trainer process this run owns that has died is started again (same endpoint, same
        database): the weeks after a crash get fresh models instead of the last good one."""
        if self.process is None:
            return
        code = self.process.exit_code()
        if code is None:
            return
        self.process.restart()
        detail = f"the trainer process had exited (code {code}); restarted on {self.endpoint}"
        log.warning("week %d: %s", week, detail)
        self.events.append(
            {"week": week, "event": "trainer_restarted", "detail": detail, "using": "new model"}
        )
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        self._greeted = False
        self.wait_ready(60.0)  # starting is not a fault: no deadline on it

    def _train(self, week: int) -> dict[str, Any]:
        self._supervise(week)
        started = time.monotonic()
        if not self._greeted:
            self._greet()
        size = len(self.records)
        for _attempt in range(3):
            remaining = max(0.1, self.deadline - (time.monotonic() - started))
            reply = self._request(
                encode(
                    "train",
                    week=week,
                    history=size,
                    first_seq=self.acked,
                    finished=finished_field(self.records[self.acked : size]),
                    expires=time.time() + remaining,
                ),
                remaining,
            )
            self.acked = min(int(reply["history"]), size)
            if reply["type"] == "model":
                return {**reply["entry"], "_payload": reply["_payload"]}
            if reply["type"] == "expired":
                raise TrainerUnavailable(f"the trainer got week {week}'s request too late")
        raise TrainerUnavailable(f"the trainer kept missing history for week {week}")
