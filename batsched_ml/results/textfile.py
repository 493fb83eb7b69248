"""A text file written whole or not at all: the one way the package writes its tables, so that
a reader (a campaign resuming, ``report``, ``collect``) never takes a half-written file for a
result. A leaf module: the simulator's job table and the run folder's files both use it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

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
