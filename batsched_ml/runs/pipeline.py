"""The one way a replay becomes a run folder: the workload loaded (and shaken), the folder
claimed for the run's identity, the replay run, its results written, the folder marked
complete (or failed, or interrupted, with the reason).

``batsched-ml replay``, campaigns (and so ``paper-results``, which runs its grid as a campaign)
go through :func:`replay_into`; the Python API loads through :func:`load` and replays with the
same :func:`batsched_ml.runs.replaying.run_replay`. What differs between them is only what they say
while running (a progress bar, the input cleaning on stderr or once per trace) and who trains
a classified run's forests, so those are the arguments.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from batsched_ml.errors import ConfigError
from batsched_ml.gc_control import collector_paused
from batsched_ml.results.outputs import write_replay
from batsched_ml.results.runfolder import RunFolder, RunIdentity, claim, workload_record
from batsched_ml.runs.replaying import ReplayConfig, ReplayResult, not_applied, run_replay
from batsched_ml.workload.io import dropped_jobs, load_workload, report_dropped
from batsched_ml.workload.shake import shake

#: ``progress``'s callback: the number of jobs finished so far.
Progress = Callable[[int], None]


def identity_of(
    path: str | Path,
    config: ReplayConfig,
    *,
    lenient: bool = False,
    shaking: Mapping[str, int] | None = None,
    batsim: int = 4,
) -> RunIdentity:
    """A replay's identity (:mod:`batsched_ml.results.runfolder`): its settings and its workload
    file's
    name and digest, so the command line and a campaign resume each other's folders. Batsim
    5's replay is another run (its own ``jobs.csv``): named in the identity, 4's as before."""
    record = workload_record(path, lenient=lenient, shaking=shaking)
    played = {} if batsim == 4 else {"batsim": batsim}
    return RunIdentity("replay", config.as_dict() | played, record)


def load(
    path: str | Path, *, lenient: bool = False, shaking: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The workload a replay schedules: ``path`` read (an SWF trace converted on the fly), and
    shaken when ``shaking`` (``seed``, ``seconds``: :func:`batsched_ml.workload.shake.shake`)
    asks."""
    workload = load_workload(path, lenient=lenient)
    if shaking:
        workload = shake(workload, **shaking)
    return workload


class WorkloadCache:
    """Loaded workloads kept for the next replays of the same process: a campaign's worker
    replays each trace about twenty times (4 queue orders x 5 variants), and reading and
    converting full HPC2N took 0.7 s of each.

    Each workload is kept as its pickle, and every replay gets a copy of its own
    (:func:`pickle.loads`: about a third of that time): nothing one replay (or a plug-in) does
    to its workload can reach another. Keyed by the file's resolved path and its identity
    record (:func:`batsched_ml.results.runfolder.workload_record`: the file's sha256) and how it
    is read (``lenient``, ``shaking``), so a file changed between two runs is read again. At
    most ``size`` workloads, the least recently used dropped (full HPC2N's pickle: 16 MB)."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._lock = threading.Lock()  # a Dask worker may run tasks in threads

    def load(
        self,
        path: str | Path,
        record: Mapping[str, Any],
        *,
        lenient: bool = False,
        shaking: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """:func:`load`'s workload of ``path``, whose identity record is ``record``."""
        settings = {"record": record, "lenient": lenient, "shaking": shaking}
        key = (str(Path(path).resolve()), json.dumps(settings, sort_keys=True))
        with self._lock:
            data = self._kept.get(key)
            if data is not None:
                self._kept.move_to_end(key)
        if data is not None:
            with collector_paused():  # (many containers, all kept: see gc_control)
                workload: dict[str, Any] = pickle.loads(data)
            return workload
        workload = load(path, lenient=lenient, shaking=shaking)
        data = pickle.dumps(workload, protocol=pickle.HIGHEST_PROTOCOL)  # before any replay
        with self._lock:
            self._kept[key] = data
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return workload


def replay_into(
    output: str | Path,
    path: str | Path,
    config: ReplayConfig,
    *,
    lenient: bool = False,
    shaking: Mapping[str, int] | None = None,
    force: bool = False,
    identity: RunIdentity | None = None,
    say_dropped: bool = True,
    progress: Callable[[int], AbstractContextManager[Progress | None]] | None = None,
    trainer: Callable[[RunFolder], AbstractContextManager[Any]] | None = None,
    zmq_endpoint: str | None = None,
    batsim: int = 4,
    workloads: WorkloadCache | None = None,
) -> tuple[ReplayResult, dict[str, Any]]:
    """Replay ``path`` under ``config`` into the run folder ``output``; return the result and
    its summary (``summary.json``).

    Bad input, and a setting the run would not apply
    (:func:`~batsched_ml.runs.replaying.not_applied`), stop the run before anything is
    written. ``say_dropped``: the jobs the cleaning rules dropped are said on stderr (the
    command line) rather than only recorded in ``run.json`` and ``summary.json`` (a campaign
    says them once per trace). ``progress`` makes, from the number of jobs, the context of a
    progress callback; ``trainer`` makes, from the claimed folder, the context of a classified
    run's trainer (``None``: trained in process). ``batsim``: the Batsim played, 4 (4.2.1) or
    5 (5.0.0-rc2). ``workloads``: where the workload is loaded from and kept for the next runs
    (a campaign's worker)."""
    refusal = not_applied(config)  # a setting the run would not apply: nothing read or written
    if refusal is not None:
        raise ConfigError(refusal)
    if identity is None:
        identity = identity_of(path, config, lenient=lenient, shaking=shaking, batsim=batsim)
    # bad input: nothing written
    if workloads is None:
        workload = load(path, lenient=lenient, shaking=shaking)
    else:
        workload = workloads.load(path, identity.workload, lenient=lenient, shaking=shaking)
    folder = claim(output, identity, force=force)
    # said once the run goes ahead (a mistake is one line), recorded in run.json
    dropped = report_dropped(workload, path) if say_dropped else dropped_jobs(workload)
    folder.notes["input_cleaning"] = dropped
    with folder.running():
        with (
            progress(len(workload["jobs"])) if progress else contextlib.nullcontext() as callback,
            trainer(folder) if trainer else contextlib.nullcontext() as chosen,
        ):
            result = run_replay(
                workload,
                config,
                progress=callback,
                zmq_endpoint=zmq_endpoint,
                trainer=chosen,
                batsim=batsim,
            )
        del workload  # its job objects are freed before the files are written (peak memory)
        summary = write_replay(result, output, run_id=folder.run_id)
    return result, summary
