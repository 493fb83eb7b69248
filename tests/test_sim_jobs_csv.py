"""The job table's fast formatting gives the bytes of the general one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batsched_ml.alloc import procset_of
from batsched_ml.sim import jobs_csv

integers = st.integers(0, 2**53).map(float)


@settings(max_examples=300, deadline=None)
@given(mask=st.integers(1, 2**300))
def test_the_allocation_text_is_the_procsets(mask: int) -> None:
    assert jobs_csv.alloc_text(mask) == str(procset_of(mask))


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
