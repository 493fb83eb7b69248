"""What the embedded simulator accepts and rejects, on hand-made workloads."""

from __future__ import annotations

from typing import Any

import pytest
from procset import ProcSet

from batsched_ml.protocol.events import (
    CallMeLater,
    ExecuteJob,
    JobCompleted,
    JobSubmitted,
    KillJob,
    Message,
    Notify,
    RegisterJob,
    RegisterProfile,
    RejectJob,
    RequestedCall,
    SetJobMetadata,
    SimulationEnds,
)
from batsched_ml.sim.loop import SerialFcfs, drive
from batsched_ml.sim.simulator import BatsimSimulator, InvalidDecision, SimulationError


def workload(*jobs: tuple[int, float, int, int, float | None]) -> dict[str, Any]:
    """Jobs as (id, subtime, res, delay, walltime)."""
    out: dict[str, Any] = {"nb_res": 4, "jobs": [], "profiles": {}}
    for job_id, subtime, res, delay, walltime in jobs:
        job = {"id": job_id, "subtime": subtime, "res": res, "profile": f"delay_{delay}"}
        if walltime is not None:
            job["walltime"] = walltime
        out["jobs"].append(job)
        out["profiles"][f"delay_{delay}"] = {"type": "delay", "delay": delay}
    return out


def sim_at_first_submission(wl: dict[str, Any], **flags: Any) -> tuple[BatsimSimulator, Message]:
    sim = BatsimSimulator([wl], [f"host{i}" for i in range(4)], **flags)
    sim.start()
    return sim, sim.step(Message(0.0, []))


def types(message: Message) -> list[str]:
    return [event.TYPE for event in message.events]


TWO_JOBS = workload((1, 0, 2, 10, 100), (2, 0, 2, 20, 100))


@pytest.mark.parametrize(
    ("decisions", "decision", "fragment"),
    [
        (
            [ExecuteJob(0, "w0!1", ProcSet((0, 2)))],
            "EXECUTE_JOB",
            "has 3 machines, the job requests 2",
        ),
        ([ExecuteJob(0, "w0!1", ProcSet((3, 4)))], "EXECUTE_JOB", "outside 0-3"),
        ([ExecuteJob(0, "w0!9", ProcSet((0, 1)))], "EXECUTE_JOB", "unknown job"),
        (
            [ExecuteJob(0, "w0!1", ProcSet((0, 1))), ExecuteJob(0, "w0!1", ProcSet((2, 3)))],
            "EXECUTE_JOB",
            "already running",
        ),
        ([RejectJob(0, "w0!1"), ExecuteJob(0, "w0!1", ProcSet((0, 1)))], "EXECUTE_JOB", "rejected"),
        ([RejectJob(0, "w0!1"), RejectJob(0, "w0!1")], "REJECT_JOB", "job was rejected"),
        (
            [ExecuteJob(0, "w0!1", ProcSet((0, 1))), ExecuteJob(0, "w0!2", ProcSet((1, 2)))],
            "EXECUTE_JOB",
            "machines 1 are already in use",
        ),
        ([CallMeLater(0, 0.0)], "CALL_ME_LATER", "not strictly after now"),
        ([KillJob(0, ["w0!1"])], "KILL_JOB", "not running"),
        (
            [RegisterJob(0, "w0!5", {"id": "w0!5", "res": 1, "profile": "delay_10"})],
            "REGISTER_JOB",
            "dynamic jobs are disabled",
        ),
        ([Notify(0, "registration_finished")], "NOTIFY", "dynamic jobs are disabled"),
        ([SetJobMetadata(0, "w0!1", 'a"b')], "SET_JOB_METADATA", "contains"),
    ],
)
def test_invalid_decisions_name_the_decision(decisions, decision: str, fragment: str) -> None:
    sim, _ = sim_at_first_submission(TWO_JOBS)
    with pytest.raises(InvalidDecision) as info:
        sim.step(Message(0.0, decisions))
    assert info.value.decision == decision
    assert fragment in str(info.value)


