"""A replay: a workload through the embedded simulator and the scheduler, then its outputs.

This module wires the pure parts together; it is what ``batsched-ml replay`` runs. The scheduler
answers either in process (no serialisation) or over ZeroMQ through the same codec as with real
Batsim; both give the same job table byte for byte.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batsched_ml.metrics import read_jobs_csv, summarize
from batsched_ml.protocol.events import Message
from batsched_ml.scheduler.core import EasyScheduler
from batsched_ml.scheduler.estimators import ESTIMATORS
from batsched_ml.sim import jobs_csv
from batsched_ml.sim.simulator import BatsimSimulator


@dataclass
class ReplayConfig:
    """What a replay runs: plain values, so a config can be written next to the results."""

    policy: str = "fcfs"
    estimator: str = "requested"
    starvation_threshold: float | None = 72 * 3600.0
    backfilling: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "estimator": self.estimator,
            "starvation_threshold": self.starvation_threshold,
            "backfilling": self.backfilling,
        }


@dataclass
class ReplayResult:
    rows: list[str]
    messages: int
    scheduler: EasyScheduler
    workload: dict[str, Any]
    config: ReplayConfig
    summary: dict[str, Any] = field(default_factory=dict)


def make_scheduler(config: ReplayConfig, *, audit: bool = False) -> EasyScheduler:
    try:
        estimator_type = ESTIMATORS[config.estimator]
    except KeyError:
        known = ", ".join(ESTIMATORS)
        raise ValueError(f"unknown estimator {config.estimator!r} (choose from {known})") from None
    return EasyScheduler(
        config.policy,
        estimator_type(),
        starvation_threshold=config.starvation_threshold,
        backfilling=config.backfilling,
        audit=audit,
    )


def make_simulator(workload: dict[str, Any], **flags: Any) -> BatsimSimulator:
    hosts = [f"host{i}" for i in range(int(workload["nb_res"]))]
    return BatsimSimulator([workload], hosts, **flags)


def run_replay(
    workload: dict[str, Any],
    config: ReplayConfig,
    *,
    progress: Callable[[int], None] | None = None,
    audit: bool = False,
    zmq_endpoint: str | None = None,
) -> ReplayResult:
    """Replay ``workload`` under ``config``. ``progress`` is called now and then with the number
    of jobs finished so far. With ``zmq_endpoint`` (e.g. ``tcp://127.0.0.1:*`` or an ``ipc://``
    path) the scheduler is served over ZeroMQ in a thread and the simulator talks to it as Batsim
    would; otherwise they talk in process."""
    scheduler = make_scheduler(config, audit=audit)
    sim = make_simulator(workload)
    if zmq_endpoint is None:
        messages = _run_in_process(sim, scheduler.handle, progress)
    else:
        messages = _run_over_zmq(sim, scheduler.handle, zmq_endpoint)
    result = ReplayResult(sim.rows, messages, scheduler, workload, config)
    return result


def _run_in_process(
    sim: BatsimSimulator,
    handler: Callable[[Message], Message],
    progress: Callable[[int], None] | None,
) -> int:
    message: Message | None = sim.start()
    count = 0
    while message is not None:
        count += 1
        if progress is not None and count % 2048 == 0:
            progress(len(sim.rows))
        message = sim.step(handler(message))
    if progress is not None:
        progress(len(sim.rows))
    return count


def _run_over_zmq(
    sim: BatsimSimulator, handler: Callable[[Message], Message], endpoint: str
) -> int:
    from batsched_ml.transport import run_batsim_peer, serve

    bound: list[str] = []
    ready = threading.Event()
    failure: list[BaseException] = []

    def server() -> None:
        try:
            serve(
                endpoint, handler, timeout=60.0, on_bound=lambda e: (bound.append(e), ready.set())
            )
        except BaseException as exc:  # reported in the caller's thread
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=server, name="batsched-ml-serve", daemon=True)
    thread.start()
    ready.wait(30)
    if failure:
        raise failure[0]
    count = run_batsim_peer(sim, bound[0], timeout=60.0)
    thread.join(30)
    if failure:
        raise failure[0]
    return count


def write_outputs(result: ReplayResult, out_dir: str | Path) -> dict[str, Any]:
    """Write ``jobs.csv`` and ``summary.json`` into ``out_dir``; return the summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs_path = out / "jobs.csv"
    jobs_csv.write_jobs_csv(jobs_path, result.rows)
    workload = result.workload
    summary = summarize(
        read_jobs_csv(jobs_path),
        nb_machines=int(workload["nb_res"]),
        unix_start_time=workload.get("unix_start_time"),
        time_zone=workload.get("time_zone_string"),
    )
    summary = {
        "trace": workload.get("trace"),
        "config": result.config.as_dict(),
        "workload_jobs": len(workload.get("jobs", [])),
        **summary,
        "rejected_jobs": list(result.scheduler.rejected),
    }
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(out / "summary.json")
    result.summary = summary
    return summary
