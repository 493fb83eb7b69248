"""Our scheduler against the scheduler that drove real Batsim 4.2.1 in the recordings: same
events in, the very same decisions out, message by message."""

from __future__ import annotations

import pytest

from batsched_ml.protocol.codec import message_to_dict
from batsched_ml.scheduler.core import EasyScheduler
from tests.conftest import load_case
from tests.test_sim_reference import _simulator

# (case, backfilling): the recordings' scheduler was EASY in easy_backfill and plain FCFS
# (stop at the first job that does not fit) in the others.
CASES = [
    ("easy_backfill", True),
    ("fcfs_small", False),
    ("reject", False),
    ("walltime_kill", False),
    ("fcfs_small_latency", False),  # links with latencies: the same decisions at other times
]


@pytest.mark.parametrize(("name", "backfilling"), CASES)
def test_same_decisions_as_the_recorded_scheduler(name: str, backfilling: bool) -> None:
    case = load_case(name)
    scheduler = EasyScheduler("fcfs", starvation_threshold=None, backfilling=backfilling)
    sim = _simulator(case)
    ours = []
    message = sim.start()
    while message is not None:
        reply = scheduler.handle(message)
        ours.append(message_to_dict(reply))
        message = sim.step(reply)
    recorded = [r["msg"] for r in case.records if r["dir"] == "sched->batsim"]
    assert ours == recorded
    scheduler.check_consistency()


def test_easy_backfill_case_really_backfills() -> None:
    """The case is only a test of EASY if backfilling changed something: 31 jobs start before
    an earlier-submitted one (README of the recordings)."""
    case = load_case("easy_backfill")
    starts = {}
    for record in case.records:
        if record["dir"] == "sched->batsim":
            for event in record["msg"]["events"]:
                if event["type"] == "EXECUTE_JOB":
                    starts[int(event["data"]["job_id"].split("!")[1])] = event["timestamp"]
    overtaking = {j for j in starts if any(k < j and starts[k] > starts[j] for k in starts)}
    assert len(overtaking) == 31
