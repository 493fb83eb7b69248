"""A run folder holds one run: its identity, its status, and nothing left over from another run.

Every command that writes a run (``replay``, ``serve``, a campaign's runs, ``collect``) first
*claims* its output folder with :func:`claim`, which writes ``run.json``:

* ``run_id``: a digest of what was asked: the command, the full configuration and the
  workload's sha256. The same run asked twice has the same id (outputs are deterministic, so
  ``summary.json``, which carries it, stays byte-identical across reruns); any other setting,
  another trace or another version of the trace gives another id.
* ``code``: what ran it: the package version, a digest of the package's source files, the git
  commit when the package lives in a git checkout, and the versions of the libraries that
  shape results. A campaign resumes a run only when both the id and the code match
  (:func:`same_run`), so results of older code never mix silently with new ones.
* ``status``: ``running`` while the run goes on, then ``complete`` once every file is written,
  or ``interrupted`` / ``failed`` with the reason. This is the one place that says whether a
  folder holds a whole run: ``report``, ``campaign`` and ``collect`` read it (:func:`status_of`).

A folder holding another run, or files that are not a run's, is refused with one line naming it
and the choices; ``--force`` replaces it whole, but only when every entry in it is a file a run
writes (a mistyped ``-o ~`` never empties a home folder).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from batsched_ml import __version__, blas_kernel
from batsched_ml.compiled import compiled_module, guard_scheduler, scheduler_sources
from batsched_ml.errors import UserError
from batsched_ml.results.outputs import RUN_FILE, RUN_OUTPUTS, write_json
from batsched_ml.results.textfile import SCRATCH_SUFFIX
from batsched_ml.workload.io import WorkloadError

RUNNING, COMPLETE, INTERRUPTED, FAILED = "running", "complete", "interrupted", "failed"

#: Libraries whose versions can change a run's numbers (the forest, the planner, the tables).
RESULT_LIBRARIES = ("numpy", "scikit-learn", "pandas", "ortools")


class OutputFolderError(UserError, ValueError):
    """An output folder that cannot take this run (a user error: one line, exit 2)."""


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class RunIdentity:
    """What a run is: ``command`` (``replay``, ``serve``, ``collect``), its full configuration
    and its workload (``{"name", "sha256", ...}``; ``sha256`` of the file read)."""

    command: str
    config: Mapping[str, Any]
    workload: Mapping[str, Any]

    @property
    def run_id(self) -> str:
        text = _canonical(
            {"command": self.command, "config": self.config, "workload": self.workload}
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        config = self.config
        name = self.workload.get("name") or "?"
        return (
            f"{self.command} {config.get('policy', '?')} ({config.get('variant', '?')}) "
            f"on {name}, run id {self.run_id}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "command": self.command,
            "config": dict(self.config),
            "workload": dict(self.workload),
        }


@functools.cache
def code_identity() -> dict[str, Any]:
    """The code that runs: version, source digest, git commit (and whether the package's
    files differ from it), the simulator's kernel and the result-shaping libraries' versions.

    The digest covers the package's Python files and, for each compiled part in use (the
    SimGrid kernel, the compiled simulator, the forest's walk, the forest's grower, the SWF
    reader: :mod:`batsched_ml.compiled`), the digest of the C source it was built from (the
    module knows it: an installed wheel has no ``.c`` file to read); ``scheduler`` says
    whether the scheduler ran compiled by mypyc from those very Python files (``compiled``) or
    from them directly (``python``), and the digest counts the compiled one. Each gives the
    same results as its reference (the tests compare them), but a run made by one is not taken
    for a run made by the other: a campaign resuming under the other replays it again.
    ``blas_kernel`` names the OpenBLAS kernel asked for
    (:mod:`batsched_ml.blas_kernel`), informative like the git commit.
    """
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    out: dict[str, Any] = {"version": __version__, "source_sha256": ""}
    for part, source in (
        ("kernel", "sim/_ckernel.c"),
        ("simulator", "sim/_csim.c"),
        ("forest", "predict/_cforest.c"),
        ("grow", "predict/_cgrow.c"),
        ("swf", "workload/_cswf.c"),
    ):
        name = "batsched_ml." + source.removesuffix(".c").replace("/", ".")
        module = compiled_module(name, package / source)
        if module is not None:
            digest.update(f"compiled {part}\0".encode() + str(module.SOURCE_SHA256).encode())
        out[part] = "python" if module is None else "compiled"
    # the scheduler compiled by mypyc: its sources are the package's own .py files, already
    # digested above (the guard runs it only when built from them); what it counts is that
    # the compiled group ran, and from which sources
    sources = scheduler_sources()
    if sources is not None:
        digest.update(b"compiled scheduler\0" + json.dumps(sources, sort_keys=True).encode())
    out["scheduler"] = guard_scheduler()[0]
    out["source_sha256"] = digest.hexdigest()
    # the OpenBLAS kernel asked for (None: OpenBLAS's own choice), on which SVR's rounding, so
    # the SU predictor's predictions, depend (batsched_ml.blas_kernel)
    out["blas_kernel"] = blas_kernel.CHOSEN
    out |= {
        "git_commit": None,
        "git_dirty": None,
    }
    try:
        commit = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(package), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        out["git_commit"], out["git_dirty"] = commit, bool(dirty)
    except (OSError, subprocess.SubprocessError):
        pass  # not a git checkout (an installed wheel): the source digest says it all
    libraries: dict[str, str | None] = {}
    for name in RESULT_LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libraries[name] = None
    out["libraries"] = libraries
    return out


def same_code(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two ``code`` records ran the same code (the git commit is informative only:
    the source digest and the libraries decide)."""
    if not a or not b:
        return False
    keys = ("version", "source_sha256", "libraries")
    return all(a.get(k) == b.get(k) for k in keys)


