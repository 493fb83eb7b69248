"""The SWF reader: fields, header, and errors that name the file and line."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from batsched_ml.workload.swf import SWF_FIELDS, SwfError, read_swf
from tests.conftest import TRACES

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
    assert list(trace.jobs.columns) == list(SWF_FIELDS)
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
    assert plain.jobs.equals(packed.jobs)
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
    assert trace.jobs["job_number"].iloc[0] == 15
    assert trace.jobs["job_number"].iloc[-1] == 28_490  # = MaxJobs
