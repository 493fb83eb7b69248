"""``batsched-ml edc-library``: where Batsim 5's library of batsched-ml is, and its init string.

Batsim 5 runs a decision component either as a process behind a socket (``batsched-ml serve``)
or as a shared library it loads itself: ``batsim ... -l LIBRARY INIT_STRING``. The library
(``batsched_ml/_edc.c``, :mod:`batsched_ml.serving.edc`) is built at install when a C compiler and a
shared libpython are there; this command prints its absolute path, or says that it is not
built (exit :data:`NOT_BUILT`). With ``--init`` and the scheduler options of ``serve`` it
prints the init string that asks the library for that scheduler instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
from pathlib import Path

from batsched_ml.cli import options
from batsched_ml.compiled import source_digest
from batsched_ml.errors import ConfigError, NotBuilt

MODULE = "batsched_ml._edc"
SOURCE = Path(__file__).resolve().parents[1] / "_edc.c"
#: the exit status when the library is not built, or built from another source (EX_UNAVAILABLE)
NOT_BUILT = NotBuilt.exit_code


def library_path() -> Path:
    """The library's absolute path; :class:`NotBuilt` when it is missing or was built from
    another ``_edc.c`` than the one beside it (an editable install not rebuilt)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or spec.origin is None:
        raise NotBuilt(
            "the Batsim 5 library is not built (it needs a C compiler and a Python built with "
            "a shared libpython when batsched-ml is installed); serve over a socket instead: "
            "batsched-ml serve"
        )
    if SOURCE.is_file():
        built = getattr(importlib.import_module(MODULE), "SOURCE_SHA256", None)
        if built != source_digest(SOURCE):
            raise NotBuilt(
                f"the Batsim 5 library {spec.origin} was built from another {SOURCE.name}: "
                "rebuild it (pip install -e .)"
            )
    return Path(spec.origin).resolve()


def init_string(args: argparse.Namespace) -> str:
    """The init string asking the library for the scheduler the options describe: the run's
    settings as ``run.json`` records them, the forest's in full (``null`` included), read back
    here to the same settings before it is printed."""
    from batsched_ml.serving.edc import config_of_init

    config = options.config(args)
    settings = config.as_dict()
    if "forest" in settings:
        settings["forest"] = dataclasses.asdict(config.forest)
    text = json.dumps(settings, separators=(",", ":"))
    if config_of_init(text) != config:  # a setting the init string would not carry
        raise AssertionError(f"the init string {text} does not give back {config}")
    return text


def run(args: argparse.Namespace) -> int:
    if not args.init:
        given = [
            option
            for option, (dest, default) in args.scheduler_defaults.items()
            if getattr(args, dest) != default
        ]
        if given:
            raise ConfigError(f"{', '.join(given)}: the scheduler options go with --init")
    print(init_string(args) if args.init else library_path())
    return 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``edc-library`` (the scheduler options are ``serve``'s, for ``--init``)."""
    parser = commands.add_parser(
        "edc-library",
        help="print the path of Batsim 5's library of batsched-ml (batsim -l PATH INIT)",
        description="Print the absolute path of the shared library that Batsim 5 loads to run "
        "batsched-ml in its own process (batsim ... -l PATH INIT_STRING); exit "
        f"{NOT_BUILT} with one line when it is not built. With --init, print the init string "
        "for the scheduler options given instead (those of serve).",
    )
    parser.add_argument(
        "--init",
        action="store_true",
        help="print the init string (JSON) asking the library for the scheduler of the options",
    )
    first = len(parser._actions)
    options.add_scheduler_options(parser)
    defaults = {
        action.option_strings[-1]: (action.dest, action.default)
        for action in parser._actions[first:]
    }
    parser.set_defaults(handler=run, scheduler_defaults=defaults)
