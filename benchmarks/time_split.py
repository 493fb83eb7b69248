"""Where a whole ``replay`` command's time goes: the command run as users run it
(``batsched-ml replay TRACE --policy P``, a new process each time), its wall time split into
the imports (numpy, pandas with pyarrow where the command loads it, and the package itself,
timed apart), loading the trace (read and cleaned), the replay (the simulator and the
scheduler), writing the run's files (with the figures computed from them), and the rest (the
interpreter's start and exit, the command line, the run folder's record), median of
``--repeat`` for each part. With ``--python`` each trace is also measured with
``BATSCHED_ML_KERNEL=python`` (no compiled part: what an install without a C compiler runs),
interleaved; with ``--variant`` a classified replay is split, its replay's part
including its wait for the side trainer, whose weeks of training (``timing.json``'s
``train_seconds``) are given apart.

The command runs after a prelude that imports numpy, then pandas (only where ``replay``'s
modules import it: a base replay does not), then the package's modules that ``replay``
imports, timing each step, and that wraps the run pipeline's three steps
(:mod:`batsched_ml.runs.pipeline`'s ``load``, ``run_replay`` and ``write_replay``) with a
clock. Nothing else changes: the files are those of the command alone (``--check`` compares
them with a plain run's).

Usage::

    python benchmarks/time_split.py                                   # KTH-SP2, full HPC2N, RICC
    python benchmarks/time_split.py --traces KTH-SP2-1996-2.1-cln --repeat 1 --json split.json
    python benchmarks/time_split.py --traces HPC2N-2002-2.2-cln --python \
        --variant classification-idempotent
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import kernel_environment, run_wrapped, trace_path

#: the prelude: each import timed in turn, the pipeline's steps wrapped, the times printed
#: to stderr at exit as one ``SPLIT <json>`` line
PRELUDE = """
import atexit, json, sys, time
_t = {}
_s = time.perf_counter()
import numpy
_t["numpy"] = time.perf_counter() - _s
_s = time.perf_counter()
if sys.argv[1] == "pandas":  # (timed apart only where the command imports it: PANDAS_PROBE)
    import pandas
_t["pandas"] = time.perf_counter() - _s
del sys.argv[1]
_s = time.perf_counter()
import batsched_ml.cli, batsched_ml.cli.replay, batsched_ml.runs.pipeline as _p
_t["package"] = time.perf_counter() - _s

def _timed(name, function):
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _t[name] = _t.get(name, 0.0) + time.perf_counter() - started
    return timed

