"""Batsim 5's library mode: the scheduler called inside Batsim's own process.

Batsim 5 loads an external decision component (EDC) either as a process behind a ZeroMQ socket
(:mod:`batsched_ml.transport.v5`, ``batsched-ml serve``) or as a shared library that it
calls through a C interface (``batsim -l LIBRARY INIT_STRING``). The library of batsched-ml
(``batsched_ml/_edc.c``, its path printed by ``batsched-ml edc-library``) embeds Python and calls
this module: :func:`init` once with the init string, :func:`take_decisions` with each of Batsim's
messages, :func:`deinit` at the end. The scheduler, the codec and the hello are those of ``serve``
(:func:`batsched_ml.runs.replaying.make_scheduler`, :class:`~batsched_ml.protocol.codec_v5.
Batsim5Codec`, :class:`~batsched_ml.serving.served.ServedRun`'s calendar lookup); only the transport
differs (a function call instead of a socket), so both modes answer the same messages with the same
bytes.

The init string is a JSON object of the run's settings, the keys of ``run.json``'s ``config``
(:meth:`~batsched_ml.runs.replaying.ReplayConfig.as_dict`): ``policy``, ``variant``, ``predictor``,
``correction``, ``dispatcher``, ``predictor_params``, ``dispatcher_params``,
``classifier_params``, ``starvation_threshold`` (seconds, ``null``: never), ``backfilling``,
``feature_mode`` and ``forest`` (:class:`~batsched_ml.predict.params.ForestParams`'s fields).
A key left out takes the command line's default; an empty init string is ``serve``'s defaults.
A key not known, or a value of the wrong kind, refuses the run at init with one line: nothing
is ignored. A classified variant trains its weekly forests in Batsim's process (``serve``'s
``--trainer inprocess``; the same models as the side trainer's).

Errors: a setting or a message the user can fix is printed as one ``batsched-ml: error:`` line
on standard error, anything else with its traceback; either way the function returns ``None``
and the library returns non-zero to Batsim, which stops.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from batsched_ml import __version__
from batsched_ml.errors import ConfigError, UserError
from batsched_ml.predict.params import ForestParams
from batsched_ml.protocol.codec_v5 import EDC_NAME, Batsim5Codec, features_for
from batsched_ml.protocol.framing_v5 import batsim_payload
from batsched_ml.registry import FEATURE_MODES
from batsched_ml.runs.replaying import ReplayConfig, config_of_record, make_scheduler
from batsched_ml.serving.served import ServedRun

#: the init string's keys and the JSON kinds each takes (``run.json``'s ``config``)
_KINDS: dict[str, tuple[type, ...]] = {
    "policy": (str,),
    "variant": (str,),
    "predictor": (str,),
    "correction": (str,),
    "dispatcher": (str,),
    "predictor_params": (dict,),
    "dispatcher_params": (dict,),
    "classifier_params": (dict,),
    "starvation_threshold": (int, float, type(None)),
    "backfilling": (bool,),
    "feature_mode": (str,),
    "forest": (dict,),
}
#: the forest's settings that take ``null`` (no depth limit, all history, whole bootstrap)
_FOREST_NULLABLE = ("max_depth", "window", "max_samples")
_T = TypeVar("_T")


def _forest_value_fits(key: str, value: Any, default: Any) -> bool:
    """Whether a forest setting of the init string is of its field's kind (as the
    command line's options type them): an integer where the default is one, a number where it
    is a float, a number or a name for ``max_features``, ``null`` where the field takes it."""
    if value is None:
        return key in _FOREST_NULLABLE
    if isinstance(value, bool):
        return False
    if isinstance(default, str):
        return isinstance(value, str | int | float)
    if isinstance(default, int):
        return isinstance(value, int)
    return isinstance(value, int | float)


def config_of_init(text: str) -> Any:
    """The :class:`~batsched_ml.runs.replaying.ReplayConfig` an init string asks for (see the
    module); :class:`ConfigError` naming the key for anything not understood."""
    if not text.strip():
        return ReplayConfig()
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"the init string is not JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(given, dict):
        raise ConfigError("the init string is not a JSON object of settings")
    unknown = sorted(set(given) - set(_KINDS))
    if unknown:
        raise ConfigError(
            f"the init string: unknown key(s) {', '.join(unknown)} (known: {', '.join(_KINDS)})"
        )
    for key, value in given.items():
        kinds = _KINDS[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ConfigError(f"the init string: {key} cannot be {json.dumps(value)}")
    if given.get("feature_mode", "online") not in FEATURE_MODES:
        raise ConfigError(
            f"the init string: feature_mode is one of {', '.join(FEATURE_MODES)}, "
            f"not {given['feature_mode']!r}"
        )
    forest = dataclasses.asdict(ForestParams())
    unknown = sorted(set(given.get("forest", {})) - set(forest))
    if unknown:
        raise ConfigError(
            f"the init string: forest has no {', '.join(unknown)} (it has: {', '.join(forest)})"
        )
    for key, value in given.get("forest", {}).items():
        if not _forest_value_fits(key, value, forest[key]):
            raise ConfigError(f"the init string: forest {key} cannot be {json.dumps(value)}")
    record = {**ReplayConfig().as_dict(), **given, "forest": {**forest, **given.get("forest", {})}}
    try:
        return config_of_record(record)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UserError):
            raise
        raise ConfigError(f"the init string: {exc}") from None


class LibraryRun:
    """One simulation answered in process: the scheduler ``serve`` would build from the same
    settings, behind the Batsim 5 codec."""

    def __init__(self, init_text: str) -> None:
        self.config = config_of_init(init_text)
        self.run = ServedRun(make_scheduler(self.config), self.config.as_dict())
        self.codec = Batsim5Codec(features_for(self.config), init_text)

    def hello(self) -> bytes:
        """The reply to the init: one ``EDCHelloEvent`` with the features the run needs."""
        return json.dumps(self.codec.hello(EDC_NAME, __version__)).encode()

    def take_decisions(self, frame: bytes) -> bytes:
        """The JSON reply to one of Batsim's messages (``frame``: its JSON text, with or
        without the NUL Batsim ends it with)."""
        message = self.codec.from_batsim(batsim_payload(frame))
        return self.codec.to_batsim(self.run.handle(message)).encode()


_RUN: LibraryRun | None = None


def _reported(call: Callable[[], _T]) -> _T | None:
    """``call()``, or ``None`` once its error is printed: one line for a user's error, the
    traceback otherwise (Batsim, told by the library's non-zero return, stops)."""
    try:
        return call()
    except UserError as exc:
        print(f"batsched-ml: error: {exc}", file=sys.stderr, flush=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    return None


def init(data: bytes) -> bytes | None:
    """``batsim_edc_init``: build the run from the init string; the hello's JSON, or None."""

    def start() -> bytes:
        global _RUN
        if _RUN is not None:
            raise ConfigError(
                "batsim_edc_init called twice without batsim_edc_deinit: one batsched-ml "
                "library serves one simulation at a time in a process"
            )
        try:
            text = data.rstrip(b"\0").decode()
        except UnicodeDecodeError:
            raise ConfigError("the init string is not UTF-8 text") from None
        _RUN = LibraryRun(text)
        return _RUN.hello()

    return _reported(start)


def take_decisions(frame: bytes) -> bytes | None:
    """``batsim_edc_take_decisions``: the reply's JSON, or None."""

    def decide() -> bytes:
        if _RUN is None:
            raise ConfigError("batsim_edc_take_decisions called before batsim_edc_init")
        return _RUN.take_decisions(frame)

    return _reported(decide)


def deinit() -> bool | None:
    """``batsim_edc_deinit``: forget the run (its scheduler, its models); True, or None."""

    def stop() -> bool:
        global _RUN
        _RUN = None
        sys.stdout.flush()
        return True

    return _reported(stop)
