"""Serving Batsim 4 or Batsim 5 on one socket: the protocol is told by Batsim's first frame.

Batsim 4 opens with a JSON message; Batsim 5 with its init frame (:mod:`.protocol.framing_v5`),
which the scheduler answers with its hello, then JSON messages in batprotocol's shape
(:mod:`.protocol.codec_v5`). Either way the scheduler sees the typed Batsim 4 events and answers
each message once, until the simulation ends. ``protocol="4"`` is :func:`.transport.serve`
itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import zmq

from batsched_ml import __version__
from batsched_ml.errors import TransportError
from batsched_ml.protocol.codec import ProtocolError, dump_message, parse_message
from batsched_ml.protocol.codec_v5 import EDC_NAME as EDC_NAME
from batsched_ml.protocol.codec_v5 import Batsim5Codec
from batsched_ml.protocol.codec_v5 import features_for as features_for
from batsched_ml.protocol.events import Message, SimulationEnds
from batsched_ml.protocol.framing_v5 import (
    batsim_payload,
    hello_frame,
    init_data,
    protocol_of,
)
from batsched_ml.transport import bind_rep
from batsched_ml.transport import serve as serve_v4

PROTOCOLS = ("auto", "4", "5")


def _receive(socket: zmq.Socket[bytes], timeout: float | None) -> bytes:
    if timeout is not None and not socket.poll(int(timeout * 1000), zmq.POLLIN):
        raise TransportError(f"no message from Batsim within {timeout:g} s")
    return socket.recv()


def _ends(message: Message) -> bool:
    return any(isinstance(event, SimulationEnds) for event in message.events)


def serve_batsim4(
    socket: zmq.Socket[bytes],
    first: bytes,
    handler: Callable[[Message], Message],
    timeout: float | None,
) -> int:
    """Answer a Batsim 4 whose first message (``first``) has been received."""
    frame, count = first, 0
    while True:
        message = parse_message(frame)
        socket.send_string(dump_message(handler(message)))
        count += 1
        if _ends(message):
            return count
        frame = _receive(socket, timeout)


def serve_batsim5(
    socket: zmq.Socket[bytes],
    init: bytes,
    handler: Callable[[Message], Message],
    timeout: float | None,
    features: dict[str, bool] | None = None,
) -> int:
    """Answer a Batsim 5 whose init frame (``init``) has been received: the hello, then every
    message until ``SimulationEndsEvent``. Returns the number of messages answered (the init
    not counted)."""
    codec = Batsim5Codec(features, init_data(init))
    socket.send(hello_frame(json.dumps(codec.hello(EDC_NAME, __version__))))
    count = 0
    while True:
        message = codec.from_batsim(batsim_payload(_receive(socket, timeout)))
        socket.send(codec.to_batsim(handler(message)).encode())
        count += 1
        if _ends(message):
            return count


def serve(
    endpoint: str | zmq.Socket[bytes],
    handler: Callable[[Message], Message],
    *,
    protocol: str = "auto",
    features: dict[str, bool] | None = None,
    timeout: float | None = 60.0,
    on_bound: Callable[[str], None] | None = None,
    on_protocol: Callable[[int], None] | None = None,
) -> int:
    """Answer a Batsim on ``endpoint`` (an address to bind, or a socket :func:`~batsched_ml.
    transport.bind_rep` bound) until the simulation ends; ``protocol``: ``"auto"``
    (told by the first frame), ``"4"`` or ``"5"``. ``features``: what to request of a
    Batsim 5 (:func:`features_for`). ``on_protocol`` is told the protocol found. Returns the
    number of messages answered; errors as :func:`batsched_ml.transport.serve`'s."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if protocol == "4":
        if on_protocol is not None:
            on_protocol(4)
        return serve_v4(endpoint, handler, timeout=timeout, on_bound=on_bound)
    if isinstance(endpoint, zmq.Socket):  # bound already: ready now
        socket = endpoint
        if on_bound is not None:
            on_bound(socket.getsockopt_string(zmq.LAST_ENDPOINT))
    else:
        socket = bind_rep(endpoint, on_bound)
    try:
        first = _receive(socket, timeout)
        found = protocol_of(first)
        if protocol == "5" and found != 5:
            raise ProtocolError(
                "message",
                "(first frame)",
                "a Batsim 4 message, not Batsim 5's init frame: serve with --protocol 4 or auto",
            )
        if on_protocol is not None:
            on_protocol(found)
        if found == 5:
            return serve_batsim5(socket, first, handler, timeout, features)
        return serve_batsim4(socket, first, handler, timeout)
    finally:
        socket.close()