_p.load = _timed("load", _p.load)
_p.run_replay = _timed("replay", _p.run_replay)
_p.write_replay = _timed("files", _p.write_replay)
atexit.register(lambda: print("SPLIT " + json.dumps(_t), file=sys.stderr))
"""

#: whether the modules ``replay`` imports import pandas: if they no longer do, the prelude
#: must not import it (it would charge the command an import it does not make)
PANDAS_PROBE = (
    "import sys, batsched_ml.cli, batsched_ml.cli.replay, batsched_ml.runs.pipeline; "
    "print('pandas' in sys.modules)"
)

#: the parts of a command, in the order they happen
PARTS = ("numpy", "pandas", "package", "load", "replay", "files")
TRACES = ("KTH-SP2-1996-2.1-cln", "HPC2N-2002-2.2-cln", "RICC-2010-2")
FILES = ("jobs.csv", "predictions.csv", "summary.json", "classification.csv")


def imports_pandas() -> bool:
    """Whether a ``replay`` command imports pandas (:data:`PANDAS_PROBE`, a new process)."""
    done = subprocess.run(
        [sys.executable, "-c", PANDAS_PROBE], capture_output=True, text=True, check=True
    )
    return done.stdout.strip() == "True"


def _options(policy: str, variant: str | None) -> list[str]:
    return ["--policy", policy, *(["--variant", variant] if variant else []), "-q"]


def measure(
    path: Path, options: list[str], out: Path, pandas: bool, python: bool
) -> dict[str, float]:
    """One command's parts and its whole wall time (``whole``), and its weeks of training
    (``train``, 0 for a base replay); ``pandas``: whether the command imports pandas
    (:func:`imports_pandas`); ``python``: with no compiled part."""
    command = ["pandas" if pandas else "-", "replay", str(path), *options, "-o", str(out)]
    whole, parts = run_wrapped(PRELUDE, command, "SPLIT", env=kernel_environment(python))
    if set(parts) != set(PARTS):  # a step the pipeline no longer takes: say so, never guess
        raise SystemExit(f"the command did not go through every part: {sorted(parts)}")
    timing = json.loads((out / "timing.json").read_text())
    return {"whole": whole, **parts, "train": float(timing.get("train_seconds", 0.0))}


def plain_files_equal(
    path: Path, options: list[str], measured: Path, tmp: Path, python: bool
) -> bool:
    """Whether a plain run of the same command (no prelude) writes the same files."""
    plain = tmp / "plain"
    shutil.rmtree(plain, ignore_errors=True)
    command = ["replay", str(path), *options, "-o", str(plain)]
    done = subprocess.run(
        [sys.executable, "-m", "batsched_ml", *command],
        capture_output=True,
        text=True,
        env=kernel_environment(python),
    )
    if done.returncode:
        raise SystemExit(f"the plain run failed ({done.returncode}): {done.stderr.strip()}")
    written = [f for f in FILES if (measured / f).exists() or (plain / f).exists()]
    return all((plain / f).read_bytes() == (measured / f).read_bytes() for f in written)


#: the compiled parts a replay runs on (``run.json``'s ``code``): a split measured without one
#: (or, for the side without compiled parts, with one) is another command's, refused rather
#: than printed
COMPILED = ("kernel", "simulator", "scheduler")


def split(
    path: Path,
    policy: str,
    repeat: int,
    check: bool,
    *,
    variant: str | None = None,
    sides: tuple[bool, ...] = (False,),
) -> list[dict[str, Any]]:
    """For each side (``False``: the compiled parts, ``True``: none), the medians of ``repeat``
    commands' parts, with ``rest`` (the whole minus the parts); the sides' runs interleaved."""
    runs: dict[bool, list[dict[str, float]]] = {python: [] for python in sides}
    pandas = imports_pandas()
    options = _options(policy, variant)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for turn in range(repeat):
            for python in sides:
                out = Path(tmp) / f"run{int(python)}-{turn}"
                runs[python].append(measure(path, options, out, pandas, python))
        for python in sides:
            first = Path(tmp) / f"run{int(python)}-0"
            code = json.loads((first / "run.json").read_text())["code"]
            wrong = [
                part for part in COMPILED if code.get(part) != ("python" if python else "compiled")
            ]
            if wrong:  # a split is the command's it says it is, or none
                raise SystemExit(
                    f"measured with the wrong {', '.join(wrong)}"
                    + ("" if python else ": rebuild the compiled parts")
                )
            same = plain_files_equal(path, options, first, Path(tmp), python) if check else None
            for run in runs[python]:
                run["rest"] = run["whole"] - sum(run[part] for part in PARTS)
            medians = {
                key: statistics.median(run[key] for run in runs[python]) for key in runs[python][0]
            }
            row = {"trace": path.name, "policy": policy, "variant": variant, "python": python}
            row |= {"repeat": repeat, "same_files": same, "imports_pandas": pandas}
            rows.append(row | medians)
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table: seconds, and each part's share of the whole."""
    head = "| trace, policy | whole | imports | load | replay | files | rest |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for row in rows:
        whole = row["whole"]

        def cell(seconds: float, whole: float = whole) -> str:
            return f"{seconds:.2f} s ({100 * seconds / whole:.0f} %)"

        imports = row["numpy"] + row["pandas"] + row["package"]
        name = row["trace"].removesuffix(".swf.gz")
        what = f"{name}, {row['policy'].upper()}"
        what += f" {row['variant']}" if row.get("variant") else ""
        what += ", no compiled part" if row.get("python") else ""
        replay = cell(row["replay"])
        if row.get("train"):
            replay += f", of which the trainer's weeks {row['train']:.2f}"
        pandas = f"pandas {row['pandas']:.2f}, " if row.get("imports_pandas", True) else ""
        lines.append(
            f"| {what} | {whole:.2f} s | {cell(imports)}: "
            f"{pandas}numpy {row['numpy']:.2f}, the package "
            f"{row['package']:.2f} | {cell(row['load'])} | {replay} | "
            f"{cell(row['files'])} | {cell(row['rest'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--traces", nargs="+", default=list(TRACES), help="trace names or SWF files"
    )
    parser.add_argument("--policy", default="fcfs")
    parser.add_argument("--variant", help="a classified variant (default: the base replay)")
    parser.add_argument(
        "--python", action="store_true", help="each trace also with no compiled part"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="compare with a plain run's files")
    parser.add_argument("--json", type=Path, help="also write the figures (speed_page.py)")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d")
    paths = [trace_path(t) for t in args.traces]
    sides = (False, True) if args.python else (False,)
    rows = [
        row
        for path in paths
        for row in split(
            path, args.policy, args.repeat, args.check, variant=args.variant, sides=sides
        )
    ]
    print(render(rows))
    if any(row["same_files"] is False for row in rows):
        print("the measured command wrote other files than a plain run", file=sys.stderr)
        return 1
    if args.json:
        record = {"date": started, "rows": rows, "python": sys.version.split()[0]}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
