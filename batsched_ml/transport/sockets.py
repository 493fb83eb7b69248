"""The ZeroMQ sockets every peer of batsched-ml uses, whatever it speaks: a bound REP socket with
one line for a bad endpoint, and a wait that acts on signals. Here, apart from Batsim's
protocols (:mod:`.v4`, :mod:`.v5`), so that the side trainer, which speaks its own, starts
without importing them (a twentieth of a second of its start, which a classified run waits
for)."""

from __future__ import annotations

import time
from collections.abc import Callable

import zmq

from batsched_ml.errors import TransportError

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
