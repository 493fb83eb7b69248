"""The Python API: replay a workload in the embedded simulator, get the results as tables.

>>> import batsched_ml
>>> result = batsched_ml.replay(policy="spf")  # the shipped KTH-SP2 trace  # doctest: +SKIP
>>> result.summary["mean_bsld"], len(result.jobs)  # doctest: +SKIP

The same replay as ``batsched-ml replay``, with the same outputs: a :class:`Result` holds what the
command writes into its run folder, made by the same writers in memory (no folder is written)
and parsed into pandas tables (``jobs`` is Batsim's ``jobs.csv``, ``summary`` is
``summary.json``, and so on), so a notebook and the command line never disagree. Settings are
:class:`~batsched_ml.runs.replaying.ReplayConfig`'s fields, given as keyword arguments
(``predictor`` is accepted for the runtime predictor, as on the command line).
"""

from __future__ import annotations

import dataclasses
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from batsched_ml.results.frames import read_jobs_csv
from batsched_ml.results.outputs import JOBS, SUMMARY, TIMING, Memory, write_replay
from batsched_ml.runs.pipeline import load
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.shipped import resolve

__all__ = ["Result", "replay"]


@dataclass
class Result:
    """A replay's results, as its run folder holds them.

    ``jobs``: Batsim's job table, one row per attempt (a job killed at the divider and
    resubmitted has two). ``summary``: the figures of ``summary.json`` (``mean_bsld``,
    ``mean_wait``, ``kills``, ``classification``, ``prediction``, ...), byte-identical across
    reruns. ``classification`` (per job: week, divider, predicted class, runtime, attempts),
    ``weekly`` (the classifier's quality week by week) and ``importances`` (Gini importance of
    each feature per week) for the classified variants; ``predictions`` (each job's predicted
    and actual runtime) when a runtime predictor ran; ``timing``: the wall-clock figures.
    """

    jobs: pd.DataFrame
    summary: dict[str, Any]
    timing: dict[str, Any] = field(default_factory=dict)
    classification: pd.DataFrame | None = None
    weekly: pd.DataFrame | None = None
    importances: pd.DataFrame | None = None
    predictions: pd.DataFrame | None = None


_TABLES = {
    "classification": "classification.csv",
    "weekly": "weekly_quality.csv",
    "importances": "feature_importance.csv",
    "predictions": "predictions.csv",
}


def replay(
    workload: str | Path | dict[str, Any] | None = None, config: Any = None, /, **settings: Any
) -> Result:
    """Replay ``workload`` (an SWF trace, plain or gzipped, a Batsim workload JSON file, or a
    workload object as :func:`batsched_ml.workload.io.load_workload` returns) in the embedded
    simulator and return its :class:`Result`. Without a workload, the shipped KTH-SP2 trace; a
    shipped trace is also found by its name from any folder
    (:mod:`batsched_ml.workload.shipped`).

    ``config`` is a :class:`~batsched_ml.runs.replaying.ReplayConfig`; ``settings`` are its fields
    (``policy="spf"``, ``variant="classification-idempotent"``, ``predictor="easy++"``,
    ``dispatcher="prb"``, ...), applied over ``config`` when both are given. A classified
    variant trains its weekly forests in process. Invalid settings raise
    :class:`~batsched_ml.errors.ConfigError` with the reason.
    """
    if config is None:
        config = ReplayConfig(**settings)
    elif settings:
        config = dataclasses.replace(config, **settings)
    data = workload if isinstance(workload, dict) else load(resolve(workload))
    result = run_replay(data, config)
    files = Memory()  # the run folder's files, as texts: no folder written
    write_replay(result, files)
    texts = files.texts
    tables = {
        name: pd.read_csv(io.StringIO(texts[file])) if file in texts else None
        for name, file in _TABLES.items()
    }
    return Result(
        jobs=read_jobs_csv(io.StringIO(texts[JOBS])),
        summary=json.loads(texts[SUMMARY]),
        timing=json.loads(texts[TIMING]),
        **tables,
    )