def test_decision_stamped_after_the_replys_now_is_rejected() -> None:
    sim, _ = sim_at_first_submission(TWO_JOBS)
    with pytest.raises(InvalidDecision, match="later than the reply's now"):
        sim.step(Message(0.0, [ExecuteJob(5.0, "w0!1", ProcSet((0, 1)))]))


def test_reply_in_the_past_is_rejected() -> None:
    sim, _ = sim_at_first_submission(TWO_JOBS)
    sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet((0, 1)))]))  # -> NOTIFY at 0
    sim.step(Message(0.0, []))  # -> JOB_COMPLETED at 10
    with pytest.raises(InvalidDecision, match="before Batsim's now"):
        sim.step(Message(5.0, []))  # Batsim is at 10 now


def test_executing_a_finished_job_is_rejected() -> None:
    sim, _ = sim_at_first_submission(TWO_JOBS)
    message = sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet((0, 1)))]))
    assert types(message) == ["NOTIFY"]
    message = sim.step(Message(0.0, []))
    assert types(message) == ["JOB_COMPLETED"] and message.now == 10.0
    with pytest.raises(InvalidDecision, match="already finished"):
        sim.step(Message(10.0, [ExecuteJob(10.0, "w0!1", ProcSet((0, 1)))]))


def test_dynamic_job_needs_a_subtime_and_a_live_profile() -> None:
    wl = workload((1, 0, 1, 10, None))
    sim, _ = sim_at_first_submission(wl, dynamic_jobs=True)
    message = sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0))]))
    assert types(message) == ["NOTIFY"]
    message = sim.step(Message(0.0, []))
    assert types(message) == ["JOB_COMPLETED"]
    # the only job using delay_10 finished. Batsim forgets it (and, with no live job using it,
    # its profile) once the message telling it is sent (server.cpp's jobs_to_be_deleted),
    # after the REQ-REP actor it creates has parsed the reply: a registration in this very
    # reply still finds the profile, one in the next reply does not
    job = {"id": "w0!1b", "subtime": 10.0, "res": 1, "profile": "delay_10"}
    message = sim.step(Message(10.0, [RegisterJob(10.0, "w0!1b", job), CallMeLater(10.0, 15.0)]))
    assert types(message) == ["REQUESTED_CALL"] and message.now == 15.0
    message = sim.step(Message(15.0, [ExecuteJob(15.0, "w0!1b", ProcSet(0))]))
    assert types(message) == ["JOB_COMPLETED"] and message.now == 25.0
    sim.step(Message(25.0, [CallMeLater(25.0, 30.0)]))
    job = {"id": "w0!1c", "subtime": 30.0, "res": 1, "profile": "delay_10"}
    with pytest.raises(InvalidDecision, match="does not exist"):
        sim.step(Message(30.0, [RegisterJob(30.0, "w0!1c", job)]))
    sim2, _ = sim_at_first_submission(wl, dynamic_jobs=True)
    no_subtime = {"id": "w0!x", "res": 1, "profile": "delay_10"}
    with pytest.raises(InvalidDecision, match="no 'subtime'"):
        sim2.step(Message(0.0, [RegisterJob(0.0, "w0!x", no_subtime)]))


