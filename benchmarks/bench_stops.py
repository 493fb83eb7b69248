"""How fast commands stop on SIGINT / SIGTERM: the tight figures that tests/test_stops.py leaves
out (its bound is generous so that a loaded machine never fails it).

Each case starts ``batsched-ml`` as a process, waits until its run folder says ``running`` (and
a moment more, into the work), sends the signal and times it until the process has exited.
Prints one line per case: the command, the signal, the exit status and the seconds to stop
(median of ``--repeat`` runs).

    python benchmarks/bench_stops.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = [
    ("replay --dispatcher cph", ["replay", "-q", "--dispatcher", "cph"], signal.SIGINT),
    (
        "replay classification-idempotent, trainer process",
        ["replay", "-q", "--variant", "classification-idempotent", "--trainer", "process"],
        signal.SIGTERM,
    ),
    ("serve, waiting for Batsim", ["serve", "--socket", "tcp://127.0.0.1:0"], signal.SIGTERM),
]


def running(folder: Path) -> bool:
    try:
        return json.loads((folder / "run.json").read_text())["status"] == "running"
    except (OSError, ValueError, KeyError):
        return False


def one(arguments: list[str], sig: int) -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        process = subprocess.Popen(
            [sys.executable, "-m", "batsched_ml", *arguments, "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 120
        while not running(out):
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise SystemExit(f"{arguments}: never started running")
            time.sleep(0.05)
        time.sleep(2.0)  # into the work
        started = time.perf_counter()
        process.send_signal(sig)
        code = process.wait(timeout=300)
        return code, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for label, arguments, sig in CASES:
        results = [one(arguments, sig) for _ in range(args.repeat)]
        codes = sorted({code for code, _ in results})
        seconds = statistics.median(s for _, s in results)
        print(f"{label:55} {sig.name:7} exit {codes} stopped in {seconds:.2f} s (median)")


if __name__ == "__main__":
    main()
