"""The tutorial (docs/tutorial.md), run as written: its commands in a fresh folder, the paper's
traces fetched from a local copy of the archive (nothing touches the internet), and what it
shows (the replay's output, the report's table) compared with what the commands print and
write. The whole run is ``long`` (12 replays and a report); the default run checks that every
command and the campaign file are what the code accepts."""

from __future__ import annotations

import csv
import http.server
import re
import shlex
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from batsched_ml.cli import build_parser, main
from batsched_ml.experiments.campaign import load_campaign
from batsched_ml.workload import archive
from tests.conftest import ROOT, TRACES

PAGE = ROOT / "docs" / "tutorial.md"


def blocks(kind: str) -> list[str]:
    """The page's fenced blocks of ``kind`` (``bash``, ``toml``, ``text``), in order."""
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), flags=re.S)


def commands() -> list[list[str]]:
    """The ``batsched-ml`` commands of the page, in order, as argument lists."""
    return [
        shlex.split(line)[1:]
        for block in blocks("bash")
        for line in block.splitlines()
        if line.startswith("batsched-ml ")
    ]


def table() -> dict[str, list[str]]:
    """The report's table on the page: label -> its cells."""
    rows = {}
    for line in PAGE.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| fcfs"):
            rows[cells[0]] = cells[1:]
    return rows


def test_every_command_of_the_tutorial_is_one_the_command_line_takes(tmp_path) -> None:
    found = commands()
    assert [c[0] for c in found] == ["traces", "traces", "replay", "campaign", "report"]
    parser = build_parser()
    for args in found:
        parser.parse_args(args)
    (config,) = blocks("toml")
    path = tmp_path / "tutorial.toml"
    path.write_text(config)
    campaign = load_campaign(path)
    assert len(campaign.runs) == 12
    assert {(run.predictor, run.dispatcher) for run in campaign.runs} == {
        (p, d) for p in ("requested", "easy++") for d in ("easy", "prb")
    }
    assert len(table()) == 4


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def paper_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The paper's logs served as the archive lays them out, the cache in the temporary
    folder."""
    if not TRACES.is_dir():
        pytest.skip("needs ../shared/traces (the paper's logs)")
    root = tmp_path / "archive"
    served = root / "parallel" / "workload"
    for trace in archive.TRACES:
        if trace.paper and trace.folder is not None:
            (served / trace.folder).mkdir(parents=True, exist_ok=True)
            shutil.copy(TRACES / trace.file, served / trace.folder / trace.file)

    def handler(*args: object, **kwargs: object) -> _Quiet:
        return _Quiet(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv(
        archive.URL_VARIABLE, f"http://127.0.0.1:{httpd.server_address[1]}/parallel/workload/"
    )
    monkeypatch.setenv(archive.DIR_VARIABLE, str(tmp_path / "cache"))
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.long
def test_the_tutorial_runs_as_written(paper_archive, tmp_path, monkeypatch, capsys) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (config,) = blocks("toml")
    (work / "tutorial.toml").write_text(config)
    printed = {}
    for args in commands():
        assert main(args) == 0, args
        printed[args[0]] = capsys.readouterr().out
    # the paper's traces in the cache, every one checked
    for trace in archive.TRACES:
        if trace.paper and trace.folder is not None and trace.name != "KTH-SP2":
            assert archive.content_sha256(tmp_path / "cache" / trace.file) == trace.sha256
    # the replay's output, as the page shows it
    shown = blocks("text")[0].splitlines()
    assert printed["replay"].splitlines()[: len(shown)] == shown
    # the report's table, from its CSV files
    report = work / "runs" / "tutorial-report"
    assert (report / "index.html").is_file()
    means = {row["label"]: row for row in csv.DictReader((report / "means.csv").open())}
    differences = {row["label"]: row for row in csv.DictReader((report / "differences.csv").open())}
    expected = table()
    assert set(means) == set(expected)
    for label, (copies, mean, against) in expected.items():
        row = means[label]
        assert copies == row["copies"] == "3"
        values = [float(row[k]) for k in ("mean_bsld", "mean_bsld_low", "mean_bsld_high")]
        assert mean == "{:.2f} ({:.2f} to {:.2f})".format(*values), label
        if label == "fcfs (base)":
            assert against == "" and label not in differences
            continue
        change = [
            100 * float(differences[label][k])
            for k in ("mean_bsld_relative", "mean_bsld_relative_low", "mean_bsld_relative_high")
        ]
        assert against == "{:+.1f} % ({:+.1f} to {:+.1f})".format(*change), label
    for stem in ("comparison", "gantt", "cumulative-bsld"):
        assert (report / f"KTH-SP2-1996-2.1-cln-{stem}.png").is_file()
        assert (report / f"KTH-SP2-1996-2.1-cln-{stem}.csv").is_file()
