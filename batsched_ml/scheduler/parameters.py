"""Constructor parameters given as text (``--predictor-option``, ``--dispatcher-option``).

Predictors and planners take plain keyword parameters with defaults, as scikit-learn
estimators do; the command line and campaign files give them as ``KEY=VALUE`` strings. One
function checks the keys against the constructor and converts each value to the type of its
default, so a typo or a wrong type fails before a replay starts, naming what is wrong.
"""

from __future__ import annotations

import inspect
from typing import Any

from batsched_ml.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_KINDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}


def _convert(value: Any, default: Any) -> Any:
    """``value`` as the type of ``default`` (a ``None`` default takes a float)."""
    if isinstance(default, bool):  # before int: bool("false") would be True
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise ValueError(value)
    kind = float if default is None or isinstance(default, float) else type(default)
    return kind(value)


def constructor_kwargs(
    kind: type, label: str, params: dict[str, Any], *, exclude: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``params`` checked against the constructor of ``kind`` and typed like its defaults.

    ``label`` names the thing in errors (``"predictor su"``); parameters in ``exclude`` (or
    without a default) are not settable this way. Raises :class:`ConfigError` naming an
    unknown parameter, with the known ones, a value that does not convert, or one the
    constructor refuses."""
    accepted = {
        key: parameter.default
        for key, parameter in inspect.signature(kind).parameters.items()
        if key not in exclude and parameter.default is not inspect.Parameter.empty
    }
    typed: dict[str, Any] = {}
    for key, value in params.items():
        if key not in accepted:
            known = ", ".join(accepted) or "none"
            raise ConfigError(f"{label} has no parameter {key!r} (it has: {known})")
        default = accepted[key]
        try:
            typed[key] = _convert(value, default)
        except (TypeError, ValueError):
            wanted = _KINDS.get("float" if default is None else type(default).__name__, "valid")
            raise ConfigError(f"{label} parameter {key}: {value!r} is not {wanted}") from None
    try:  # a value out of range: the constructor says which (built once here, a throwaway)
        kind(**typed)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: {exc}") from None
    return typed