def test_dynamic_jobs_run_and_the_simulation_waits_for_registration_finished() -> None:
    wl = workload((1, 0, 1, 10, None))
    sim, _ = sim_at_first_submission(wl, dynamic_jobs=True, acknowledge_dynamic_jobs=True)
    reply = [
        ExecuteJob(0.0, "w0!1", ProcSet(0)),
        RegisterProfile(0.0, "dyn", "p", {"type": "delay", "delay": 5}),
        RegisterJob(0.0, "dyn!a", {"id": "dyn!a", "subtime": 0.0, "res": 2, "profile": "p"}),
    ]
    message = sim.step(Message(0.0, reply))
    assert types(message) == ["NOTIFY", "JOB_SUBMITTED"]
    message = sim.step(Message(0.0, [ExecuteJob(0.0, "dyn!a", ProcSet((1, 2)))]))
    assert types(message) == ["JOB_COMPLETED"] and message.now == 5.0
    message = sim.step(Message(5.0, []))
    assert types(message) == ["JOB_COMPLETED"] and message.now == 10.0
    with pytest.raises(SimulationError, match="registration_finished"):
        sim.step(Message(10.0, []))
    sim, _ = sim_at_first_submission(wl, dynamic_jobs=True)
    sim.step(
        Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0)), Notify(0.0, "registration_finished")])
    )
    message = sim.step(Message(0.0, []))
    assert types(message) == ["JOB_COMPLETED"]
    assert types(sim.step(Message(10.0, []))) == ["SIMULATION_ENDS"]
    assert sim.step(Message(10.0, [])) is None and sim.finished


def test_a_scheduler_that_never_starts_a_job_gets_a_clear_error() -> None:
    sim, _ = sim_at_first_submission(TWO_JOBS)
    sim.step(Message(0.0, []))  # NOTIFY no_more_static_job_to_submit
    with pytest.raises(SimulationError, match="2 submitted job"):
        sim.step(Message(0.0, []))


def test_requested_call_comes_exactly_when_asked_and_delays_the_end() -> None:
    sim, _ = sim_at_first_submission(workload((1, 0, 1, 10, None)))
    message = sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0)), CallMeLater(0.0, 25.5)]))
    assert types(message) == ["NOTIFY"]
    message = sim.step(Message(0.0, []))
    assert (types(message), message.now) == (["JOB_COMPLETED"], 10.0)
    message = sim.step(Message(10.0, []))
    assert (types(message), message.now) == (["REQUESTED_CALL"], 25.5)
    assert isinstance(message.events[0], RequestedCall)
    assert isinstance(sim.step(Message(25.5, [])).events[0], SimulationEnds)


def test_walltime_kill_at_exactly_the_walltime_and_reject_row() -> None:
    wl = workload((1, 0, 1, 10, 10), (2, 0, 1, 5, 7.5))
    sim, _ = sim_at_first_submission(wl)
    message = sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0)), RejectJob(0.0, "w0!2")]))
    assert types(message) == ["NOTIFY"]
    message = sim.step(Message(0.0, []))
    event = message.events[0]
    assert isinstance(event, JobCompleted)
    assert (event.job_state, event.return_code, message.now) == (
        "COMPLETED_WALLTIME_REACHED",
        -1,
        10.0,
    )
    assert sim.rows[0] == '2,w0,delay_5,0.000000,1,7.500000,0,REJECTED,,,,,,,,,""'
    assert sim.rows[1].startswith(
        "1,w0,delay_10,0.000000,1,10.000000,0,COMPLETED_WALLTIME_REACHED,"
    )


def test_kill_answers_completed_then_killed_with_progress() -> None:
    sim, _ = sim_at_first_submission(workload((1, 0, 1, 40, None)))
    sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0)), CallMeLater(0.0, 10.0)]))
    message = sim.step(Message(0.0, []))
    assert types(message) == ["REQUESTED_CALL"]
    message = sim.step(Message(10.0, [KillJob(10.0, ["w0!1"])]))
    assert types(message) == ["JOB_COMPLETED", "JOB_KILLED"]
    assert message.events[0].job_state == "COMPLETED_KILLED"
    assert message.events[1].job_progress == {
        "w0!1": {"profile_name": "delay_40", "progress": 0.25}
    }
    assert types(sim.step(Message(10.0, []))) == ["SIMULATION_ENDS"]


