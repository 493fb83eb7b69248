"""Loading what a replay runs on: an SWF trace (converted on the fly) or a Batsim workload JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from batsched_ml.errors import UserError
from batsched_ml.gc_control import collector_paused, release_freed_memory
from batsched_ml.workload.convert import BatsimWorkload, convert_trace
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
