"""Every Python snippet of the README and the docs runs, from a folder that is not the
repository's (a user's notebook): a page can not show code that no longer works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SNIPPETS = [
    (page, number, code)
    for page in PAGES
    for number, code in enumerate(BLOCK.findall(page.read_text()), start=1)
]


def test_the_pages_have_snippets() -> None:
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize(
    ("page", "number", "code"),
    SNIPPETS,
    ids=[f"{page.name}-{number}" for page, number, _ in SNIPPETS],
)
def test_a_snippet_runs(
    page: Path, number: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page.name} snippet {number}", "exec"), {"__name__": "snippet"})


def test_the_shipped_trace_is_found_by_name_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import batsched_ml
    from batsched_ml.workload import shipped

    monkeypatch.chdir(tmp_path)
    assert shipped.resolve("KTH-SP2-1996-2.1-cln.swf.gz") == shipped.DEFAULT_TRACE
    assert shipped.resolve("KTH-SP2-1996-2.1-cln") == shipped.DEFAULT_TRACE
    assert shipped.resolve(None) == shipped.DEFAULT_TRACE
    assert shipped.resolve("elsewhere/KTH-SP2-1996-2.1-cln.swf.gz") == Path(
        "elsewhere/KTH-SP2-1996-2.1-cln.swf.gz"
    )
    (tmp_path / "KTH-SP2-1996-2.1-cln.swf.gz").write_text("a user's own file")
    assert shipped.resolve("KTH-SP2-1996-2.1-cln.swf.gz") == Path("KTH-SP2-1996-2.1-cln.swf.gz")
    (tmp_path / "KTH-SP2-1996-2.1-cln.swf.gz").unlink()
    result = batsched_ml.replay()  # no argument: the shipped trace
    assert len(result.jobs) == 28_467 and round(result.summary["mean_bsld"], 2) == 31.75
