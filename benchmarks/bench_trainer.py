"""The side trainer's cost (issue 6 target: at most 10% slower than the in-process trainer on the
full HPC2N replay). Runs FCFS classification-idempotent twice, in-process and with a trainer
process, prints both times and checks the job tables are identical."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from _common import HPC2N, need

from batsched_ml.replay import ReplayConfig, run_replay
from batsched_ml.trainer.client import RemoteTrainer
from batsched_ml.trainer.process import start_trainer
from batsched_ml.workload.io import load_workload


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else HPC2N
    workload = load_workload(need(path))
    config = ReplayConfig(policy="fcfs", variant="classification-idempotent")
    started = time.perf_counter()
    local = run_replay(workload, config)
    in_process = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as out:
        process, endpoint = start_trainer(
            Path(out) / "models", Path(out) / "t.sqlite", config.forest
        )
        trainer = RemoteTrainer(endpoint, Path(out) / "models", config.forest)
        trainer.wait_ready(60)
        started = time.perf_counter()
        remote = run_replay(workload, config, trainer=trainer)
        separate = time.perf_counter() - started
        trainer.close(stop=True)
        process.wait(30)
    print(
        f"{workload['trace']} fcfs classification-idempotent: in-process trainer {in_process:.1f} s, "
        f"trainer process {separate:.1f} s ({100 * (separate / in_process - 1):+.1f} %); "
        f"job tables identical: {remote.rows == local.rows}; trainer events: {len(trainer.events)}"
    )


if __name__ == "__main__":
    main()
