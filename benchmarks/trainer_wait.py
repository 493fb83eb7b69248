"""How long a classified replay command waits for its side trainer: the time the scheduler's
process spends in its requests to the trainer (``hello``, then one ``train`` a week, each
answered once the week's forest is grown), against the whole command.

A sampling profiler does not show this wait (the process is idle in ``poll``), yet it is on the
command's critical path: the model of week w is trained on the jobs finished before w starts,
and the first job of w needs it, so nothing of the replay can go on meanwhile.

Usage::

    python benchmarks/trainer_wait.py                       # full HPC2N
    python benchmarks/trainer_wait.py --trace KTH-SP2-1996-2.1-cln --repeat 3
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from _common import classified_run_arguments, run_wrapped

#: the command line in this process, each request to the trainer timed; totals printed at exit
WRAPPER = """
import atexit, json, sys, time
from batsched_ml.trainer import client

requests = []
original = client.RemoteTrainer._request


def timed(self, data, timeout):
    started = time.perf_counter()
    try:
        return original(self, data, timeout)
    finally:
        requests.append(time.perf_counter() - started)


client.RemoteTrainer._request = timed
atexit.register(
    lambda: print("WAIT " + json.dumps([len(requests), sum(requests)]), file=sys.stderr)
)
"""


def main() -> None:
    args, path = classified_run_arguments(__doc__, repeat=1)
    walls: list[float] = []
    waits: list[float] = []
    trains: list[float] = []
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for turn in range(args.repeat):
            out = Path(tmp) / str(turn)
            command = [str(path), "--variant", args.variant, "-q", "-o", str(out)]
            seconds, (count, waited) = run_wrapped(WRAPPER, ["replay", *command], "WAIT")
            walls.append(seconds)
            waits.append(waited)
            timing = json.loads((out / "timing.json").read_text())
            trains.append(timing["train_seconds"])
    wall, wait, train = (statistics.median(v) for v in (walls, waits, trains))
    print(f"{path.name}, --variant {args.variant}, median of {args.repeat}")
    print(f"whole command          {wall:.1f} s")
    print(f"waiting for trainer    {wait:.1f} s ({wait / wall:.0%}), {count} requests")
    print(f"forests grown (train)  {train:.1f} s (timing.json's train_seconds)")
    print(f"the rest               {wall - wait:.1f} s")


if __name__ == "__main__":
    main()
