"""The pure scheduler core: protocol events in, decisions out.

:class:`EasyScheduler` holds no socket, file, clock or global: it is driven by
:meth:`EasyScheduler.handle`, which takes one Batsim :class:`Message` and returns the reply. Event
handlers only record what happened; one scheduling pass (:func:`easy_pass`) per message then
decides, as batsched does, which keeps the in-process and ZeroMQ paths identical.

A pass runs when the message brought something that can change a decision: a submission, a
completion or a requested call. The queue it gives EASY is: *starving* jobs first (waiting longer
than ``starvation_threshold``, oldest first), then the others in the policy's order.

Starvation threshold: by default 72 hours. SPF and SAF can postpone a long or wide job for as
long as shorter ones keep arriving; a threshold bounds that wait (paper, section 5.1) while
staying clear of ordinary waits, so that it does not turn SPF and SAF into FCFS on busy traces.
``benchmarks/starvation_threshold.py`` measures the trade-off on KTH-SP2; ``None`` disables it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from batsched_ml import registry
from batsched_ml.alloc import full_mask, procset_of
from batsched_ml.errors import UserError
from batsched_ml.job import Job
from batsched_ml.protocol.events import (
    Event,
    ExecuteJob,
    JobCompleted,
    JobSubmitted,
    Message,
    Notify,
    RejectJob,
    RequestedCall,
    SimulationBegins,
    SimulationEnds,
)
from batsched_ml.scheduler.correction import MARGIN, Correction
from batsched_ml.scheduler.cph import ConstraintPlanner
from batsched_ml.scheduler.easy import Reservation, easy_pass
from batsched_ml.scheduler.estimators import Estimator, RequestedTime
from batsched_ml.scheduler.policies import Policy, PriorityRule, get_policy

HOUR = 3600.0
_key = attrgetter("key")
DEFAULT_STARVATION_THRESHOLD = registry.STARVATION_THRESHOLD_HOURS * HOUR


class SchedulerError(UserError, RuntimeError):
    """Batsim told the scheduler something inconsistent with what it knows."""


@dataclass(slots=True)
class WaitingJob:
    """A submitted job not yet started, with what the scheduler derived for it.

    ``est`` is the runtime EASY plans with; ``rank_est`` the estimate the policy orders by (the
    same, except for jobs whose planned runtime is capped, see the classified scheduler);
    ``rank`` puts whole classes of jobs first (0 before 1: small before large).
    """

    job: Job
    seq: int
    est: float
    res: int
    subtime: float
    rank_est: float = 0.0
    rank: int = 0
    key: tuple = ()


@dataclass(slots=True)
class RunningJob:
    job: Job
    start: float
    est: float
    mask: int
    entry: WaitingJob | None = None
    end_entry: tuple[float, int, int] = field(default=(0.0, 0, 0))
    corrections: int = 0


class EasyScheduler:
    """EASY backfilling with a queue policy and a starvation threshold.

    Parameters
    ----------
    policy:
        ``"fcfs"``, ``"wfp"``, ``"spf"`` or ``"saf"`` (see :mod:`batsched_ml.scheduler.policies`).
    estimator:
        The runtime estimate EASY uses (default: requested time).
    starvation_threshold:
        Seconds of waiting after which a job goes to the head of the queue; ``None`` disables.
    backfilling:
        ``False`` stops each pass at the first job that does not fit (no EASY), a baseline.
    audit:
        Record every reservation as ``(now, job_id, shadow)`` in :attr:`reservations` (tests).
    correction:
        Extend the estimate of a running job that reaches it (:mod:`.correction`); ``None``:
        such a job is expected to end at once.

    greedy:
        Start every job that fits, in queue order, and reserve nothing (PRB's allocation).
    planner:
        Decide with CPH's constraint model instead of EASY (:mod:`.cph`).

    Backfilling tries the jobs behind the head shortest estimate first when the estimator
    asks for it (``backfill_shortest_first``: EASY++'s SJBF), in queue order otherwise. Under
    ``greedy`` or a ``planner``, a starving queue head still gets EASY's reservation, or the
    starvation threshold would bound nothing.
    """

    def __init__(
        self,
        policy: str | Policy | PriorityRule = "fcfs",
        estimator: Estimator | None = None,
        *,
        starvation_threshold: float | None = DEFAULT_STARVATION_THRESHOLD,
        backfilling: bool = True,
        audit: bool = False,
        correction: Correction | None = None,
        greedy: bool = False,
        planner: ConstraintPlanner | None = None,
    ) -> None:
        self.backfilling = backfilling
        self.greedy = greedy
        self.planner = planner
        self.correction = correction
        self.policy = get_policy(policy) if isinstance(policy, str) else policy
        self.estimator = estimator if estimator is not None else RequestedTime()
        self.starvation_threshold = starvation_threshold
        self.audit = audit
        self.reservations: list[tuple[float, str, float]] = []
        self.nb_machines = 0
        self.free = 0
        self.profiles: dict[str, dict[str, dict[str, Any]]] = {}
        self.waiting: dict[str, WaitingJob] = {}
        self.running: dict[str, RunningJob] = {}
        self._backdated: dict[str, WaitingJob] = {}  # queued with an earlier subtime than Batsim's
        self._sorted: list[WaitingJob] = []  # static policies: the queue, kept sorted by key
        self._ends: list[tuple[float, int, int]] = []
        self._seq = 0
        self.no_more_static_jobs = False
        self.ended = False
        self.now = 0.0  # the last message's time
        self.last_reservation: Reservation | None = None
        self.rejected: list[str] = []
        self._immediate: list[Event] = []
        self.dynamic_jobs = False
        self.acknowledge_dynamic_jobs = False
        self.registration_finished = False

    # --- the protocol ---------------------------------------------------------------------

    def handle(self, message: Message) -> Message:
        """Record the events of ``message``, run one pass if needed, return the reply.

        A message that breaks Batsim's guarantees (time going back, an event after ``now`` or
        out of order, anything after SIMULATION_ENDS, a job submitted twice, a completion of a
        job not running) raises :class:`SchedulerError` before anything is decided: answering
        it would mean scheduling on a state that no longer matches the simulator's."""
        now = message.now
        self.check_order(message)
        dirty = False
        for event in message.events:
            dirty |= self.on_event(event, now)
        self.after_events(now)
        decisions: list[Event] = self._immediate
        self._immediate = []
        if dirty and not self.ended and not self.deferred():
            decisions.extend(self.schedule(now))
        if (
            self.dynamic_jobs
            and not self.registration_finished
            and self.no_more_static_jobs
            and not self.may_register_more()
        ):
            # with dynamic jobs enabled, Batsim cannot end before this NOTIFY
            self.registration_finished = True
            decisions.append(Notify(now, "registration_finished"))
        return Message(now, decisions)

    def check_order(self, message: Message) -> None:
        if self.ended:
            raise SchedulerError(f"a message at now={message.now} after SIMULATION_ENDS")
        last = self.now
        if message.now < last:
            raise SchedulerError(
                f"a message at now={message.now} after one at now={last}: time went back"
            )
        for event in message.events:
            if not last <= event.timestamp <= message.now:
                raise SchedulerError(
                    f"{type(event).__name__} at {event.timestamp} in a message at "
                    f"now={message.now} after time {last}: events out of time order"
                )
            last = event.timestamp
        self.now = message.now

    def after_events(self, now: float) -> None:
        """Called once all events of a message are recorded, before deciding (a hook)."""
        return None

    def may_register_more(self) -> bool:
        """Whether this scheduler may still register dynamic jobs (none here)."""
        return False

    def deferred(self) -> bool:
        """Whether to skip this message's pass (a job it must see comes at the same instant)."""
        return False

    def on_event(self, event: Event, now: float) -> bool:
        """Record one event; return True if it may change a decision."""
        if isinstance(event, JobSubmitted):
            self.on_submitted(event)
            return True
        if isinstance(event, JobCompleted):
            self.on_completed(event, now)
            return True
        if isinstance(event, RequestedCall):
            return True
        if isinstance(event, SimulationBegins):
            self.on_begins(event)
            return False
        if isinstance(event, Notify):
            if event.type == "no_more_static_job_to_submit":
                self.no_more_static_jobs = True
            return False
        if isinstance(event, SimulationEnds):
            self.ended = True
        return False

    @property
    def needs_calendar(self) -> bool:
        """Whether a part of this scheduler reads the time of day and has no calendar yet
        (Batsim does not forward the workload's ``unix_start_time``; see :meth:`set_calendar`)."""
        inner = getattr(self.estimator, "inner", self.estimator)
        return bool(getattr(inner, "needs_calendar", False))

    def set_calendar(self, calendar: dict[str, Any]) -> None:
        """Give the parts that read the time of day the workload's calendar (its
        ``unix_start_time``, ``time_zone_string``, ``time_zone``), before the first job."""
        inner = getattr(self.estimator, "inner", self.estimator)
        if hasattr(inner, "set_calendar"):
            inner.set_calendar(calendar)

    def on_begins(self, event: SimulationBegins) -> None:
        self.nb_machines = event.nb_compute_resources
        self.free = full_mask(self.nb_machines)
        self.profiles = event.profiles
        self.dynamic_jobs = bool(event.config.get("dynamic-jobs-enabled", False))
        self.acknowledge_dynamic_jobs = bool(event.config.get("dynamic-jobs-acknowledged", False))

    def profile_of(self, job: Job, event: JobSubmitted | None = None) -> dict[str, Any] | None:
        if event is not None and event.profile is not None:
            return event.profile
        return self.profiles.get(job.workload, {}).get(job.profile)

    def on_submitted(self, event: JobSubmitted) -> WaitingJob | None:
        """Queue a submitted job; a job that can never fit the machine is rejected at once
        (REJECT_JOB) and listed in :attr:`rejected`, so the run says why it did not finish."""
        job = Job.from_batsim(event.job_id, event.job)
        if job.id in self.waiting or job.id in self.running:
            raise SchedulerError(f"job {job.id} submitted twice")
        if job.res > self.nb_machines or job.res <= 0:
            self.rejected.append(job.id)
            self._immediate.append(RejectJob(event.timestamp, job.id))
            return None
        est = self.estimator.estimate(job, self.profile_of(job, event))
        if not est > 0:
            raise SchedulerError(f"job {job.id}: runtime estimate {est} is not positive")
        entry = self.new_waiting(job, est)
        self.admit(entry, event)
        self.add_waiting(entry)
        return entry

    def admit(self, entry: WaitingJob, event: JobSubmitted) -> None:
        """Complete a new queue entry before it is queued (a hook: classes, capped estimates)."""
        return None

    def new_waiting(self, job: Job, est: float, subtime: float | None = None) -> WaitingJob:
        entry = WaitingJob(
            job=job,
            seq=self._seq,
            est=est,
            res=job.res,
            subtime=job.subtime if subtime is None else subtime,
            rank_est=est,
        )
        self._seq += 1
        return entry

    def add_waiting(self, entry: WaitingJob) -> None:
        self.waiting[entry.job.id] = entry
        if entry.subtime < entry.job.subtime:
            self._backdated[entry.job.id] = entry
        if not self.policy.dynamic:
            entry.key = (entry.rank, *self.policy.key(entry, 0.0))
            insort(self._sorted, entry, key=_key)

    def on_completed(self, event: JobCompleted, now: float) -> RunningJob:
        running = self.running.pop(event.job_id, None)
        if running is None:
            raise SchedulerError(f"completion of job {event.job_id}, which is not running")
        self.free |= running.mask
        self._ends.remove(running.end_entry)
        self.estimator.observe(running.job, now - running.start)
        return running

    # --- deciding -------------------------------------------------------------------------

    def ordered_queue(self, now: float) -> list[WaitingJob]:
        """The queue EASY walks: starving jobs (oldest first), then the policy's order."""
        if self.policy.dynamic:
            key = self.policy.key
            queue = sorted(self.waiting.values(), key=lambda entry: (entry.rank, *key(entry, now)))
        else:
            queue = self._sorted
        threshold = self.starvation_threshold
        if threshold is None or not queue:
            return queue
        starving: list[WaitingJob] = []
        for entry in self.waiting.values():  # arrival order = Batsim's submission order
            if now - entry.job.subtime <= threshold:
                break
            if now - entry.subtime > threshold:
                starving.append(entry)
        for entry in self._backdated.values():  # resubmissions waiting since their original
            if now - entry.job.subtime <= threshold < now - entry.subtime:
                starving.append(entry)
        if not starving:
            return queue
        starving.sort(key=lambda entry: (entry.subtime, entry.seq))
        chosen = {id(entry) for entry in starving}
        return starving + [entry for entry in queue if id(entry) not in chosen]

    def schedule(self, now: float) -> list[Event]:
        """One EASY pass over the queue; the EXECUTE_JOB decisions it makes."""
        if not self.waiting:
            return []
        if self.correction is not None:
            self.correct_estimates(now)
        queue = self.ordered_queue(now)  # may be self._sorted itself: not changed until the end
        starving = self._head_starving(queue, now)
        if self.planner is not None and not starving:
            started = self.planner.plan(queue, self.free, self._ends, now)
            reservation = None
        else:
            started, reservation = easy_pass(
                queue,
                self.free,
                self._ends,
                now,
                backfilling=self.backfilling,
                shortest_first=getattr(self.estimator, "backfill_shortest_first", False),
                greedy=self.greedy and not starving,
            )
        self.last_reservation = reservation
        if self.audit and reservation is not None:
            head = reservation.head
            assert isinstance(head, WaitingJob)
            self.reservations.append((now, head.job.id, reservation.shadow))
        decisions: list[Event] = []
        for entry, mask in started:
            decisions.extend(self.start(entry, mask, now))
        return decisions

    def _head_starving(self, queue: list[WaitingJob], now: float) -> bool:
        threshold = self.starvation_threshold
        return bool(queue) and threshold is not None and now - queue[0].subtime > threshold

    def correct_estimates(self, now: float) -> None:
        """Extend the estimate of every running job expected to end within the correction
        margin of ``now`` (see :mod:`batsched_ml.scheduler.correction`)."""
        assert self.correction is not None
        due = now + MARGIN
        if not self._ends or self._ends[0][0] > due:
            return
        for running in self.running.values():
            if running.start + running.est > due:
                continue
            est, count = self.correction.correct(
                running.est, now - running.start, running.corrections, running.job.walltime
            )
            if est == running.est:
                continue
            self._ends.remove(running.end_entry)
            running.est, running.corrections = est, count
            running.end_entry = (running.start + est, running.end_entry[1], running.end_entry[2])
            insort(self._ends, running.end_entry)

    def start(self, entry: WaitingJob, mask: int, now: float) -> list[Event]:
        """Move ``entry`` from the queue to the running set; the decisions that start it."""
        del self.waiting[entry.job.id]
        self._backdated.pop(entry.job.id, None)
        if not self.policy.dynamic:
            sorted_queue = self._sorted
            del sorted_queue[bisect_left(sorted_queue, entry.key, key=_key)]
        self.free ^= mask
        started = getattr(self.policy, "started", None)
        if started is not None:  # a policy that learns from waits (PRB)
            started(entry, now)
        running = RunningJob(job=entry.job, start=now, est=entry.est, mask=mask, entry=entry)
        running.end_entry = (now + entry.est, entry.seq, entry.res)
        insort(self._ends, running.end_entry)
        self.running[entry.job.id] = running
        return [ExecuteJob(now, entry.job.id, procset_of(mask))]

    # --- introspection --------------------------------------------------------------------

    def check_consistency(self) -> None:
        """Assert the internal invariants (used by tests)."""
        used = 0
        for running in self.running.values():
            assert not used & running.mask, "two running jobs share a machine"
            used |= running.mask
        assert used & self.free == 0, "a machine is both free and in use"
        assert used | self.free == full_mask(self.nb_machines), "a machine went missing"
        assert len(self._ends) == len(self.running)
