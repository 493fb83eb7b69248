"""SimGrid 3.32's kernel, reduced to what Batsim 4.2.1 asks of it on the exact platform.

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
  clock. An answered simcall (``simcall_answered``: starting a communication, creating or killing
  an actor) costs its issuer one sub-round; a blocking one (sleep, wait) resumes it when its
  activity ends.
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

The kernel is pure: actors are generators that yield simcalls (tuples below); an actor may also
yield ``(EXCHANGE, message)`` to hand a message to the outside world (the REQ-REP actor's ZeroMQ
exchange, which takes no simulated time), which :meth:`Kernel.run` yields to its caller.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

SLEEP, PUT, GET, WAIT, CREATE, KILL, EXCHANGE = range(7)

NO_MAX_DURATION = -1.0
TIMING_PRECISION = 1e-9  # sg_surf_precision ("surf/precision")
WORK_PRECISION = 1e-5 * 1e-9  # sg_maxmin_precision * sg_surf_precision
COMM_RATE = 1e12  # a 1-byte message over 1 TBps links: the ptask's rate (fraction per second)
# A step shorter than half an ulp of 2**14 (2**-39 s) leaves every duration above 2**14 unchanged
# (``fl(m - step) == m``): a transfer's 1e-12 s step only touches the shorter sleeps. Strictly
# above: 2**14 itself goes down into the finer binade below (16384 - 1e-12 -> 16384 - 2**-39).
_UNMOVED_FROM = 16384.0
_TINY_STEP = 2.0**-39

Simcall = tuple[Any, ...]
ActorCode = Generator[Simcall, Any, None]


class KernelError(RuntimeError):
    """The emulation met a situation real SimGrid handles and this kernel does not model."""


class Actor:
    """A SimGrid actor: a generator of simcalls, the answer to its last one, its pending call.

    ``preset`` is the simcall the actor is known to issue next without running its code: after
    starting a put or a get, Batsim's actors always wait for it (``Mailbox::put``/``get`` are
    ``start()->wait()``), so the kernel issues that wait itself, in the same sub-round the actor
    would have, and skips resuming the generator.
    """

    __slots__ = ("answer", "call", "dead", "gen", "name", "preset", "sleep")

    def __init__(self, name: str, gen: ActorCode) -> None:
        self.name = name
        self.gen = gen
        self.answer: Any = None
        self.call: Simcall | None = None
        self.preset: Simcall | None = None
        self.dead = False
        self.sleep: Sleep | None = None


class Comm:
    """A mailbox communication: a send and a receive, matched or waiting for their peer."""

    __slots__ = ("done", "is_send", "key", "payload", "remains", "waiting")

    def __init__(self, is_send: bool, payload: Any = None) -> None:
        self.is_send = is_send
        self.payload = payload
        self.done = False
        self.waiting: list[Actor] = []
        self.key = -1
        self.remains = 1.0  # the ptask's cost is 1: it ends when 1 byte has crossed


class Sleep:
    """A sleep action: its remaining ``max_duration`` and the actor waiting for it."""

    __slots__ = ("actor", "key", "m")

    def __init__(self, key: int, m: float, actor: Actor) -> None:
        self.key = key
        self.m = m
        self.actor = actor


class Kernel:
    """The scheduling rounds, the clock and the actions; see the module's design note.

    Sleeps live in two dicts, in creation order: ``_long`` (remaining > 2**14, which a
    transfer's step cannot move) and ``_short``. ``_low`` is the sleep with the smallest
    remaining duration: every sleep loses the same steps and rounding is monotonic, so the
    order between two sleeps never changes and the lowest one stays lowest until it ends.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.to_run: list[Actor] = []
        self.mailboxes: dict[str, deque[Comm]] = {}
        self._short: dict[int, Sleep] = {}
        self._long: dict[int, Sleep] = {}
        self._low: Sleep | None = None
        self._comm: Comm | None = None  # the transfer under way (Batsim has one receiver)
        self._keys = 0
        self.steps = 0

    # --- actors -----------------------------------------------------------------------

    def spawn(self, name: str, gen: ActorCode) -> Actor:
        """Create an actor ready to run (``ActorImpl::start``: appended to the run list)."""
        actor = Actor(name, gen)
        self.to_run.append(actor)
        return actor

    # --- the main loop ----------------------------------------------------------------

    def run(self) -> Generator[Any, Any, None]:
        """Run to the end; yield each message an actor hands out and resume it with the reply."""
        handle = self._handle
        while True:
            while self.to_run:
                ran = self.to_run
                self.to_run = []
                for actor in ran:
                    if actor.preset is not None:
                        actor.call = actor.preset
                        actor.preset = None
                        continue
                    try:
                        call = actor.gen.send(actor.answer)
                        while call[0] == EXCHANGE:
                            reply = yield call[1]
                            call = actor.gen.send(reply)
                    except StopIteration:
                        actor.dead = True
                        actor.call = None
                        continue
                    actor.call = call
                for actor in ran:
                    if actor.call is not None:
                        handle(actor)
            if not self.solve():
                return

    def _handle(self, actor: Actor) -> None:
        call = actor.call
        assert call is not None
        actor.call = None
        kind = call[0]
        if kind == WAIT:
            comm = call[1]
            if comm.done:
                actor.answer = comm.payload
                self.to_run.append(actor)
            else:
                comm.waiting.append(actor)
        elif kind == SLEEP:
            # s4u::this_actor::sleep_for: a no-op for durations <= 0 (the caller checks).
            self._sleep(actor, call[1])
        elif kind in (PUT, GET):
            is_send = kind == PUT
            box = self.mailboxes.get(call[1])
            if box is None:
                box = self.mailboxes[call[1]] = deque()
            peer = None
            for pending in box:
                if pending.is_send != is_send:
                    peer = pending
                    break
            if peer is None:
                comm = Comm(is_send, call[2] if is_send else None)
                box.append(comm)
            else:
                box.remove(peer)
                comm = peer
                if is_send:
                    comm.payload = call[2]
                self._start(comm)
            # answered: the actor's next simcall, next sub-round, is the wait
            actor.preset = (WAIT, comm)
            self.to_run.append(actor)
        elif kind == CREATE:
            new = self.spawn(call[1], call[2])
            actor.answer = new
            self.to_run.append(actor)
        elif kind == KILL:
            victim: Actor = call[1]
            if not victim.dead:
                victim.dead = True
                if victim.sleep is not None:
                    self._cancel(victim.sleep)
                    victim.sleep = None
                victim.gen.close()
            actor.answer = None
            self.to_run.append(actor)
        else:  # pragma: no cover - a bug in an actor
            raise KernelError(f"unknown simcall {call!r} from {actor.name}")

    def _sleep(self, actor: Actor, duration: float) -> None:
        key = self._keys
        self._keys = key + 1
        duration = float(duration)
        sleep = Sleep(key, duration, actor)
        actor.sleep = sleep
        if duration > _UNMOVED_FROM:
            self._long[key] = sleep
        else:
            self._short[key] = sleep
        low = self._low
        if low is None or duration < low.m:
            self._low = sleep

    def _cancel(self, sleep: Sleep) -> None:
        self._short.pop(sleep.key, None)
        self._long.pop(sleep.key, None)
        if self._low is sleep:
            self._low = self._lowest()

    def _lowest(self) -> Sleep | None:
        low = None
        for group in (self._short, self._long):
            for sleep in group.values():
                if low is None or sleep.m < low.m:
                    low = sleep
        return low

    def _start(self, comm: Comm) -> None:
        if self._comm is not None:
            raise KernelError("two transfers at once: bandwidth sharing is not modelled")
        comm.key = self._keys
        self._keys += 1
        self._comm = comm

    # --- time ---------------------------------------------------------------------------

    def solve(self) -> bool:
        """One step of the clock; False when nothing can happen any more."""
        comm = self._comm
        low = self._low
        step = -1.0
        if comm is not None:
            step = comm.remains / COMM_RATE if comm.remains > 0 else 0.0
            if low is not None and low.m < step:
                step = low.m
        elif low is not None:
            step = low.m
        else:
            return False
        self.steps += 1
        self.now += step
        ended: list[Any] = []
        if comm is not None:
            remains = comm.remains - COMM_RATE * step
            if remains < WORK_PRECISION:
                ended.append(comm)
                self._comm = None
            else:
                comm.remains = remains
        if low is not None:
            precision = TIMING_PRECISION
            done = 0
            short = self._short
            for sleep in short.values():
                m = sleep.m - step
                if m < precision:
                    ended.append(sleep)
                    done += 1
                else:
                    sleep.m = m
            if step >= _TINY_STEP:
                long = self._long
                moved = []
                for sleep in long.values():
                    m = sleep.m - step
                    if m <= _UNMOVED_FROM:
                        moved.append(sleep)
                        if m < precision:
                            ended.append(sleep)
                            done += 1
                            m = 0.0
                    sleep.m = m
                for sleep in moved:
                    del long[sleep.key]
                    if sleep.m >= precision:
                        short[sleep.key] = sleep
            if done:
                lost = False
                for action in ended:
                    if type(action) is Sleep:
                        short.pop(action.key, None)
                        action.m = 0.0
                        lost = lost or action is low
                if lost:
                    self._low = self._lowest()
        if len(ended) > 1:
            ended.sort(key=_key)  # handle_ended_actions: in the order actions were created
        to_run = self.to_run
        for action in ended:
            if type(action) is Comm:
                action.done = True
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
