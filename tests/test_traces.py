"""``batsched-ml traces``: the Parallel Workloads Archive's logs listed, downloaded into the
per-user cache (checked against the SHA-256 of their uncompressed content) and named wherever a
trace's path is accepted. The archive is a local HTTP server serving a temporary folder laid out
like it (``l_NAME/FILE.swf.gz``); nothing here touches the internet."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from batsched_ml.cli import main
from batsched_ml.experiments.campaign import RunSpec, run_identity, run_one
from batsched_ml.workload import archive, shipped
from tests.conftest import TRACES as SHARED_TRACES

HEADER = "; Version: 2.2\n; UnixStartTime: 820454400\n; MaxProcs: 8\n"


def row(number: int, submit: int, run: int, procs: int) -> str:
    return f"{number} {submit} 0 {run} {procs} -1 -1 {procs} 500 -1 1 1 1 1 1 1 -1 -1\n"


def swf(jobs: int, seed: int = 0) -> bytes:
    rows = [row(i, 10 * i + seed, 50 + i, 1 + (i + seed) % 4) for i in range(1, jobs + 1)]
    return (HEADER + "".join(rows)).encode()


@dataclass
class Archive:
    root: Path  # the folder the server serves
    url: str

    def put(self, trace: archive.Trace, content: bytes, level: int = 9) -> Path:
        assert trace.folder is not None
        path = self.root / trace.folder / trace.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(content, compresslevel=level, mtime=0))
        return path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Archive]:
    """A local archive (and the cache, in the temporary folder, through the variables)."""
    root = tmp_path / "archive"
    root.mkdir()

    def handler(*args: object, **kwargs: object) -> _Quiet:
        return _Quiet(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/parallel/workload/"
    # the server's root is the archive's folder: the mirror's address ends in it
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv(archive.URL_VARIABLE, url)
    monkeypatch.setenv(archive.DIR_VARIABLE, str(tmp_path / "cache"))
    served = root / "parallel" / "workload"
    served.mkdir(parents=True)
    try:
        yield Archive(served, url)
    finally:
        httpd.shutdown()
        httpd.server_close()


def entry(
    name: str, content: bytes, *, paper: bool = False, folder: str | None = ""
) -> archive.Trace:
    return archive.Trace(
        name,
        f"{name}-2000-1.0-cln.swf.gz",
        f"l_{name.lower().replace('-', '_')}" if folder == "" else folder,
        f"the {name} machine",
        content.count(b"\n") - HEADER.count("\n"),
        "2000",
        8,
        hashlib.sha256(content).hexdigest(),
        paper=paper,
    )


@pytest.fixture
def tiny(server: Archive, monkeypatch: pytest.MonkeyPatch) -> dict[str, archive.Trace]:
    """A registry of three small logs on the server (two "paper" ones) and a synthetic one."""
    contents = {"TINY-A": swf(6), "TINY-B": swf(9, 1), "TINY-C": swf(4, 2)}
    traces = {
        name: entry(name, content, paper=name != "TINY-C") for name, content in contents.items()
    }
    for name, trace in traces.items():
        server.put(trace, contents[name])
    traces["SYNTH"] = entry("SYNTH", swf(3), folder=None)
    monkeypatch.setattr(archive, "TRACES", tuple(traces.values()))
    return traces


def cache() -> Path:
    return archive.cache_dir()


def test_list_names_every_log_and_says_which_are_at_hand(tiny, capsys) -> None:
    assert main(["traces", "list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert list(lines) == ["TINY-A", "TINY-B", "TINY-C", "SYNTH"]
    assert "the TINY-A machine (paper)" in lines["TINY-A"]
    assert " 6 " in lines["TINY-A"] and "2000" in lines["TINY-A"]
    assert "cached" not in out and "not in archive" in lines["SYNTH"]
    assert f"cache: {cache()}" in out
    assert main(["traces", "fetch", "-q", "TINY-B"]) == 0
    capsys.readouterr()
    assert main(["traces", "list"]) == 0
    out = capsys.readouterr().out
    listed = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert "cached" in listed["TINY-B"] and "cached" not in listed["TINY-A"]
    size = (cache() / tiny["TINY-B"].file).stat().st_size
    assert f"{size} B" in listed["TINY-B"]


def test_the_real_registry_lists_the_archive_logs(capsys) -> None:
    names = [trace.name for trace in archive.TRACES]
    assert len(names) == 13 and len(set(names)) == 13
    assert [t.name for t in archive.paper_traces()] == [
        "CTC-SP2",
        "HPC2N",
        "KTH-SP2",
        "SDSC-BLUE",
        "SDSC-SP2",
    ]
    assert archive.lookup("kth-sp2-1996-2.1-cln.swf.gz").name == "KTH-SP2"
    assert archive.lookup("HPC2N-2002-2.2-cln").url(archive.ARCHIVE_URL) == (
        "https://www.cs.huji.ac.il/labs/parallel/workload/l_hpc2n/HPC2N-2002-2.2-cln.swf.gz"
    )
    assert not archive.lookup("lublin_256").fetchable
    assert all(len(t.sha256) == 64 for t in archive.TRACES)


def test_fetch_one_downloads_it_into_the_cache_once(tiny, capsys) -> None:
    assert main(["traces", "fetch", "-q", "TINY-A"]) == 0
    path = cache() / tiny["TINY-A"].file
    assert capsys.readouterr().out == f"TINY-A: downloaded to {path}\n"
    assert gzip.decompress(path.read_bytes()) == swf(6)
    assert sorted(p.name for p in cache().iterdir()) == [path.name]  # no partial file left
    assert main(["traces", "fetch", "-q", "tiny-a-2000-1.0-cln"]) == 0  # full name, any case
    assert capsys.readouterr().out == f"TINY-A: already in {path}\n"


def test_fetch_several_and_the_papers(tiny, capsys) -> None:
    assert main(["traces", "fetch", "-q", "TINY-C", "TINY-A"]) == 0
    assert sorted(p.name for p in cache().iterdir()) == sorted(
        tiny[n].file for n in ("TINY-A", "TINY-C")
    )
    capsys.readouterr()
    assert main(["traces", "fetch", "-q", "--paper"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"TINY-A: already in {cache() / tiny['TINY-A'].file}",
        f"TINY-B: downloaded to {cache() / tiny['TINY-B'].file}",
    ]
    assert main(["traces", "fetch", "-q", "--all"]) == 0
    assert "SYNTH: not in the archive, skipped" in capsys.readouterr().out


def test_a_checksum_mismatch_is_refused_and_nothing_is_kept(tiny, server, capsys) -> None:
    server.put(tiny["TINY-A"], swf(6) + row(7, 99, 10, 1).encode())  # not the registry's
    assert main(["traces", "fetch", "-q", "TINY-A", "TINY-B"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("batsched-ml: error: TINY-A: the content of ")
    assert "SHA-256" in err[0] and err[0].endswith("not kept")
    assert [p.name for p in cache().iterdir()] == [tiny["TINY-B"].file]  # B went on


def test_a_file_that_is_not_gzip_is_refused(tiny, server, capsys) -> None:
    (server.root / tiny["TINY-A"].folder / tiny["TINY-A"].file).write_bytes(b"<html>moved</html>")
    assert main(["traces", "fetch", "-q", "TINY-A"]) == 2
    err = capsys.readouterr().err
    assert "not kept" in err and err.count("\n") == 1
    assert list(cache().iterdir()) == []


def test_a_log_missing_on_the_server_is_one_line(tiny, server, capsys) -> None:
    (server.root / tiny["TINY-C"].folder / tiny["TINY-C"].file).unlink()
    assert main(["traces", "fetch", "-q", "TINY-C"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"batsched-ml: error: TINY-C: cannot download {server.url}l_tiny_c/")
    assert "HTTP 404" in err and err.count("\n") == 1
    assert list(cache().iterdir()) == []


def test_unknown_and_unfetchable_names_are_refused(tiny, capsys) -> None:
    assert main(["traces", "fetch", "NOPE"]) == 2
    assert "unknown trace 'NOPE'" in capsys.readouterr().err
    assert main(["traces", "fetch", "SYNTH"]) == 2
    assert "not in the Parallel Workloads Archive" in capsys.readouterr().err
    assert main(["traces", "fetch"]) == 2


@pytest.mark.skipif(
    not (SHARED_TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz").is_file(), reason="needs ../shared"
)
def test_a_recompressed_real_log_passes_its_content_checksum(server, capsys) -> None:
    """A mirror that recompressed the archive's file (other gzip bytes, the same content)."""
    trace = archive.lookup("NASA-iPSC")
    original = (SHARED_TRACES / trace.file).read_bytes()
    served = server.put(trace, gzip.decompress(original), level=1)
    assert served.read_bytes() != original
    assert main(["traces", "fetch", "-q", "NASA-iPSC"]) == 0
    path = cache() / trace.file
    assert path.read_bytes() == served.read_bytes()
    assert archive.content_sha256(path) == trace.sha256
    assert shipped.resolve("NASA-iPSC") == path


