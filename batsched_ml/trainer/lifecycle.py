"""The trainer of one run, from start to stop: in process, a side trainer process owned by the
run, or a running trainer at an endpoint.

Kept out of the command line so that ``replay`` and ``serve`` (and anything else that runs a
classified scheduler) start, wait for and stop a trainer the same way: a process the run started
is stopped with it (killed, without the polite request, when the run is interrupted, since it may
be training), and a running trainer is told to stop only when asked (``stop``). A trainer obeys
``stop`` only from the run that owns it: the run its history belongs to, i.e. the first to
greet it (this run's identity, sent with each request; a process this run started is greeted
before the run begins, so it is this run's from its start). Under docker compose, a scheduler
of an earlier ``up``, stopped only when compose recreates it, after the new ``up``'s trainer has
started, asks nothing: the trainer at that endpoint is the new run's (:func:`.status.replaced`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from batsched_ml.errors import check_positive
from batsched_ml.predict.training import Trainer
from batsched_ml.serving.status import replaced
from batsched_ml.trainer import DEADLINE, needs_nothing
from batsched_ml.trainer.client import RemoteTrainer, stop_trainer
from batsched_ml.trainer.process import TrainerProcess


@contextlib.contextmanager
def trainer(
    config: Any,
    out_dir: Path,
    run: dict[str, Any] | None = None,
    *,
    choice: str = "inprocess",
    store: str | Path | None = None,
    deadline: float = DEADLINE,
    stop: bool = False,
) -> Iterator[Trainer | None]:
    """The trainer a run with ``config`` (a :class:`~batsched_ml.runs.replaying.ReplayConfig`) uses:
    ``None`` (the scheduler trains in process) for ``choice`` ``"inprocess"`` or a run that
    does not classify; for ``"process"`` a side trainer process started here (models in
    ``store``, by default OUT/models, its history in OUT/trainer.sqlite) and stopped at the end;
    otherwise ``choice`` is the endpoint of a running trainer, stopped at the end if ``stop``.
    ``run`` is the run identity sent with ``hello``."""
    check_positive("the trainer deadline", deadline)  # else every week would go unmodelled
    if needs_nothing(config.classified, choice):
        yield None
        return
    if not config.classified:  # a trainer at an endpoint, which this run does not use
        try:
            yield None
        finally:
            if stop and not replaced():  # a dedicated trainer this run did not need ends with it
                stop_trainer(choice, run)
        return

    params = config.forest
    models = Path(store) if store else out_dir / "models"
    if config.variant == "class-clairvoyant":  # the true class needs no model
        params = dataclasses.replace(params, n_estimators=0)
    process: TrainerProcess | None = None
    remote: RemoteTrainer | None = None
    interrupted = False
    try:
        # started inside the try: a Ctrl-C or SIGTERM that lands while the process starts or
        # the client connects stops it too (it used to be left running, an orphan, when the
        # signal came between the start and the ``try``)
        if choice == "process":
            if run is None:  # the process is this run's all the same: a token of its own
                run = {"run_id": secrets.token_hex(8)}
            process = TrainerProcess(models, out_dir / "trainer.sqlite", params)
            process.start()  # held by ``process`` before the child exists: never an orphan
            endpoint = process.endpoint
        else:
            endpoint = choice
        remote = RemoteTrainer(
            endpoint, models, params, deadline=deadline, process=process, run=run
        )
        if process is not None:
            remote.wait_ready(60.0)
        yield remote
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if interrupted and process is not None:  # no polite stop request: it may be training
            if remote is not None:
                remote.close()
            process.kill()
        else:
            stop = stop and not replaced()  # a later compose `up` owns that trainer now
            stopped = remote is not None and remote.close(stop=process is not None or stop)
            if process is not None and stopped:
                process.stop()  # it agreed to stop just above: waited for
            elif process is not None:  # never asked, or it did not agree: nothing to wait for
                process.kill()
