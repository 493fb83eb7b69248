"""The traces shipped with the package, found by name from any folder.

The package carries one trace (package data, so an installed wheel has it too): the KTH-SP2 log
of the Parallel Workloads Archive, the default of ``batsched-ml replay`` and of
:func:`batsched_ml.replay`. A workload argument that is not an existing file but names a shipped
trace, with or without its extensions (``KTH-SP2-1996-2.1-cln.swf.gz``,
``KTH-SP2-1996-2.1-cln``, ``KTH-SP2``), is that trace: the same call works from any working
directory. The other logs of the Parallel Workloads Archive are found by name the same way once
downloaded (``batsched-ml traces fetch NAME``: :mod:`batsched_ml.workload.archive`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from batsched_ml.workload import archive

DATA = Path(__file__).resolve().parents[1] / "data"

#: The default trace (KTH-SP2, 28,467 jobs).
DEFAULT_TRACE = DATA / "KTH-SP2-1996-2.1-cln.swf.gz"


def shipped_traces() -> list[Path]:
    return sorted(DATA.glob("*.swf.gz"))


def resolve(workload: str | Path | None, folder: str | Path | None = None) -> Path:
    """The file a workload argument names: the default trace for ``None``, an existing path as
    it is, else the shipped trace of that name, else the downloaded log of the Parallel
    Workloads Archive of that name (``KTH-SP2``, ``HPC2N-2002-2.2-cln``:
    :mod:`batsched_ml.workload.archive`; a known log not downloaded yet raises
    :class:`~batsched_ml.workload.archive.TraceNotFetched`, one line saying how to fetch it),
    else the path as given, so that reading it reports the missing file.

    With ``folder`` (a campaign's ``trace_dir``), a bare name is first ``folder/NAME.swf.gz``,
    and that path is the answer when nothing else is found."""
    if workload is None:
        return DEFAULT_TRACE
    path = Path(workload)
    if path.parent != Path("."):
        return path
    local = None if folder is None else Path(folder) / f"{path.name}.swf.gz"
    if local is not None:
        if local.exists():
            return local
    elif path.exists():
        return path
    for trace in shipped_traces():
        if path.name in (
            trace.name,
            trace.name.removesuffix(".gz"),
            trace.name.removesuffix(".swf.gz"),
        ):
            return trace
    known = archive.find(path.name)
    if known is not None and (DATA / known.file).is_file():
        return DATA / known.file  # the short name of a shipped trace (KTH-SP2)
    return archive.cached(path.name) or local or path


def check_fetched(names: Iterable[str], folder: str | Path | None = None) -> None:
    """Every one of ``names`` that names a known log is in ``folder`` (``NAME.swf.gz``), shipped
    or downloaded; else one :class:`TraceNotFetched` line saying how to fetch them all."""
    missing: list[archive.Trace] = []
    for name in dict.fromkeys(names):
        try:
            resolve(name, folder)
        except archive.TraceNotFetched:
            missing.append(archive.lookup(name))
    if not missing:
        return
    where = f" (nor in {folder})" if folder is not None else ""
    fetchable = [trace.name for trace in missing if trace.fetchable]
    lines = [archive.not_fetchable(trace) for trace in missing if not trace.fetchable]
    if fetchable:
        lines.insert(
            0,
            f"not downloaded{where}: {', '.join(fetchable)}: "
            f"batsched-ml traces fetch {' '.join(fetchable)}",
        )
    raise archive.TraceNotFetched("; ".join(lines))
