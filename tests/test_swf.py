"""The SWF reader: fields, header, and errors that name the file and line."""

from __future__ import annotations

import gzip
import io
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from batsched_ml import compiled
from batsched_ml.workload import swf
from batsched_ml.workload.swf import SWF_FIELDS, SwfError, read_swf
from tests.conftest import TRACES, missing_compiled

HEADER = """; Version: 2.2
; Computer: Test machine
; MaxJobs: 3
; UnixStartTime: 1000000000
; TimeZone: 3600
; TimeZoneString: Europe/Stockholm
; MaxNodes: 8
; MaxProcs: 16
; Note: first line
;       second line
"""
LINES = [
    "1 0 5 100 4 -1 -1 4 200 -1 1 7 3 2 1 -1 -1 -1",
    "2 10 0 50 2 -1 -1 -1 60 -1 0 8 3 -1 -1 -1 -1 -1",
    "3 20 1 -1 1 -1 -1 1 10 -1 5 7 3 2 1 -1 -1 -1",
]


def write(tmp_path: Path, body: str, name: str = "t.swf") -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return path


def test_reads_all_18_fields_and_the_header(tmp_path: Path) -> None:
    trace = read_swf(write(tmp_path, HEADER + "\n".join(LINES) + "\n"))
    assert list(trace.jobs) == list(SWF_FIELDS)
    assert trace.jobs["run_time"].tolist() == [100, 50, -1]
    assert trace.jobs["requested_processors"].tolist() == [4, -1, 1]
    assert trace.jobs["user_id"].tolist() == [7, 8, 7]
    assert trace.jobs["job_number"].dtype.kind == "i"
    assert trace.line_numbers.tolist() == [11, 12, 13]
    header = trace.header
    assert (header.max_procs, header.max_nodes, header.machine_size) == (16, 8, 16)
    assert header.unix_start_time == 1_000_000_000
    assert header.time_zone == 3600
    assert header.time_zone_string == "Europe/Stockholm"
    assert header.fields["Note"] == "first line\nsecond line"


def test_gzip_and_plain_give_the_same_jobs(tmp_path: Path) -> None:
    body = HEADER + "\n".join(LINES) + "\n"
    plain = read_swf(write(tmp_path, body, "a.swf"))
    packed = read_swf(write(tmp_path, body, "a.swf.gz"))
    _same_frames(plain.jobs, packed.jobs)
    assert packed.name == "a"


def test_wrong_field_count_names_file_and_line(tmp_path: Path) -> None:
    lines = [*LINES[:2], "3 20 1 5 1 -1 -1 1 10 -1 5 7 3 2 1 -1 -1", LINES[2]]
    path = write(tmp_path, HEADER + "\n".join(lines) + "\n")
    with pytest.raises(SwfError) as info:
        read_swf(path)
    assert info.value.line == 13
    assert str(info.value) == f"{path}:13: expected 18 fields, found 17"


@pytest.mark.parametrize(
    ("where", "extra", "line", "found"),
    [
        ("first", " 7", 11, 19),  # pandas would take a first line's extra field for an index
        ("all", " 7", 11, 19),
        ("all", " 7 8", 11, 20),
        ("last", " 7", 13, 19),
        ("first", "", 11, 17),  # a field short: the last field missing
        ("last", "", 13, 17),
    ],
)
def test_every_line_of_another_field_count_is_found(
    tmp_path: Path, where: str, extra: str, line: int, found: int
) -> None:
    """Lines of 19, 20 or 17 fields, first, last or everywhere: the strict reader names the
    first, the lenient one skips every one of them and keeps the others' values whole."""
    lines = list(LINES)
    bad = {"first": [0], "last": [2], "all": [0, 1, 2]}[where]
    for index in bad:
        lines[index] = lines[index] + extra if extra else lines[index].rsplit(" ", 1)[0]
    path = write(tmp_path, HEADER + "\n".join(lines) + "\n")
    with pytest.raises(SwfError) as info:
        read_swf(path)
    assert str(info.value) == f"{path}:{line}: expected 18 fields, found {found}"
    trace = read_swf(path, lenient=True)
    assert sorted(trace.skipped_lines) == [11 + index for index in bad]
    kept = [int(text.split()[0]) for i, text in enumerate(LINES) if i not in bad]
    assert trace.jobs["job_number"].tolist() == kept
    assert trace.jobs["user_id"].tolist() == [[7, 8, 7][i] for i in range(3) if i not in bad]


