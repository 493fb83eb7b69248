"""Reader for the Standard Workload Format (SWF) of the Parallel Workloads Archive.

An SWF file is a header of ``; Key: value`` comment lines followed by one line per job with 18
whitespace-separated numeric fields (-1 meaning "unknown"). The reader is vectorised: a C parser
(or numpy's, its reference) converts the numbers and, in doing so, shows that every line has 18
(see :func:`_parse_numbers`); only when that fails does it look line by line for the culprit (the
field count of every line, then each field), so the error can name the file and the line. The
usual file (ASCII, every job line read) is split into lines and read by the C parser in one pass
(``_cswf.read``), whose reference is the reader's own steps (:func:`_read_lines`).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from batsched_ml.compiled import compiled_module
from batsched_ml.errors import UserError

#: The 18 SWF fields, in file order, with the names of the trace's columns (:attr:`SwfTrace.jobs`).
SWF_FIELDS: tuple[str, ...] = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable_number",
    "queue_number",
    "partition_number",
    "preceding_job_number",
    "think_time",
)

#: Fields that are integers in the format; the others (times, CPU time, memory) may be real.
INTEGER_FIELDS: frozenset[str] = frozenset(
    {
        "job_number",
        "allocated_processors",
        "requested_processors",
        "status",
        "user_id",
        "group_id",
        "executable_number",
        "queue_number",
        "partition_number",
        "preceding_job_number",
    }
)

#: The compiled parser (``_cswf.c``): what it reads, it reads as numpy's parser below, its
#: reference, does, and it splits a file into lines as :func:`_read_lines` does
#: (``tests/test_swf.py`` compares them); what it is not sure of goes there.
_CSWF = "batsched_ml.workload._cswf"


def compiled_parser() -> Any:
    """The compiled parser, where it was built from the source beside it, else ``None``."""
    return compiled_module(_CSWF, Path(__file__).with_name("_cswf.c"))


_HEADER_RE = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$")


class SwfError(UserError, ValueError):
    """A malformed SWF file; the message names the file and, where it applies, the line."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@dataclass
class SwfHeader:
    """The header comments of an SWF file.

    ``fields`` keeps every ``; Key: value`` pair in file order (continuation lines and notes are
    appended to the previous key's value); typed accessors cover the keys the rest of the package
    uses.
    """

    fields: dict[str, str] = field(default_factory=dict)

    def _int(self, key: str) -> int | None:
        value = self.fields.get(key)
        if value is None:
            return None
        match = re.match(r"\s*(-?\d+)", value)
        return int(match.group(1)) if match else None

    @property
    def max_procs(self) -> int | None:
        return self._int("MaxProcs")

    @property
    def max_nodes(self) -> int | None:
        return self._int("MaxNodes")

    @property
    def unix_start_time(self) -> int | None:
        return self._int("UnixStartTime")

    @property
    def time_zone(self) -> int | None:
        """Offset of the trace's local time from UTC, in seconds (the ``TimeZone`` key)."""
        return self._int("TimeZone")

    @property
    def time_zone_string(self) -> str | None:
        value = self.fields.get("TimeZoneString")
        return value.split()[0] if value else None

    @property
    def machine_size(self) -> int | None:
        """Processors of the machine: MaxProcs, else MaxNodes (PWA headers give one or both)."""
        procs = self.max_procs
        if procs is not None and procs > 0:
            return procs
        nodes = self.max_nodes
        return nodes if nodes is not None and nodes > 0 else None


