"""Which protocol a Batsim speaks, judged by its first frame (never by its version string).

batsched-ml speaks the Batsim 4 protocol: JSON messages ``{"now", "events": [{"timestamp",
"type", "data"}]}``, the first one holding ``SIMULATION_BEGINS``. Batsim 5 (batprotocol) opens
with another frame: a 32-bit size and an init string (with ``batsim -s ENDPOINT ''``: the four
bytes ``00 00 00 00``), then messages whose events carry ``event_type`` and ``event``. A peer of
another protocol is refused at its first frame with one line that says which protocol it speaks
and what to use instead. Whatever a Batsim calls itself (``4.2.1``, or ``commit SHA (built by
Nix from master branch)`` for an image built from its master branch), a peer that speaks
Batsim 4 is accepted.
"""

from __future__ import annotations

import json

from batsched_ml.errors import UserError

#: What :func:`judge_first_frame` returns for a peer it accepts (recorded in serve.json).
BATSIM4_PROTOCOL = "batsim4-json"
#: What serve.json records for a Batsim 5 peer (batprotocol, JSON serialisation).
BATSIM5_PROTOCOL = "batsim5-json"

_USE_INSTEAD = (
    "this serve was asked for Batsim 4 (--protocol 4): serve with --protocol auto (the "
    "default) or 5 for a Batsim 5, or run a Batsim 4 (in docker compose, a Batsim 4 image in "
    "BATSIM_IMAGE, which collect needs) or the stand-in `batsched-ml batsim`"
)


class OtherProtocolError(UserError, ValueError):
    """The peer speaks another protocol than Batsim 4's; the message says which."""


def _batsim5_init(frame: bytes) -> bool:
    """A batprotocol init frame: a little-endian u32 size, then that many bytes (and, as
    Batsim 5 sends its messages, perhaps one NUL)."""
    if len(frame) < 4:
        return False
    size = int.from_bytes(frame[:4], "little")
    return size in (len(frame) - 4, len(frame) - 5) and (
        size == len(frame) - 4 or frame.endswith(b"\0")
    )


def _batsim5_message(frame: bytes) -> bool:
    """A batprotocol JSON message (events of ``event_type`` and ``event``), e.g. a peer that
    skipped the init frame."""
    try:
        obj = json.loads(frame.rstrip(b"\0"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    events = obj.get("events") if isinstance(obj, dict) else None
    return isinstance(events, list) and any(
        isinstance(e, dict) and "event_type" in e and "type" not in e for e in events
    )


def judge_first_frame(frame: bytes) -> str:
    """The protocol of a peer whose first frame is ``frame``: :data:`BATSIM4_PROTOCOL` for
    anything that is not recognisably another protocol (a malformed Batsim 4 message is then
    refused by the codec, naming its field); :class:`OtherProtocolError` for Batsim 5."""
    start = frame.lstrip()[:1]
    if start != b"{" and _batsim5_init(frame):
        size = int.from_bytes(frame[:4], "little")
        raise OtherProtocolError(
            "the peer speaks the Batsim 5 protocol (batprotocol: its first frame is a 4-byte "
            f"size and an init string of {size} byte(s), not a Batsim 4 JSON message); "
            + _USE_INSTEAD
        )
    if start == b"{" and _batsim5_message(frame):
        raise OtherProtocolError(
            "the peer speaks the Batsim 5 protocol (batprotocol: events with event_type, not "
            "Batsim 4's type and data); " + _USE_INSTEAD
        )
    return BATSIM4_PROTOCOL
