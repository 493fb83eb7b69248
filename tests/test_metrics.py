"""The metrics module on a hand-made job table, with exact values."""

from __future__ import annotations

import io
import random

import numpy as np
import pandas as pd
import pytest

from batsched_ml.results.metrics import bounded_slowdown, max_machines_in_use, summarize
from batsched_ml.sim.jobs_csv import HEADER

TABLE = (
    HEADER
    + """
1,w0,p,0.000000,2,100.000000,1,COMPLETED_SUCCESSFULLY,0.000000,30.000000,30.000000,0.000000,30.000000,1.000000,0-1,-1.000000,""
2,w0,p,10.000000,1,100.000000,1,COMPLETED_SUCCESSFULLY,30.000000,90.000000,120.000000,20.000000,110.000000,1.222222,0,-1.000000,""
3,w0,p,20.000000,3,100.000000,1,COMPLETED_SUCCESSFULLY,30.000000,10.000000,40.000000,10.000000,20.000000,2.000000,1-3,-1.000000,""
4,w0,p,25.000000,8,100.000000,0,REJECTED,,,,,,,,,""
"""
)


def table() -> pd.DataFrame:
    return pd.read_csv(io.StringIO(TABLE), dtype={"job_id": str})


def test_bounded_slowdown_uses_tau_60() -> None:
    assert bounded_slowdown(0.0, 30.0) == 1.0  # (0 + 30) / 60 < 1 -> 1
    assert bounded_slowdown(20.0, 90.0) == pytest.approx(110 / 90)
    assert bounded_slowdown(10.0, 10.0) == 1.0  # 20 / 60
    assert bounded_slowdown(110.0, 10.0) == 2.0  # 120 / 60


def test_summary_values() -> None:
    summary = summarize(table(), nb_machines=4)
    assert summary["jobs"] == 4 and summary["finished"] == 3 and summary["rejected"] == 1
    assert summary["mean_bsld"] == pytest.approx(round((1 + 110 / 90 + 1) / 3, 6))
    assert summary["cumulative_bsld"] == pytest.approx(round(2 + 110 / 90, 6))
    assert summary["mean_wait"] == pytest.approx(10.0)
    assert summary["max_wait"] == 20.0
    assert summary["makespan"] == 120.0
    # area: 2*30 + 1*90 + 3*10 = 180 over 4 machines * 120 s
    assert summary["utilisation"] == pytest.approx(180 / 480)
    assert summary["monthly"] == {
        "m00": {"jobs": 3, "mean_bsld": summary["mean_bsld"], "mean_wait": 10.0}
    }


def test_the_cost_of_kills_in_the_summary() -> None:
    """Job 1 killed once (at 10 s on 2 machines) and resubmitted, job 2 killed at its walltime
    for good (5 s on 3 machines), job 3 plain, on 4 machines for a makespan of 100 s."""
    text = (
        "job_id,workload_name,submission_time,requested_number_of_resources,final_state,"
        "starting_time,execution_time,finish_time\n"
        "1,w0,0,2,COMPLETED_KILLED,0,10,10\n"
        "1_r1,w0_resub,10,2,COMPLETED_SUCCESSFULLY,10,50,60\n"
        "2,w0,0,3,COMPLETED_KILLED,60,5,65\n"
        "3,w0,20,1,COMPLETED_SUCCESSFULLY,20,80,100\n"
    )
    summary = summarize(pd.read_csv(io.StringIO(text), dtype={"job_id": str}), nb_machines=4)
    assert summary["jobs"] == 3 and summary["kills"] == 2 and summary["killed_jobs"] == 2
    assert summary["wasted_area"] == 2 * 10 + 3 * 5  # processor-seconds of killed attempts
    assert summary["wasted_core_hours"] == round(35 / 3600, 6)
    assert summary["makespan"] == 100.0
    # capacity 4 x 100 = 400 processor-seconds; used 20 + 100 + 15 + 80 = 215, wasted 35
    assert summary["utilisation"] == round(215 / 400, 6)
    assert summary["wasted_share"] == round(35 / 400, 6)
    assert summary["useful_utilisation"] == round(180 / 400, 6)
    plain = summarize(table(), nb_machines=4)  # no kill: nothing wasted, the same utilisations
    assert (plain["kills"], plain["killed_jobs"], plain["wasted_area"]) == (0, 0, 0.0)
    assert plain["wasted_core_hours"] == 0.0
    assert plain["wasted_share"] == 0.0
    assert plain["useful_utilisation"] == plain["utilisation"]


