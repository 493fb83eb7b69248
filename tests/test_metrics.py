"""The metrics module on a hand-made job table, with exact values."""

from __future__ import annotations

import io

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
    from batsched_ml.results.metrics import month_labels

    rng = np.random.default_rng(0)
    submission = pd.Series(np.sort(rng.uniform(0, 3 * 365 * 86_400.0, 5000)), name="s")
    for start, zone in ((842_000_000, "Europe/Stockholm"), (0, None), (-(10**8), "Nowhere/Zone")):
        stamps = pd.to_datetime(start + submission, unit="s", utc=True)
        if zone == "Europe/Stockholm":
            stamps = stamps.dt.tz_convert(zone)
        expected = stamps.dt.strftime("%Y-%m")
        pd.testing.assert_series_equal(month_labels(submission, start, zone), expected)


def test_logical_jobs_fold_attempts_in_final_order() -> None:
    """Attempts given out of order: a job killed twice, a resubmission whose original row is
    missing, a rejected job, a job killed for good; rows come in the order of a stable sort on
    (killed, finish time), each with its original name, submission and wasted area."""
    from batsched_ml.results.metrics import logical_jobs, read_jobs_csv

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
    from batsched_ml.results.metrics import logical_jobs, read_jobs_csv

    text = (
        "job_id,workload_name,submission_time,requested_number_of_resources,final_state,"
        "starting_time,execution_time,finish_time\n"
        "1,w0,0,2,COMPLETED_KILLED,5,10,15\n"
        ",w0,1,2,COMPLETED_SUCCESSFULLY,5,10,15\n"
    )
    with pytest.raises(ValueError, match="no job_id"):
        logical_jobs(read_jobs_csv(io.StringIO(text)))
