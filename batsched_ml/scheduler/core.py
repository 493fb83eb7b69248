"""The pure scheduler core: protocol events in, decisions out, from composable parts.

A :class:`Scheduler` is anything with ``handle(Message) -> Message``: it takes one Batsim message
and returns the reply, holding no socket, file, clock or global, so that the in-process and the
ZeroMQ paths give the same decisions. :class:`BatchScheduler` is the one implementation. As
batsched does, it first *records* the events of a message (each handler only updates the state),
then *decides once*: one scheduling pass per message, when the message brought something that can
change a decision (a submission, a completion, a requested call, a killed job).

The scheduler is made of parts, each an object (no flags):

================  =================================================================================
``policy``        the queue order (:mod:`.policies`: ``key(job, now)``, ``dynamic``), plug-ins too
``predictor``     the runtime each job plans with (:mod:`.predictors`: ``estimate``, ``observe``)
``dispatcher``    which jobs start now (:mod:`.dispatchers`: ``decide(...)``): EASY, list
                  scheduling (sjf, ljf), PRB's greedy allocation, CPH's plan, probabilistic
                  backfilling (:mod:`.probabilistic`, also a component: it learns)
``correction``    extends the estimate of a running job that outlives it (:mod:`.correction`)
``components``    :class:`Component` objects attached through the named hooks below: the job-size
                  classifier and the kill-and-resubmit safeguard (:mod:`.classified`)
================  =================================================================================

One pass: the queue is the *starving* jobs first (waiting longer than ``starvation_threshold``,
oldest first), then the others by ``(rank, *policy.key(job, now))``: ``rank`` is a job's class
(0 before 1; 0 for every job when nothing classifies), so a classifier's small jobs go first
whatever the order and the dispatcher. The dispatcher decides on that queue; each started job is
told to the policy (``started``, an order that learns) and to the components.

Hooks (:class:`Component`, all no-ops there; the scheduler calls the components that override
a hook, in the order they were attached):

========================================  =========================================================
``on_message(message)``                   a message arrives, before anything (a new week begins)
``on_begins(event)``                      SIMULATION_BEGINS was recorded (machines, profiles)
``take_submission(event) -> entry|None``  a submission the component queues itself (Batsim's
                                          acknowledgement of a job it registered)
``on_admit(entry, event)``                a new queue entry, before it is queued: may set its
                                          ``rank``, planned ``est`` and ordering ``rank_est``
``on_started(entry, running, now)``       a job starts; returns more decisions (a CALL_ME_LATER)
``on_completed(running, event, now)``     a job ended (``running.killed``: the scheduler killed it)
``on_requested_call(now)``                a CALL_ME_LATER came back
``on_jobs_killed(event, now)``            JOB_KILLED (makes the message's pass run)
``after_events(now)``                     every event of the message is recorded, before the pass:
                                          may kill (:meth:`BatchScheduler.kill`)
``deferred() -> bool``                    skip this message's pass (a job it must see comes at the
                                          same instant)
``may_register_more() -> bool``           may still register dynamic jobs (delays NOTIFY
                                          registration_finished)
``needs_calendar``, ``set_calendar(c)``   reads the time of day and has no calendar yet / takes it
========================================  =========================================================

Starvation threshold: by default 72 hours. SPF and SAF can postpone a long or wide job for as
long as shorter ones keep arriving; a threshold bounds that wait (paper, section 5.1) while
staying clear of ordinary waits, so that it does not turn SPF and SAF into FCFS on busy traces.
``benchmarks/starvation_threshold.py`` measures the trade-off on KTH-SP2; ``None`` disables it.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable
from itertools import islice
from operator import attrgetter
from typing import Any, Protocol

from mypy_extensions import mypyc_attr

from batsched_ml import registry
from batsched_ml.alloc import MachineSet, Runs, mask_of, procset_of_runs
from batsched_ml.errors import SchedulerError as SchedulerError
from batsched_ml.job import Job
from batsched_ml.protocol.events import (
    Event,
    ExecuteJob,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    KillJob,
    Message,
    Notify,
    RejectJob,
    RequestedCall,
    SimulationBegins,
    SimulationEnds,
)
from batsched_ml.scheduler.correction import MARGIN, Correction
from batsched_ml.scheduler.cph import ConstraintPlanner
from batsched_ml.scheduler.dispatchers import (
    Dispatcher,
    Easy,
    Greedy,
    ListScheduling,
    Planned,
)
from batsched_ml.scheduler.easy import QueueBlocks, Reservation, reservation_after
from batsched_ml.scheduler.kinetic import WfpQueue
from batsched_ml.scheduler.parts import HOOKS as HOOKS
from batsched_ml.scheduler.parts import Component as Component
from batsched_ml.scheduler.parts import RunningJob as RunningJob
from batsched_ml.scheduler.parts import WaitingJob as WaitingJob
from batsched_ml.scheduler.parts import cut_short as cut_short
from batsched_ml.scheduler.policies import LJF, POLICIES, PriorityRule, get_policy, wfp_value
from batsched_ml.scheduler.predictors import Predictor, RequestedTime

HOUR = 3600.0
_key = attrgetter("key")
DEFAULT_STARVATION_THRESHOLD = registry.STARVATION_THRESHOLD_HOURS * HOUR

#: The built-in static orders, whose keys end with the job's arrival number: no two entries of a
#: queue have the same key (what :meth:`BatchScheduler.ordered_queue`'s kept queue relies on).
_UNIQUE_KEY_ORDERS: tuple[Any, ...] = tuple(
    policy for policy in (*POLICIES.values(), LJF) if not policy.dynamic
)


def _unique_dynamic_key(policy: Any) -> bool:
    """Whether ``policy`` is a built-in dynamic order, whose keys end with the job's arrival
    number (WFP, PRB): no two entries of a queue have the same key, so a sort of the queue
    gives one order whatever order it is given the entries in."""
    return policy is POLICIES["wfp"] or isinstance(policy, PriorityRule)


_WFP = POLICIES["wfp"]


def _wfp_sorted(entries: list[WaitingJob], now: float) -> list[WaitingJob]:
    """``sorted(entries, key=lambda e: (e.rank, *_wfp(e, now)))``, the same list, made
    without a tuple a job: the jobs of each rank (smallest first) sorted by their float
    priority alone (:func:`.policies.wfp_value`; Python's sort compares floats natively),
    then each run of equal priorities (jobs queued at this very time: a priority of zero) put
    in arrival order, which is what the tuples' next fields decide. Re-sorting a queue of
    thousands at every pass was most of a WFP replay's time on the largest traces."""
    if not entries:
        return []
    rank = entries[0].rank
    for entry in entries:
        if entry.rank != rank:
            break
    else:
        return _by_wfp_priority(entries, now)
    ranks: dict[int, list[WaitingJob]] = {}
    for entry in entries:
        ranks.setdefault(entry.rank, []).append(entry)
    out: list[WaitingJob] = []
    for rank in sorted(ranks):
        out.extend(_by_wfp_priority(ranks[rank], now))
    return out


#: the heads a WFP pass finds one by one (:meth:`BatchScheduler._wfp_pass_queue`) before it
#: sorts the rest of the queue whole
_FIRST_HEADS = 8


def _wfp_first(entries: list[WaitingJob], now: float) -> int:
    """The index of the first of ``entries`` (not empty) in WFP's order: the smallest
    ``(rank, priority, subtime, seq)``, the tuple :func:`_wfp_sorted` sorts by, compared field
    by field without a tuple."""
    best = 0
    head = entries[0]
    best_rank = head.rank
    best_priority = wfp_value(now - head.subtime, head.rank_est, head.res)
    best_subtime = head.subtime
    best_seq = head.seq
    for i in range(1, len(entries)):
        entry = entries[i]
        rank = entry.rank
        if rank > best_rank:
            continue
        priority = wfp_value(now - entry.subtime, entry.rank_est, entry.res)
        if rank == best_rank:
            if priority > best_priority:
                continue
            if priority == best_priority and (
                entry.subtime > best_subtime
                or (entry.subtime == best_subtime and entry.seq > best_seq)
            ):
                continue
        best = i
        best_rank = rank
        best_priority = priority
        best_subtime = entry.subtime
        best_seq = entry.seq
    return best


def _by_wfp_priority(entries: list[WaitingJob], now: float) -> list[WaitingJob]:
    """``entries`` (all of one rank) by WFP priority, ties in arrival order."""
    keys = [wfp_value(now - entry.subtime, entry.rank_est, entry.res) for entry in entries]
    order = sorted(range(len(entries)), key=keys.__getitem__)
    out = [entries[i] for i in order]
    size = len(out)
    j = 1
    while j < size:
        if keys[order[j]] != keys[order[j - 1]]:
            j += 1
            continue
        start = j - 1
        tie = keys[order[start]]
        while j < size and keys[order[j]] == tie:
            j += 1
        if not _in_arrival_order(out, start, j):
            out[start:j] = sorted(out[start:j], key=_starving_key)
    return out


def _in_arrival_order(entries: list[WaitingJob], start: int, stop: int) -> bool:
    """Whether ``entries[start:stop]`` is in :func:`_starving_key`'s order already, as it
    mostly is (the queue is walked in arrival order, and the sorts are stable): then a sort by
    that key, stable, would leave it as it is, and is not made. RICC submits jobs by the
    hundred with the same size and request: their WFP priorities tie, and sorting each tie
    (a tuple a job) was a fifth of a WFP replay."""
    for k in range(start + 1, stop):
        before = entries[k - 1]
        entry = entries[k]
        if entry.subtime < before.subtime or (
            entry.subtime == before.subtime and entry.seq < before.seq
        ):
            return False
    return True


def _starving_key(entry: WaitingJob) -> tuple[float, int]:
    """The order of the starving jobs at the head of the queue: oldest first."""
    return (entry.subtime, entry.seq)


class Scheduler(Protocol):
    """A scheduler: Batsim's messages in, its decisions out (one reply per message), and the
    jobs it rejected (they can never run on this machine)."""

    rejected: list[str]

    def handle(self, message: Message) -> Message: ...


# compiled (mypyc), open to interpreted subclasses (classified.ClassifyingScheduler)
@mypyc_attr(allow_interpreted_subclasses=True)
class BatchScheduler:
    """The scheduler of batsched-ml: a queue order, a runtime predictor, a dispatcher, an
    optional correction and components, over Batsim's protocol (see the module docstring).

    Parameters
    ----------
    policy:
        The queue order: a name (``"fcfs"``, ``"wfp"``, ``"spf"``, ``"saf"``, a plug-in, see
        :func:`~batsched_ml.scheduler.policies.get_policy`) or an order object.
    predictor:
        The runtime estimate each job plans with (default: the requested time).
    dispatcher:
        Which jobs start at a pass (default: EASY, with shortest-job backfilling when the
        predictor asks for it, ``backfill_shortest_first``, as EASY++). A dispatcher that is
        also a :class:`Component` (one that learns from finished jobs) is attached first.
    starvation_threshold:
        Seconds of waiting after which a job goes to the head of the queue; ``None`` disables.
    correction:
        Extend the estimate of a running job that reaches it (:mod:`.correction`); ``None``:
        such a job is expected to end at once.
    components:
        Parts attached through the hooks (:class:`Component`), in calling order.
    audit:
        Record every reservation as ``(now, job_id, shadow)`` in :attr:`reservations` (tests).
    """

    def __init__(
        self,
        policy: Any = "fcfs",
        predictor: Predictor | None = None,
        dispatcher: Dispatcher | None = None,
        *,
        starvation_threshold: float | None = DEFAULT_STARVATION_THRESHOLD,
        correction: Correction | None = None,
        components: Iterable[Component] = (),
        audit: bool = False,
    ) -> None:
        self.policy = get_policy(policy) if isinstance(policy, str) else policy
        self.predictor: Predictor = predictor if predictor is not None else RequestedTime()
        if dispatcher is None:
            dispatcher = Easy(
                shortest_first=getattr(self.predictor, "backfill_shortest_first", False)
            )
        self.dispatcher: Dispatcher = dispatcher
        self.correction = correction
        self.starvation_threshold = starvation_threshold
        self.audit = audit
        self.reservations: list[tuple[float, str, float]] = []
        self.nb_machines = 0
        self.free = MachineSet()
        self.profiles: dict[str, dict[str, dict[str, Any]]] = {}
        self.waiting: dict[str, WaitingJob] = {}
        self.running: dict[str, RunningJob] = {}
        self._backdated: dict[str, WaitingJob] = {}  # queued with an earlier subtime than Batsim's
        self._sorted: list[WaitingJob] = []  # static policies: the queue, kept sorted by key
        # a built-in static order with a threshold: _sorted is the whole queue the dispatcher
        # walks, kept from pass to pass (see ordered_queue): its first _starving_count entries
        # are the starving jobs, oldest first, the others follow by key; _young[_young_head:]
        # holds the others (and jobs started since) oldest first (by subtime, then seq)
        self._kept = starvation_threshold is not None and any(
            self.policy is order for order in _UNIQUE_KEY_ORDERS
        )
        self._kept_threshold = 0.0 if starvation_threshold is None else starvation_threshold
        # the kept queue behind its starving jobs, in blocks (EASY's walk passes over those
        # with no job to test; None: not kept, or ``block_walk`` turned off before the first job)
        self._blocks: QueueBlocks | None = None
        #: whether a kept queue is walked by blocks of up to twice ``block_size`` jobs, from
        #: ``blocks_from`` jobs behind the starving ones until fewer than ``blocks_below`` (a
        #: short queue's walk is short, and keeping blocks costs each arrival and start: 1.06
        #: times the time of full HPC2N under FCFS without compiled parts, kept throughout);
        #: the tests compare with the walk job by job, with small blocks and thresholds
        self.block_walk = True
        self.block_size = 64
        self.blocks_from = 256
        self.blocks_below = 64
        self._starving_count = 0
        self._young: list[WaitingJob] = []
        self._young_head = 0
        self._kept_now = 0.0  # the time the starving jobs were last counted at
        self._last_arrival = -float("inf")  # the latest job.subtime queued
        self._ends: list[tuple[float, int, int]] = []
        # a built-in dynamic order: the last pass's sorted queue and the entries queued since,
        # the next sort's input (see _dynamic_input)
        self._resort = _unique_dynamic_key(self.policy)
        self._last_order: list[WaitingJob] = []
        self._arrivals: list[WaitingJob] = []
        # WFP with a long queue (see _wfp_pass_queue): the waiting jobs not starving, in groups
        # under a kinetic tournament (kept from pass to pass while the arrivals come in order
        # of their job.subtime), and every waiting job's size
        self._wfp: WfpQueue | None = None
        self._is_wfp = self.policy is _WFP
        #: the queue length from which a WFP pass keeps _wfp, and below which it drops it
        self.wfp_queue_from = 256
        self.wfp_queue_below = 64
        self._wfp_fresh = False  # _wfp is to be made from the waiting jobs at the next pass
        # the seqs of the starving jobs taken out of _wfp (none of them is in it): a starving
        # job is taken out once, not looked for again at every later pass (a third of a RICC
        # replay under WFP, with thousands starving)
        self._wfp_out: set[int] = set()
        self._res_count: dict[int, int] = {}  # every waiting job's size: how many
        self._res_values: list[int] = []  # the sizes of _res_count, sorted
        self._wfp_threshold = starvation_threshold
        self._wfp_in_order = True
        self._wfp_arrival = -float("inf")  # the latest job.subtime queued
        # the entries queued since the last pass, while nothing else changed (None: something
        # did); an incremental dispatcher then tests only those (:mod:`.easy`)
        self._fresh: list[WaitingJob] | None = None
        self._seq = 0
        self.no_more_static_jobs = False
        self.ended = False
        self.now = 0.0  # the last message's time
        # the last pass's reservation; None when the whole queue started, or when a WFP or
        # PRB pass was skipped for want of free machines (see _nothing_fits)
        self.last_reservation: Reservation | None = None
        self.rejected: list[str] = []
        self._immediate: list[Event] = []
        self.dynamic_jobs = False
        self.acknowledge_dynamic_jobs = False
        self.registration_finished = False
        self._policy_started: Callable[[WaitingJob, float], None] | None = getattr(
            self.policy, "started", None
        )  # a policy that learns from waits (PRB)
        self.components: list[Component] = []
        self._hooks: dict[str, list[Callable[..., Any]]] = {name: [] for name in HOOKS}
        if isinstance(dispatcher, Component):  # a dispatcher that learns (probabilistic)
            self.add(dispatcher)
        for component in components:
            self.add(component)

    def add(self, component: Component) -> None:
        """Attach ``component``: its overridden hooks are called from now on, after those of
        the components attached before it."""
        component.attach(self)
        self.components.append(component)
        for name in HOOKS:
            if getattr(type(component), name) is not getattr(Component, name):
                self._hooks[name].append(getattr(component, name))

    def part(self, kind: type) -> Any:
        """The attached component of class ``kind`` (or a subclass), ``None`` if none."""
        return next((c for c in self.components if isinstance(c, kind)), None)

    # --- what the writers and tests read -------------------------------------------------

    @property
    def planner(self) -> ConstraintPlanner | None:
        """CPH's planner when the dispatcher has one (its solver counters), else ``None``."""
        return getattr(self.dispatcher, "planner", None)

    # --- the protocol ---------------------------------------------------------------------

    def handle(self, message: Message) -> Message:
        """Record the events of ``message``, run one pass if needed, return the reply.

        A message that breaks Batsim's guarantees (time going back, an event after ``now`` or
        out of order, anything after SIMULATION_ENDS, a job submitted twice, a completion of a
        job not running) raises :class:`SchedulerError` before anything is decided: answering
        it would mean scheduling on a state that no longer matches the simulator's."""
        for hook in self._hooks["on_message"]:
            hook(message)
        now = message.now
        self.check_order(message)
        dirty = False
        for event in message.events:
            dirty |= self.on_event(event, now)
        for hook in self._hooks["after_events"]:
            hook(now)
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

    def may_register_more(self) -> bool:
        """Whether a component may still register dynamic jobs."""
        return any(hook() for hook in self._hooks["may_register_more"])

    def deferred(self) -> bool:
        """Whether to skip this message's pass (a component waits for a job at this instant).

        A plain loop: asked once a message, and a generator for ``any`` cost more than the
        hooks themselves."""
        for hook in self._hooks["deferred"]:  # noqa: SIM110 (see above)
            if hook():
                return True
        return False

    def on_event(self, event: Event, now: float) -> bool:
        """Record one event; return True if it may change a decision."""
        if isinstance(event, JobSubmitted):
            self.on_submitted(event)
            return True
        if isinstance(event, JobCompleted):
            self.on_completed(event, now)  # the next pass walks the whole queue
            return True
        if not isinstance(event, (SimulationBegins, Notify)):
            self._fresh = None  # a call back, a kill: the next pass walks the whole queue
        if isinstance(event, RequestedCall):
            for hook in self._hooks["on_requested_call"]:
                hook(now)
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
        if isinstance(event, JobKilled):
            hooks = self._hooks["on_jobs_killed"]
            for hook in hooks:
                hook(event, now)
            return bool(hooks)
        return False

    def _calendar_parts(self) -> list[Any]:
        return [getattr(self.predictor, "inner", self.predictor), *self.components]

    @property
    def needs_calendar(self) -> bool:
        """Whether a part of this scheduler reads the time of day and has no calendar yet
        (Batsim does not forward the workload's ``unix_start_time``; see :meth:`set_calendar`)."""
        return any(getattr(part, "needs_calendar", False) for part in self._calendar_parts())

    def set_calendar(self, calendar: dict[str, Any]) -> None:
        """Give the parts that read the time of day the workload's calendar (its
        ``unix_start_time``, ``time_zone_string``, ``time_zone``), before the first job."""
        for part in self._calendar_parts():
            if hasattr(part, "set_calendar"):
                part.set_calendar(calendar)

    def on_begins(self, event: SimulationBegins) -> None:
        self.nb_machines = event.nb_compute_resources
        self.free = MachineSet.full(self.nb_machines)
        self.profiles = event.profiles
        self.dynamic_jobs = bool(event.config.get("dynamic-jobs-enabled", False))
        self.acknowledge_dynamic_jobs = bool(event.config.get("dynamic-jobs-acknowledged", False))
        for hook in self._hooks["on_begins"]:
            hook(event)

    def profile_of(self, job: Job, event: JobSubmitted | None = None) -> dict[str, Any] | None:
        if event is not None and event.profile is not None:
            return event.profile
        profiles = self.profiles.get(job.workload)
        return None if profiles is None else profiles.get(job.profile)

    def on_submitted(self, event: JobSubmitted) -> WaitingJob | None:
        """Queue a submitted job; a job that can never fit the machine is rejected at once
        (REJECT_JOB) and listed in :attr:`rejected`, so the run says why it did not finish."""
        for hook in self._hooks["take_submission"]:
            taken: WaitingJob | None = hook(event)
            if taken is not None:
                return taken
        job = Job.from_batsim(event.job_id, event.job)
        if job.id in self.waiting or job.id in self.running:
            raise SchedulerError(f"job {job.id} submitted twice")
        if job.res > self.nb_machines or job.res <= 0:
            self.rejected.append(job.id)
            self._immediate.append(RejectJob(event.timestamp, job.id))
            return None
        est = self.predictor.estimate(job, self.profile_of(job, event))
        if not est > 0:
            raise SchedulerError(f"job {job.id}: runtime estimate {est} is not positive")
        entry = self.new_waiting(job, est)
        for hook in self._hooks["on_admit"]:
            hook(entry, event)
        self.add_waiting(entry)
        return entry

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
        if self._is_wfp:
            self._wfp_add(entry)
        if self._resort:
            self._arrivals.append(entry)
        if self._fresh is not None:
            self._fresh.append(entry)
        if entry.subtime < entry.job.subtime:
            self._backdated[entry.job.id] = entry
        if self._kept and not (
            entry.job.subtime >= self._last_arrival and entry.subtime == entry.subtime
        ):
            self._unkeep()  # arrivals out of order (or a NaN): the kept queue's rule is off
        if not self.policy.dynamic:
            entry.key = (entry.rank, *self.policy.key(entry, 0.0))
            if self._kept:
                self._last_arrival = entry.job.subtime
                queue = self._sorted
                count = self._starving_count
                if len(queue) == count or not entry.key < queue[-1].key:
                    # after every key (unique keys; FCFS's every arrival): insort's own place,
                    # without its bisection (a key read and compared per step)
                    at = len(queue)
                    queue.append(entry)
                else:
                    at = bisect_right(queue, entry.key, count, key=_key)
                    queue.insert(at, entry)
                self._add_young(entry)
                blocks = self._blocks
                if blocks is not None:
                    blocks.insert(at - count, entry)
                elif (
                    len(queue) - count >= self.blocks_from
                    and self.block_walk
                    and self._walks_by_blocks()
                ):
                    blocks = self._blocks = QueueBlocks(self.block_size)
                    blocks.start = count
                    for k, kept in enumerate(queue[count:]):
                        blocks.insert(k, kept)
            else:
                insort(self._sorted, entry, key=_key)

    def on_completed(self, event: JobCompleted, now: float) -> RunningJob:
        running = self.running.pop(event.job_id, None)
        if running is None:
            raise SchedulerError(f"completion of job {event.job_id}, which is not running")
        self.free.add(running.alloc)
        self._drop_end(running.end_entry)
        self._fresh = None
        if not cut_short(running, event):
            self.predictor.observe(running.job, now - running.start)
        for hook in self._hooks["on_completed"]:
            hook(running, event, now)
        return running

    def _drop_end(self, end: tuple[float, int, int]) -> None:
        """Take a running job's ``(expected end, seq, machines)`` out of the sorted ends: found
        by bisection (each entry is unique, its ``seq`` being its job's), not by a walk of the
        running jobs (6 % of a RICC replay's time, profiled, with thousands running)."""
        ends = self._ends
        at = bisect_left(ends, end)
        if at == len(ends) or ends[at] != end:
            # a bug, not the peer's doing: a traceback
            raise RuntimeError(f"expected end {end} is not among the running jobs' ends")
        del ends[at]

    def kill(self, job_ids: list[str], now: float) -> None:
        """Ask Batsim to kill running jobs (in this message's reply, before the pass's
        decisions); their completions come marked ``killed``."""
        for job_id in job_ids:
            self.running[job_id].killed = True
        self._immediate.append(KillJob(now, job_ids))

    # --- deciding -------------------------------------------------------------------------

    def ordered_queue(self, now: float) -> list[WaitingJob]:
        """The queue the dispatcher walks: starving jobs (oldest first), then by class rank and
        the policy's order.

        Under a built-in static order (``_kept``) that queue is kept from pass to pass instead
        of being made again at each (the starving jobs found by a walk of the queue, sorted,
        and the others filtered by the set of them: most of a RICC replay under SPF, with
        thousands waiting): the jobs that started starving since the last pass move from their
        place by key to theirs among the starving, and the queue is returned as it is. The
        same list as the walk below makes: with arrivals in order of their ``job.subtime``
        (checked as they come, else that walk runs), the walk's starving jobs are exactly those
        with ``now - subtime > threshold``, which the kept queue counts, for any ``now`` (an
        earlier one too: starving jobs go back to their place)."""
        if self._kept:
            if self.starvation_threshold == self._kept_threshold:
                self._keep_starving(now)
                return self._sorted
            self._unkeep()  # the threshold was changed: the walk below
        if self.policy.dynamic:
            key = self.policy.key
            if self.policy is _WFP:
                queue = _wfp_sorted(self._dynamic_input(), now)
            else:
                queue = sorted(
                    self._dynamic_input(), key=lambda entry: (entry.rank, *key(entry, now))
                )
            if self._resort:
                if any(map(operator.is_, queue, queue[1:])):  # an entry twice: cannot happen
                    queue = sorted(
                        self.waiting.values(), key=lambda entry: (entry.rank, *key(entry, now))
                    )
                self._last_order = queue
        else:
            queue = self._sorted
        if not queue:
            return queue
        starving = self._starving(now)
        if not starving:
            return queue
        if len(starving) <= len(queue) and all(map(operator.is_, starving, queue)):
            return queue  # already first, in that order (FCFS's oldest jobs): no copy
        if not self.policy.dynamic and len(starving) <= 32:
            # a few starving jobs: the sorted queue copied and each taken out at its key (a
            # bisection and a memmove in C, well under a nanosecond an entry), rather than
            # every entry of the queue tested in Python (tens of nanoseconds each)
            rest = list(queue)
            for entry in starving:
                at = bisect_left(rest, entry.key, key=_key)
                if at == len(rest) or rest[at] is not entry:
                    break  # not where its key says (cannot happen): the walk below
                del rest[at]
            else:
                return starving + rest
        chosen = {id(entry) for entry in starving}
        return starving + [entry for entry in queue if id(entry) not in chosen]

    def _starving(self, now: float, rest: list[WaitingJob] | None = None) -> list[WaitingJob]:
        """The jobs waiting for longer than the starvation threshold at ``now``, oldest first
        (by subtime, then arrival): the head of the queue a pass walks. ``rest``, when given,
        receives the other waiting jobs, in arrival order (what a WFP pass orders: telling them
        apart by the identity of the starving ones was a tenth of a RICC replay under WFP)."""
        threshold = self.starvation_threshold
        if threshold is None:
            if rest is not None:
                rest.extend(self.waiting.values())
            return []
        starving: list[WaitingJob] = []
        k = 0  # the entries walked
        for entry in self.waiting.values():  # arrival order = Batsim's submission order
            if now - entry.job.subtime <= threshold:
                break
            if now - entry.subtime > threshold:
                starving.append(entry)
            elif rest is not None:
                rest.append(entry)
            k += 1
        backdated = 0
        for entry in self._backdated.values():  # resubmissions waiting since their original
            if now - entry.job.subtime <= threshold < now - entry.subtime:
                starving.append(entry)  # (never among the entries above: their jobs are young)
                backdated += 1
        if rest is not None:
            after = islice(self.waiting.values(), k, None)
            if backdated:
                chosen = {id(entry) for entry in starving[len(starving) - backdated :]}
                rest.extend([entry for entry in after if id(entry) not in chosen])
            else:
                rest.extend(after)
        if not _in_arrival_order(starving, 0, len(starving)):  # sorted: nothing to do
            starving.sort(key=_starving_key)
        return starving

    def _wfp_pass_queue(self, now: float) -> list[WaitingJob]:
        """What an EASY (or list scheduling) pass under WFP needs of :meth:`ordered_queue`'s
        list, in its order: the jobs that start at the head, the first that does not fit (the
        head, whose reservation the pass makes), then, under EASY, the jobs it backfills, in
        the order it starts them (:meth:`.kinetic.WfpQueue.behind`: the others would be
        passed over). The pass makes the same decisions and reservation on it as on the whole
        list, without every waiting job's priority being computed: the jobs not starving are
        kept in groups of one size and estimate under a kinetic tournament
        (:class:`.kinetic.WfpQueue`), which gives the heads one by one (about the logarithm of
        the number of groups each) and the jobs behind from the groups that pass EASY's tests.
        On RICC, with thousands waiting, computing every waiting job's priority and sorting
        those that fit at each pass was nearly all of the replay. The queue is left as it was
        found: the heads that start leave it when they start. The queue is kept only while
        :attr:`wfp_queue_from` jobs or more wait (made from the waiting jobs when they reach
        that, dropped below :attr:`wfp_queue_below`); with fewer, :meth:`_wfp_walk`.
        ``tests/test_policies.py`` checks both against the whole sorted queue."""
        length = len(self.waiting)
        if self._wfp is None:
            if length < self.wfp_queue_from:
                return self._wfp_walk(now)
            self._wfp = WfpQueue()  # made from the waiting jobs by _wfp_starving
            self._wfp_fresh = True
            self._wfp_out = set()
            self._res_count = {}
            self._res_values = []
            for entry in self.waiting.values():
                self._count_size(entry.res, 1)
        elif length < self.wfp_queue_below:
            self._wfp = None
            return self._wfp_walk(now)
        starving = self._wfp_starving(now)
        queue = self._wfp
        assert queue is not None
        free = self.free.count
        out: list[WaitingJob] = []
        for i, entry in enumerate(starving):
            out.append(entry)
            if entry.res > free:  # the head, among the starving
                if self._backfills():
                    shadow, extra = reservation_after(entry.res, out[:i], free, self._ends, now)
                    out.extend(queue.behind(starving[i + 1 :], free, now, shadow, extra))
                return out
            free -= entry.res
        taken: list[WaitingJob] = []
        while True:
            first = queue.first(now)
            if first is None:
                break
            if first.res > free:  # the head
                if self._backfills():
                    shadow, extra = reservation_after(first.res, out, free, self._ends, now)
                    out.append(first)
                    out.extend(queue.behind([], free, now, shadow, extra))
                else:
                    out.append(first)
                break
            out.append(first)
            queue.remove(first)
            taken.append(first)
            free -= first.res
        for entry in taken:
            queue.add(entry)
        return out

    def _wfp_walk(self, now: float) -> list[WaitingJob]:
        """:meth:`_wfp_pass_queue`'s list for a short queue, from a walk of the waiting jobs:
        the heads found one by one (:func:`_wfp_first`, every waiting job's priority computed
        each time), then the jobs behind the head that fit the machines left free, sorted
        (more than a few heads starting at once: the whole queue sorted). With tens waiting,
        this costs less than keeping :attr:`_wfp` at each arrival and start (measured on
        KTH-SP2, whose queue is that short: ``benchmarks/speed_table.py --rows kth-wfp``)."""
        rest: list[WaitingJob] = []
        starving = self._starving(now, rest)
        free = self.free.count
        out: list[WaitingJob] = []
        for i, entry in enumerate(starving):
            out.append(entry)
            if entry.res > free:  # the head, among the starving
                out.extend([other for other in starving[i + 1 :] if other.res <= free])
                out.extend(_wfp_sorted([e for e in rest if e.res <= free], now))
                return out
            free -= entry.res
        while rest:
            if len(out) - len(starving) >= _FIRST_HEADS:
                out.extend(_wfp_sorted(rest, now))
                return out
            first = rest.pop(_wfp_first(rest, now))
            out.append(first)
            if first.res > free:  # the head
                out.extend(_wfp_sorted([e for e in rest if e.res <= free], now))
                return out
            free -= first.res
        return out

    def _backfills(self) -> bool:
        """Whether the dispatcher (EASY or list scheduling) backfills behind the head."""
        dispatcher = self.dispatcher
        return type(dispatcher) is Easy and dispatcher.backfilling

    def _wfp_starving(self, now: float) -> list[WaitingJob]:
        """The starving jobs at ``now`` (:meth:`_starving`), taken out of :attr:`_wfp`, which
        then holds exactly the others: a job starving at a pass starves at every later one, as
        long as time goes forward, the threshold stays and the arrivals come in order of their
        ``job.subtime`` (what :meth:`_starving`'s walk relies on). Otherwise the queue is
        made again from the others."""
        queue = self._wfp
        assert queue is not None
        threshold = self.starvation_threshold
        if (
            self._wfp_in_order
            and not self._wfp_fresh
            and now >= queue.time
            and threshold == self._wfp_threshold
        ):
            starving = self._starving(now)
            out = self._wfp_out
            for entry in starving:
                if entry.seq not in out:  # starving since the last pass
                    queue.remove(entry)
                    out.add(entry.seq)
            return starving
        rest: list[WaitingJob] = []
        starving = self._starving(now, rest)
        queue = self._wfp = WfpQueue()
        for entry in rest:
            queue.add(entry)
        self._wfp_out = {entry.seq for entry in starving}
        self._wfp_threshold = threshold
        self._wfp_fresh = False
        return starving

    def _wfp_add(self, entry: WaitingJob) -> None:
        """``entry`` queued, under WFP: whether the arrivals still come in order, and, with a
        long queue, into :attr:`_wfp` and the sizes."""
        if entry.rank_est != entry.rank_est:
            raise SchedulerError(f"job {entry.job.id}: its estimate for WFP is not a number")
        if entry.job.subtime >= self._wfp_arrival and entry.subtime == entry.subtime:
            self._wfp_arrival = entry.job.subtime
        else:
            self._wfp_in_order = False  # out of order (or a NaN): _wfp made at each pass
        if self._wfp is not None:
            self._wfp.add(entry)
            self._count_size(entry.res, 1)

    def _wfp_remove(self, entry: WaitingJob) -> None:
        """``entry`` started, under WFP with a long queue: out of :attr:`_wfp` and the sizes."""
        assert self._wfp is not None
        if entry.seq in self._wfp_out:  # starving: out of _wfp already
            self._wfp_out.remove(entry.seq)
        else:
            self._wfp.remove(entry)
        self._count_size(entry.res, -1)

    def _count_size(self, res: int, change: int) -> None:
        count = self._res_count.get(res, 0) + change
        if count:
            if count == change:
                insort(self._res_values, res)
            self._res_count[res] = count
        else:
            del self._res_count[res]
            del self._res_values[bisect_left(self._res_values, res)]

    def _dynamic_input(self) -> list[WaitingJob]:
        """The waiting entries, for the sort of a dynamic order: in arrival order, or, under a
        built-in one (unique keys: the sort's result is the same), in the last pass's order
        with the entries queued since at the end. An order changes little from pass to pass:
        Python's sort then takes about one comparison an entry instead of log2 of the queue's
        length (a third of a WFP replay's time, profiled, with tens waiting). It is the queue
        exactly: entries still waiting (the same objects), as many as wait, none twice (the
        caller checks the sorted list, where a repeated entry would be next to itself)."""
        waiting = self.waiting
        if not self._resort:
            return list(waiting.values())
        order = [entry for entry in self._last_order if waiting.get(entry.job.id) is entry]
        order.extend([entry for entry in self._arrivals if waiting.get(entry.job.id) is entry])
        self._arrivals = []
        if len(order) != len(waiting):
            return list(waiting.values())
        return order

    def _keep_starving(self, now: float) -> None:
        """Move the jobs that starve at ``now`` and did not at the last call to the starving
        head of the kept queue (and back, should ``now`` be earlier)."""
        threshold = self._kept_threshold
        queue = self._sorted
        count = self._starving_count
        if now < self._kept_now:  # an earlier time (asked by a test): the youngest go back
            while count and not now - queue[count - 1].subtime > threshold:
                count -= 1
                entry = queue.pop(count)
                at = bisect_right(queue, entry.key, count, key=_key)
                queue.insert(at, entry)
                self._add_young(entry)
                if self._blocks is not None:
                    self._blocks.insert(at - count, entry)
        self._kept_now = now
        young = self._young
        head = self._young_head
        waiting = self.waiting
        while head < len(young) and now - young[head].subtime > threshold:
            entry = young[head]
            head += 1
            if waiting.get(entry.job.id) is not entry:
                continue  # started since it was queued
            at = bisect_left(queue, entry.key, count, key=_key)
            if at == len(queue) or queue[at] is not entry:
                # a bug, not the peer's doing: a traceback
                raise RuntimeError(f"job {entry.job.id} is not where its key puts it")
            del queue[at]
            if self._blocks is not None:
                self._blocks.remove(at - count, entry)
            insort(queue, entry, 0, count, key=_starving_key)
            count += 1
        self._starving_count = count
        if self._blocks is not None:
            self._blocks.start = count
            self._few_blocked()
        if head > 1024 and 2 * head > len(young):  # the passed part goes, now and then
            del young[:head]
            head = 0
        self._young_head = head

    def _add_young(self, entry: WaitingJob) -> None:
        """Put ``entry`` among the jobs not starving yet, in its place by (subtime, seq): at
        the end but for a backdated job (or one going back)."""
        young = self._young
        if len(young) > self._young_head:
            last = young[-1]
            if not (
                last.subtime < entry.subtime
                or (last.subtime == entry.subtime and last.seq < entry.seq)
            ):
                insort(young, entry, self._young_head, key=_starving_key)
                return
        young.append(entry)

    def _unkeep(self) -> None:
        """Leave the kept queue for the walk of :meth:`ordered_queue`: the queue sorted by key
        again (the order the insertions would have kept: no two keys are equal)."""
        self._kept = False
        self._blocks = None
        self._sorted.sort(key=_key)
        self._starving_count = 0
        self._young = []
        self._young_head = 0

    def schedule(self, now: float) -> list[Event]:
        """One pass over the queue; the EXECUTE_JOB decisions the dispatcher makes."""
        fresh, self._fresh = self._fresh, []
        if not self.waiting:
            self._arrivals = []  # all started: none to sort next time
            return []
        if self.correction is not None and self.correct_estimates(now):
            fresh = None
        if self._resort and not self.audit and self._nothing_fits():
            self.last_reservation = None
            return []
        if self.policy is _WFP and self._walks_what_fits():
            queue = self._wfp_pass_queue(now)
            self._last_order, self._arrivals = [], []  # ordered_queue: from the arrival order
        else:
            queue = self.ordered_queue(now)  # may be self._sorted itself: unchanged until the end
        starving = self._head_starving(queue, now)
        if getattr(self.dispatcher, "incremental", False):  # EASY (dispatchers.Easy)
            decide: Any = self.dispatcher.decide
            fresh = self._in_order(fresh, now)
            if self._blocks is not None and queue is self._sorted and type(self.dispatcher) is Easy:
                started, reservation = decide(
                    queue, self.free, self._ends, now, starving, fresh=fresh, blocks=self._blocks
                )
            else:
                started, reservation = decide(
                    queue, self.free, self._ends, now, starving, fresh=fresh
                )
        else:
            started, reservation = self.dispatcher.decide(
                queue, self.free, self._ends, now, starving
            )
        self.last_reservation = reservation
        if self.audit and reservation is not None:
            head = reservation.head
            assert isinstance(head, WaitingJob)
            self.reservations.append((now, head.job.id, reservation.shadow))
        decisions: list[Event] = []
        for entry, alloc in started:
            decisions.extend(self.start(entry, alloc, now))
        return decisions

    def _walks_by_blocks(self) -> bool:
        """Whether the dispatcher is EASY walking behind the head in queue order (the walk
        :class:`.easy.QueueBlocks` are for)."""
        dispatcher = self.dispatcher
        return type(dispatcher) is Easy and dispatcher.backfilling and not dispatcher.shortest_first

    def _walks_what_fits(self) -> bool:
        """Whether the dispatcher is EASY (backfilling in queue order) or list scheduling:
        passes that start jobs that fit the free machines, in queue order, and pass over the
        others (what :meth:`_wfp_pass_queue` relies on)."""
        dispatcher = self.dispatcher
        if type(dispatcher) is ListScheduling:
            return True
        return type(dispatcher) is Easy and not dispatcher.shortest_first

    def _nothing_fits(self) -> bool:
        """Whether every waiting job needs more machines than are free, under EASY or list
        scheduling: then the pass starts nothing whatever the order, and a dynamic order's pass
        (the queue sorted again, then walked whole) is skipped: a quarter of a WFP replay's
        passes, with the longest queues. The reservation such a pass would make is not made:
        :attr:`last_reservation` is ``None`` (the audit, which records them, never skips)."""
        dispatcher = type(self.dispatcher)
        if dispatcher is not Easy and dispatcher is not ListScheduling:
            return False
        count = self.free.count
        if self._wfp is not None:  # WFP with a long queue: the smallest job, from the sizes
            return not self._res_values or self._res_values[0] > count
        return all(entry.res > count for entry in self.waiting.values())

    def _in_order(self, fresh: list[WaitingJob] | None, now: float) -> list[WaitingJob] | None:
        """The entries queued since the last pass in the order the queue holds them, or
        ``None`` when that order is not theirs by key alone (a dynamic policy, or one of them
        starving and so moved ahead) and the dispatcher must walk the whole queue."""
        if fresh is None or self.policy.dynamic:
            return None
        threshold = self.starvation_threshold
        if threshold is not None and any(now - entry.subtime > threshold for entry in fresh):
            return None
        if len(fresh) > 1:
            fresh.sort(key=_key)
        return fresh

    def _head_starving(self, queue: list[WaitingJob], now: float) -> bool:
        threshold = self.starvation_threshold
        return bool(queue) and threshold is not None and now - queue[0].subtime > threshold

    def correct_estimates(self, now: float) -> bool:
        """Extend the estimate of every running job expected to end within the correction
        margin of ``now`` (see :mod:`batsched_ml.scheduler.correction`); whether one was."""
        assert self.correction is not None
        due = now + MARGIN
        if not self._ends or self._ends[0][0] > due:
            return False
        corrected = False
        for running in self.running.values():
            if running.start + running.est > due:
                continue
            est, count = self.correction.correct(
                running.est, now - running.start, running.corrections, running.job.walltime
            )
            if est == running.est:
                continue
            self._drop_end(running.end_entry)
            running.est, running.corrections = est, count
            running.end_entry = (running.start + est, running.end_entry[1], running.end_entry[2])
            insort(self._ends, running.end_entry)
            corrected = True
        return corrected

    def start(self, entry: WaitingJob, alloc: Runs, now: float) -> list[Event]:
        """Move ``entry`` from the queue to the running set on ``alloc``, machines the
        dispatcher has already taken from :attr:`free`; the decisions that start it."""
        del self.waiting[entry.job.id]
        self._backdated.pop(entry.job.id, None)
        if self._wfp is not None:
            self._wfp_remove(entry)
        if self._kept:
            self._drop_kept(entry)
        elif not self.policy.dynamic:
            sorted_queue = self._sorted
            del sorted_queue[bisect_left(sorted_queue, entry.key, key=_key)]
        if self._policy_started is not None:
            self._policy_started(entry, now)
        running = RunningJob(job=entry.job, start=now, est=entry.est, alloc=alloc, entry=entry)
        running.end_entry = (now + entry.est, entry.seq, entry.res)
        insort(self._ends, running.end_entry)
        self.running[entry.job.id] = running
        decisions: list[Event] = [ExecuteJob(now, entry.job.id, procset_of_runs(alloc))]
        for hook in self._hooks["on_started"]:
            decisions.extend(hook(entry, running, now))
        return decisions

    def _drop_kept(self, entry: WaitingJob) -> None:
        """Take a starting job out of the kept queue: among the starving jobs if it was
        starving when they were counted, else (or if queued since) by its key. (It stays in
        ``_young`` until its turn comes, then is passed over.)"""
        queue = self._sorted
        count = self._starving_count
        if count and self._kept_now - entry.subtime > self._kept_threshold:
            # the first starving job (the usual start) is where the bisection would find it
            at = (
                0
                if queue[0] is entry
                else bisect_left(queue, _starving_key(entry), 0, count, key=_starving_key)
            )
            if at < count and queue[at] is entry:
                del queue[at]
                self._starving_count = count - 1
                if self._blocks is not None:
                    self._blocks.start = count - 1
                return
        if count < len(queue) and queue[count] is entry:  # the first by key (FCFS's head)
            at = count
        else:
            at = bisect_left(queue, entry.key, count, key=_key)
        del queue[at]
        if self._blocks is not None:
            self._blocks.remove(at - count, entry)
            self._few_blocked()

    def _few_blocked(self) -> None:
        """Leave the blocks when the kept queue has grown short (see :attr:`blocks_below`)."""
        assert self._blocks is not None
        if len(self._blocks) < self.blocks_below:
            self._blocks = None

    # --- introspection --------------------------------------------------------------------

    def check_consistency(self) -> None:
        """Assert the internal invariants (used by tests)."""
        used = 0
        for running in self.running.values():
            mask = mask_of(running.alloc)
            assert not used & mask, "two running jobs share a machine"
            used |= mask
        free = mask_of(self.free.runs())
        assert self.free.count == free.bit_count(), "the free machines are miscounted"
        assert used & free == 0, "a machine is both free and in use"
        assert used | free == (1 << self.nb_machines) - 1, "a machine went missing"
        assert len(self._ends) == len(self.running)
        blocks = self._blocks
        if blocks is not None:
            assert self._kept, "blocks of a queue not kept"
            assert blocks.start == self._starving_count, "the blocks start elsewhere"
            assert blocks.jobs() == self._sorted[blocks.start :], "the blocks are not the queue"
            assert len(blocks) == len(self._sorted) - blocks.start
            for b, block in enumerate(blocks.blocks):
                assert 0 < len(block) <= 2 * blocks.size, "a block of the wrong size"
                sizes = [job.res for job in block]
                estimates = [job.est for job in block]
                assert blocks.least_res[b] == min(sizes)
                assert blocks.least_est[b] == min(estimates)
                assert blocks.ties_res[b] == sizes.count(min(sizes))
                assert blocks.ties_est[b] == estimates.count(min(estimates))


class EasyScheduler(BatchScheduler):
    """A convenience constructor with the flags of old: EASY (``backfilling=False``: list
    scheduling), PRB's allocation (``greedy``) or CPH (``planner``) over ``policy``, with
    ``predictor`` (default: the requested time). Anything else is :class:`BatchScheduler`'s."""

    def __init__(
        self,
        policy: Any = "fcfs",
        predictor: Predictor | None = None,
        *,
        starvation_threshold: float | None = DEFAULT_STARVATION_THRESHOLD,
        backfilling: bool = True,
        audit: bool = False,
        correction: Correction | None = None,
        greedy: bool = False,
        planner: ConstraintPlanner | None = None,
        components: Iterable[Component] = (),
    ) -> None:
        predictor = predictor if predictor is not None else RequestedTime()
        easy = Easy(
            backfilling=backfilling,
            shortest_first=getattr(predictor, "backfill_shortest_first", False),
        )
        dispatcher: Dispatcher = easy
        if planner is not None:
            dispatcher = Planned(planner, easy)
        elif greedy:
            dispatcher = Greedy(easy)
        super().__init__(
            policy,
            predictor,
            dispatcher,
            starvation_threshold=starvation_threshold,
            correction=correction,
            components=components,
            audit=audit,
        )
