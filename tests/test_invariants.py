"""Invariants of a schedule, checked on job tables: every workload job finishes exactly once, no
job starts before its submission, no machine runs two jobs at once (so the processors in use
never exceed the machine), every killed job was resubmitted and its last attempt completed, and
a second run gives a byte-identical table.

CI checks them on a slice of KTH-SP2 under every policy. The long version (``pytest -m long
tests/test_invariants.py``) replays every trace in ``../shared/traces`` under every policy with
``classification-idempotent``, twice. With ``BATSCHED_ML_INVARIANT_RECORDS=DIR`` set, each case
leaves ``DIR/TRACE-POLICY.json`` (jobs, rows, kills, seconds), as summarised in
``docs/reliability.md``; without it, the tests write only into their temporary folders.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from procset import ProcSet

from batsched_ml.alloc import mask_of
from batsched_ml.results.frames import logical_jobs, read_jobs_csv
from batsched_ml.results.metrics import RESUBMIT_SUFFIX, max_machines_in_use
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.scheduler.policies import POLICIES
from batsched_ml.workload.io import load_workload
from tests.conftest import TRACES, workload_head


def _mask_of_text(text: str) -> int:
    """The machines of an allocation's text (``"0-3 8 10-11"``), read here rather than through
    procset, whose sets merge interval by interval (a quarter of an hour a policy on RICC's
    8,192 machines); checked against procset's reading below."""
    mask = 0
    for part in text.split():
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        assert 0 <= first <= last, f"allocation {text!r}"
        mask |= ((1 << (last - first + 1)) - 1) << first
    return mask


def test_an_allocation_s_text_is_read_as_procset_reads_it() -> None:
    for text in ("0", "0-3", "0-3 8 10-11", "5 7-9 4095", "0-8191"):
        assert _mask_of_text(text) == mask_of(ProcSet.from_str(text))


def check_schedule(table: pd.DataFrame, workload: dict[str, Any]) -> dict[str, int]:
    """Assert the invariants on a job table; return what was checked."""
    ids = sorted(str(job["id"]) for job in workload["jobs"])
    logical = logical_jobs(table)
    # every workload job exactly once, finished (a rejection would say why, none is expected:
    # the converter drops jobs larger than the machine)
    assert sorted(logical["job_id"].astype(str)) == ids
    assert (logical["final_state"] == "COMPLETED_SUCCESSFULLY").all()
    # each attempt starts at or after its own submission, and after the original's
    assert (table["starting_time"] >= table["submission_time"]).all()
    # no machine runs two jobs at once: a sweep over starts and finishes (finishes first at
    # equal times: a machine freed at t can be used from t)
    events = []
    masks: dict[str, int] = {}  # an allocation's text, read once (RICC: 447,000 rows)
    for start, finish, alloc in zip(
        table["starting_time"], table["finish_time"], table["allocated_resources"], strict=True
    ):
        text = str(alloc)
        mask = masks.get(text)
        if mask is None:
            mask = masks[text] = _mask_of_text(text)
        events.append((finish, 0, mask))
        events.append((start, 1, mask))
    events.sort(key=lambda e: (e[0], e[1]))
    busy = 0
    for _time, kind, mask in events:
        if kind == 0:
            busy ^= mask
        else:
            assert not busy & mask, f"a machine of {mask:b} runs two jobs at {_time}"
            busy |= mask
    assert max_machines_in_use(table) <= int(workload["nb_res"])
    # a killed attempt is followed by a resubmission; the last attempt is not killed
    killed = table["final_state"] == "COMPLETED_KILLED"
    resubmitted = table["workload_name"].astype(str).str.endswith(RESUBMIT_SUFFIX)
    assert int(killed.sum()) == int(resubmitted.sum())
    assert int((logical["attempts"] - 1).sum()) == int(killed.sum())
    return {"jobs": len(ids), "rows": len(table), "kills": int(killed.sum())}


def replay_twice(workload: dict[str, Any], config: ReplayConfig, out: Path) -> pd.DataFrame:
    first = run_replay(workload, config)
    write_replay(first, out)
    second = run_replay(workload, config)
    assert second.rows == first.rows, "a second run gave another job table"
    return read_jobs_csv(out / "jobs.csv")


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_invariants_on_a_kth_slice(kth_workload, policy: str, tmp_path: Path) -> None:
    workload = workload_head(kth_workload, 3000)
    config = ReplayConfig(policy=policy, variant="classification-idempotent")
    checked = check_schedule(replay_twice(workload, config, tmp_path), workload)
    assert checked["jobs"] == 3000 and checked["kills"] > 0


@pytest.mark.parametrize(
    ("dispatcher", "predictor", "correction"),
    [
        ("sjf", "easy++", "none"),
        ("ljf", "profile", "none"),
        ("prb", "su", "power"),
        ("cph", "requested", "none"),
        # CPH's solver is the slowest dispatcher: its second case runs with the long runs
        pytest.param("cph", "easy++", "simple", marks=pytest.mark.long),
        ("easy", "adaboost", "power"),
    ],
)
def test_invariants_of_the_related_work_on_a_kth_slice(
    kth_workload, dispatcher: str, predictor: str, correction: str, tmp_path: Path
) -> None:
    workload = workload_head(kth_workload, 1000)
    config = ReplayConfig(dispatcher=dispatcher, predictor=predictor, correction=correction)
    checked = check_schedule(replay_twice(workload, config, tmp_path), workload)
    assert checked == {"jobs": 1000, "rows": 1000, "kills": 0}


TRACE_FILES = sorted(TRACES.glob("*.swf.gz")) if TRACES.is_dir() else []


@pytest.mark.long
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("trace", TRACE_FILES, ids=lambda p: p.name.removesuffix(".swf.gz"))
def test_invariants_on_every_trace(trace: Path, policy: str, tmp_path: Path) -> None:
    started = time.perf_counter()
    workload = load_workload(trace)
    config = ReplayConfig(policy=policy, variant="classification-idempotent")
    checked = check_schedule(replay_twice(workload, config, tmp_path), workload)
    record = {
        "trace": workload["trace"],
        "policy": policy,
        **checked,
        "seconds": round(time.perf_counter() - started, 1),
    }
    records = os.environ.get("BATSCHED_ML_INVARIANT_RECORDS")
    if not records:
        return
    out = Path(records)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{workload['trace']}-{policy}.json").write_text(json.dumps(record) + "\n")
