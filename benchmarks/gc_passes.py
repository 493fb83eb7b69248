"""The cyclic collector's passes during a whole replay command, with the survivors of each full
pass frozen (``gc_control.alive_frozen``, as shipped) and without (only the objects alive at
the replay's start frozen, as before): the passes of each generation, the objects they found,
the time spent in the passes (the last run's), the command's wall time (median of ``--repeat``, the two in turn) and whether both wrote the
same files.

Usage::

    python benchmarks/gc_passes.py                      # full HPC2N, classification-idempotent
    python benchmarks/gc_passes.py --trace KTH-SP2-1996-2.1-cln --repeat 5
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import classified_run_arguments, run_wrapped, same_files

#: run the command line in this process after, for "load-only", putting back the collector
#: policy before the survivors were frozen; print the collector's counters at exit
WRAPPER = """
import atexit, contextlib, gc, json, sys
mode = sys.argv.pop(1)
if mode == "load-only":
    from batsched_ml import gc_control
    from batsched_ml.runs import replaying

    @contextlib.contextmanager
    def alive_frozen(compiled=None):
        if gc.get_freeze_count():
            yield
            return
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()

    gc_control.alive_frozen = replaying.alive_frozen = alive_frozen
import time
spent = [0.0, 0.0, 0.0]
began = [0.0]


def clock(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        spent[info["generation"]] += time.perf_counter() - began[0]


gc.callbacks.insert(0, clock)
stats = lambda: [{**g, "seconds": s} for g, s in zip(gc.get_stats(), spent)]
atexit.register(lambda: print("GC " + json.dumps(stats()), file=sys.stderr))
"""
MODES = ("survivors", "load-only")
FILES = ("jobs.csv", "classification.csv", "predictions.csv", "summary.json")


def run(mode: str, args: list[str], out: Path) -> tuple[float, list[dict[str, Any]]]:
    return run_wrapped(WRAPPER, [mode, "replay", *args, "-q", "-o", str(out)], "GC")


def main() -> None:
    args, path = classified_run_arguments(__doc__, repeat=3)
    command = [str(path), "--variant", args.variant]
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    stats: dict[str, list[dict[str, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for turn in range(args.repeat):
            for mode in MODES:
                seconds, stats[mode] = run(mode, command, Path(tmp) / f"{mode}{turn}")
                times[mode].append(seconds)
        same = same_files(Path(tmp), "survivors", "load-only", args.repeat, FILES)
    print(f"{path.name}, --variant {args.variant}, median of {args.repeat}, in turn")
    print(
        "| frozen | young passes | middle | full | objects found | in the passes | whole command |"
    )
    print("|---|---|---|---|---|---|---|")
    for mode in MODES:
        passes = [generation["collections"] for generation in stats[mode]]
        found = sum(generation["collected"] for generation in stats[mode])
        label = "the survivors of each full pass" if mode == "survivors" else "the load only"
        inside = sum(generation["seconds"] for generation in stats[mode])
        seconds = statistics.median(times[mode])
        print(
            f"| {label} | {passes[0]} | {passes[1]} | {passes[2]} | {found} | {inside:.2f} s "
            f"| {seconds:.1f} s |"
        )
    ratio = statistics.median(times["survivors"]) / statistics.median(times["load-only"])
    print(f"ratio {ratio:.2f}; files {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
