"""The side trainer's cost (issue 6 target: at most 10% slower than the in-process trainer on the
full HPC2N replay). Runs FCFS classification-idempotent in-process and with a trainer process,
alternately, ``--repeat`` times each (default 2; the machine's noise between two runs of the same
replay reaches 15 %), prints every time and the best of each (with the seconds the weekly forests took to grow
in each: the rest is the trainer's protocol and what runs beside it), and checks the job
tables are identical.

    python bench_trainer.py [TRACE] [--repeat N]"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from _common import HPC2N, need

from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.trainer.client import RemoteTrainer
from batsched_ml.trainer.process import TrainerProcess
from batsched_ml.workload.io import load_workload


def grown(result) -> float:
    """The seconds the run's weekly forests took to grow, wherever they grew (the trainer
    process reports its own time with each model)."""
    return sum(week.train_seconds for week in result.scheduler.weeks)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--repeat")]
    repeat = 2
    for a in sys.argv[1:]:
        if a.startswith("--repeat="):
            repeat = int(a.split("=", 1)[1])
    path = Path(args[0]) if args else HPC2N
    workload = load_workload(need(path))
    config = ReplayConfig(policy="fcfs", variant="classification-idempotent")
    local_times: list[float] = []
    remote_times: list[float] = []
    identical = True
    events = 0
    for _ in range(repeat):
        started = time.perf_counter()
        local = run_replay(workload, config)
        local_times.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as out:
            process = TrainerProcess(Path(out) / "models", Path(out) / "t.sqlite", config.forest)
            process.start()
            endpoint = process.endpoint
            # the run that greets the trainer owns it: only it can stop it
            trainer = RemoteTrainer(
                endpoint, Path(out) / "models", config.forest, run={"run_id": "bench-trainer"}
            )
            trainer.wait_ready(60)
            started = time.perf_counter()
            remote = run_replay(workload, config, trainer=trainer)
            remote_times.append(time.perf_counter() - started)
            trainer.close(stop=True)
            process.stop(30)
        identical &= remote.rows == local.rows
        events += len(trainer.events)
        local_train, remote_train = grown(local), grown(remote)
        print(
            f"in-process {local_times[-1]:.1f} s (forests {local_train:.1f} s), trainer process "
            f"{remote_times[-1]:.1f} s (forests {remote_train:.1f} s)"
        )
    best_local, best_remote = min(local_times), min(remote_times)
    print(
        f"{workload['trace']} fcfs classification-idempotent, best of {repeat}: in-process "
        f"trainer {best_local:.1f} s, trainer process {best_remote:.1f} s "
        f"({100 * (best_remote / best_local - 1):+.1f} %); job tables identical: {identical}; "
        f"trainer events: {events}"
    )


if __name__ == "__main__":
    main()
