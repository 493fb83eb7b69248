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

SLEEP, ISEND, IRECV, WAIT, CREATE, KILL, EXCHANGE = range(7)

NO_MAX_DURATION = -1.0
TIMING_PRECISION = 1e-9  # sg_surf_precision ("surf/precision")
WORK_PRECISION = 1e-5 * 1e-9  # sg_maxmin_precision * sg_surf_precision
COMM_RATE = 1e12  # a 1-byte message over 1 TBps links: the ptask's rate (fraction per second)

Simcall = tuple[Any, ...]
ActorCode = Generator[Simcall, Any, None]


class KernelError(RuntimeError):
    """The emulation met a situation real SimGrid handles and this kernel does not model."""


class Actor:
    """A SimGrid actor: a generator of simcalls, the answer to its last one, its pending call."""

    __slots__ = ("answer", "call", "dead", "gen", "name", "sleep")

    def __init__(self, name: str, gen: ActorCode) -> None:
        self.name = name
        self.gen = gen
        self.answer: Any = None
        self.call: Simcall | None = None
        self.dead = False
        self.sleep: Action | None = None


class Comm:
    """A mailbox communication: a send and a receive, matched or waiting for their peer."""

    __slots__ = ("done", "is_send", "payload", "waiting")

    def __init__(self, is_send: bool, payload: Any = None) -> None:
        self.is_send = is_send
        self.payload = payload
        self.done = False
        self.waiting: list[Actor] = []


class Action:
    """A model action: a sleep (``max_duration``) or a transfer (``remains`` at ``rate``)."""

    __slots__ = ("comm", "key", "max_duration", "rate", "remains", "sleeper")

    def __init__(
        self, key: int, max_duration: float, rate: float, sleeper: Actor | None, comm: Comm | None
    ) -> None:
        self.key = key
        self.max_duration = max_duration
        self.remains = 1.0
        self.rate = rate
        self.sleeper = sleeper
        self.comm = comm


class Kernel:
    """The scheduling rounds, the clock and the actions; see the module's design note."""

    def __init__(self) -> None:
        self.now = 0.0
        self.to_run: list[Actor] = []
        self.actions: dict[int, Action] = {}  # insertion order = creation order (started set)
        self.mailboxes: dict[str, deque[Comm]] = {}
        self._keys = 0
        self._comms = 0  # transfers under way
        self.steps = 0

    # --- actors -----------------------------------------------------------------------

    def spawn(self, name: str, gen: ActorCode) -> Actor:
        """Create an actor ready to run (``ActorImpl::start``: appended to the run list)."""
        actor = Actor(name, gen)
        self.to_run.append(actor)
        return actor

    def _answer(self, actor: Actor, value: Any = None) -> None:
        actor.answer = value
        self.to_run.append(actor)

    # --- the main loop ----------------------------------------------------------------

    def run(self) -> Generator[Any, Any, None]:
        """Run to the end; yield each message an actor hands out and resume it with the reply."""
        while True:
            while self.to_run:
                ran = self.to_run
                self.to_run = []
                for actor in ran:
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
                        self._handle(actor)
            if not self.solve():
                return

    def _handle(self, actor: Actor) -> None:
        call = actor.call
        assert call is not None
        actor.call = None
        kind = call[0]
        if kind == SLEEP:
            # s4u::this_actor::sleep_for: a no-op for durations <= 0 (the caller checks).
            actor.sleep = self._add(call[1], 0.0, actor, None)
        elif kind in (ISEND, IRECV):
            is_send = kind == ISEND
            box = self.mailboxes.setdefault(call[1], deque())
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
            self._answer(actor, comm)
        elif kind == WAIT:
            comm = call[1]
            if comm.done:
                self._answer(actor)
            else:
                comm.waiting.append(actor)
        elif kind == CREATE:
            new = self.spawn(call[1], call[2])
            self._answer(actor, new)
        elif kind == KILL:
            victim: Actor = call[1]
            if not victim.dead:
                victim.dead = True
                if victim.sleep is not None:
                    self.actions.pop(victim.sleep.key, None)
                    victim.sleep = None
                victim.gen.close()
            self._answer(actor)
        else:  # pragma: no cover - a bug in an actor
            raise KernelError(f"unknown simcall {call!r} from {actor.name}")

    def _add(self, max_duration: float, rate: float, sleeper: Actor | None, comm: Comm | None):
        key = self._keys
        self._keys += 1
        action = Action(key, max_duration, rate, sleeper, comm)
        self.actions[key] = action
        return action

    def _start(self, comm: Comm) -> None:
        if self._comms:
            raise KernelError("two transfers at once: bandwidth sharing is not modelled")
        self._comms += 1
        self._add(NO_MAX_DURATION, COMM_RATE, None, comm)

    # --- time ---------------------------------------------------------------------------

    def solve(self) -> bool:
        """One step of the clock; False when nothing can happen any more."""
        actions = self.actions
        step = -1.0
        for action in actions.values():
            if action.rate > 0:
                value = action.remains / action.rate if action.remains > 0 else 0.0
                if step < 0 or value < step:
                    step = value
            duration = action.max_duration
            if duration >= 0 and (step < 0 or duration < step):
                step = duration
        if step < 0:
            return False
        self.steps += 1
        self.now += step
        ended: list[Action] = []
        for action in list(actions.values()):
            if action.rate > 0:
                remains = action.remains - action.rate * step
                action.remains = 0.0 if remains < WORK_PRECISION else remains
                if action.remains <= 0:
                    ended.append(action)
                    del actions[action.key]
                continue
            duration = action.max_duration - step
            if duration < TIMING_PRECISION:
                ended.append(action)
                del actions[action.key]
            else:
                action.max_duration = duration
        for action in ended:
            if action.comm is not None:
                self._comms -= 1
                comm = action.comm
                comm.done = True
                for waiting in comm.waiting:
                    self._answer(waiting)
                comm.waiting = []
            else:
                sleeper = action.sleeper
                assert sleeper is not None
                sleeper.sleep = None
                self._answer(sleeper)
        return True
