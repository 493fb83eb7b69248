"""Plug-ins: a predictor or a queue order named by import path or by entry point.

A name the scheduler does not know is resolved here, by :func:`load_plugin`:

- ``"package.module:Attribute"`` (a name with a ``:``): the module is imported and the attribute
  read (a dotted attribute, ``module:Outer.Inner``, walks the path);
- a plain name: the entry point of that name in the group (``batsched_ml.predictors``,
  ``batsched_ml.policies``) of the installed distributions, declared in a package's
  ``pyproject.toml`` as::

      [project.entry-points."batsched_ml.predictors"]
      mine = "mypkg.predictors:MyPredictor"

What is found must be a class with the methods the part needs (a predictor: ``estimate`` and
``observe``; a queue order: ``key`` and ``dynamic``); the caller builds it (a predictor with its
``--predictor-option`` parameters, checked against its constructor). Every failure is a
:class:`~batsched_ml.errors.ConfigError` naming the name and what failed.
"""

from __future__ import annotations

import importlib
from typing import Any

from batsched_ml.errors import ConfigError


def _entry_points(group: str) -> Any:
    from importlib import metadata  # only when a name is not built in (30 ms of imports)

    return metadata.entry_points(group=group)


#: The entry-point groups, by the kind of part.
GROUPS: dict[str, str] = {
    "predictor": "batsched_ml.predictors",
    "policy": "batsched_ml.policies",
}


def load_plugin(
    name: str, kind: str, members: tuple[str, ...], builtin: tuple[str, ...] = ()
) -> type:
    """The class a plug-in ``name`` of ``kind`` (``"predictor"``, ``"policy"``) names.

    ``members``: the attributes the class must have; ``builtin``: the built-in names, listed
    in the error for an unknown plain name. Raises :class:`ConfigError`: the module is not
    found (or fails to import), the attribute is missing, no entry point has that name, or
    what was found is not a class with ``members``."""
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        if not module_name or not attribute:
            raise ConfigError(f"{kind} {name!r}: an import path is 'package.module:Class'")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            absent = exc.name or ""
            if module_name == absent or module_name.startswith(absent + "."):
                raise ConfigError(f"{kind} {name!r}: module {module_name!r} not found") from None
            raise ConfigError(f"{kind} {name!r}: importing {module_name!r} failed: {exc}") from None
        except Exception as exc:  # the plug-in's own error at import: named, not a traceback
            raise ConfigError(
                f"{kind} {name!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
            ) from None
        found: Any = module
        for part in attribute.split("."):
            try:
                found = getattr(found, part)
            except AttributeError:
                raise ConfigError(
                    f"{kind} {name!r}: module {module_name!r} has no attribute {attribute!r}"
                ) from None
    else:
        group = GROUPS[kind]
        points = [point for point in _entry_points(group) if point.name == name]
        if not points:
            known = ", ".join(builtin)
            raise ConfigError(
                f"unknown {kind} {name!r} (choose from {known}, an import path "
                f"'package.module:Class' or an entry point of group {group})"
            )
        try:
            found = points[0].load()
        except Exception as exc:
            raise ConfigError(
                f"{kind} {name!r}: entry point {points[0].value!r} of group {group} failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from None
    missing = [member for member in members if not hasattr(found, member)]
    if not isinstance(found, type) or missing:
        wanted = " and ".join(members)
        raise ConfigError(f"{kind} {name!r}: {found!r} is not a class with {wanted}")
    return found


def is_entry_point(name: str, kind: str) -> bool:
    """Whether an installed distribution declares an entry point ``name`` for ``kind``."""
    return any(point.name == name for point in _entry_points(GROUPS[kind]))


class Choices(list[str]):
    """The built-in names of ``kind`` as argparse ``choices`` that also admit plug-ins: an
    import path (a name with a ``:``, checked when the run is configured) or an entry point.
    An unknown plain name is still argparse's ``invalid choice``, listing the built-in ones."""

    def __init__(self, builtin: list[str], kind: str) -> None:
        super().__init__(builtin)
        self.kind = kind

    def __contains__(self, name: object) -> bool:
        if list.__contains__(self, name):
            return True
        return isinstance(name, str) and (":" in name or is_entry_point(name, self.kind))
