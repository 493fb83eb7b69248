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
from zmq.utils.monitor import recv_monitor_message

from batsched_ml.errors import PeerGone, TransportError
from batsched_ml.protocol.codec import dump_message, parse_message
from batsched_ml.protocol.dialect import judge_first_frame
from batsched_ml.protocol.events import Message, SimulationEnds
from batsched_ml.sim.simulator import BatsimSimulator
from batsched_ml.transport.sockets import bind_rep, wait_readable


def _receive(socket: zmq.Socket, timeout: float | None, waiting_for: str) -> bytes:
    if not wait_readable(socket, timeout):
        raise TransportError(f"no message from {waiting_for} within {timeout:g} s")
    return socket.recv()


def rep_socket(
    endpoint: str | zmq.Socket, on_bound: Callable[[str], None] | None = None
) -> zmq.Socket:
    """``endpoint`` bound (:func:`bind_rep`), or the socket given, bound already: ready now
    either way (``on_bound`` gets its endpoint)."""
    if not isinstance(endpoint, zmq.Socket):
        return bind_rep(endpoint, on_bound)
    if on_bound is not None:
        on_bound(endpoint.getsockopt_string(zmq.LAST_ENDPOINT))
    return endpoint


def serve(
    endpoint: str | zmq.Socket,
    handler: Callable[[Message], Message],
    *,
    timeout: float | None = 60.0,
    on_bound: Callable[[str], None] | None = None,
) -> int:
    """Answer a Batsim on ``endpoint`` (bound, e.g. ``tcp://*:28000``, or a socket that
    :func:`bind_rep` bound) until SIMULATION_ENDS. ``on_bound`` gets the endpoint once the
    socket is ready to answer.

    Returns the number of messages answered. A first frame of another protocol than Batsim 4's
    raises :class:`~batsched_ml.protocol.dialect.OtherProtocolError`
    (:func:`~batsched_ml.protocol.dialect.judge_first_frame`); a message that cannot be parsed
    :class:`ProtocolError`; no message within ``timeout`` seconds :class:`TransportError`.
    """
    socket = rep_socket(endpoint, on_bound)
    try:
        count = 0
        while True:
            frame = _receive(socket, timeout, "Batsim")
            if count == 0:
                judge_first_frame(frame)
            message = parse_message(frame)
            reply = handler(message)
            socket.send_string(dump_message(reply))
            count += 1
            if any(isinstance(event, SimulationEnds) for event in message.events):
                return count
    finally:
        socket.close()


class Watched:
    """A REQ socket whose connection to its peer is watched (ZeroMQ's socket monitor): a reply
    is awaited until it comes, the timeout passes, or the peer's connection closes while the
    request is pending. A peer computing a long decision keeps its connection open and is
    waited for; a peer whose process ended has its connection closed by the system at once,
    and as ZeroMQ's REQ socket does not send a request again over a new connection, its
    reply can never come."""

    def __init__(self, socket: zmq.Socket, endpoint: str) -> None:
        self.socket = socket
        self.endpoint = endpoint
        self.monitor = socket.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self.connected = False
        self.closed_since_sent = False

    def _events(self) -> None:
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)["event"]
            if event == zmq.EVENT_CONNECTED:
                self.connected = True
            elif event == zmq.EVENT_DISCONNECTED:
                self.connected = False
                self.closed_since_sent = True

    def send(self, frame: str | bytes) -> None:
        self._events()
        self.closed_since_sent = False
        if isinstance(frame, str):
            self.socket.send_string(frame)
        else:
            self.socket.send(frame)

    def receive(self, timeout: float | None, count: int) -> bytes:
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        poller.register(self.monitor, zmq.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = dict(poller.poll(None if left is None else int(left * 1000)))
            if self.socket in ready:
                return self.socket.recv()
            if self.monitor in ready:
                self._events()
                if self.closed_since_sent and not self.socket.poll(0):
                    raise PeerGone(
                        f"the scheduler at {self.endpoint} closed the connection while Batsim "
                        f"waited for its answer to message {count} (its process ended? its "
                        "own output says why); no answer can come"
                    )
                continue
            if deadline is not None and time.monotonic() >= deadline:
                raise TransportError(f"no message from the scheduler within {timeout:g} s")

    def close(self) -> None:
        self.socket.disable_monitor()
        self.monitor.close(linger=0)


def run_batsim_peer(sim: BatsimSimulator, endpoint: str, *, timeout: float | None = 60.0) -> int:
    """Play Batsim over ZeroMQ: connect a REQ socket to the scheduler at ``endpoint`` and run
    ``sim`` to its end. Returns the number of messages sent. A scheduler silent for
    ``timeout`` seconds raises :class:`TransportError`; one whose connection closes while its
    answer is awaited (its process ended) :class:`PeerGone`, at once."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    socket = context.socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    watched = Watched(socket, endpoint)
    try:
        socket.connect(endpoint)
        message: Message | None = sim.start()
        count = 0
        while message is not None:
            watched.send(dump_message(message))
            count += 1
            reply = parse_message(watched.receive(timeout, count))
            message = sim.step(reply)
        return count
    finally:
        watched.close()
        socket.close()
