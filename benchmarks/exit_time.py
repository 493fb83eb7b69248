"""What the end of a command costs: the whole ``replay`` command as the ``batsched-ml`` program
runs it (``cli.program``: every object frozen when the command is done, so that the
interpreter's exit skips them in the collector's last passes) against the same command ended
as before (``cli.main`` alone, the collector's exit passes over every object still alive),
in turn, with the wall time of the whole process (median of ``--repeat``) and whether both
wrote the same files.

Usage::

    python benchmarks/exit_time.py                       # full HPC2N, classification-idempotent
    python benchmarks/exit_time.py --variant base --repeat 5
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import classified_run_arguments, same_files

#: the command line in a new process, ended by ``program`` (as shipped) or ``main`` alone
WRAPPER = """
import sys
from batsched_ml import cli
ending = sys.argv.pop(1)
sys.argv[0] = "batsched-ml"
sys.exit(cli.program() if ending == "program" else cli.main())
"""
ENDINGS = ("program", "main")
FILES = ("jobs.csv", "classification.csv", "predictions.csv", "summary.json")


def run(ending: str, arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", WRAPPER, ending, *arguments],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    args, path = classified_run_arguments(__doc__, repeat=3)
    times: dict[str, list[float]] = {ending: [] for ending in ENDINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for turn in range(args.repeat):
            for ending in ENDINGS:
                out = Path(tmp) / f"{ending}{turn}"
                command = ["replay", str(path), "--variant", args.variant, "-q", "-o", str(out)]
                times[ending].append(run(ending, command))
        same = same_files(Path(tmp), "program", "main", args.repeat, FILES)
    print(f"{path.name}, --variant {args.variant}, median of {args.repeat}, in turn")
    print("| ended by | whole command (median) | min-max |")
    print("|---|---|---|")
    for ending in ENDINGS:
        label = "program (objects frozen)" if ending == "program" else "main alone"
        values = times[ending]
        print(
            f"| {label} | {statistics.median(values):.2f} s | {min(values):.2f}-{max(values):.2f} s |"
        )
    ratio = statistics.median(times["program"]) / statistics.median(times["main"])
    print(f"ratio {ratio:.2f}; files {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
