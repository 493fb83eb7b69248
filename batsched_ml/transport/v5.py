"""Serving Batsim 4 or Batsim 5 on one socket: the protocol is told by Batsim's first frame.

Batsim 4 opens with a JSON message; Batsim 5 with its init frame (:mod:`.protocol.framing_v5`),
which the scheduler answers with its hello, then JSON messages in batprotocol's shape
(:mod:`.protocol.codec_v5`). Either way the scheduler sees the typed Batsim 4 events and answers
each message once, until the simulation ends. ``protocol="4"`` is :func:`.v4.serve`
itself.

Batsim's side too: :func:`run_batsim5_peer` is the stand-in (``batsched-ml batsim --protocol
5``), the embedded simulator speaking Batsim 5 over ZeroMQ (in process, without a socket:
:func:`.protocol.codec_v5.through_batsim5_json`).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import zmq

from batsched_ml import __version__
from batsched_ml.errors import TransportError
from batsched_ml.protocol.codec import ProtocolError, dump_message, parse_message
from batsched_ml.protocol.codec_v5 import EDC_NAME as EDC_NAME
from batsched_ml.protocol.codec_v5 import FEATURES, Batsim5Codec
from batsched_ml.protocol.codec_v5 import features_for as features_for
from batsched_ml.protocol.events import Message, SimulationEnds
from batsched_ml.protocol.framing_v5 import (
    FLAG_JSON,
    batsim_frame,
    batsim_payload,
    hello_frame,
    init_data,
    init_frame,
    protocol_of,
    split_hello,
)
from batsched_ml.sim.simulator import BatsimSimulator
from batsched_ml.transport.v4 import Watched, rep_socket
from batsched_ml.transport.v4 import serve as serve_v4

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
    transport.sockets.bind_rep` bound) until the simulation ends; ``protocol``: ``"auto"``
    (told by the first frame), ``"4"`` or ``"5"``. ``features``: what to request of a
    Batsim 5 (:func:`features_for`). ``on_protocol`` is told the protocol found. Returns the
    number of messages answered; errors as :func:`batsched_ml.transport.v4.serve`'s."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if protocol == "4":
        if on_protocol is not None:
            on_protocol(4)
        return serve_v4(endpoint, handler, timeout=timeout, on_bound=on_bound)
    socket = rep_socket(endpoint, on_bound)
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


# --- Batsim's side: the stand-in --------------------------------------------------------------


def hello_of(frame: bytes) -> dict[str, bool]:
    """The features an EDC's hello frame requests (``{}``: none); a frame that is no JSON
    ``EDCHelloEvent`` hello is a :class:`ProtocolError`."""
    flags, text = split_hello(frame)
    if flags != FLAG_JSON:
        raise ProtocolError(
            "hello", "flags", f"0x{flags:x}: only JSON (0x2) is spoken here, not flatbuffers"
        )
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError("hello", "(json)", f"malformed JSON: {exc}") from None
    events = obj.get("events") if isinstance(obj, dict) else None
    if (
        not isinstance(events, list)
        or len(events) != 1
        or not isinstance(events[0], dict)
        or events[0].get("event_type") != "EDCHelloEvent"
    ):
        raise ProtocolError("hello", "events", "expected exactly one EDCHelloEvent")
    event = events[0].get("event")
    features = event.get("requested_simulation_features") if isinstance(event, dict) else None
    if not isinstance(features, dict):
        raise ProtocolError("EDCHelloEvent", "requested_simulation_features", "missing")
    for name, value in features.items():
        if name not in FEATURES or not isinstance(value, bool):
            raise ProtocolError(
                "EDCHelloEvent", "requested_simulation_features", f"unknown feature {name!r}"
            )
    return {name: value for name, value in features.items() if value}


def run_batsim5_peer(
    make_simulator: Callable[[dict[str, bool]], BatsimSimulator],
    endpoint: str,
    *,
    init_string: str = "",
    timeout: float | None = 60.0,
) -> tuple[BatsimSimulator, int]:
    """Play Batsim 5 over ZeroMQ: connect to the EDC at ``endpoint``, send the init frame
    (``init_string``), read its hello, build the simulation with the features it requests
    (``make_simulator``) and run it to its end, each message NUL-terminated as Batsim 5
    sends it. Returns the simulator and the number of messages sent (the init not counted);
    errors as :func:`batsched_ml.transport.v4.run_batsim_peer`'s."""
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    watched = Watched(socket, endpoint)
    try:
        socket.connect(endpoint)
        watched.send(init_frame(init_string))
        features = hello_of(watched.receive(timeout, 0))
        sim = make_simulator(features)
        codec = Batsim5Codec(features, init_string)
        message: Message | None = sim.start()
        count = 0
        while message is not None:
            watched.send(batsim_frame(codec.encode(message)))
            count += 1
            message = sim.step(codec.decode(watched.receive(timeout, count)))
        return sim, count
    finally:
        watched.close()
        socket.close()
