"""A run folder holds one run: identity, refusal of another run's folder, --force, status, and a
campaign that resumes only the runs made by this code with these settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batsched_ml.cli import main
from batsched_ml.experiments.campaign import RunSpec, run_identity, run_one
from batsched_ml.results.runfolder import (
    COMPLETE,
    OutputFolderError,
    RunIdentity,
    claim,
    read_run,
    require_complete,
    same_run,
)
from tests.conftest import workload_head
from tests.test_campaign import small_trace


def write_slice(kth_workload, path: Path, count: int = 300) -> Path:
    path.write_text(json.dumps(workload_head(kth_workload, count)))
    return path


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_the_run_id_names_the_settings_and_the_workload() -> None:
    a = RunIdentity("replay", {"policy": "fcfs", "variant": "base"}, {"sha256": "1"})
    assert (
        a.run_id
        == RunIdentity("replay", {"variant": "base", "policy": "fcfs"}, {"sha256": "1"}).run_id
    )
    assert (
        a.run_id
        != RunIdentity("replay", {"policy": "spf", "variant": "base"}, {"sha256": "1"}).run_id
    )
    assert (
        a.run_id
        != RunIdentity("replay", {"policy": "fcfs", "variant": "base"}, {"sha256": "2"}).run_id
    )
    assert (
        a.run_id
        != RunIdentity("serve", {"policy": "fcfs", "variant": "base"}, {"sha256": "1"}).run_id
    )
    assert len(a.run_id) == 16


def test_a_replay_refuses_a_folder_holding_another_run_and_force_replaces_it_whole(
    kth_workload, tmp_path: Path, capsys
) -> None:
    workload = write_slice(kth_workload, tmp_path / "w.json")
    out = tmp_path / "out"
    classified = ["--variant", "classification-idempotent", "--trees", "4"]
    assert main(["replay", str(workload), "-o", str(out), "-q", *classified]) == 0
    assert (out / "classification.csv").exists()
    first = read_run(out)
    assert first is not None and first["status"] == COMPLETE
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_id"] == first["run_id"]
    capsys.readouterr()

    # another run: refused, one line naming the folder and the choices, nothing touched
    before = sorted(p.name for p in out.iterdir())
    assert main(["replay", str(workload), "-o", str(out), "-q"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"batsched-ml: error: {out} holds another run (replay fcfs")
    assert "--force" in line and first["run_id"] in line
    assert sorted(p.name for p in out.iterdir()) == before

    # --force: the base run alone, no classification leftovers
    assert main(["replay", str(workload), "-o", str(out), "-q", "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "jobs.csv",
        "predictions.csv",
        "run.json",
        "summary.json",
        "timing.json",
    ]
    base = read_run(out)
    assert base is not None and base["run_id"] != first["run_id"]
    assert base["config"]["variant"] == "base"

    # the same run again: allowed, and the same bytes
    jobs, summary_bytes = (out / "jobs.csv").read_bytes(), (out / "summary.json").read_bytes()
    assert main(["replay", str(workload), "-o", str(out), "-q"]) == 0
    assert (out / "jobs.csv").read_bytes() == jobs
    assert (out / "summary.json").read_bytes() == summary_bytes


def test_force_never_empties_a_folder_with_files_no_run_writes(
    kth_workload, tmp_path: Path, capsys
) -> None:
    workload = write_slice(kth_workload, tmp_path / "w.json")
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    for force in ([], ["--force"]):
        assert main(["replay", str(workload), "-o", str(home), "-q", *force]) == 2
        line = one_error_line(capsys)
        assert str(home) in line and "thesis.tex" in line
    assert (home / "thesis.tex").read_text() == "precious"
    assert sorted(p.name for p in home.iterdir()) == ["thesis.tex"]


def test_a_run_that_fails_is_marked_failed_and_refused_by_readers(tmp_path: Path) -> None:
    folder = claim(tmp_path / "run", RunIdentity("replay", {"policy": "fcfs"}, {}))
    assert read_run(tmp_path / "run")["status"] == "running"
    with pytest.raises(RuntimeError), folder.running():
        raise RuntimeError("boom")
    record = read_run(tmp_path / "run")
    assert record["status"] == "failed" and record["reason"] == "RuntimeError: boom"
    with pytest.raises(OutputFolderError, match="the run is failed: RuntimeError: boom"):
        require_complete(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt), folder.running():
        raise KeyboardInterrupt
    assert read_run(tmp_path / "run")["status"] == "interrupted"


def campaign_run(tmp_path: Path) -> tuple[RunSpec, str, str, Path]:
    """A campaign's FCFS run of a 300-job trace, made: its spec, trace folder, output, folder."""
    spec = RunSpec(small_trace(tmp_path / "traces", 300), "fcfs", "base")
    traces, output = str(tmp_path / "traces"), str(tmp_path / "out")
    assert run_one(spec, traces, output)["status"] == "done"
    return spec, traces, output, spec.folder(Path(output))


