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


def test_the_docker_pages_expected_figures_are_the_replays(tmp_path: Path) -> None:
    """docs/docker.md's expected output of the compose experiment shows the figures of the
    embedded replay with the same settings (the job tables are byte-identical): they are
    checked against that replay here, so the page cannot keep figures of older code."""
    from batsched_ml.cli import main

    page = (ROOT / "docs" / "docker.md").read_text()
    block = page[page.index("Expected output (KTH-SP2") :]
    block = block[block.index("```\n") + 4 :]
    block = block[: block.index("```")]
    shown = [
        line.split("|", 1)[1].strip()
        for line in block.splitlines()
        if line.startswith("experiment_1  | ") and not line.endswith("report.md")
    ]
    assert any(line.startswith("mean bounded slowdown") for line in shown)
    out = tmp_path / "out"
    import contextlib
    import io

    printed, said = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
        assert main(["replay", "-q", "-o", str(out), "--variant", "classification-idempotent"]) == 0
    table = {" ".join(line.split()) for line in printed.getvalue().splitlines()}
    # the cleaning lines: the replay names the trace, the experiment the converted workload
    cleaning = said.getvalue().replace("KTH-SP2-1996-2.1-cln.swf.gz:", "workload.json:")
    table |= {" ".join(line.split()) for line in cleaning.splitlines()}
    assert any(line.startswith("batsched-ml: workload.json: ") for line in shown)
    for line in shown:
        assert " ".join(line.split()) in table, line
