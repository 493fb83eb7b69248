"""The scheduler compiled by mypyc (``batsched_ml.compiled.SCHEDULER_GROUP``): used only when
built from the very sources beside it, all of its modules or none, and deciding exactly as its
Python source does.

Each check runs in a process of its own (the group is chosen once, at ``import batsched_ml``).
Without the compiled scheduler these tests fail where ``BATSCHED_ML_REQUIRE_COMPILED=1`` is set
(CI, which installs the package with its build requirements), else they skip.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from batsched_ml import compiled
from tests.conftest import ROOT, missing_compiled

# which file each module of the group was loaded from, and what the guard decided
SHOW = """
import importlib, json, sys
from batsched_ml import compiled
files = [importlib.import_module(name).__file__ for name in compiled.SCHEDULER_GROUP]
print(json.dumps({"state": compiled.guard_scheduler(), "files": files}))
"""

# the files of a replay (their digests: the job table, the summary, the predictions, the
# classifier's tables; not the timings) of a KTH-SP2 slice under every queue order, every
# dispatcher but CPH (its solver's time limit) and classified variants; argv[1] == "source":
# the group imported from its .py files
REPLAYS = """
import hashlib, json, sys, tempfile
from pathlib import Path
from batsched_ml import compiled
if sys.argv[1] == "source":
    compiled.use_scheduler_source("the test's source run")
from batsched_ml import registry
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload
from tests.conftest import KTH, workload_head

workload = workload_head(load_workload(KTH), 3000)
settings = [{"policy": policy} for policy in registry.POLICIES]
settings += [{"dispatcher": name} for name in registry.DISPATCHERS if name != "cph"]
settings += [
    {"policy": "spf", "predictor": "easy++"},
    {"policy": "fcfs", "backfilling": False},
    {"policy": "fcfs", "starvation_threshold": 3600.0},
    {"policy": "fcfs", "variant": "classification-idempotent"},
    {"policy": "spf", "variant": "class-clairvoyant"},
]
out = {}
for setting in settings:
    with tempfile.TemporaryDirectory() as folder:
        write_replay(run_replay(workload, ReplayConfig(**setting)), folder)
        for path in sorted(Path(folder).iterdir()):
            if path.name != "timing.json":  # seconds
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[f"{json.dumps(setting)} {path.name}"] = digest
print(json.dumps({"state": compiled.guard_scheduler(), "tables": out}))
"""


def run(code: str, *args: str, path: Path = ROOT, **env: str) -> tuple[dict, str]:
    """Run ``code`` with the package at ``path``; its JSON output and its standard error."""
    environ = {k: v for k, v in os.environ.items() if k != compiled.VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=path,  # python -c puts its folder first on the path
        env={**environ, "PYTHONPATH": os.pathsep.join([str(path), str(ROOT)]), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def compiled_files(files: list[str]) -> bool:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    if all(f.endswith(suffixes) for f in files):
        return True
    assert all(f.endswith(".py") for f in files), files  # never some of each
    return False


@pytest.fixture(scope="module")
def built() -> None:
    shown, _ = run(SHOW)
    if shown["state"][0] != "compiled":
        missing_compiled("the compiled scheduler", f"is not used: {shown['state'][1]}")


def test_the_compiled_scheduler_runs_where_it_was_built(built: None) -> None:
    shown, stderr = run(SHOW)
    assert compiled_files(shown["files"])
    assert "RuntimeWarning" not in stderr


def test_the_variable_runs_the_whole_group_from_source(built: None) -> None:
    shown, stderr = run(SHOW, **{compiled.VARIABLE: "python"})
    assert shown["state"] == ["python", f"{compiled.VARIABLE}=python"]
    assert not compiled_files(shown["files"])
    assert "RuntimeWarning" not in stderr


def test_a_value_of_the_variable_it_does_not_know_is_said_once(built: None) -> None:
    """A typo (``pyhton``) must not pass without a word: one warning names it, and the
    compiled parts run as without the variable."""
    shown, stderr = run(SHOW, **{compiled.VARIABLE: "pyhton"})
    assert shown["state"] == ["compiled", "built from the sources beside it"]
    assert stderr.count(f"{compiled.VARIABLE}='pyhton' is not understood") == 1


def copy_package(tmp_path: Path) -> Path:
    """A copy of the package with its builds, as an editable install has it."""
    shutil.copytree(
        ROOT / "batsched_ml",
        tmp_path / "batsched_ml",
        ignore=shutil.ignore_patterns("__pycache__", "*.swf.gz"),
    )
    return tmp_path


def test_an_unedited_copy_runs_compiled(built: None, tmp_path: Path) -> None:
    shown, _ = run(SHOW, path=copy_package(tmp_path))
    assert shown["state"][0] == "compiled"
    assert compiled_files(shown["files"])
    assert all(f.startswith(str(tmp_path)) for f in shown["files"])


@pytest.mark.parametrize("module", compiled.SCHEDULER_GROUP)
def test_an_edited_source_runs_the_whole_group_from_source(
    built: None, tmp_path: Path, module: str
) -> None:
    """A ``.py`` edited after the build: the edit counts, every module of the group is
    imported from its source (they call each other natively: all or none), and a warning
    says that the build is stale."""
    package = copy_package(tmp_path)
    source = package.joinpath(*module.split(".")).with_suffix(".py")
    source.write_text(source.read_text() + "\n# an edit\n")
    shown, stderr = run(SHOW, path=package)
    assert shown["state"] == ["python", f"{source.name} ({module}) changed since it was compiled"]
    assert not compiled_files(shown["files"])
    assert all(f.startswith(str(tmp_path)) for f in shown["files"])
    assert "the compiled scheduler is not used" in stderr


def test_an_edit_of_the_easy_rule_changes_the_replay(built: None, tmp_path: Path) -> None:
    """The worst defect a stale build could make: an edit of scheduler/easy.py silently not
    run. EASY's pass edited to stop at the first job that does not fit gives list scheduling's
    job table exactly."""
    code = """
