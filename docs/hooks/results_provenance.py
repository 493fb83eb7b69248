"""MkDocs hook: each results page says which code made its runs, or warns that nothing ties
them to the current code (:func:`batsched_ml.experiments.probe.provenance`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def on_page_markdown(markdown: str, page: Any, config: Any, **kwargs: Any) -> str:
    from batsched_ml.experiments.probe import provenance, results_pages

    if page.file.src_uri not in results_pages(config["nav"] or []):
        return markdown

    before, after = provenance(Path(config["docs_dir"]) / page.file.src_uri)
    if before and markdown.startswith("# "):  # the warning under the page's title
        title, _, rest = markdown.partition("\n")
        return f"{title}\n\n{before}{rest}{after}"
    return f"{before}{markdown}{after}"
