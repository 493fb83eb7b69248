"""MkDocs hook: each results page says which code made its runs, or warns that nothing ties
them to the current code (:func:`batsched_ml.results.probe.provenance`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _results_pages(nav: list[Any]) -> set[str]:
    for entry in nav:
        if isinstance(entry, dict) and "Results" in entry:
            return {
                page
                for item in entry["Results"]
                for page in (item.values() if isinstance(item, dict) else [item])
                if not page.endswith("-notes.md")
            }
    return set()


def on_page_markdown(markdown: str, page: Any, config: Any, **kwargs: Any) -> str:
    if page.file.src_uri not in _results_pages(config["nav"] or []):
        return markdown
    from batsched_ml.results.probe import provenance

    before, after = provenance(Path(config["docs_dir"]) / page.file.src_uri)
    if before and markdown.startswith("# "):  # the warning under the page's title
        title, _, rest = markdown.partition("\n")
        return f"{title}\n\n{before}{rest}{after}"
    return f"{before}{markdown}{after}"
