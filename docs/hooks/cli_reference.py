"""MkDocs hook: the command reference page, written from the command line's own parser at build
time, so it cannot drift from ``batsched-ml --help``."""

from __future__ import annotations

import argparse
import re
from typing import Any

PAGE = "cli.md"


def _help(parser: argparse.ArgumentParser) -> str:
    # a fixed width: the page is the same whatever the terminal that builds it
    parser.formatter_class = lambda prog: parser_formatter(prog)  # type: ignore[assignment]
    return parser.format_help()


def parser_formatter(prog: str) -> argparse.HelpFormatter:
    from batsched_ml.cli import _HelpFormatter

    return _HelpFormatter(prog, width=100)


def _commands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, Any]]:
    out = [(prefix, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, f"{prefix} {name}")
    return out


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    from batsched_ml.cli import build_parser

    lines = [markdown.rstrip(), ""]
    for name, parser in _commands(build_parser(), "batsched-ml"):
        lines += [f"## `{name}`", "", "```text", _help(parser).rstrip(), "```", ""]
    return "\n".join(lines)


def on_page_read_source(page: Any, config: Any, **kwargs: Any) -> str | None:
    """The home page is the README (one text, two places): its ``docs/`` links made relative."""
    if page.file.src_uri != "index.md":
        return None
    from pathlib import Path

    readme = Path(config["docs_dir"]).parent / "README.md"
    text = readme.read_text().replace("](docs/", "](")
    # a link to a file of the repository outside docs/ (examples/README.md) has no page on the
    # site: its text stays, naming the file
    return re.sub(r"\[([^\]]+)\]\((?!https?:|#|[\w-]+\.md)([^)]+)\)", r"\1 (`\2`)", text)