def test_non_numeric_value_names_file_and_line(tmp_path: Path) -> None:
    lines = [LINES[0], LINES[1].replace(" 50 ", " 5O "), LINES[2]]
    path = write(tmp_path, HEADER + "\n".join(lines) + "\n")
    with pytest.raises(SwfError) as info:
        read_swf(path)
    assert info.value.line == 12
    assert "'5O' is not a finite number" in str(info.value)


def test_lenient_mode_skips_and_counts_bad_lines(tmp_path: Path) -> None:
    lines = [LINES[0], "garbage", LINES[1].replace(" 50 ", " nan "), LINES[2]]
    trace = read_swf(write(tmp_path, HEADER + "\n".join(lines) + "\n"), lenient=True)
    assert trace.jobs["job_number"].tolist() == [1, 3]
    assert sorted(trace.skipped_lines) == [12, 13]


def test_missing_file_and_corrupt_gzip(tmp_path: Path) -> None:
    with pytest.raises(SwfError, match="cannot read"):
        read_swf(tmp_path / "absent.swf")
    bad = tmp_path / "bad.swf.gz"
    bad.write_bytes(gzip.compress(b"1 2 3")[:-6])
    with pytest.raises(SwfError, match="corrupt gzip"):
        read_swf(bad)


def test_empty_file_gives_no_jobs(tmp_path: Path) -> None:
    trace = read_swf(write(tmp_path, HEADER))
    assert len(trace) == 0


def test_reads_the_real_kth_trace() -> None:
    path = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"
    if not path.exists():
        pytest.skip("shared traces not available")
    trace = read_swf(path)
    assert len(trace) == 28_476  # SOURCES.md: job lines
    assert trace.header.max_procs == 100
    assert trace.jobs["job_number"][0] == 15
    assert trace.jobs["job_number"][-1] == 28_490  # = MaxJobs


def test_an_integer_field_beyond_int64_stays_a_float(tmp_path: Path) -> None:
    """A whole number the int64 column cannot hold is kept as it was read (the cast wrapped it
    round to another number, with only a RuntimeWarning)."""
    line = LINES[0].replace("1 0 5", "1e30 0 5", 1)
    trace = read_swf(write(tmp_path, HEADER + "\n".join([line, *LINES[1:]]) + "\n"))
    assert trace.jobs["job_number"].tolist() == [1e30, 2.0, 3.0]
    assert trace.jobs["user_id"].dtype.kind == "i"


# --- the compiled number parser (_cswf.c) against its reference, pandas' C parser -------------


def _cswf() -> Any:
    """The compiled parser built from this source; a failure where CI requires the compiled
    parts (``BATSCHED_ML_REQUIRE_COMPILED=1``), else a skip (no compiler at install)."""
    module = compiled.compiled_module(swf._CSWF, CSWF_SOURCE)
    if module is None:
        missing_compiled("the SWF number parser")
    return module


CSWF_SOURCE = Path(swf.__file__).with_name("_cswf.c")


