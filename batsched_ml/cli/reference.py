"""The command reference page (docs/cli.md), written from the command line's own parser, so it
cannot drift from ``batsched-ml --help``: ``python -m batsched_ml.cli.reference docs/cli.md``
writes it, and a test fails when the page in the repository differs from what the parser
prints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batsched_ml.cli import build_parser
from batsched_ml.cli.parsing import HelpFormatter

#: The page's introduction, above the generated sections.
INTRO = """# Command reference

Every command and option, as `batsched-ml ... --help` prints them. This page is generated from
the command line's parser (`python -m batsched_ml.cli.reference docs/cli.md`); a test checks
that it is up to date.
"""


def command_helps() -> dict[str, str]:
    """Each command's ``--help`` at a fixed width (the page is the same whatever the terminal
    that writes it), by its full name (``batsched-ml workload convert``)."""
    helps: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        parser.formatter_class = lambda prog: HelpFormatter(prog, width=100)
        helps[name] = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")

    walk(build_parser(), "batsched-ml")
    return helps


def page() -> str:
    """docs/cli.md's text."""
    lines = [INTRO]
    for name, text in command_helps().items():
        lines += [f"## `{name}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m batsched_ml.cli.reference PAGE.md", file=sys.stderr)
        return 2
    Path(args[0]).write_text(page())
    print(f"wrote {args[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