def test_months_follow_the_trace_calendar() -> None:
    # 1996-09-30 23:00 UTC is 1996-10-01 01:00 in Stockholm (CEST, UTC+2)
    start = pd.Timestamp("1996-09-30 23:00", tz="UTC").timestamp()
    summary = summarize(table(), nb_machines=4, unix_start_time=start, time_zone="Europe/Stockholm")
    assert list(summary["monthly"]) == ["1996-10"]
    utc = summarize(table(), nb_machines=4, unix_start_time=start, time_zone=None)
    assert list(utc["monthly"]) == ["1996-09"]


def test_max_machines_in_use_frees_before_it_takes() -> None:
    # job 1 (2 machines) ends at 30 when job 2 (1) and job 3 (3) start: 4, not 6
    assert max_machines_in_use(table()) == 4


def test_month_labels_are_strftime_s_formatted_once_per_month() -> None:
    """The months of times over forty years, in zones whose clocks moved at midnight or by half
    an hour, and in an unknown zone (UTC): pandas' ``strftime("%Y-%m")`` of each time."""
    from batsched_ml.results.metrics import month_labels

    rng = np.random.default_rng(0)
    submission = pd.Series(np.sort(rng.uniform(0, 40 * 365 * 86_400.0, 20_000)), name="s")
    # and every time a second either side of each day's start, where a month may begin
    days = np.arange(0, 40 * 365) * 86_400.0
    submission = pd.Series(np.sort(np.concatenate([submission, days - 1, days, days + 1])))
    for start, zone in [(631_152_000, z) for z in ZONES] + [(0, None), (-(10**8), "Europe/Paris")]:
        stamps = pd.to_datetime(start + submission, unit="s", utc=True)
        if zone is not None and zone != "Nowhere/Zone":
            stamps = stamps.dt.tz_convert(zone)
        expected = stamps.dt.strftime("%Y-%m")
        got = month_labels(submission.to_numpy(), start, zone)
        assert got.tolist() == expected.tolist(), zone
    calendarless = month_labels(np.array([0.0, 2_592_000.0, 1e9, np.nan]), None, None)
    assert calendarless.tolist() == ["m00", "m01", "m385", None]


def test_logical_jobs_fold_attempts_in_final_order() -> None:
    """Attempts given out of order: a job killed twice, a resubmission whose original row is
    missing, a rejected job, a job killed for good; rows come in the order of a stable sort on
    (killed, finish time), each with its original name, submission and wasted area."""
    from batsched_ml.results.frames import logical_jobs, read_jobs_csv

    columns = (
        "job_id,workload_name,submission_time,requested_number_of_resources,final_state,"
        "starting_time,execution_time,finish_time\n"
    )
    rows = [
        "1_r2,w0_resub,40,2,COMPLETED_SUCCESSFULLY,50,10,60",  # job 1's third attempt
        "1,w0,0,2,COMPLETED_KILLED,5,10,15",
        "2,w0,3,1,COMPLETED_SUCCESSFULLY,3,30,33",
        "1_r1,w0_resub,15,2,COMPLETED_KILLED,20,5,25",
        "3,w0,4,9,REJECTED,,,",
        "7_r1,w0_resub,8,4,COMPLETED_SUCCESSFULLY,8,2,10",  # its original row is missing
        "4,w1,1,3,COMPLETED_KILLED,2,6,8",  # killed, never resubmitted
        "4_r1,w0_resub,33,1,COMPLETED_SUCCESSFULLY,33,27,60",  # w0's job 4, not w1's
    ]
    table = logical_jobs(read_jobs_csv(io.StringIO(columns + "\n".join(rows) + "\n")))
    assert table["starting_time"].isna().tolist() == [False, True, False, False, False, False]
    got = [
        (
            row.job_id,
            row.workload_name,
            row.submission_time,
            row.starting_time,
            row.finish_time,
            row.attempts,
            row.wasted_area,
            row.waiting_time,
        )
        for row in table.fillna(-1.0).itertuples()
    ]
    assert got == [
        ("4", "w1", 1.0, 2.0, 8.0, 1, 18.0, 1.0),  # killed: first, by finish time
        ("3", "w0", 4.0, -1.0, -1.0, 1, 0.0, -1.0),  # rejected: finish -1 when sorted
        ("7_r1", "w0_resub", 8.0, 8.0, 10.0, 1, 0.0, 0.0),
        ("2", "w0", 3.0, 3.0, 33.0, 1, 0.0, 0.0),
        ("1", "w0", 0.0, 50.0, 60.0, 3, 30.0, 50.0),  # 2 x 10 + 2 x 5 wasted
        ("4_r1", "w0_resub", 33.0, 33.0, 60.0, 1, 0.0, 0.0),  # same finish: row order
    ]
    assert list(table.columns[8:10]) == ["attempts", "wasted_area"]
    assert table["attempts"].dtype == np.int64 and table.index.equals(pd.RangeIndex(6))