def test_path_prints_where_a_log_is_or_how_to_fetch_it(tiny, capsys) -> None:
    assert main(["traces", "path", "TINY-A"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "TINY-A (TINY-A-2000-1.0-cln) is not downloaded: batsched-ml traces fetch TINY-A\n"
    )
    assert main(["traces", "fetch", "-q", "TINY-A"]) == 0
    capsys.readouterr()
    assert main(["traces", "path", "TINY-A-2000-1.0-cln.swf.gz"]) == 0
    assert capsys.readouterr().out == f"{cache() / tiny['TINY-A'].file}\n"
    assert main(["traces", "path", "NOPE"]) == 2


def test_the_shipped_trace_is_at_hand_without_download(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(archive.DIR_VARIABLE, str(tmp_path / "empty"))
    assert shipped.resolve("KTH-SP2") == shipped.DEFAULT_TRACE
    assert shipped.resolve("kth-sp2") == shipped.DEFAULT_TRACE
    assert main(["traces", "path", "KTH-SP2"]) == 0
    assert capsys.readouterr().out == f"{shipped.DEFAULT_TRACE}\n"
    assert main(["traces", "fetch", "-q", "KTH-SP2"]) == 0
    assert "shipped with batsched-ml" in capsys.readouterr().out
    assert not (tmp_path / "empty").exists()


def test_replay_takes_a_log_by_name(tiny, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    assert main(["replay", "TINY-B", "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "batsched-ml: error: TINY-B (TINY-B-2000-1.0-cln) is not downloaded: "
        "batsched-ml traces fetch TINY-B\n"
    )
    assert not out.exists()
    assert main(["traces", "fetch", "-q", "TINY-B"]) == 0
    assert main(["replay", "TINY-B", "-o", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 9
    run = json.loads((out / "run.json").read_text())
    assert run["workload"]["name"] == tiny["TINY-B"].file
    assert main(["workload", "convert", "tiny-b", "-o", str(tmp_path / "converted")]) == 0
    assert (tmp_path / "converted" / "TINY-B-2000-1.0-cln.json").is_file()


def test_a_campaign_finds_its_traces_in_the_cache(tiny, tmp_path, capsys) -> None:
    """A trace not in the campaign's trace_dir is the downloaded log of that name; a known log
    that is neither is one line saying how to fetch it."""
    trace_dir = tmp_path / "no-such-folder"
    spec = RunSpec("TINY-A-2000-1.0-cln", "fcfs", "base", 0)
    with pytest.raises(archive.TraceNotFetched, match="batsched-ml traces fetch TINY-A"):
        run_identity(spec, trace_dir)
    with pytest.raises(archive.TraceNotFetched) as raised:
        shipped.check_fetched(["TINY-A", "TINY-C", "TINY-A", "unknown"], trace_dir)
    assert str(raised.value) == (
        f"not downloaded (nor in {trace_dir}): TINY-A, TINY-C: "
        "batsched-ml traces fetch TINY-A TINY-C"
    )
    assert main(["traces", "fetch", "-q", "TINY-A"]) == 0
    shipped.check_fetched(["TINY-A"], trace_dir)
    row = run_one(spec, str(trace_dir), str(tmp_path / "runs"))
    assert row["status"] == "done", row
    assert row["jobs"] == 6
    # a file in trace_dir comes first
    trace_dir.mkdir()
    local = trace_dir / "TINY-A-2000-1.0-cln.swf.gz"
    local.write_bytes(gzip.compress(swf(5)))
    assert shipped.resolve("TINY-A-2000-1.0-cln", trace_dir) == local
    assert shipped.resolve("unknown", trace_dir) == trace_dir / "unknown.swf.gz"


def test_paper_results_says_how_to_fetch_its_traces(tiny, tmp_path, capsys) -> None:
    argv = [
        "paper-results",
        *("-o", str(tmp_path / "results.md"), "--runs", str(tmp_path / "runs")),
        *("--trace-dir", str(tmp_path / "none"), "--traces", "TINY-A-2000-1.0-cln"),
        *("--policies", "fcfs", "--variants", "base", "--workers", "1"),
    ]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"batsched-ml: error: not downloaded (nor in {tmp_path / 'none'}): TINY-A: "
        "batsched-ml traces fetch TINY-A\n"
    )


def test_the_progress_bar_and_quiet(tiny, capsys) -> None:
    assert main(["traces", "fetch", "TINY-A"]) == 0
    err = capsys.readouterr().err
    assert "TINY-A" in err and "100%" in err
    assert main(["traces", "fetch", "-q", "TINY-B"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.startswith("TINY-B: downloaded to ")


def test_the_cache_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(archive.DIR_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr("sys.platform", "linux")
    assert archive.cache_dir() == tmp_path / "xdg" / "batsched-ml" / "traces"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert archive.cache_dir() == tmp_path / "home" / ".cache" / "batsched-ml" / "traces"
    monkeypatch.setenv(archive.DIR_VARIABLE, str(tmp_path / "mine"))
    assert archive.cache_dir() == tmp_path / "mine"


def test_the_cache_folder_override_is_where_fetch_writes(
    tiny, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv(archive.DIR_VARIABLE, str(tmp_path / "elsewhere"))
    assert main(["traces", "fetch", "-q", "TINY-C"]) == 0
    assert (tmp_path / "elsewhere" / tiny["TINY-C"].file).is_file()
    assert not (tmp_path / "cache").exists()
    capsys.readouterr()
    assert main(["traces", "path", "TINY-C"]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'elsewhere' / tiny['TINY-C'].file}\n"