def read_run(folder: str | Path) -> dict[str, Any] | None:
    """``run.json`` of ``folder``, or ``None`` when there is none (or it is unreadable)."""
    path = Path(folder) / RUN_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def status_of(folder: str | Path) -> str | None:
    """``complete``, ``running``, ``interrupted``, ``failed``, or ``None`` without run.json."""
    run = read_run(folder)
    return None if run is None else str(run.get("status"))


def require_complete(folder: str | Path, what: str = "run") -> dict[str, Any] | None:
    """Refuse a folder whose run did not complete (``OutputFolderError`` naming it and why);
    return its run record (``None`` for a folder written before run.json existed)."""
    run = read_run(folder)
    if run is None:
        return None
    status = run.get("status")
    if status != COMPLETE:
        reason = f": {run['reason']}" if run.get("reason") else ""
        raise OutputFolderError(
            f"{folder}: the {what} is {status}{reason} (run.json), not complete"
        )
    return run


def same_run(folder: str | Path, identity: RunIdentity) -> tuple[bool, str]:
    """Whether ``folder`` holds ``identity``'s run, complete, made by this code; and if not,
    why (for a campaign's "reran N: ..." line)."""
    run = read_run(folder)
    if run is None:
        if (Path(folder) / "summary.json").exists():
            return False, "no run.json (made before runs had an identity)"
        return False, "not run yet"
    if run.get("run_id") != identity.run_id:
        return False, "another run's settings or workload"
    if run.get("status") != COMPLETE:
        return False, f"left {run.get('status')}"
    if not same_code(run.get("code"), code_identity()):
        return False, "made by other code"
    for name, info in (run.get("files") or {}).items():
        path = Path(folder) / name
        if not path.is_file() or path.stat().st_size != info.get("bytes"):
            return False, "files missing or changed"
    return True, ""


def mark_interrupted(folder: str | Path, reason: str = "interrupted") -> bool:
    """Mark a run left ``running`` by a process that was stopped from outside (a campaign's
    killed worker) as ``interrupted``; whether it did."""
    run = read_run(folder)
    if run is None or run.get("status") != RUNNING:
        return False
    write_json(Path(folder) / RUN_FILE, {**run, "status": INTERRUPTED, "reason": reason})
    return True


@dataclass
class RunFolder:
    """A claimed folder: :meth:`finish` marks it complete, :meth:`stop` incomplete."""

    path: Path
    identity: RunIdentity
    #: facts of the run learnt on the way, recorded in run.json beside the identity but not
    #: part of it (``input_cleaning``: the trace's jobs the cleaning rules dropped)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    def _record(self, status: str, reason: str | None, files: dict[str, Any] | None = None) -> None:
        record = {
            **self.identity.as_dict(),
            **{key: value for key, value in self.notes.items() if value},
            "status": status,
            "reason": reason,
            "code": code_identity(),
        }
        if files is not None:
            record["files"] = files
        write_json(self.path / RUN_FILE, record)

    def clear_outputs(self) -> None:
        """Remove every file the run wrote but run.json: a run that failed before it started
        (a failed bind, a peer refused at its first message) leaves only the record of why."""
        for entry in self.path.iterdir():
            if entry.name == RUN_FILE or entry.name not in RUN_OUTPUTS:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def finish(self) -> None:
        """Mark the run complete, listing the files it wrote (size and sha256): a folder whose
        files were since removed or changed is not taken for this run any more."""
        files = {
            p.name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
            for p in sorted(self.path.iterdir())
            if p.is_file() and p.name != RUN_FILE and p.name in RUN_OUTPUTS
        }
        self._record(COMPLETE, None, files)

    def stop(self, reason: str, *, interrupted: bool = False) -> None:
        """Mark the run incomplete (``interrupted`` for a signal, ``failed`` otherwise); the
        files written so far stay, and every reader sees they are not a whole run."""
        self._record(INTERRUPTED if interrupted else FAILED, reason)

    @contextlib.contextmanager
    def running(self) -> Iterator[RunFolder]:
        """The run's body: complete when it returns, ``interrupted`` on ``KeyboardInterrupt``
        (SIGINT, and SIGTERM turned into one), ``failed`` with the error on anything else."""
        try:
            yield self
        except KeyboardInterrupt:
            self.stop("interrupted", interrupted=True)
            raise
        except BaseException as exc:
            self.stop(f"{type(exc).__name__}: {exc}")
            raise
        self.finish()


