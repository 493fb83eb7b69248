"""Shared fixtures: where the recordings of real Batsim (``tests/data``, copies of ``../shared``'s)
and the read-only traces of ``../shared`` (tests that need them skip without it) live."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

#: Set in the process that runs a test marked ``scheduler_source`` (see pytest_pyfunc_call)
SCHEDULER_SOURCE = "BATSCHED_ML_TEST_SCHEDULER_SOURCE"
if os.environ.get(SCHEDULER_SOURCE) == "1":
    # before any test module imports the scheduler
    from batsched_ml import compiled

    compiled.use_scheduler_source("a test marked scheduler_source")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

if TYPE_CHECKING:
    from batsched_ml.scheduler.parts import WaitingJob

ROOT = Path(__file__).resolve().parents[1]

# Hypothesis keeps no example database and its other files (a cache of the constants it reads in
# the code) in a temporary folder: the tests write only into temporary folders. A failure prints
# its falsifying example, which goes into the test as an @example. The folder goes at exit.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="batsched-ml-hypothesis-")
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
settings.register_profile("no-database", database=None)
settings.load_profile("no-database")

SHARED = ROOT.parent / "shared"
SHARED_REFERENCE = SHARED / "batsim-reference"
REFERENCE = ROOT / "tests" / "data" / "batsim-reference"  # the copies the tests read
TRACES = SHARED / "traces"
REFERENCE_CASES = (
    sorted(p.name for p in REFERENCE.iterdir() if p.is_dir()) if REFERENCE.is_dir() else []
)


@dataclass
class ReferenceCase:
    """One recorded run of real Batsim 4.2.1."""

    name: str
    path: Path
    records: list[dict[str, Any]]
    command: str

    @property
    def workload(self) -> dict[str, Any]:
        return json.loads((self.path / "workload.json").read_text())

    @property
    def dynamic_jobs(self) -> bool:
        return "--enable-dynamic-jobs" in self.command

    @property
    def acknowledge(self) -> bool:
        return "--acknowledge-dynamic-jobs" in self.command

    def jobs_csv(self) -> str:
        return (self.path / "out_jobs.csv").read_text()


def load_case(name: str) -> ReferenceCase:
    path = REFERENCE / name
    records = [json.loads(line) for line in (path / "messages.jsonl").read_text().splitlines()]
    return ReferenceCase(name, path, records, (path / "command.txt").read_text())


def missing_compiled(
    what: str, why: str = "is not built in this install (or is turned off)"
) -> NoReturn:
    """Stop a test that needs the compiled part ``what``: a failure where it must be there (CI
    sets ``BATSCHED_ML_REQUIRE_COMPILED=1``), else a skip (no compiler at install)."""
    if os.environ.get("BATSCHED_ML_REQUIRE_COMPILED") == "1":
        pytest.fail(f"{what} {why} (BATSCHED_ML_REQUIRE_COMPILED=1)")
    pytest.skip(f"{what} {why}")


def need_shared() -> None:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside the clone")


def workload_head(workload: dict[str, Any], count: int) -> dict[str, Any]:
    """The first ``count`` jobs of a workload, with just the profiles they use (and without
    the whole trace's cleaning record, which does not describe a slice)."""
    jobs = workload["jobs"][:count]
    used = {job["profile"] for job in jobs}
    return {
        **{k: v for k, v in workload.items() if k not in ("jobs", "profiles", "cleaning")},
        "jobs": jobs,
        "profiles": {name: p for name, p in workload["profiles"].items() if name in used},
    }


KTH = ROOT / "batsched_ml" / "data" / "KTH-SP2-1996-2.1-cln.swf.gz"


@pytest.fixture(scope="session")
def kth_workload() -> Iterator[dict[str, Any]]:
    """The shipped KTH-SP2 workload, loaded once and shared by every test of a worker: a test
    must not change it (it would move every later test's results in that worker, as happened
    once), so its teardown checks that it is as loaded."""
    from batsched_ml.workload.io import load_workload

    workload = load_workload(KTH)
    loaded = json.dumps(workload, sort_keys=True)
    yield workload
    assert json.dumps(workload, sort_keys=True) == loaded, (
        "a test changed the shared kth_workload in place: copy it (copy.deepcopy) first"
    )


def waiting(
    name: str, res: int, est: float, walltime: float | None = None, subtime: float = 0.0
) -> WaitingJob:
    """A queued job as the scheduler holds it, named ``entry.job.id``: the dispatchers take only
    that class (compiled, they read its fields natively and refuse a look-alike)."""
    from batsched_ml.job import Job
    from batsched_ml.scheduler.parts import WaitingJob

    return WaitingJob(Job(name, subtime, res, walltime, "p", {}), 0, est, res, subtime)


def _scheduler_compiled() -> bool:
    from batsched_ml import compiled

    return compiled.guard_scheduler()[0] == "compiled"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked ``scheduler_source`` monkeypatches a module of the scheduler: compiled,
    its modules call each other natively and never see the patch. Where the scheduler is
    compiled, such a test runs in a pytest process of its own, whose scheduler is imported
    from its Python source (the compiled simulator and the other compiled parts stay)."""
    if pyfuncitem.get_closest_marker("scheduler_source") is None:
        return None
    if os.environ.get(SCHEDULER_SOURCE) == "1" or not _scheduler_compiled():
        return None  # here, on the Python source
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            pyfuncitem.nodeid,
        ],
        cwd=ROOT,
        env={**os.environ, SCHEDULER_SOURCE: "1"},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or "1 passed" not in done.stdout:
        pytest.fail(
            f"on the scheduler's Python source (a process of its own):\n{done.stdout[-6000:]}"
            f"{done.stderr[-2000:]}",
            pytrace=False,
        )
    return True
