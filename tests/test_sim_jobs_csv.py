"""The job table's fast formatting gives the bytes of the general one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batsched_ml.alloc import intervals_of, procset_of
from batsched_ml.results.textfile import write_jobs_csv
from batsched_ml.sim import jobs_csv

integers = st.integers(0, 2**53).map(float)


@settings(max_examples=300, deadline=None)
@given(mask=st.integers(1, 2**300))
def test_the_allocation_text_is_the_procsets(mask: int) -> None:
    assert jobs_csv.alloc_text(tuple(intervals_of(mask))) == str(procset_of(mask))


@settings(max_examples=500, deadline=None)
@given(
    subtime=integers,
    wait=integers,
    run=st.integers(1, 2**53).map(float),
    walltime=st.none() | st.integers(1, 2**53) | integers,
    res=st.integers(1, 10**6),
    killed=st.booleans(),
)
def test_integer_times_are_written_as_with_percent_f(
    subtime: float, wait: float, run: float, walltime: float | None, res: int, killed: bool
) -> None:
    """The row formatted with ``%d.000000`` equals the one all ``%.6f`` would give."""
    start = subtime + wait
    finish = start + run
    state = "COMPLETED_KILLED" if killed else "COMPLETED_SUCCESSFULLY"
    row = jobs_csv.finished_row(
        name="7",
        workload="w0",
        profile="p",
        subtime=subtime,
        res=res,
        walltime=walltime,
        state=state,
        start=start,
        finish=finish,
        alloc="0-3 5",
    )
    execution, turnaround = finish - start, finish - subtime
    if execution > 0:  # the general branch's exact times (all integers here)
        stretch = float(jobs_csv._LD(turnaround) / jobs_csv._LD(execution))
        times = (execution, finish, start - subtime, turnaround, stretch)
    else:  # finish rounded back to start (times beyond 2**53): long double throughout
        times = jobs_csv._times_ld(subtime, start, finish)
    expected = jobs_csv._FINISHED % (
        "7",
        "w0",
        "p",
        subtime,
        res,
        walltime if walltime is not None else -1.0,
        not killed,
        state,
        start,
        *times,
        "0-3 5",
        "",
    )
    assert row == expected


def _reference(turnaround: float, execution: float) -> float:
    return float(jobs_csv._LD(turnaround) / jobs_csv._LD(execution))


@settings(max_examples=3000, deadline=None)
@given(
    execution=st.integers(1, 2**53 - 1) | st.integers(1, 2**20) | st.integers(2**10, 2**26),
    wait=st.integers(0, 2**53) | st.integers(0, 2**20),
)
def test_the_stretch_is_the_long_double_quotient(execution: int, wait: int) -> None:
    turnaround = min(execution + wait, 2**53 - 1)
    assert jobs_csv.stretch_of(float(turnaround), float(execution)) == _reference(
        float(turnaround), float(execution)
    )


def test_the_stretch_on_many_pairs_and_every_double_rounding() -> None:
    """A million integer pairs (seeded), in ranges of execution and waiting times: each one's
    stretch equals the long double quotient; among them about two hundred on which the double
    division differs from it (double rounding), which must take the long double way. (Run
    offline on 12 million pairs, all through ``stretch_of``, before this went in.)"""
    rng = np.random.default_rng(20)
    double_rounded = 0
    ranges = [
        (1, 2**11, 2**20),
        (2**10, 2**17, 2**24),
        (2**11, 2**26, 2**30),
        (2**20, 2**40, 2**45),
        (2**30, 2**52, 2**52),
        (1, 2**52, 2**52),
    ]
    for low, high, waits in ranges:
        execution = rng.integers(low, high, 170_000, dtype=np.int64)
        turnaround = np.minimum(execution + rng.integers(0, waits, len(execution)), 2**53 - 1)
        a, b = turnaround.astype(np.float64), execution.astype(np.float64)
        expected = (a.astype(np.longdouble) / b.astype(np.longdouble)).astype(np.float64)
        differ = expected != a / b
        double_rounded += int(differ.sum())
        sample = np.concatenate([np.flatnonzero(differ), np.arange(20_000)])
        for x, y, ref in zip(
            a[sample].tolist(), b[sample].tolist(), expected[sample].tolist(), strict=True
        ):
            assert jobs_csv.stretch_of(x, y) == ref, (x, y)
    assert double_rounded > 100  # the cases that matter were really there


def test_the_stretch_at_the_edges() -> None:
    edges = [1, 2, 3, 1023, 1024, 2047, 2048, 2049, 2**26 + 1, 2**52, 2**52 + 1, 2**53 - 1]
    for b in edges:
        for a in {*edges, b, b + 1, 2 * b, 2 * b - 1, 3 * b, 2**53 - 1}:
            if a < 2**54:
                assert jobs_csv.stretch_of(float(a), float(b)) == _reference(float(a), float(b))
    # a quotient below 1, and operands a long double cannot take exactly both ways
    assert jobs_csv.stretch_of(3.0, 7.0) == _reference(3.0, 7.0)
    assert jobs_csv.stretch_of(2.0**60 + 2**8, 3.0) == _reference(2.0**60 + 2**8, 3.0)


def test_the_table_is_written_whole_whatever_the_parts(tmp_path) -> None:
    """``write_jobs_csv`` writes its rows a part at a time: the file is the header, then every
    row on its own line, for any part size, and no temporary file is left."""
    rows = [f"{i},w0,row {i}" for i in range(7)]
    for count in (0, 1, 7):
        for rows_per_part in (1, 2, 3, 7, 50_000):
            path = tmp_path / "jobs.csv"
            write_jobs_csv(path, rows[:count], rows_per_part=rows_per_part)
            wanted = jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in rows[:count])
            assert path.read_bytes() == wanted.encode()
            assert not (tmp_path / "jobs.csv.tmp").exists()
