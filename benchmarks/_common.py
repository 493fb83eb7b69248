"""Helpers shared by the benchmark scripts: where the traces are, and how to measure."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from batsched_ml.compiled import VARIABLE as KERNEL_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
HPC2N = TRACES / "HPC2N-2002-2.2-cln.swf.gz"
KTH = ROOT / "batsched_ml" / "data" / "KTH-SP2-1996-2.1-cln.swf.gz"


def kernel_environment(python: bool, **extra: str) -> dict[str, str]:
    """This process's environment, with ``extra``, for a command run with its compiled parts
    (``BATSCHED_ML_KERNEL`` removed) or with none (``python``: set to ``python``)."""
    env = {k: v for k, v in os.environ.items() if k != KERNEL_VARIABLE} | extra
    return env | {KERNEL_VARIABLE: "python"} if python else env


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def need(path: Path) -> Path:
    if not path.exists():
        raise SystemExit(f"missing {path}: the benchmarks read ../shared/traces")
    return path


def trace_named(name: str) -> Path:
    """The trace ``name`` (without ``.swf.gz``): the shipped KTH-SP2, else ../shared/traces'."""
    return KTH if KTH.name.startswith(name) else need(TRACES / f"{name}.swf.gz")


def trace_path(name_or_file: str) -> Path:
    """An SWF file given by its path, else the trace of that name (:func:`trace_named`)."""
    path = Path(name_or_file)
    return path if path.is_file() else trace_named(name_or_file)


#: ends a wrapper's code: the command line, run in the wrapper's process
CLI = """
from batsched_ml.cli import program
sys.argv[0] = "batsched-ml"
sys.exit(program())
"""


def run_wrapped(
    prelude: str, arguments: list[str], tag: str, *, env: dict[str, str] | None = None
) -> tuple[float, Any]:
    """Run ``batsched-ml ARGUMENTS`` in a new Python process after ``prelude`` (which imports
    ``sys`` and prints one line ``TAG <json>`` to stderr at exit), with ``env`` (default: this
    process's); return the whole process's wall time and that JSON."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", prelude + CLI, *arguments],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    seconds = time.perf_counter() - started
    line = next(line for line in done.stderr.splitlines() if line.startswith(f"{tag} "))
    return seconds, json.loads(line[len(tag) + 1 :])


def classified_run_arguments(doc: str | None, repeat: int) -> tuple[argparse.Namespace, Path]:
    """The options of a benchmark that times a classified replay command (``--trace``, full
    HPC2N by default; ``--variant``; ``--repeat``), parsed, and the trace's path."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--trace", default="HPC2N-2002-2.2-cln")
    parser.add_argument("--variant", default="classification-idempotent")
    parser.add_argument("--repeat", type=int, default=repeat)
    args = parser.parse_args()
    return args, trace_named(args.trace)


def same_files(folder: Path, first: str, second: str, turns: int, names: tuple[str, ...]) -> bool:
    """Whether the runs ``FIRST<turn>`` and ``SECOND<turn>`` in ``folder`` wrote the same
    ``names`` (those the first has), byte for byte, at every turn."""
    return all(
        (folder / f"{first}{turn}" / name).read_bytes()
        == (folder / f"{second}{turn}" / name).read_bytes()
        for turn in range(turns)
        for name in names
        if (folder / f"{first}{turn}" / name).exists()
    )


def write_between_markers(page: Path, tables: dict[str, str]) -> None:
    """Put each of ``tables`` (name -> Markdown) between the page's ``<!-- NAME:begin -->`` and
    ``<!-- NAME:end -->``, in place of what was there: a page's tables are its script's, made
    again from the runs. Refuses (nothing written) when a pair is missing or repeated."""
    text = page.read_text()
    for name, table in tables.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        if text.count(begin) != 1 or text.count(end) != 1:
            raise SystemExit(f"{page}: no single {begin} ... {end} to write into")
        head, rest = text.split(begin)
        _old, tail = rest.split(end)
        text = f"{head}{begin}\n{table}\n{end}{tail}"
    page.write_text(text)


def print_or_write(page: Path | None, tables: dict[str, str]) -> int:
    """A page script's ending: the tables printed (each under its marker's name), or written
    into ``page`` (:func:`write_between_markers`); the exit status."""
    if page is None:
        print("\n\n".join(f"{name}:\n{text}" for name, text in tables.items() if text))
        return 0
    write_between_markers(page, tables)
    print(f"wrote the tables of {page}")
    return 0