@dataclass
class SwfTrace:
    """A parsed SWF file: its header, its jobs by column (:data:`SWF_FIELDS`, each a numpy
    array with a value per job; ``pandas.DataFrame(trace.jobs)`` makes them a table), and
    ``line_numbers[i]``, the 1-based file line of job ``i`` (for error messages downstream)."""

    path: str
    header: SwfHeader
    jobs: dict[str, np.ndarray]
    line_numbers: np.ndarray
    skipped_lines: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.line_numbers)

    @property
    def name(self) -> str:
        """The trace's name: its file name without ``.swf`` / ``.swf.gz``."""
        base = Path(self.path).name
        for suffix in (".gz", ".swf"):
            base = base.removesuffix(suffix)
        return base


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed if gzip."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SwfError(str(path), None, f"cannot read: {exc.strerror or exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise SwfError(str(path), None, f"corrupt gzip data: {exc}") from exc
    return raw


def _decoded(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _parse_header(lines: list[str]) -> SwfHeader:
    header = SwfHeader()
    last_key: str | None = None
    for line in lines:
        match = _HEADER_RE.match(line)
        if match:
            key, value = match.group(1), match.group(2)
            if key in header.fields:
                header.fields[key] += "\n" + value
            else:
                header.fields[key] = value
            last_key = key
        elif last_key is not None:
            extra = line.lstrip(";").strip()
            if extra:
                header.fields[last_key] += "\n" + extra
    return header


def read_swf_header(path: str | Path) -> SwfHeader:
    """Only the header of an SWF file (reads up to the first job line)."""
    path = Path(path)
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    lines: list[str] = []
    with opener(path, "rt", encoding="latin-1") as handle:
        for line in handle:
            stripped = line.strip()
            if stripped and not stripped.startswith(";"):
                break
            if stripped:
                lines.append(stripped)
    return _parse_header(lines)


def _bad_token_line(data_lines: list[str]) -> tuple[int, str] | None:
    """Index and token of the first non-numeric field (slow path, only called on failure)."""
    for index, line in enumerate(data_lines):
        for token in line.split():
            try:
                value = float(token)
            except ValueError:
                return index, token
            if not np.isfinite(value):
                return index, token
    return None


def read_swf(path: str | Path, *, lenient: bool = False) -> SwfTrace:
    """Read an SWF file (plain or gzip-compressed).

    A data line with a number of fields other than 18, or a field that is not a finite number,
    raises :class:`SwfError` naming the file and line. With ``lenient=True`` such lines are
    skipped instead and listed in :attr:`SwfTrace.skipped_lines` (line number -> reason).
    """
    path = Path(path)
    raw = _read_bytes(path)
    parser = compiled_parser()
    read = None if parser is None else parser.read(raw, len(SWF_FIELDS))
    if read is not None:  # the compiled reader split and read every line as the steps below
        values, numbers, comments = read
        return SwfTrace(
            path=str(path),
            header=_parse_header(comments),
            jobs=_columns(np.frombuffer(values, dtype=np.float64).reshape(-1, len(SWF_FIELDS))),
            line_numbers=np.frombuffer(numbers, dtype=np.int64).copy(),
        )
    return _read_lines(path, _decoded(raw), lenient=lenient)


def _read_lines(path: Path, text: str, *, lenient: bool) -> SwfTrace:
    """:func:`read_swf` of the file's ``text``, line by line: the reference of the compiled
    reader (``_cswf.read``), and the way of a file it is not sure of (a byte beyond ASCII, a
    control character, a job line it does not read)."""
    all_lines = text.splitlines()
    header_lines: list[str] = []
    data_lines: list[str] = []
    data_numbers: list[int] = []
    for number, line in enumerate(all_lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            header_lines.append(stripped)
        else:
            data_lines.append(stripped)
            data_numbers.append(number)

    skipped: dict[int, str] = {}
    try:  # the usual file: every line 18 finite numbers, known from the parse itself
        columns = _parse_numbers(data_lines)
    except ValueError:  # a malformed line: found below, the first one named
        pass
    else:
        return SwfTrace(
            path=str(path),
            header=_parse_header(header_lines),
            jobs=columns,
            line_numbers=np.asarray(data_numbers, dtype=np.int64),
        )
    n_fields = len(SWF_FIELDS)
    counts = np.fromiter((len(line.split()) for line in data_lines), dtype=np.int64)
    bad = np.flatnonzero(counts != n_fields)
    if bad.size:
        if not lenient:
            first = int(bad[0])
            raise SwfError(
                str(path),
                data_numbers[first],
                f"expected {n_fields} fields, found {int(counts[first])}",
            )
        for position in bad:
            skipped[data_numbers[position]] = (
                f"expected {n_fields} fields, found {int(counts[position])}"
            )
        keep = counts == n_fields
        data_lines = [line for line, ok in zip(data_lines, keep, strict=True) if ok]
        data_numbers = [num for num, ok in zip(data_numbers, keep, strict=True) if ok]

    while True:
        try:
            columns = _parse_numbers(data_lines)
            break
        except ValueError:
            found = _bad_token_line(data_lines)
            if found is None:  # pragma: no cover - numpy failed for a reason we cannot see
                raise SwfError(str(path), None, "could not parse the job lines") from None
            index, token = found
            reason = f"field {token!r} is not a finite number"
            if not lenient:
                raise SwfError(str(path), data_numbers[index], reason) from None
            skipped[data_numbers[index]] = reason
            del data_lines[index]
            del data_numbers[index]

    return SwfTrace(
        path=str(path),
        header=_parse_header(header_lines),
        jobs=columns,
        line_numbers=np.asarray(data_numbers, dtype=np.int64),
        skipped_lines=dict(sorted(skipped.items())),
    )


def _parse_numbers(data_lines: list[str]) -> dict[str, np.ndarray]:
    """The job lines' 18 numbers each, in :data:`SWF_FIELDS`' columns; :class:`ValueError` if
    a line is not 18 finite numbers.

    The compiled parser (``_cswf.c``) reads the usual file in one pass, a few times faster;
    a line it is not sure of (another field count, a number of more than 15 digits, any other
    text) leaves the whole parse to numpy's parser (``numpy.loadtxt``), its reference: each
    number correctly rounded, a line of another field count a :class:`ValueError`."""
    if not data_lines:
        return _columns(np.empty((0, len(SWF_FIELDS))))
    # as bytes: a StringIO holds four bytes a character (the load's peak memory)
    data = "\n".join(data_lines).encode()
    parser = compiled_parser()
    parsed = None if parser is None else parser.parse(data, len(SWF_FIELDS))
    if parsed is not None:  # the compiled parser read every field as numpy would
        values = np.frombuffer(parsed, dtype=np.float64).reshape(len(data_lines), -1)
        return _columns(values)
    values = np.loadtxt(data_lines, dtype=np.float64, ndmin=2, comments=None)
    if values.shape != (len(data_lines), len(SWF_FIELDS)):
        raise ValueError("a line of another number of fields")
    return _columns(values)


def _columns(values: np.ndarray) -> dict[str, np.ndarray]:
    """The jobs' columns of the parsed ``values`` (a row per job line, a column per field):
    :class:`ValueError` if one is missing or not finite; the integer fields as int64 where
    they are whole numbers within int64 (a file of no job: every column float64)."""
    if not len(values):
        return {name: np.empty(0, dtype=np.float64) for name in SWF_FIELDS}
    if not np.isfinite(values).all():
        raise ValueError("a missing or non-finite value")
    by_field = np.ascontiguousarray(values.T)  # one copy: each field's values side by side
    columns: dict[str, np.ndarray] = {}
    for name, column in zip(SWF_FIELDS, by_field, strict=True):
        if name in INTEGER_FIELDS:
            # whole numbers within int64 (beyond, the cast would wrap round: kept as floats)
            whole = np.array_equal(column, np.floor(column))
            if whole and bool(((column >= -(2.0**63)) & (column < 2.0**63)).all()):
                column = column.astype(np.int64)
        columns[name] = column
    return columns