import hashlib, json
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload
from tests.conftest import KTH, workload_head
workload = workload_head(load_workload(KTH), 1500)
out = {str(b): run_replay(workload, ReplayConfig(backfilling=b)).rows for b in (True, False)}
print(json.dumps({k: hashlib.sha256("".join(v).encode()).hexdigest() for k, v in out.items()}))
"""
    before, _ = run(code)
    assert before["True"] != before["False"]
    package = copy_package(tmp_path)
    easy = package / "batsched_ml" / "scheduler" / "easy.py"
    text = easy.read_text()
    assert text.count("    if index == size or not backfilling:\n") == 1
    easy.write_text(text.replace("    if index == size or not backfilling:\n", "    if True:\n"))
    after, stderr = run(code, path=package)
    assert after["True"] == before["False"]
    assert "easy.py (batsched_ml.scheduler.easy) changed since it was compiled" in stderr


def test_compiled_and_source_decide_alike(built: None) -> None:
    """The same files, byte for byte, from the compiled group and from its source."""
    fast, _ = run(REPLAYS, "compiled")
    slow, _ = run(REPLAYS, "source")
    assert fast["state"][0] == "compiled"
    assert slow["state"] == ["python", "the test's source run"]
    assert sum(key.endswith(" jobs.csv") for key in fast["tables"]) >= 14
    assert any(key.endswith(" predictions.csv") for key in fast["tables"])
    assert fast["tables"] == slow["tables"]


def test_run_json_names_the_scheduler_that_ran(built: None, tmp_path: Path) -> None:
    """``run.json``'s code identity says whether the scheduler ran compiled, and a run of one
    is not taken for a run of the other (the compiled group's digests count); the C parts
    stay compiled under the scheduler's fallback, so only the scheduler differs."""
    code = """
import json
from batsched_ml.results.runfolder import code_identity
print(json.dumps(code_identity()))
"""
    fast, _ = run(code)
    assert fast["scheduler"] == "compiled"
    package = copy_package(tmp_path)
    core = package / "batsched_ml" / "scheduler" / "core.py"
    core.write_text(core.read_text() + "\n")  # the build is stale
    stale, _ = run(code, path=package)
    assert stale["scheduler"] == "python"
    assert stale["simulator"] == fast["simulator"]
    forced, _ = run(code, **{compiled.VARIABLE: "python"})
    assert forced["scheduler"] == "python"
    assert forced["source_sha256"] != fast["source_sha256"]
