"""Batsim's ``_jobs.csv``: same columns, same value formatting, rows in completion order.

Formatting follows Batsim 4.2.1 as recorded in ``shared/batsim-reference``: numbers with C's
``%f`` (six decimals), ``success`` 0/1, ``requested_time`` -1 without walltime, empty time fields
for rejected jobs, ``consumed_energy`` -1 (no energy plugin) and ``metadata`` always quoted.
Batsim 5.0.0-rc2 (``shared/batsim5-reference``) writes the same columns its own way
(:func:`finished_row_v5`, :func:`rejected_row_v5`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np
from procset import ProcSet

from batsched_ml.alloc import Runs

JOBS_CSV_COLUMNS: tuple[str, ...] = (
    "job_id",
    "workload_name",
    "profile",
    "submission_time",
    "requested_number_of_resources",
    "requested_time",
    "success",
    "final_state",
    "starting_time",
    "execution_time",
    "finish_time",
    "waiting_time",
    "turnaround_time",
    "stretch",
    "allocated_resources",
    "consumed_energy",
    "metadata",
)
HEADER = ",".join(JOBS_CSV_COLUMNS)


def _f(value: float) -> str:
    return f"{value:.6f}"


# One %-format per row: about three times faster than formatting field by field, which shows
# on 10^5-job replays. Columns: see JOBS_CSV_COLUMNS.
_FINISHED = '%s,%s,%s,%.6f,%d,%.6f,%d,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%s,-1.000000,"%s"'
# The same when every time but the stretch is an integer: ``%d`` of an integer-valued double is
# its exact decimal, to which ``%.6f`` only adds ".000000"; twice as fast as ``%.6f``.
_FINISHED_INTEGERS = (
    "%s,%s,%s,%d.000000,%d,%d.000000,%d,%s,%d.000000,%d.000000,%d.000000,%d.000000,%d.000000,"
    '%.6f,%s,-1.000000,"%s"'
)


_LD = np.longdouble
_LD_EPSILON_RUNTIME = np.longdouble("1e-5")  # Batsim's 1e-5l for a job that ran in no time


def finished_row(
    *,
    name: str,
    workload: str,
    profile: str,
    subtime: float,
    res: int,
    walltime: float | None,
    state: str,
    start: float,
    finish: float,
    alloc: ProcSet | str,
    metadata: str = "",
) -> str:
    """The row of a job that ran (successfully, killed or past its walltime).

    ``alloc`` is the allocation, or its text (:func:`alloc_text`).

    ``start`` and ``finish`` are SimGrid's clock (doubles) when the job's actor started and
    ended. Batsim keeps the runtime as ``finish - start`` in ``long double`` and derives the
    other columns from it in ``long double`` (``export.cpp``, ``JobsTracer::write_job``), then
    casts each to ``double`` for ``%f``; on x86-64 ``numpy.longdouble`` is that same 80-bit
    type. When every time is an integer the sums and differences are exact in ``double`` too,
    and only the stretch's division needs the wider type.
    """
    execution = finish - start
    if execution > 0 and start.is_integer() and finish.is_integer() and float(subtime).is_integer():
        turnaround = finish - subtime
        stretch = stretch_of(turnaround, execution)
        if walltime is None or float(walltime).is_integer():
            return _FINISHED_INTEGERS % (
                name,
                workload,
                profile,
                subtime,
                res,
                walltime if walltime is not None else -1,
                state == "COMPLETED_SUCCESSFULLY",
                state,
                start,
                execution,
                finish,
                start - subtime,
                turnaround,
                stretch,
                alloc,
                metadata,
            )
        times: tuple[float, ...] = (execution, finish, start - subtime, turnaround, stretch)
    else:
        times = _times_ld(subtime, start, finish)
    return _FINISHED % (
        name,
        workload,
        profile,
        subtime,
        res,
        walltime if walltime is not None else -1.0,
        state == "COMPLETED_SUCCESSFULLY",
        state,
        start,
        *times,
        alloc,
        metadata,
    )


def stretch_ld(turnaround: float, execution: float) -> float:
    """The stretch as Batsim computes it: the quotient in ``long double`` (x87's 64-bit
    significand on x86-64, which ``numpy.longdouble`` is), then cast to ``double``. The
    reference for :func:`stretch_of`; about 1.5 microseconds a call."""
    return float(_LD(turnaround) / _LD(execution))


def stretch_of(turnaround: float, execution: float) -> float:
    """:func:`stretch_ld` of two positive integer-valued doubles, in about a third of its time.

    The long double path rounds the exact quotient ``q`` twice, to 64 bits (``RN64``) and then
    to 53 (``RN53``); the double division ``turnaround / execution`` rounds it once,
    correctly. The two differ only by double rounding: when ``RN64(q)`` lands on a midpoint
    between two doubles that ``q`` itself is not on. Everything else gives the same double, as
    ``RN64`` is monotonic and the midpoints are 64-bit numbers: a ``q`` farther than half a
    64-bit ulp from every midpoint rounds to a value strictly between the same two midpoints as
    ``q``, whose ``RN53`` is ``q``'s.

    So the quotient is scaled by ``2**s`` into ``[2**53, 2**55)`` with integers
    (``A = turnaround << s``, ``Q, R = divmod(A, execution)``): there a double's ulp is 2 (below
    ``2**54``) or 4, the midpoints the odd integers or those that are 2 mod 4, and half a 64-bit
    ulp ``2**-11`` or ``2**-10``. ``A / execution`` within that distance of a midpoint (even on
    it) goes the long double way; with integers below ``2**53`` that needs an execution time of
    at least ``2**10`` s and happens about once in a thousand such jobs. A stretch of exactly 1
    (no wait) is exact both ways.
    """
    if turnaround == execution:
        return 1.0
    a = int(turnaround)
    b = int(execution)
    shift = 54 - a.bit_length() + b.bit_length()
    if a <= 0 or b <= 0 or shift < 0:  # not a stretch (or one of 2**54 and more)
        return stretch_ld(turnaround, execution)
    quotient, rest = divmod(a << shift, b)
    if quotient >> 54:  # ulp 4: midpoints 2 mod 4, half a 64-bit ulp 2**-10
        low = quotient & 3
        if (low == 2 and rest << 10 <= b) or (low == 1 and (b - rest) << 10 <= b):
            return stretch_ld(turnaround, execution)
    elif quotient & 1:  # ulp 2: midpoints odd, half a 64-bit ulp 2**-11
        if rest << 11 <= b:
            return stretch_ld(turnaround, execution)
    elif (b - rest) << 11 <= b:
        return stretch_ld(turnaround, execution)
    return turnaround / execution


@lru_cache(maxsize=4096)
def alloc_text(runs: Runs) -> str:
    """The allocation of ``runs`` (a ProcSet's intervals) as Batsim writes it, which is ``str``
    of its ProcSet (maximal intervals, ``a-b`` or ``a``, separated by spaces), cached: a
    scheduler placing jobs on the lowest free machines hands out the same allocations again and
    again, and formatting a ProcSet took about a tenth of a whole replay."""
    return " ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _times_ld(subtime: float, start: float, finish: float) -> tuple[float, ...]:
    """Execution, finish, waiting, turnaround and stretch in ``long double`` throughout, as
    Batsim computes them."""
    start_ld, sub_ld = _LD(start), _LD(subtime)
    runtime = _LD(finish) - start_ld
    if runtime == 0:
        runtime = _LD_EPSILON_RUNTIME
    completion = start_ld + runtime
    turnaround = completion - sub_ld
    ld = (runtime, completion, start_ld - sub_ld, turnaround, turnaround / runtime)
    return tuple(float(value) for value in ld)  # then each cast to double, as Batsim does


# Batsim 5.0.0-rc2's row (``JobsTracer::write_job``): the profile's full id, the energy as it is
# (-1 for a workload's job, 0 for a job the scheduler registered), and no metadata.
_FINISHED_V5 = "%s,%s,%s,%.6f,%d,%.6f,%d,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%s,%.6f,"


def finished_row_v5(
    *,
    name: str,
    workload: str,
    profile: str,
    subtime: float,
    res: int,
    walltime: float | None,
    state: str,
    start: float,
    finish: float,
    alloc: str,
    dynamic: bool,
) -> str:
    """The row Batsim 5 writes for a job that ran: the same times as :func:`finished_row`
    (``long double`` throughout), where Batsim 5's 1e-12 s message hops show only as a
    ``-0.000000`` wait when a job started a few ulps before its submission time; ``profile``
    is the profile's id (``w0!delay_10``); ``dynamic``: a job the scheduler registered, whose
    energy Batsim 5 writes 0 (-1 for the workload's)."""
    return _FINISHED_V5 % (
        name,
        workload,
        profile,
        subtime,
        res,
        walltime if walltime is not None else -1.0,
        state == "COMPLETED_SUCCESSFULLY",
        state,
        start,
        *_times_ld(subtime, start, finish),
        alloc,
        0.0 if dynamic else -1.0,
    )


def rejected_row_v5(
    *, name: str, workload: str, profile: str, subtime: float, res: int, walltime: float | None
) -> str:
    """Batsim 5's row of a rejected job: no times, allocation, energy nor metadata."""
    requested = walltime if walltime is not None else -1.0
    return f"{name},{workload},{profile},{subtime:.6f},{res:d},{requested:.6f},0,REJECTED,,,,,,,,,"


def rejected_row(
    *,
    name: str,
    workload: str,
    profile: str,
    subtime: float,
    res: int,
    walltime: float | None,
    metadata: str = "",
) -> str:
    """The row of a rejected job: no times, no allocation, no energy."""
    head = (
        name,
        workload,
        profile,
        _f(subtime),
        str(res),
        _f(walltime if walltime is not None else -1.0),
        "0",
        "REJECTED",
    )
    return ",".join(head) + "," * 8 + f',"{metadata}"'


def table_parts(rows: list[str], rows_per_part: int = 50_000) -> Iterator[str]:
    """The table's text (header and ``rows``), a part at a time."""
    yield HEADER + "\n"
    for start in range(0, len(rows), rows_per_part):
        yield "\n".join(rows[start : start + rows_per_part])
        yield "\n"  # after the part, not appended to it: no copy of the part
