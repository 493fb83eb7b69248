"""Batsim 5's ZeroMQ framing, and telling a Batsim 5 from a Batsim 4 by its first frame.

Batsim 5 opens with an *init* frame: ``u32 size`` (little-endian) followed by ``size`` bytes,
the init string given after the endpoint (``batsim -s ENDPOINT INIT_STRING``). The EDC answers
one frame: ``u32 flags`` (``0x2``: JSON, ``0x1``: flatbuffers binary) followed by a message
holding one ``EDCHelloEvent``. Then each side sends one JSON message per frame, in turn;
Batsim's end with a NUL byte, the EDC's need none.

Batsim 4's first frame is a JSON message (``{"now": ...``), with no prefix.
"""

from __future__ import annotations

import struct

from batsched_ml.protocol.codec import ProtocolError

#: the hello's flags: the messages that follow are JSON
FLAG_JSON = 0x2
_U32 = struct.Struct("<I")


def is_batsim5_init(frame: bytes) -> bool:
    """Whether ``frame`` is Batsim 5's init frame (a u32 size, then exactly that many bytes;
    a trailing NUL tolerated). A Batsim 4 message is JSON text, which never fits: its first
    four bytes are printable and would announce far more bytes than follow."""
    if len(frame) < _U32.size:
        return False
    (size,) = _U32.unpack_from(frame)
    rest = len(frame) - _U32.size
    return size == rest or (size == rest - 1 and frame.endswith(b"\0"))


def protocol_of(frame: bytes) -> int:
    """5 for Batsim 5's init frame, 4 for a Batsim 4 JSON message; anything else is a
    :class:`ProtocolError`."""
    if is_batsim5_init(frame):
        return 5
    if frame.lstrip()[:1] == b"{":
        return 4
    shown = frame[:16].hex(" ")
    raise ProtocolError(
        "message",
        "(first frame)",
        f"neither a Batsim 4 JSON message nor a Batsim 5 init frame (starts {shown})",
    )


def init_data(frame: bytes) -> str:
    """The init string of Batsim 5's init frame."""
    if not is_batsim5_init(frame):
        raise ProtocolError("init", "(frame)", "not a Batsim 5 init frame (u32 size + data)")
    (size,) = _U32.unpack_from(frame)
    data = frame[_U32.size : _U32.size + size]
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ProtocolError("init", "init_data", "not UTF-8 text") from None


def init_frame(data: str = "") -> bytes:
    """Batsim 5's init frame carrying ``data`` (the init string)."""
    raw = data.encode()
    return _U32.pack(len(raw)) + raw


def hello_frame(message: str, flags: int = FLAG_JSON) -> bytes:
    """The EDC's answer to the init: ``u32 flags`` + the JSON hello message."""
    return _U32.pack(flags) + message.encode()


def split_hello(frame: bytes) -> tuple[int, bytes]:
    """``(flags, message)`` of an EDC hello frame."""
    if len(frame) < _U32.size:
        raise ProtocolError("hello", "(frame)", "shorter than its u32 flags")
    (flags,) = _U32.unpack_from(frame)
    return flags, frame[_U32.size :]


def batsim_payload(frame: bytes) -> bytes:
    """A Batsim 5 message frame without its trailing NUL."""
    return frame[:-1] if frame.endswith(b"\0") else frame


def batsim_frame(message: str) -> bytes:
    """A message as Batsim 5 frames it (NUL-terminated)."""
    return message.encode() + b"\0"
