"""SimGrid 3.32's kernel, reduced to what Batsim 4.2.1 asks of it on the exact platform (and on a
platform with link latencies, with routes).

Real Batsim is a set of SimGrid actors (the job submitter, the server, one "REQ-REP" actor per
message to the scheduler, one actor per running job, waiters and killers) that talk through a
mailbox. SimGrid's clock is a ``double`` advanced by floating-point steps, so the protocol's
times, which Batsim prints with six decimals, are not always on the integers they show; this
module reproduces that arithmetic so that the embedded simulator groups and orders events as real
Batsim does (``shared/batsim-reference/clock_drift``). Design note, each piece with the SimGrid
rule it mirrors (sources: SimGrid tag v3.32):

* **Scheduling rounds** (``EngineImpl::run``): the actors ready to run run one after the other,
  each until its next simcall; then the simcalls are handled in that same order; the actors they
  answer run in the next sub-round. When no actor is ready, :meth:`Kernel.solve` advances the
  clock. An answered simcall (``simcall_answered``: creating or killing an actor) costs its
  issuer one sub-round; a blocking one (sleep, wait) resumes it when its activity ends. A put or
  a get (``start()->wait()``) is one simcall here: the kernel registers the wait itself (see
  :meth:`Kernel.run` for why the order is the same).
* **Actions and the clock** (``EngineImpl::solve``, ``Model::next_occurring_event_full``,
  ``HostL07Model::update_actions_state``): the step is the smallest of every sleep's remaining
  ``max_duration`` and every communication's ``remains / rate``; ``now += step``; then, in the
  order the actions were created, each sleep's ``max_duration -= step`` and each
  communication's ``remains -= rate * step``, set to 0 below the precision (``double_update``:
  ``surf/precision`` 1e-9 for durations, 1e-9 x 1e-5 for work); an action at 0 ends, and the
  actors waiting on ended actions wake in that order (``handle_ended_actions``).
* **Sleeps** (``CpuL07::sleep``, ``s4u::this_actor::sleep_for``): a sleep is an action with
  ``max_duration`` = the duration and no work; a duration <= 0 does nothing; one below 1e-9 still
  sleeps (SimGrid only warns), which is how Batsim's submitter ends up splitting a burst.
* **Communications** (``Mailbox::put``/``get``, ``CommImpl::isend``/``irecv``/``finish``): a put
  or a get first looks in the mailbox for the first pending opposite request; if found the two
  match and the transfer starts, else the request waits in the mailbox (FIFO). The transfer is a
  ptask of 1 byte (``ipp.cpp``'s message size) over links of 1 TBps and latency 0, so its rate is
  1e12 and it lasts ``1.0 / 1e12`` s whatever the route. When it ends, the actors waiting on it
  wake in the order they started waiting. Batsim has a single receiver (the server), so at most
  one transfer runs at a time (checked).
* **Links with latencies** (``L07Action``, ``HostL07Model::next_occurring_event`` and
  ``update_actions_state``; Batsim runs ``host/model:ptask_L07``, whose network model has no
  latency or bandwidth factor): given a ``route`` (:class:`Kernel`'s argument), a transfer from
  the sender's host to the receiver's has the route's ``latency`` (its links' latencies summed in
  SimGrid's route order) and ``rate`` (its narrowest link's bandwidth: 1 byte, cost 1). Its
  variable is disabled (rate 0) while latency is left: the step is also bounded by the latency
  left; each step takes ``latency - step`` off it (0 below ``surf/precision``, or when the step
  is not shorter), and the remains do not move. From the next step on, it runs at ``rate`` as
  above: a message sent at ``t`` on an idle kernel arrives at ``(t + latency) + 1 / rate``.
  Every actor runs on the master host (``host`` None) but a job's, which runs on the first host
  of its allocation (the fourth element of its ``CREATE``). Recorded: ``fcfs_small_latency`` of
  both reference folders (see :mod:`batsched_ml.workload.platform` for the routes).

The kernel is pure: actors are generators that yield simcalls (tuples below); an actor may also
yield ``(EXCHANGE, message)`` to hand a message to the outside world (the REQ-REP actor's ZeroMQ
exchange, which takes no simulated time), which :meth:`Kernel.run` yields to its caller.

**Two implementations.** :class:`Kernel` below is the reference. ``_ckernel.c`` is the same
kernel compiled (built from source at install, optional: :func:`kernel_class` falls back to
this one without it, or with ``BATSCHED_ML_KERNEL=python``): on the full HPC2N replay the
kernel is 1.29 million clock steps and 2.8 million simcalls, whose bookkeeping (the sub-rounds,
the mailbox, each sleep's ``m - step`` at each step) is most of the simulator's time in Python.
It keeps every rule above with the same double operations in the same order, so the clock and
every remaining duration are the same bits: ``now += step``, ``m - step`` for every sleep (all
of them, SimGrid's own loop: the Python kernel skips the durations above 2**14 s on a step
below 2**-39 s only because the subtraction leaves them unchanged), ``remains - rate * step``
compiled with ``-ffp-contract=off`` (no fused multiply-add, whose single rounding would
differ), the same comparisons with the same precisions, ties of equal durations broken the same
way (``bisect_right``, then creation order). The actors stay Python generators, resumed with
``PyIter_Send``. The tests run every recording, the property tests, random actor programs
(against the plain kernel too) and the whole ``ctc_sp2_full`` transcript with both kernels; a
build made from another ``_ckernel.c`` (an editable install not rebuilt) is not used.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Generator
from itertools import count
from pathlib import Path
from typing import Any, cast

import numpy as np

from batsched_ml import compiled

SLEEP, PUT, GET, CREATE, KILL, EXCHANGE = range(6)

NO_MAX_DURATION = -1.0
TIMING_PRECISION = 1e-9  # sg_surf_precision ("surf/precision")
WORK_PRECISION = 1e-5 * 1e-9  # sg_maxmin_precision * sg_surf_precision
COMM_RATE = 1e12  # a 1-byte message over 1 TBps links: the ptask's rate (fraction per second)
# A step shorter than half an ulp of 2**14 (2**-39 s) leaves every duration above 2**14 unchanged
# (``fl(m - step) == m``): a transfer's 1e-12 s step only touches the shorter sleeps. Strictly
# above: 2**14 itself goes down into the finer binade below (16384 - 1e-12 -> 16384 - 2**-39).
_UNMOVED_FROM = 16384.0
_TINY_STEP = 2.0**-39
# From this many pending sleeps their durations are a numpy array, below half of it a list
# (Kernel's docstring): thresholds of speed only, the arithmetic is the same either way.
ARRAY_FROM = 256

Simcall = tuple[Any, ...]
ActorCode = Generator[Simcall, Any, None]
#: a transfer's (latency, rate) from the sender's host to the receiver's (None: the master host)
Route = Callable[[str | None, str | None], tuple[float, float]]


class KernelError(RuntimeError):
    """The emulation met a situation real SimGrid handles and this kernel does not model."""


class Actor:
    """A SimGrid actor: a generator of simcalls, the answer to its last one, its pending call."""

    __slots__ = ("answer", "call", "dead", "gen", "host", "name", "sleep")

    def __init__(self, name: str, gen: ActorCode, host: str | None = None) -> None:
        self.name = name
        self.host = host  # None: the master host, where Batsim runs all its actors but jobs
        self.gen = gen
        self.answer: Any = None
        self.call: Simcall | None = None
        self.dead = False
        self.sleep: Sleep | None = None


def _ended() -> ActorCode:
    return
    yield  # a generator function


# What a dead actor's code becomes: resuming it (a killed actor whose communication ends) stops
# at once, and its own generator, frame and answer are freed instead of kept by whoever still
# refers to the actor.
_DEAD = _ended()
next(_DEAD, None)


class Comm:
    """A mailbox communication: a send and a receive, matched or waiting for their peer."""

    __slots__ = (
        "done",
        "dst",
        "is_send",
        "key",
        "latency",
        "payload",
        "rate",
        "remains",
        "src",
        "waiting",
    )

    def __init__(self, is_send: bool, payload: Any = None) -> None:
        self.is_send = is_send
        self.src: str | None = None  # the sender's host and the receiver's (None: master)
        self.dst: str | None = None
        self.latency = 0.0  # latency left to pay before the byte moves
        self.rate = COMM_RATE
        self.payload = payload
        self.done = False
        self.waiting: list[Actor] = []
        self.key = -1
        self.remains = 1.0  # the ptask's cost is 1: it ends when 1 byte has crossed


class Sleep:
    """A sleep action: its creation key and the actor waiting for it. Its remaining
    ``max_duration`` lives in the kernel's sorted list (:meth:`Kernel.remaining`)."""

    __slots__ = ("actor", "key")

    def __init__(self, key: int, actor: Actor) -> None:
        self.key = key
        self.actor = actor


