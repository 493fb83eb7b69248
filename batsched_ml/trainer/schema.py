"""The versioned message schema between the scheduler and the side trainer (JSON over ZeroMQ).

Every message carries ``"schema": 1``; a peer receiving another version answers an ``error``
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
            the jobs from ``first_seq`` on, each                 forest), ``history``; or
            ``[week, runtime, [features...]]``                   ``missing``: ``history`` (resend
                                                                 from there)
``stop``    (none)                                               ``bye``, then the trainer exits
==========  ===================================================  ================================

A ``train`` request may carry ``expires`` (Unix time): the scheduler stops waiting then. A
trainer reading it later stores the jobs but does not train, and answers ``expired`` at once, so
that requests given up on do not pile up ahead of the next week's (both sides on one clock: the
same machine, or synchronised ones).
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np

SCHEMA_VERSION = 1
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
    arrays: weeks (int64), runtimes (float64), features (float32, one row per job).

    The per-value checks run as C-level passes (a set of the value types, then numpy), about
    1 ms for a week of HPC2N jobs where a Python loop over every feature took 10 ms at each
    week boundary; only a message that fails is searched row by row to name the culprit."""
    for key in ("week", "history", "first_seq"):
        value = message.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SchemaError(f"train: field {key!r} must be a non-negative integer")
    expires = message.get("expires")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise SchemaError("train: field 'expires' must be a number (Unix time)")
    finished = message.get("finished")
    if not isinstance(finished, list):
        raise SchemaError("train: field 'finished' must be a list")
    shape_ok = all(
        type(row) is list
        and len(row) == 3
        and type(row[0]) is int
        and type(row[1]) in (int, float)
        and type(row[2]) is list
        and len(row[2]) == n_features
        for row in finished
    )
    values_ok = shape_ok and set(
        map(type, itertools.chain.from_iterable(row[2] for row in finished))
    ) <= {int, float}
    if values_ok:
        features = np.array([row[2] for row in finished], dtype=np.float64).reshape(-1, n_features)
        runtimes = np.array([row[1] for row in finished], dtype=np.float64)
        values_ok = bool(np.isfinite(features).all() and np.isfinite(runtimes).all())
    if not values_ok:
        for i, row in enumerate(finished):
            if not (
                type(row) is list
                and len(row) == 3
                and type(row[0]) is int
                and type(row[1]) in (int, float)
                and math.isfinite(row[1])
                and type(row[2]) is list
                and len(row[2]) == n_features
                and all(type(v) in (int, float) and math.isfinite(v) for v in row[2])
            ):
                raise SchemaError(
                    f"train: finished[{i}] must be [week, runtime, {n_features} finite numbers]"
                )
    weeks = np.array([row[0] for row in finished], dtype=np.int64)
    return weeks, runtimes, features.astype(np.float32)
