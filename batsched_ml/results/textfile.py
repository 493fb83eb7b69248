"""A text file written whole or not at all: the one way the package writes its tables, so that
a reader (a campaign resuming, ``report``, ``collect``) never takes a half-written file for a
result. The run folder's files and the job table of the stand-in of Batsim use it; the
simulator only formats its rows (:mod:`batsched_ml.sim.jobs_csv`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from batsched_ml.sim.jobs_csv import table_parts

#: The suffix of the scratch file :func:`write_text` writes before renaming it.
SCRATCH_SUFFIX = ".tmp"


def write_text(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` atomically: a reader sees the old file or the whole new one. ``text``
    may come in parts (an iterable of strings, written one after the other), so that a large
    table is never one string in memory. A write that fails (a full disk, an interruption)
    leaves no scratch file behind: its error goes on, the old file stays as it was."""
    tmp = path.with_name(path.name + SCRATCH_SUFFIX)
    try:
        with tmp.open("w", newline="") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                for part in text:
                    handle.write(part)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_jobs_csv(path: str | Path, rows: list[str], *, rows_per_part: int = 50_000) -> None:
    """Batsim's job table of ``rows`` (the simulator's, :mod:`batsched_ml.sim.jobs_csv`) at
    ``path``, written whole or not at all, a part at a time: the whole table as one text, and
    its encoded copy, were the largest step of a replay's memory (two copies of 33 MiB for
    HPC2N)."""
    write_text(Path(path), table_parts(rows, rows_per_part))