def test_a_campaign_resumes_only_complete_runs_of_this_code_and_says_why_it_reran(
    tmp_path: Path,
) -> None:
    spec, traces, output, folder = campaign_run(tmp_path)
    jobs = (folder / "jobs.csv").read_bytes()
    assert run_one(spec, traces, output)["status"] == "existing"

    def edit(change) -> None:
        record = json.loads((folder / "run.json").read_text())
        change(record)
        (folder / "run.json").write_text(json.dumps(record))

    cases = [
        (lambda r: r["code"].update(source_sha256="older"), "made by other code"),
        (lambda r: r["code"]["libraries"].update({"scikit-learn": "0.1"}), "made by other code"),
        (lambda r: r.update(status="interrupted"), "left interrupted"),
        (lambda r: r.update(run_id="0123456789abcdef"), "another run's settings or workload"),
    ]
    for change, reason in cases:
        edit(change)
        row = run_one(spec, traces, output)
        assert (row["status"], row["rerun_reason"]) == ("done", reason)
        assert (folder / "jobs.csv").read_bytes() == jobs
        assert run_one(spec, traces, output)["status"] == "existing"

    (folder / "run.json").unlink()  # a folder from before run identities
    row = run_one(spec, traces, output)
    assert (row["status"], row["rerun_reason"]) == (
        "done",
        "no run.json (made before runs had an identity)",
    )

    # the trace changed under the same name: another workload, another run
    small_trace(tmp_path / "traces", 299)
    done, reason = same_run(folder, run_identity(spec, traces))
    assert (done, reason) == (False, "another run's settings or workload")


def test_serve_refuses_a_folder_holding_another_runs_trainer_history(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "served"
    out.mkdir()
    (out / "trainer.sqlite").write_bytes(b"SQLite format 3\0")
    args = ["serve", "--socket", "tcp://127.0.0.1:1", "-o", str(out), "--timeout", "1"]
    assert main(args) == 2
    line = one_error_line(capsys)
    assert line == (
        f"batsched-ml: error: {out} holds an unidentified run's files (trainer.sqlite; no "
        "run.json: made before runs had an identity?); choose an empty or new folder, or --force "
        "to replace it"
    )
    assert sorted(p.name for p in out.iterdir()) == ["trainer.sqlite"]


def test_the_code_identity_names_the_kernel_and_a_run_of_one_is_not_one_of_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulator's kernel is part of the code that made a run: ``run.json`` says which ran,
    and the source digest differs between the compiled one (its C source's digest counts) and
    the pure-Python one, so a campaign resuming under the other kernel replays the run again."""
    from batsched_ml.results.runfolder import code_identity, same_code
    from batsched_ml.sim import simgrid

    def identity(kernel: str) -> dict:
        monkeypatch.setenv(simgrid.KERNEL_VARIABLE, kernel)
        code_identity.cache_clear()
        try:
            return code_identity()
        finally:
            code_identity.cache_clear()

    python = identity("python")
    assert python["kernel"] == python["simulator"] == "python"
    assert same_code(python, identity("python"))
    monkeypatch.setenv(simgrid.KERNEL_VARIABLE, "")
    if simgrid.kernel_class() is simgrid.Kernel:
        pytest.skip("no compiled kernel in this install")
    compiled = identity("")
    assert compiled["kernel"] == compiled["simulator"] == "compiled"
    assert compiled["source_sha256"] != python["source_sha256"]
    assert not same_code(compiled, python)


def test_a_write_cut_short_leaves_no_scratch_file_and_its_run_is_made_again(
    tmp_path: Path,
) -> None:
    """A full disk stopped a campaign's runs mid-write: the scratch file of the atomic write
    (``jobs.csv.tmp``) stayed, and the resumed campaign refused the folder as holding a file
    no run writes. The writer now removes it on failure, and a run's own scratch file left by
    an older version is the run's: the run is made again there."""
    from batsched_ml.results.textfile import write_text

    target = tmp_path / "jobs.csv"
    target.write_text("old\n")

    def parts():
        yield "new,"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_text(target, parts())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv"]
    assert target.read_text() == "old\n"

    spec, traces, output, folder = campaign_run(tmp_path)
    jobs = (folder / "jobs.csv").read_bytes()
    record = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**record, "status": "running"}))
    (folder / "jobs.csv.tmp").write_text("half a tab")
    row = run_one(spec, traces, output)
    assert row["status"] == "done", row.get("error")
    assert not (folder / "jobs.csv.tmp").exists()
    assert (folder / "jobs.csv").read_bytes() == jobs