def test_logical_jobs_refuse_a_row_without_an_id() -> None:
    from batsched_ml.results.frames import logical_jobs, read_jobs_csv

    text = (
        "job_id,workload_name,submission_time,requested_number_of_resources,final_state,"
        "starting_time,execution_time,finish_time\n"
        "1,w0,0,2,COMPLETED_KILLED,5,10,15\n"
        ",w0,1,2,COMPLETED_SUCCESSFULLY,5,10,15\n"
    )
    with pytest.raises(ValueError, match="no job_id"):
        logical_jobs(read_jobs_csv(io.StringIO(text)))


# --- the figures against pandas' (tests/pandas_metrics.py: the oracle) -----------------------

ZONES = (
    None,
    "Europe/Stockholm",
    "US/Eastern",
    "Asia/Tokyo",
    "America/Sao_Paulo",  # its clocks went forward at midnight
    "America/Havana",
    "Australia/Lord_Howe",  # half an hour of daylight saving
    "Nowhere/Zone",  # unknown: UTC
)


def _time(rng: random.Random, low: float, high: float) -> float:
    """A time as jobs.csv writes it (six decimals), whole most of the time."""
    value = rng.uniform(low, high)
    return float(f"{value:.6f}") if rng.random() < 0.3 else float(round(value))


def _random_rows(rng: random.Random, jobs: int) -> list[str]:
    """Rows of a job table as a replay writes them: several workloads, rejected jobs, jobs
    killed for good, jobs killed and resubmitted (``<id>_r<n>`` in ``<w>_resub``), a
    resubmission whose original row is missing, times whole or with decimals, in any order."""
    span = rng.choice((5 * 86_400.0, 400 * 86_400.0, 3 * 365 * 86_400.0))
    rows: list[str] = []

    def row(
        name: str,
        workload: str,
        sub: float,
        res: int,
        state: str,
        start: float | None,
        run: float | None,
    ) -> str:
        if start is None or run is None:
            times = ",,,,,"
        else:
            finish = start + run
            times = f"{start:.6f},{run:.6f},{finish:.6f},{start - sub:.6f},{finish - sub:.6f},1.0"
        success = int(state == "COMPLETED_SUCCESSFULLY")
        return (
            f"{name},{workload},p,{sub:.6f},{res},3600.000000,{success},{state},{times},"
            f'0-{res - 1},-1.000000,""'
        )

    for job in range(jobs):
        workload = rng.choice(("w0", "w0", "w1"))
        sub = _time(rng, 0, span)
        res = rng.randint(1, 64)
        kind = rng.random()
        wait = rng.choice((0.0, _time(rng, 0, 1e3), _time(rng, 0, 1e6), _time(rng, 0, 1e-3)))
        run = rng.choice((_time(rng, 1, 60), _time(rng, 60, 1e5), 1e-5))
        if kind < 0.05:
            rows.append(row(str(job), workload, sub, res, "REJECTED", None, None))
        elif kind < 0.1:
            rows.append(row(str(job), workload, sub, res, "COMPLETED_KILLED", sub + wait, run))
        elif kind < 0.25:
            start = sub + wait
            attempts = rng.randint(1, 3)
            original = rng.random() > 0.05  # else: its original row is missing
            if original:
                rows.append(row(str(job), workload, sub, res, "COMPLETED_KILLED", start, run / 3))
            again = start + run / 3
            for attempt in range(1, attempts + 1):
                last = attempt == attempts
                state = "COMPLETED_SUCCESSFULLY" if last else "COMPLETED_KILLED"
                rows.append(
                    row(
                        f"{job}_r{attempt}",
                        f"{workload}_resub",
                        again,
                        res,
                        state,
                        again + wait,
                        run if last else run / 3,
                    )
                )
                again += wait + run / 3
        else:
            rows.append(
                row(str(job), workload, sub, res, "COMPLETED_SUCCESSFULLY", sub + wait, run)
            )
    rng.shuffle(rows)
    return rows