def workload_record(
    path: str | Path, *, lenient: bool = False, shaking: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """A workload's part of a run identity: its file name and sha256 (and ``lenient``, which
    changes what is read from an SWF, and ``shaking``, the seed and amount of a shaken copy:
    :mod:`batsched_ml.workload.shake`)."""
    path = Path(path)
    try:
        sha256 = file_sha256(path)
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    record: dict[str, Any] = {"name": path.name, "sha256": sha256}
    if lenient:
        record["lenient"] = True
    if shaking:
        record["shaking"] = dict(shaking)
    return record


def _strangers(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.name not in RUN_OUTPUTS
        and p.name.removesuffix(SCRATCH_SUFFIX) not in RUN_OUTPUTS  # a run's own, cut short
        and not p.name.startswith(".write-test-")
    )


def _clear(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def writable_folder(path: str | Path) -> Path:
    """Create ``path`` and check that files can be written into it, before hours of work go
    into it (refused with one line)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutputFolderError(
            f"cannot write into the output directory {path}: {exc.strerror or exc}"
        ) from None
    return path


def _refuse_strangers(path: Path) -> None:
    strangers = _strangers(path)
    if strangers:
        raise OutputFolderError(
            f"{path} holds {', '.join(strangers[:3])}{', ...' if len(strangers) > 3 else ''}"
            ", which no run writes: not writing a run there; choose an empty or new folder"
        )


def empty_run_folder(folder: str | Path) -> list[str]:
    """Make ``folder`` an empty folder this process can write into, removing a run's files
    (run.json and what runs write, whatever run they belong to); return the names removed.

    The docker compose set-up does this first in every ``up``, so that a failed ``up`` leaves
    no earlier run's results to be taken for its own, and an output folder that cannot be
    written stops it in seconds instead of after the simulation. A folder holding anything a
    run does not write is refused and left as it is (an ``OUT_DIR`` pointing at the wrong
    folder never empties it)."""
    path = Path(folder)
    writable_folder(path)
    _refuse_strangers(path)
    names = sorted(p.name for p in path.iterdir() if not p.name.startswith(".write-test-"))
    _clear(path)
    return names


def claim(folder: str | Path, identity: RunIdentity, *, force: bool = False) -> RunFolder:
    """Make ``folder`` this run's: create it (checking it takes files) and write run.json
    (``running``). A folder holding the same run is emptied and run again (a rerun gives the
    same files); one holding another run, or other files, is refused unless ``force``, which
    empties it when every entry is a run's file."""
    path = Path(folder)
    writable_folder(path)
    entries = [p for p in path.iterdir() if not p.name.startswith(".write-test-")]
    if entries:
        run = read_run(path)
        same = run is not None and run.get("run_id") == identity.run_id
        _refuse_strangers(path)
        if not same and not force:
            if run is not None:
                config = run.get("config") or {}
                held = (
                    f"another run ({run.get('command')} {config.get('policy')} "
                    f"({config.get('variant')}), run id {run.get('run_id')})"
                )
            else:
                names = sorted(p.name for p in entries)
                held = (
                    f"an unidentified run's files ({', '.join(names[:3])}"
                    f"{', ...' if len(names) > 3 else ''}; no run.json: made before runs had an "
                    "identity?)"
                )
            raise OutputFolderError(
                f"{path} holds {held}; choose an empty or new folder, or --force to replace it"
            )
        _clear(path)
    claimed = RunFolder(path, identity)
    claimed._record(RUNNING, None)
    return claimed