def _reference(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``_parse_numbers`` of ``lines`` by numpy alone (the compiled parts turned off): the
    columns, or the ValueError it raises."""
    with monkeypatch.context() as patch:
        patch.setenv(compiled.VARIABLE, "python")
        try:
            return swf._parse_numbers(lines)
        except ValueError as error:
            return error


def _same_frames(ours: Any, theirs: Any) -> None:
    assert list(ours) == list(theirs) == list(SWF_FIELDS)
    for name in ours:
        a, b = np.asarray(ours[name]), np.asarray(theirs[name])
        assert a.dtype == b.dtype, name
        assert a.tobytes() == b.tobytes(), name  # bit for bit: -0.0 and 0.0 differ


def _pandas_numbers(lines: list[str]) -> np.ndarray:
    """The numbers of ``lines`` as pandas' C parser reads them (the reader's reference before
    it was numpy's): every trace's numbers must be read the same (and made columns alike)."""
    frame = pd.read_csv(
        io.BytesIO("\n".join(lines).encode()),
        sep=r"\s+",
        header=None,
        names=list(SWF_FIELDS),
        dtype="float64",
        engine="c",
    )
    return frame.to_numpy()


TRACE_NAMES = sorted(path.name for path in TRACES.glob("*.swf.gz")) if TRACES.is_dir() else []


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=[]
            if name.startswith(("KTH", "SDSC-SP2", "lublin", "NASA"))
            else [pytest.mark.long],
        )
        for name in TRACE_NAMES
    ],
)
def test_the_compiled_parser_reads_each_trace_as_numpy_and_pandas_do(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _cswf()
    text = swf._decoded(swf._read_bytes(TRACES / name))
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith(";")]
    assert module.parse("\n".join(lines).encode(), len(SWF_FIELDS)) is not None  # taken
    ours = swf._parse_numbers(lines)
    _same_frames(ours, _reference(lines, monkeypatch))
    _same_frames(ours, swf._columns(_pandas_numbers(lines)))


def _field(rng: random.Random) -> str:
    """A field of any shape a trace or a fuzzer may hold."""
    kind = rng.randrange(12)
    if kind == 0:
        return str(rng.randint(-1, 10**6))
    if kind == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}"
    if kind == 2:
        return repr(rng.uniform(-1e3, 1e3))  # 16 or 17 digits: the reference's
    if kind == 3:
        return f"{rng.randint(1, 999)}e{rng.randint(-30, 30)}"
    if kind == 4:
        return rng.choice(["-0", "+0", "0.", ".5", "-.5", "5.", "00012", "1E+03", "1e-0", "-0.0"])
    if kind == 5:
        return rng.choice([".", "-", "+", "e5", "1e", "1e+", "1.2.3", "--1", "1e1000", "0x10"])
    if kind == 6:
        return rng.choice(["nan", "inf", "-inf", "NaN", "1_000", "١", "1,5", "12a"])
    if kind == 7:
        return str(rng.randint(10**14, 10**18))  # 15 to 19 digits
    if kind == 8:
        return f"{rng.randint(0, 10**15)}.{rng.randint(0, 10**6)}"
    if kind == 9:
        return f"{rng.randint(0, 99)}e{rng.choice(['22', '23', '-22', '-23', '300', '-300'])}"
    return str(rng.randint(0, 3000))


def _job_line(
    rng: random.Random, *, odd_count: float = 0.03, odd_first: float = 0.3, odd_rest: float = 0.04
) -> str:
    """A job line: 18 fields (another count with probability ``odd_count``), the first a
    field of any shape (:func:`_field`) with probability ``odd_first``, the others with
    ``odd_rest``, separated by spaces and tabs."""
    count = 18 if rng.random() >= odd_count else rng.choice([17, 19])
    separators = [rng.choice([" ", "  ", "\t", " \t "]) for _ in range(count - 1)]
    fields = [_field(rng) if rng.random() < odd_first else str(rng.randint(-1, 99))]
    fields += [_field(rng) if rng.random() < odd_rest else "-1" for _ in range(count - 1)]
    return fields[0] + "".join(s + f for s, f in zip(separators, fields[1:], strict=True))


def test_the_compiled_parser_reads_what_numpy_reads_or_leaves_it_to_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random lines: what the compiled parser takes it reads bit for bit as numpy does, and as
    pandas' parser does; a line it refuses (another field count, a field it is not sure of)
    sends the whole parse to numpy. Every shape of field is taken at least once, and refused
    at least once."""
    module = _cswf()
    rng = random.Random(7)
    taken = refused = 0
    for _ in range(400):
        lines = [_job_line(rng) for _ in range(rng.randint(1, 3))]
        parsed = module.parse("\n".join(lines).encode(), len(SWF_FIELDS))
        reference = _reference(lines, monkeypatch)
        if parsed is None:
            refused += 1
            continue
        taken += 1
        assert not isinstance(reference, ValueError), lines  # taken: numpy reads it too
        ours = swf._parse_numbers(lines)
        _same_frames(ours, reference)
        _same_frames(ours, swf._columns(_pandas_numbers(lines)))
    assert taken > 50 and refused > 50, (taken, refused)


def test_the_compiled_parser_refuses_what_it_cannot_be_sure_of() -> None:
    module = _cswf()
    line = " ".join(["1"] * 18)
    assert module.parse(line.encode(), 18) is not None
    for bad in ("1" * 16, "1.00000000000000001", "1e23", "1e-23", "nan", "0x1", "1e1234"):
        assert module.parse(line.replace("1", bad, 1).encode(), 18) is None, bad
    assert module.parse(" ".join(["1"] * 17).encode(), 18) is None
    assert module.parse((line + " 1").encode(), 18) is None
    assert module.parse((line + "\n" + line).encode(), 18) is not None
    assert module.parse((line + "\n").encode(), 18) is None  # an empty line: not a job line
    assert module.parse(b"", 18) is None
    with pytest.raises(ValueError, match="positive"):
        module.parse(b"1", 0)


# --- the compiled reader of a whole file (_cswf.read) against the reader's own steps ----------


def _python_read(path: Path, monkeypatch: pytest.MonkeyPatch, *, lenient: bool = False) -> Any:
    """``read_swf`` with the compiled parts turned off (the lines split and stripped by Python,
    the numbers read by numpy): the trace, or the SwfError it raises."""
    with monkeypatch.context() as patch:
        patch.setenv(compiled.VARIABLE, "python")
        try:
            return read_swf(path, lenient=lenient)
        except SwfError as error:
            return error


def _same_traces(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, SwfError):
        assert isinstance(ours, SwfError) and str(ours) == str(theirs)
        return
    assert ours.header.fields == theirs.header.fields
    _same_frames(ours.jobs, theirs.jobs)
    assert ours.line_numbers.dtype == theirs.line_numbers.dtype
    assert ours.line_numbers.tolist() == theirs.line_numbers.tolist()
    assert ours.skipped_lines == theirs.skipped_lines


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=[] if name.startswith(("KTH", "lublin", "NASA")) else [pytest.mark.long],
        )
        for name in TRACE_NAMES
    ],
)
def test_the_compiled_reader_reads_each_trace_as_the_reader_does(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _cswf()
    path = TRACES / name
    assert module.read(swf._read_bytes(path), len(SWF_FIELDS)) is not None  # taken
    _same_traces(read_swf(path), _python_read(path, monkeypatch))


def _comment(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return f"; MaxProcs: {rng.randint(1, 512)}"
    if kind == 1:
        return f";\tUnixStartTime:{rng.randint(0, 10**9)}  "
    if kind == 2:
        return ";       a continued note "
    if kind == 3:
        return "; Note: " + rng.choice(["café", "naïve", "plain", "a\x0cform feed", "a\x1fb"])
    if kind == 4:
        return ";"
    return "; Computer: test"


def test_the_compiled_reader_splits_and_strips_lines_as_python_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random files (comments anywhere, empty and blank lines, leading and trailing spaces and
    tabs, every line end, a last line with or without one, bytes beyond ASCII or control
    characters, lines of another field count or a field the parser refuses, plain or lenient):
    the same trace, or the same error, as the reader's own steps; the compiled reader takes
    many files and leaves many to the reader."""
    module = _cswf()
    rng = random.Random(11)
    taken = refused = 0
    for round in range(300):
        pieces = []
        for _ in range(rng.randint(0, 12)):
            kind = rng.random()
            if kind < 0.6:
                line = _job_line(rng, odd_count=0.05, odd_first=0.02, odd_rest=0.02)
                pieces.append(rng.choice(["", " \t"]) + line)
            elif kind < 0.85:
                pieces.append(rng.choice(["", " ", "\t", "  \t "]) + _comment(rng))
            else:
                pieces.append(rng.choice(["", " ", "\t \t"]))
        ends = [rng.choice(["\n", "\n", "\r\n", "\r"]) for _ in pieces]
        body = "".join(p + e for p, e in zip(pieces, ends, strict=True))
        if pieces and rng.random() < 0.3:
            body = body.rstrip("\r\n")
        encoding = rng.choice(["utf-8", "latin-1"])
        path = tmp_path / f"{round}.swf"
        path.write_bytes(body.encode(encoding, errors="replace"))
        lenient = rng.random() < 0.3
        if module.read(path.read_bytes(), len(SWF_FIELDS)) is None:
            refused += 1
        else:
            taken += 1
        try:
            ours: Any = read_swf(path, lenient=lenient)
        except SwfError as error:
            ours = error
        _same_traces(ours, _python_read(path, monkeypatch, lenient=lenient))
    assert taken > 60 and refused > 60, (taken, refused)


def test_the_compiled_reader_refuses_what_it_cannot_be_sure_of() -> None:
    module = _cswf()
    line = " ".join(["1"] * 18).encode()
    values, numbers, comments = module.read(b"; A: b \r\n\r\n  " + line + b"\t\n;c\r" + line, 18)
    assert len(values) == 2 * 18 * 8 and comments == ["; A: b", ";c"]
    assert list(memoryview(numbers).cast("q")) == [3, 5]
    assert module.read(b"", 18) == (b"", b"", [])
    assert module.read(b"\n\n;x\n", 18) == (b"", b"", [";x"])
    for bad in (b"\x0c", b"\x0b", b"\x1c", b"\x1f", b"\x7f", b"\x85", b"\xc3\xa9", b"\x00"):
        assert module.read(b"; note " + bad + b"\n" + line, 18) is None, bad
    assert module.read(line + b" 1", 18) is None  # 19 fields
    assert module.read(line.replace(b"1", b"1e23", 1), 18) is None  # not sure of the number
    with pytest.raises(ValueError, match="positive"):
        module.read(b"1", 0)