def test_the_figures_are_pandas_own_on_random_tables() -> None:
    """``summarize`` (numpy) gives pandas' figures bit for bit, from the rows as a replay reads
    them (compiled and not) and from a pandas table: every count, sum, mean, median and month,
    with kills, resubmissions, rejected jobs and calendars in several zones."""
    import json

    from batsched_ml import compiled
    from batsched_ml.results.frames import read_jobs_csv
    from batsched_ml.results.metrics import figure_columns
    from tests import pandas_metrics

    rng = random.Random(11)
    compared = 0
    for case in range(60):
        rows = _random_rows(rng, rng.choice((0, 1, 5, 50, 400, 3000)))
        zone = rng.choice(ZONES)
        start = rng.choice((None, 842_000_000.0, 1_300_000_000.0, 1_199_142_000.0))
        machines = rng.randint(64, 512)
        text = HEADER + "\n" + "".join(r + "\n" for r in rows)
        frame = read_jobs_csv(io.StringIO(text))
        expected = pandas_metrics.summarize(
            frame, nb_machines=machines, unix_start_time=start, time_zone=zone
        )
        tables = [figure_columns(rows), frame]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(compiled.VARIABLE, "python")
            tables.append(figure_columns(rows))
        for table in tables:
            got = summarize(table, nb_machines=machines, unix_start_time=start, time_zone=zone)
            assert json.dumps(got) == json.dumps(expected), (case, zone, start)
        compared += 1
        if case < 3:
            assert expected.get("kills", 0) >= 0
    assert compared == 60


def test_logical_jobs_are_pandas_own_on_random_tables() -> None:
    from batsched_ml.results.frames import logical_jobs, read_jobs_csv
    from tests import pandas_metrics

    rng = random.Random(12)
    for _ in range(20):
        rows = _random_rows(rng, rng.choice((1, 30, 500)))
        frame = read_jobs_csv(io.StringIO(HEADER + "\n" + "".join(r + "\n" for r in rows)))
        pd.testing.assert_frame_equal(
            logical_jobs(frame), pandas_metrics.logical_jobs(frame), check_exact=True
        )


def test_the_compiled_reader_of_rows_reads_them_as_its_reference() -> None:
    """``figure_columns``: the compiled reader (``_cswf.csv_fields``) gives its reference's
    columns bit for bit, or leaves the table to it (a number it is not sure of, too few
    fields), which reads each number as Python's ``float`` does."""
    from batsched_ml import compiled
    from batsched_ml.results.metrics import figure_columns
    from batsched_ml.workload.swf import compiled_parser

    parser = compiled_parser()
    if parser is None:
        pytest.skip("the compiled parts are not built")  # CI requires them (conftest)
    rng = random.Random(13)
    odd_numbers = ("1e3", "-0.000000", "0.1234567890123456789", "nan", " 5", "1_0", "+2", ".5")
    taken = refused = 0
    for _ in range(300):
        rows = _random_rows(rng, rng.randint(1, 6))
        for at in range(len(rows)):
            if rng.random() < 0.1:
                fields = rows[at].split(",")
                fields[rng.choice((3, 4, 8, 9, 10))] = rng.choice(odd_numbers)
                if rng.random() < 0.3:
                    fields[0] = rng.choice(("é1", "a b", '"q"', "x" * 40))
                rows[at] = ",".join(fields)
        read = parser.csv_fields(rows, (0, 1, 7), (3, 4, 8, 9, 10))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(compiled.VARIABLE, "python")
            try:
                reference = figure_columns(rows)
            except ValueError:
                assert read is None
                refused += 1
                continue
        if read is None:
            refused += 1
            continue
        taken += 1
        ours = figure_columns(rows)
        for name, values in reference.items():
            assert ours[name].dtype == values.dtype, name
            if values.dtype == object:
                assert ours[name].tolist() == values.tolist(), name
            else:
                assert ours[name].tobytes() == values.tobytes(), name
    assert taken > 100 and refused > 30, (taken, refused)


def test_sums_and_means_are_pandas_own_to_the_last_bit() -> None:
    """The figures are rounded to six decimals, which hides the last bits: the sums, means,
    medians and extremes before rounding are pandas' own, on values of every magnitude, with
    missing ones, over lengths that cross numpy's pairwise blocks."""
    from batsched_ml.results import metrics

    rng = np.random.default_rng(21)
    for size in (0, 1, 2, 7, 8, 9, 127, 128, 129, 1000, 5000):
        for _ in range(5):
            values = rng.choice([1e-6, 1.0, 3.3, 1e6, 1e12, 1e16], size) * rng.standard_normal(size)
            values[rng.random(size) < 0.05] = np.nan
            series = pd.Series(values)
            same = [
                (metrics._nan_sum(values), series.sum()),
                (metrics._nan_mean(values), series.mean()),
                (metrics._nan_max(values), series.max()),
                (metrics._nan_min(values), series.min()),
            ]
            for ours, theirs in same:
                assert np.float64(ours).tobytes() == np.float64(theirs).tobytes(), size
            known = values[~np.isnan(values)]
            if len(known):
                assert np.nanmedian(known) == series.median()
