"""ZeroMQ transports of the Batsim protocol: the scheduler's REP side and a Batsim-like REQ side.

Batsim holds a REQ socket and *connects*; the scheduler *binds* a REP socket and answers each
message exactly once, in lock-step, until SIMULATION_ENDS. Both sides here use the one codec of
:mod:`batsched_ml.protocol.codec`, and wait for their peer with a timeout so that a silent peer
ends the run with a clear error instead of a hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import zmq

from batsched_ml.errors import TransportError
from batsched_ml.protocol.codec import dump_message, parse_message
from batsched_ml.protocol.events import Message, SimulationEnds
from batsched_ml.sim.simulator import BatsimSimulator

#: The longest one wait for a message blocks (:func:`wait_readable`).
WAIT_SLICE = 0.5


def wait_readable(socket: zmq.Socket, timeout: float | None) -> bool:
    """Whether a message came within ``timeout`` seconds (``None``: wait for ever).

    Waits in slices of :data:`WAIT_SLICE` seconds: a SIGINT or SIGTERM that lands just before
    a wait begins (its Python handler not yet run, so nothing interrupts the wait) is acted on
    within half a second, rather than when the whole wait ends (a peer's 60 s timeout, a
    trainer's idle hour): seen as a `serve` that took 60 s to stop on a loaded machine."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = WAIT_SLICE
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - time.monotonic()))
        if socket.poll(int(wait * 1000), zmq.POLLIN):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


def _receive(socket: zmq.Socket, timeout: float | None, waiting_for: str) -> bytes:
    if not wait_readable(socket, timeout):
        raise TransportError(f"no message from {waiting_for} within {timeout:g} s")
    return socket.recv()


def bind_rep(endpoint: str, on_bound: Callable[[str], None] | None = None) -> zmq.Socket:
    """A bound REP socket; a bad or busy endpoint raises :class:`TransportError` (one line for
    the user, not a pyzmq traceback). ``on_bound`` gets the endpoint actually bound."""
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 1000)
    try:
        socket.bind(endpoint)
    except zmq.ZMQError as exc:
        socket.close(linger=0)
        raise TransportError(f"cannot bind {endpoint}: {exc}") from None
    if on_bound is not None:
        on_bound(socket.getsockopt_string(zmq.LAST_ENDPOINT))
    return socket


def serve(
    endpoint: str,
    handler: Callable[[Message], Message],
    *,
    timeout: float | None = 60.0,
    on_bound: Callable[[str], None] | None = None,
) -> int:
    """Answer a Batsim on ``endpoint`` (bound, e.g. ``tcp://*:28000``) until SIMULATION_ENDS.

    Returns the number of messages answered. A message that cannot be parsed raises
    :class:`ProtocolError`; no message within ``timeout`` seconds raises :class:`TransportError`.
    """
    socket = bind_rep(endpoint, on_bound)
    try:
        count = 0
        while True:
            message = parse_message(_receive(socket, timeout, "Batsim"))
            reply = handler(message)
            socket.send_string(dump_message(reply))
            count += 1
            if any(isinstance(event, SimulationEnds) for event in message.events):
                return count
    finally:
        socket.close()


def run_batsim_peer(sim: BatsimSimulator, endpoint: str, *, timeout: float | None = 60.0) -> int:
    """Play Batsim over ZeroMQ: connect a REQ socket to the scheduler at ``endpoint`` and run
    ``sim`` to its end. Returns the number of messages sent."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    socket = context.socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    try:
        socket.connect(endpoint)
        message: Message | None = sim.start()
        count = 0
        while message is not None:
            socket.send_string(dump_message(message))
            count += 1
            reply = parse_message(_receive(socket, timeout, "the scheduler"))
            message = sim.step(reply)
        return count
    finally:
        socket.close()
