"""Loading what a replay runs on: an SWF trace (converted on the fly) or a Batsim workload JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from batsched_ml.errors import UserError
from batsched_ml.gc_control import collector_paused, release_freed_memory
from batsched_ml.workload.convert import DROP_RULE_TEXT, BatsimWorkload, convert_trace
from batsched_ml.workload.platform import write_platform
from batsched_ml.workload.swf import read_swf


class WorkloadError(UserError, ValueError):
    """A workload file we cannot use."""


def is_swf(path: str | Path) -> bool:
    name = Path(path).name.lower()
    return name.endswith((".swf", ".swf.gz"))


def load_workload(path: str | Path, *, lenient: bool = False) -> dict[str, Any]:
    """A Batsim workload object from ``path``: SWF (plain or gzipped) is converted with the
    cleaning rules of :mod:`batsched_ml.workload.convert`, JSON is read as is."""
    path = Path(path)
    if is_swf(path):
        with collector_paused():
            data = convert_trace(read_swf(path, lenient=lenient)).data
        release_freed_memory()  # the trace's text and columns
        return data
    try:
        text = path.read_text()
        with collector_paused():
            data = json.loads(text)
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise WorkloadError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise WorkloadError(f"{path}: not a Batsim workload (no 'jobs' list)")
    if not data["jobs"]:
        raise WorkloadError(f"{path}: no jobs")
    if not isinstance(data.get("nb_res"), int) or data["nb_res"] <= 0:
        raise WorkloadError(f"{path}: 'nb_res' must be a positive integer")
    return data


def write_converted(workload: BatsimWorkload, out_dir: str | Path, name: str) -> tuple[Path, Path]:
    """Write ``NAME.json`` and the matching ``NAME_platform.xml`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    workload_path = out / f"{name}.json"
    platform_path = out / f"{name}_platform.xml"
    workload.write(workload_path)
    write_platform(platform_path, workload.nb_res)
    return workload_path, platform_path


def dropped_jobs(workload: Mapping[str, Any]) -> dict[str, int]:
    """The jobs of the trace that the cleaning rules dropped, rule -> count, for the rules that
    dropped any (empty for a trace read whole, or a workload that records no cleaning): what
    ``summary.json``, ``run.json`` and ``serve.json`` record as ``input_cleaning``."""
    cleaning = workload.get("cleaning")
    dropped = cleaning.get("dropped") if isinstance(cleaning, Mapping) else None
    if not isinstance(dropped, Mapping):
        return {}
    return {str(rule): int(count) for rule, count in dropped.items() if count}


def report_dropped(
    workload: Mapping[str, Any], source: str | Path, file: IO[str] | None = None
) -> dict[str, int]:
    """Say on stderr, one line per rule, which jobs of ``source`` the cleaning rules dropped
    (nothing when none was); return :func:`dropped_jobs`."""
    dropped = dropped_jobs(workload)
    cleaning = workload.get("cleaning")
    read = cleaning.get("input_jobs") if isinstance(cleaning, Mapping) else None
    print_dropped(dropped, source, read if isinstance(read, int) else None, file)
    return dropped


def print_dropped(
    dropped: Mapping[str, int],
    source: str | Path,
    read: int | None = None,
    file: IO[str] | None = None,
) -> None:
    """One line per rule of ``dropped`` (:func:`dropped_jobs`) on stderr, naming ``source``."""
    of = f" of {read:,}" if read is not None else ""
    for rule, count in dropped.items():
        what = DROP_RULE_TEXT.get(rule)
        print(
            f"batsched-ml: {Path(source).name}: {count:,}{of} job(s) dropped by the cleaning "
            f"rule {rule}" + (f" ({what})" if what else ""),
            file=sys.stderr if file is None else file,
            flush=True,
        )
