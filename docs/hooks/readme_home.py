"""MkDocs hook: the home page is the README (one text, two places)."""

from __future__ import annotations

import re
from typing import Any


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


#: A Sphinx cross-reference role left in a docstring as mkdocstrings renders it: ``:class:`` then
#: the code span (with ``~`` when only the last name is shown).
_ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc):\s*<code>(~?)([\w.]+)</code>")


def _role(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """The API reference's docstrings are written for Sphinx's roles (``:class:`Result```):
    shown as the code they name."""
    return _ROLE.sub(_role, html)