def test_kill_of_a_job_that_completed_since_the_last_message_is_acknowledged() -> None:
    """Batsim 4.2.1 forgets a finished job only once the message telling it is sent
    (server.cpp's ``jobs_to_be_deleted``), and ``server_on_kill_jobs`` accepts a kill of a job
    that ``is_complete()``: the killer skips it, JOB_KILLED lists it with no progress. Here the
    scheduler answers the call at 5 only at 12: the job completed at 10 meanwhile."""
    sim, _ = sim_at_first_submission(workload((1, 0, 1, 10, None)))
    sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0)), CallMeLater(0.0, 5.0)]))
    message = sim.step(Message(0.0, []))
    assert types(message) == ["REQUESTED_CALL"] and message.now == 5.0
    message = sim.step(Message(12.0, [KillJob(12.0, ["w0!1"])]))
    assert types(message) == ["JOB_COMPLETED", "JOB_KILLED"] and message.now == 12.0
    completed, killed = message.events
    assert (completed.job_state, completed.timestamp) == ("COMPLETED_SUCCESSFULLY", 10.0)
    assert (killed.job_ids, killed.job_progress) == (["w0!1"], {})
    assert sim.rows[0].split(",")[7] == "COMPLETED_SUCCESSFULLY"
    assert types(sim.step(Message(12.0, []))) == ["SIMULATION_ENDS"]
    # once that message is sent, the job is forgotten: a kill now is Batsim's "does not exist"
    sim, _ = sim_at_first_submission(workload((1, 0, 1, 10, None)))
    sim.step(Message(0.0, [ExecuteJob(0.0, "w0!1", ProcSet(0)), CallMeLater(0.0, 5.0)]))
    sim.step(Message(0.0, []))
    message = sim.step(Message(5.0, [CallMeLater(5.0, 11.0)]))
    assert types(message) == ["JOB_COMPLETED"]
    assert types(sim.step(Message(10.0, []))) == ["REQUESTED_CALL"]
    with pytest.raises(InvalidDecision, match="already finished"):
        sim.step(Message(11.0, [KillJob(11.0, ["w0!1"])]))


def test_late_reply_delivers_events_that_fired_while_the_scheduler_was_busy() -> None:
    sim, _ = sim_at_first_submission(workload((1, 0, 1, 10, None), (2, 3, 1, 10, None)))
    # the scheduler takes 5 s to answer: job 1 starts at 5 (its decision is stamped 5)
    message = sim.step(Message(5.0, [ExecuteJob(5.0, "w0!1", ProcSet(0))]))
    assert message.now == 5.0
    # Batsim's server queued both while its scheduler was busy (the submitter's "bye" at 3 makes
    # the NOTIFY): they leave together once the reply's "ready" arrives at 5.
    assert [(e.TYPE, e.timestamp) for e in message.events] == [
        ("JOB_SUBMITTED", 3),
        ("NOTIFY", 3),
    ]
    message = sim.step(Message(5.0, [ExecuteJob(5.0, "w0!2", ProcSet(1))]))
    assert (types(message), message.now) == (["JOB_COMPLETED", "JOB_COMPLETED"], 15.0)


def test_same_subtime_jobs_come_together_in_string_order_of_names() -> None:
    wl = workload((8, 1, 1, 10, None), (10, 1, 1, 10, None), (9, 1, 1, 10, None))
    _, message = sim_at_first_submission(wl)
    assert [e.job_id for e in message.events if isinstance(e, JobSubmitted)] == [
        "w0!10",
        "w0!8",
        "w0!9",
    ]


def test_a_full_serial_run_finishes_every_job_once() -> None:
    wl = workload(*[(i, i * 3, 1 + i % 4, 5 + i % 7, None) for i in range(40)])
    sim = BatsimSimulator([wl], [f"host{i}" for i in range(4)])
    drive(sim, SerialFcfs(4))
    assert sorted(int(row.split(",")[0]) for row in sim.rows) == list(range(40))
