"""The versioned message schema between the scheduler and the side trainer (JSON over ZeroMQ).

Every message carries ``"schema": 2``; a peer receiving another version answers an ``error``
and does nothing else. The scheduler holds a REQ socket, the trainer a REP socket.

==========  ===================================================  ================================
request     fields                                               reply
==========  ===================================================  ================================
``hello``   ``params`` (the forest set-up the scheduler expects)  ``hello``: ``history`` (jobs
            and optionally ``run`` (its identity: ``run_id``,     stored), ``params``; or
            ``workload``, ``config``; the first run to greet      ``refused``: ``error`` (the
            an empty history owns it)                            history is another run's)
``train``   ``week``; ``history`` N: train on the first N        ``model``: ``entry`` (manifest
            finished jobs; ``first_seq`` and ``finished``:       entry, ``file`` null when no
            the jobs from ``first_seq`` on (see below)           forest), ``history``; or
                                                                 ``missing``: ``history`` (resend
                                                                 from there)
``stop``    ``run``: the identity of the run asking (as in       ``bye``, then the trainer exits;
            ``hello``); obeyed only from the run that owns the   or ``refused``: ``error`` (not
            trainer (its history's run; a trainer no run has     the owner) and it goes on
            spoken to yet is the first one's)
==========  ===================================================  ================================

A ``train`` request may carry ``expires`` (Unix time): the scheduler stops waiting then. A
trainer reading it later stores the jobs but does not train, and answers ``expired`` at once, so
that requests given up on do not pile up ahead of the next week's (both sides on one clock: the
same machine, or synchronised ones).

``finished`` (:func:`finished_field`) is an object of three columns, one entry per job:
``weeks`` (a list of integers, each job's week of submission), ``runtimes`` (base64 of the
float64 runtimes, little-endian) and ``features`` (base64 of the float32 features, row by row,
little-endian). Schema 1 sent a ``[week, runtime, [features...]]`` list per job: writing and
reading a week of HPC2N jobs' 20 features as decimal text took 10 to 20 ms a side at every
week boundary, while the scheduler waits; the trainer keeps the features as float32 in any
case, so the columns carry exactly the values it trains on.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

SCHEMA_VERSION = 2
REQUESTS = ("hello", "train", "stop")
REPLIES = ("hello", "model", "missing", "expired", "bye", "error", "refused")


class SchemaError(ValueError):
    """A trainer message that does not follow the schema."""


def encode(kind: str, **fields: Any) -> bytes:
    return json.dumps({"schema": SCHEMA_VERSION, "type": kind, **fields}).encode()


def decode(data: bytes, allowed: tuple[str, ...]) -> dict[str, Any]:
    try:
        message = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"malformed trainer message: {exc}") from None
    if not isinstance(message, dict):
        raise SchemaError("a trainer message must be a JSON object")
    version = message.get("schema")
    if version != SCHEMA_VERSION:
        raise SchemaError(
            f"unsupported schema version {version!r} (this side speaks {SCHEMA_VERSION})"
        )
    kind = message.get("type")
    if kind not in allowed:
        raise SchemaError(f"unknown trainer message type {kind!r}")
    return message


def check_train(
    message: dict[str, Any], n_features: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a ``train`` request's fields (types and sizes); return its finished jobs as
    arrays: weeks (int64), runtimes (float64), features (float32, one row per job). A job
    with a runtime or a feature that is not a finite number is named by its position."""
    for key in ("week", "history", "first_seq"):
        value = message.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SchemaError(f"train: field {key!r} must be a non-negative integer")
    expires = message.get("expires")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise SchemaError("train: field 'expires' must be a number (Unix time)")
    finished = message.get("finished")
    if not isinstance(finished, dict) or set(finished) != {"weeks", "runtimes", "features"}:
        raise SchemaError("train: field 'finished' must be an object of weeks, runtimes, features")
    week_list = finished["weeks"]
    if not isinstance(week_list, list) or not all(type(w) is int for w in week_list):
        raise SchemaError("train: finished weeks must be a list of integers")
    n = len(week_list)
    runtimes = _column(finished["runtimes"], "<f8", n, "runtimes")
    features = _column(finished["features"], "<f4", n * n_features, "features")
    features = features.reshape(n, n_features)
    bad = ~(np.isfinite(runtimes) & np.isfinite(features).all(axis=1))
    if bad.any():
        raise SchemaError(
            f"train: finished job {int(np.flatnonzero(bad)[0])} has a runtime or a feature "
            "that is not a finite number"
        )
    return np.array(week_list, dtype=np.int64), runtimes, features


def _column(text: Any, dtype: str, count: int, name: str) -> np.ndarray:
    """A base64 column of ``count`` values of ``dtype``, decoded (a copy, native order)."""
    if not isinstance(text, str):
        raise SchemaError(f"train: finished {name} must be a base64 string")
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise SchemaError(f"train: finished {name} is not valid base64") from None
    size = np.dtype(dtype).itemsize
    if len(data) != count * size:
        raise SchemaError(
            f"train: finished {name} must hold {count} values of {size} bytes, "
            f"not {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=dtype).astype(np.dtype(dtype).newbyteorder("="))


def finished_field(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """The ``finished`` field of a ``train`` request for ``[week, runtime, features]`` rows."""
    runtimes = np.array([row[1] for row in rows], dtype="<f8")
    features = np.array([row[2] for row in rows], dtype="<f4")
    return {
        "weeks": [int(row[0]) for row in rows],
        "runtimes": base64.b64encode(runtimes.tobytes()).decode("ascii"),
        "features": base64.b64encode(features.tobytes()).decode("ascii"),
    }
