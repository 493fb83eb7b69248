"""The compiled replay engine: FCFS-EASY replays of the base variant in one C loop.

A replay spends most of its time in the event loop: Batsim's actors on SimGrid's kernel
(:mod:`batsched_ml.sim.simulator`) and the scheduler's pass (:mod:`batsched_ml.scheduler.core`),
some 39 microseconds a job in Python, with no single function above a few percent of a profile.
``batsched_ml/sim/_creplay.c`` is that loop transcribed to C for the most common run, the
paper's baseline: the FCFS order under EASY (or list scheduling, ``--no-backfilling``), the
requested time as the estimate, nothing classified, corrected or planned, a static workload of
``delay`` profiles. Its file says how each piece follows its Python reference; the Python path
stays the reference, and both give the same files byte for byte (``tests/test_compiled_replay.py``
compares them on traces, on random workloads built to hit the clock's drift, ties and walltime
kills, and on the recordings of real Batsim).

It runs only where it cannot change a result: :func:`eligible` checks the run's parts, and the C
side looks at the workload and answers ``None`` for anything it does not replay exactly as the
Python path (a duplicate id, an odd walltime, a profile that is not a delay...), which then runs
and reports the problem if there is one. The transports (ZeroMQ), the audit and the reply hook
need the Python scheduler and go the Python way. ``BATSCHED_ML_KERNEL=python`` turns it off
with the other compiled parts (:mod:`batsched_ml.compiled`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from batsched_ml import compiled

if TYPE_CHECKING:
    from batsched_ml.replaying import ReplayConfig

NAME = "batsched_ml.sim._creplay"
SOURCE = Path(__file__).with_name("sim") / "_creplay.c"


def engine() -> ModuleType | None:
    """The compiled engine, if built from the source beside it and not turned off."""
    return compiled.compiled_module(NAME, SOURCE)


def eligible(config: ReplayConfig) -> bool:
    """Whether the engine replays ``config`` exactly as the Python scheduler would: FCFS under
    EASY or list scheduling, the requested time with its default options, the base variant, no
    correction. The starvation threshold changes nothing under FCFS (the starving jobs are the
    oldest, which FCFS puts first already), so any value goes."""
    return (
        config.policy == "fcfs"
        and config.variant == "base"
        and config.predictor == "requested"
        and not config.predictor_params
        and config.correction == "none"
        and config.dispatcher == "easy"
        and not config.dispatcher_params
        and not config.classifier_params
    )


def replay(
    workload: dict[str, Any],
    module: ModuleType,
    *,
    backfilling: bool,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[str], int, list[str], dict[str, float]] | None:
    """Replay ``workload`` with the engine ``module``: ``jobs.csv``'s rows in completion order,
    the number of messages Batsim sent, the ids of the jobs rejected (wider than the machine),
    each job's prediction (the requested time, as the Python path's ``MeasuredPredictor``
    keeps it); ``None`` when the workload is not one the engine replays."""
    jobs = workload.get("jobs", [])
    profiles = workload.get("profiles", {})
    nb_res = workload.get("nb_res")
    if type(jobs) is not list or type(profiles) is not dict or type(nb_res) is not int:
        return None
    out = module.replay(jobs, profiles, nb_res, backfilling, progress)
    if out is None:
        return None
    rows, messages, rejected, predictions = out
    if progress is not None:
        progress(len(rows))
    return rows, messages, rejected, predictions
