"""The traces shipped with the package, found by name from any folder.

The package carries one trace (package data, so an installed wheel has it too): the KTH-SP2 log
of the Parallel Workloads Archive, the default of ``batsched-ml replay`` and of
:func:`batsched_ml.replay`. A workload argument that is not an existing file but names a shipped
trace, with or without its extensions (``KTH-SP2-1996-2.1-cln.swf.gz``,
``KTH-SP2-1996-2.1-cln``), is that trace: the same call works from any working directory.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"

#: The default trace (KTH-SP2, 28,467 jobs).
DEFAULT_TRACE = DATA / "KTH-SP2-1996-2.1-cln.swf.gz"


def shipped_traces() -> list[Path]:
    return sorted(DATA.glob("*.swf.gz"))


def resolve(workload: str | Path | None) -> Path:
    """The file a workload argument names: the default trace for ``None``, an existing path as
    it is, else the shipped trace of that name (the path as given when none matches, so that
    reading it reports the missing file)."""
    if workload is None:
        return DEFAULT_TRACE
    path = Path(workload)
    if path.exists() or path.parent != Path("."):
        return path
    for trace in shipped_traces():
        if path.name in (
            trace.name,
            trace.name.removesuffix(".gz"),
            trace.name.removesuffix(".swf.gz"),
        ):
            return trace
    return path