class Kernel:
    """The scheduling rounds, the clock and the actions; see the module's design note.

    The sleeps are two parallel lists sorted by remaining duration, lowest first: ``_ms``,
    the remaining durations as plain floats, and ``_sleeps``, the sleep actions. Every sleep
    loses the same steps and rounding is monotonic (``fl(a - s) <= fl(b - s)`` when ``a <=
    b``), so the order between two sleeps never changes: the lists stay sorted without being
    sorted again, the first is the lowest, and the sleeps a step ends (those left below the
    precision) are a prefix. A step is one list comprehension over ``_ms`` (the same
    ``m - step`` as ``double_update``, in C's loop instead of an attribute update per sleep);
    a step shorter than 2**-39 s (a transfer's 1e-12 s) leaves every duration above 2**14 s
    unchanged (``fl(m - step) == m``: less than half their ulp), so it only goes over the
    prefix at or below 2**14.

    With many jobs running (hundreds of sleeps at every step on RICC), ``_ms`` is a float64
    numpy array from :data:`ARRAY_FROM` pending sleeps until fewer than half as many remain: a
    step is then ``ms -= step`` in place, the same IEEE subtraction of every duration, and the
    sorted searches are ``searchsorted`` (``side="right"`` is ``bisect_right``). Below it, a
    list costs less than numpy's calls.
    """

    def __init__(self, route: Route | None = None) -> None:
        """``route``: a transfer's latency and rate from the sender's host to the receiver's;
        None: the exact platform's (0 and 1e12 for every route)."""
        self._route = route
        self.now = 0.0
        self.to_run: list[Actor] = []
        self.mailboxes: dict[str, deque[Comm]] = {}
        self._ms: list[float] | np.ndarray = []  # a numpy array from ARRAY_FROM sleeps
        self._sleeps: list[Sleep] = []
        self._comm: Comm | None = None  # the transfer under way (Batsim has one receiver)
        self._keys = count()
        self.steps = 0

    # --- actors -----------------------------------------------------------------------

    def spawn(self, name: str, gen: ActorCode) -> Actor:
        """Create an actor ready to run (``ActorImpl::start``: appended to the run list)."""
        actor = Actor(name, gen)
        self.to_run.append(actor)
        return actor

    # --- the main loop ----------------------------------------------------------------

    def run(self) -> Generator[Any, Any, None]:
        """Run to the end; yield each message an actor hands out and resume it with the reply.

        A put or a get is ``start()->wait()`` in Batsim's actors: the wait, the actor's next
        simcall, would be handled in the next sub-round, before any step of the clock (the
        actor is ready to run), and only registers the actor on the communication. The kernel
        registers it when it handles the put or the get instead: the actors registered on a
        communication are then in the same order (the order their puts and gets were
        handled), the communication cannot have ended in between, and the actor wakes with
        the payload when it ends, as after the wait.

        A mailbox's pending requests are all of one direction (a request that finds an
        opposite one matches it), so only its first needs looking at.
        """
        mailboxes = self.mailboxes
        solve = self.solve
        sleep = self._sleep
        while True:
            ran = self.to_run
            while ran:
                self.to_run = to_run = []
                calls = []
                for actor in ran:
                    try:
                        call = actor.gen.send(actor.answer)
                        while call[0] == EXCHANGE:
                            reply = yield call[1]
                            call = actor.gen.send(reply)
                    except StopIteration:
                        actor.dead = True
                        actor.gen = _DEAD
                        actor.answer = None
                        continue
                    calls.append((actor, call))
                for actor, call in calls:
                    kind = call[0]
                    if kind == PUT:
                        box = mailboxes.get(call[1])
                        if box is None:
                            box = mailboxes[call[1]] = deque()
                        if box and not box[0].is_send:
                            comm = box.popleft()
                            comm.payload = call[2]
                            comm.src = actor.host
                            self._start(comm)
                        else:
                            comm = Comm(True, call[2])
                            comm.src = actor.host
                            box.append(comm)
                        comm.waiting.append(actor)
                    elif kind == GET:
                        box = mailboxes.get(call[1])
                        if box is None:
                            box = mailboxes[call[1]] = deque()
                        if box and box[0].is_send:
                            comm = box.popleft()
                            comm.dst = actor.host
                            self._start(comm)
                        else:
                            comm = Comm(False)
                            comm.dst = actor.host
                            box.append(comm)
                        comm.waiting.append(actor)
                    elif kind == SLEEP:
                        # s4u::this_actor::sleep_for: a no-op for durations <= 0 (the caller
                        # checks).
                        sleep(actor, call[1])
                    elif kind == CREATE:
                        new = Actor(call[1], call[2], call[3] if len(call) > 3 else None)
                        to_run.append(new)  # ActorImpl::start: appended to the run list
                        actor.answer = new
                        to_run.append(actor)
                    elif kind == KILL:
                        victim: Actor = call[1]
                        if not victim.dead:
                            victim.dead = True
                            if victim.sleep is not None:
                                self._cancel(victim.sleep)
                                victim.sleep = None
                            victim.gen.close()
                            victim.gen = _DEAD
                            victim.answer = None
                        actor.answer = None
                        to_run.append(actor)
                    else:  # pragma: no cover - a bug in an actor
                        raise KernelError(f"unknown simcall {call!r} from {actor.name}")
                ran = to_run
            if not solve():
                return

    def _sleep(self, actor: Actor, duration: float) -> None:
        duration = float(duration)
        sleep = Sleep(next(self._keys), actor)
        actor.sleep = sleep
        ms = self._ms
        # after the equal ones: equal durations end in the same step, ordered by key there
        if isinstance(ms, list):
            index = bisect_right(ms, duration)
            ms.insert(index, duration)
            if len(ms) >= ARRAY_FROM:
                self._ms = np.array(ms, dtype=np.float64)
        else:
            index = int(ms.searchsorted(duration, side="right"))
            self._ms = np.insert(ms, index, duration)
        self._sleeps.insert(index, sleep)

    def _cancel(self, sleep: Sleep) -> None:
        index = self._sleeps.index(sleep)
        del self._sleeps[index]
        ms = self._ms
        if isinstance(ms, list):
            del ms[index]
        else:
            self._as_list_if_few(np.delete(ms, index))

    def _as_list_if_few(self, ms: np.ndarray) -> None:
        """Keep ``ms`` as the durations, a list again below half of :data:`ARRAY_FROM`."""
        self._ms = ms.tolist() if len(ms) < ARRAY_FROM // 2 else ms

    def has_pending(self, name: str) -> bool:
        """Whether the mailbox ``name`` holds requests not yet matched."""
        return bool(self.mailboxes.get(name))

    def remaining(self, sleep: Sleep) -> float:
        """A pending sleep's remaining ``max_duration``."""
        return float(self._ms[self._sleeps.index(sleep)])

    def _start(self, comm: Comm) -> None:
        if self._comm is not None:
            raise KernelError("two transfers at once: bandwidth sharing is not modelled")
        comm.key = next(self._keys)
        if self._route is not None:
            comm.latency, comm.rate = self._route(comm.src, comm.dst)
        self._comm = comm

    # --- time ---------------------------------------------------------------------------

    def solve(self) -> bool:
        """One step of the clock; False when nothing can happen any more."""
        comm = self._comm
        ms = self._ms
        pending = len(ms)
        if comm is not None:
            latency = comm.latency
            if latency > 0.0:  # no rate yet: the latency left bounds the step
                step = latency
            else:
                remains = comm.remains
                step = remains / comm.rate if remains > 0 else 0.0
            if pending and ms[0] < step:
                step = float(ms[0])  # (a Python float, from the array too)
        elif pending:
            step = float(ms[0])
        else:
            return False
        self.steps += 1
        self.now += step
        to_run = self.to_run
        ended: list[Any] | None = None
        if pending and type(ms) is list:
            if step >= _TINY_STEP:
                ms[:] = [m - step for m in ms]
            else:
                # durations above 2**14 are unchanged: only the prefix at or below it moves
                moved = bisect_right(ms, _UNMOVED_FROM)
                if moved == len(ms):
                    ms[:] = [m - step for m in ms]
                elif moved:
                    ms[:moved] = [m - step for m in ms[:moved]]
            if ms[0] < TIMING_PRECISION:
                # the sleeps this step ends: a prefix of the order
                done = 1
                while done < pending and ms[done] < TIMING_PRECISION:
                    done += 1
                sleeps = self._sleeps
                ended = sleeps[:done]
                del ms[:done]
                del sleeps[:done]
        elif pending:  # the same steps on the array (ARRAY_FROM sleeps or more)
            assert isinstance(ms, np.ndarray)
            if step >= _TINY_STEP:
                ms -= step
            else:
                moved = int(ms.searchsorted(_UNMOVED_FROM, side="right"))
                if moved:
                    ms[:moved] -= step
            if ms[0] < TIMING_PRECISION:
                done = int(ms.searchsorted(TIMING_PRECISION, side="left"))  # those below it
                sleeps = self._sleeps
                ended = sleeps[:done]
                del sleeps[:done]
                self._as_list_if_few(ms[done:])
        if comm is not None and latency > 0.0:
            # update_latency (double_update) or set_latency(0); the rate was 0 over this step
            if latency > step:
                latency -= step
                comm.latency = latency if latency >= TIMING_PRECISION else 0.0
            else:
                comm.latency = 0.0
        elif comm is not None:
            remains = comm.remains - comm.rate * step
            if remains < WORK_PRECISION:
                self._comm = None
                comm.done = True
                if ended is None:  # the common step: a transfer ends, and nothing else
                    payload = comm.payload
                    for waiting in comm.waiting:
                        waiting.answer = payload
                        to_run.append(waiting)
                    comm.waiting = []
                    return True
                ended.append(comm)
            else:
                comm.remains = remains
        if ended is None:
            return True
        if len(ended) > 1:
            ended.sort(key=_key)  # handle_ended_actions: in the order actions were created
        for action in ended:
            if type(action) is Comm:
                payload = action.payload
                for waiting in action.waiting:
                    waiting.answer = payload
                    to_run.append(waiting)
                action.waiting = []
            else:
                actor = action.actor
                actor.sleep = None
                actor.answer = None
                to_run.append(actor)
        return True


def _key(action: Sleep | Comm) -> int:
    return action.key


KERNEL_VARIABLE = compiled.VARIABLE


def kernel_class() -> type[Kernel]:
    """The kernel the simulator runs on the exact platform: the compiled one (``_ckernel``,
    built from ``_ckernel.c`` at install, which takes no routes) when it is there, else this
    module's :class:`Kernel`; ``BATSCHED_ML_KERNEL=python`` forces this module's
    (:mod:`batsched_ml.compiled`). Both give the same results (the tests run both on every
    recording of the exact platform)."""
    module = compiled.compiled_module(
        "batsched_ml.sim._ckernel", Path(__file__).with_name("_ckernel.c")
    )
    return Kernel if module is None else cast(type[Kernel], module.Kernel)
