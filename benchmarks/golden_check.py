"""Golden set: replay a fixed set of runs and print a digest of every result file, so that a
refactoring that must not change any result byte can be checked.

Usage::

    python benchmarks/golden_check.py /tmp/golden_before            # before the change
    # ... change the code ...
    python benchmarks/golden_check.py /tmp/golden_after --compare /tmp/golden_before

Each run is ``batsched-ml replay`` (through ``python -m batsched_ml``, so the working tree's code)
into ``OUT/<case>/``; the digests (SHA-256, first 16 hex digits) of the result files that must
not change, ``jobs.csv``, ``predictions.csv``, ``classification.csv`` and ``summary.json`` (those
the run writes), are printed one per line as ``DIGEST  CASE/FILE`` and written to
``OUT/digests.txt``: two sets can be compared with ``diff`` of those files, or directly with
``--compare OTHER``, which compares every file byte for byte (as ``cmp``) with OTHER's and exits
1 on any difference or missing file. ``run.json`` and ``timing.json`` hold the code's identity and
wall times and are not compared.

Revisions before b4222fe (issue 18) also wrote a wall time into ``summary.json``:
``classification.train_seconds`` of the classified variants, which differs from one run of the
same code to the next. Where present, its value is masked (``"train_seconds": "<wall time>"``,
text substitution, every other byte kept) before ``summary.json`` is digested and compared, so
that runs of such revisions can be compared too. Revisions before the run configuration was
frozen (issue 18) named the predictor ``estimator`` in ``summary.json``'s ``config``: that key
is read as ``predictor``; and since the run id is a digest of the configuration's text, it is
masked too (it names a run, it is not a result).

To check only one's own change while others commit, run the set from two exported trees
(``git archive``), e.g. ``PYTHONPATH=/tmp/tree python /tmp/tree/benchmarks/golden_check.py
OUT``: the replays run ``python -m batsched_ml`` and take the package from ``PYTHONPATH``.

The set, on the shipped KTH-SP2 trace (28,467 jobs):

* the queue orders fcfs, spf, wfp, saf x the variants base, classification-idempotent and
  class-clairvoyant (the classified ones with the default side trainer process);
* fcfs with the variants classification and runtime-clairvoyant, classification-idempotent with
  ``--feature-mode weekly``, base with ``--no-backfilling``;
* the related work's predictors, corrections and dispatchers: easy++ x power x prb, easy++ under
  EASY (shortest-job backfilling), adaboost x simple, profile x sjf, su x ljf, fixed x power,
  actual x prb;
* the cph dispatcher (CP-SAT plans, ~150 s on the whole trace) on the trace's first
  ``CPH_JOBS`` jobs (OUT/_inputs/kth-head.swf, header kept).

The whole set took 6 minutes on 2 idle cores with the rule-based simulator, 18 on 2 busy cores
with the exact clock (``--only`` runs the cases whose name holds a
given text; ``--list`` prints the cases).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KTH = ROOT / "batsched_ml" / "data" / "KTH-SP2-1996-2.1-cln.swf.gz"
RESULT_FILES = ("jobs.csv", "predictions.csv", "classification.csv", "summary.json")
CPH_JOBS = 3000
HEAD = "_inputs/kth-head.swf"  # the trace's first CPH_JOBS jobs, under OUT

# case name -> (replay options, workload: None for the shipped trace, else a path under OUT)
CASES: dict[str, tuple[list[str], str | None]] = {}
for _policy in ("fcfs", "spf", "wfp", "saf"):
    for _variant in ("base", "classification-idempotent", "class-clairvoyant"):
        CASES[f"{_policy}-{_variant}"] = (["--policy", _policy, "--variant", _variant], None)
CASES.update(
    {
        "fcfs-classification": (["--variant", "classification"], None),
        "fcfs-runtime-clairvoyant": (["--variant", "runtime-clairvoyant"], None),
        "fcfs-classification-idempotent-weekly": (
            ["--variant", "classification-idempotent", "--feature-mode", "weekly"],
            None,
        ),
        "fcfs-base-no-backfilling": (["--no-backfilling"], None),
        "easy++-power-prb": (
            ["--predictor", "easy++", "--correction", "power", "--dispatcher", "prb"],
            None,
        ),
        "easy++-easy": (["--predictor", "easy++"], None),
        "adaboost-simple-easy": (["--predictor", "adaboost", "--correction", "simple"], None),
        "profile-sjf": (["--predictor", "profile", "--dispatcher", "sjf"], None),
        "su-ljf": (["--predictor", "su", "--dispatcher", "ljf"], None),
        "fixed-power-easy": (["--predictor", "fixed", "--correction", "power"], None),
        "actual-prb": (["--predictor", "actual", "--dispatcher", "prb"], None),
        "requested-cph-head": (["--dispatcher", "cph"], HEAD),
    }
)


def write_head(path: Path, jobs: int) -> None:
    """The shipped trace's header and first ``jobs`` job lines, as plain SWF."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    kept = 0
    with gzip.open(KTH, "rt") as source:
        for line in source:
            if not line.startswith(";") and line.strip():
                if kept == jobs:
                    break
                kept += 1
            lines.append(line)
    path.write_text("".join(lines))


WALL_TIME = re.compile(rb'("train_seconds": )[-+0-9.eE]+')
RUN_ID = re.compile(rb'^(  "run_id": )"[0-9a-f]+"', re.MULTILINE)
OLD_KEY = re.compile(rb'^(    )"estimator": ', re.MULTILINE)


def content(path: Path) -> bytes:
    """The file's bytes, with the wall time of ``summary.json`` masked, and the configuration's
    name of the predictor and the run id it shapes made the same for all revisions."""
    data = path.read_bytes()
    if path.name == "summary.json":
        data = WALL_TIME.sub(rb'\1"<wall time>"', data)
        data = OLD_KEY.sub(rb'\1"predictor": ', data)
        data = RUN_ID.sub(rb'\1"<run id>"', data)
    return data


def digest(path: Path) -> str:
    return hashlib.sha256(content(path)).hexdigest()[:16]


def run_case(out: Path, name: str) -> float:
    options, workload = CASES[name]
    folder = out / name
    command = [sys.executable, "-m", "batsched_ml", "replay", "-q", "--force", "-o", str(folder)]
    if workload is not None:
        command.insert(4, str(out / workload))
    started = time.perf_counter()
    done = subprocess.run(command + options, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"{name}: batsched-ml replay exited {done.returncode}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("output", type=Path, help="folder for the runs (one sub-folder per case)")
    parser.add_argument(
        "--compare", type=Path, metavar="OTHER", help="compare byte for byte with OTHER's files"
    )
    parser.add_argument("--only", metavar="TEXT", help="run only the cases whose name holds TEXT")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    args = parser.parse_args()
    names = [name for name in CASES if args.only is None or args.only in name]
    if args.list:
        for name in names:
            options, workload = CASES[name]
            print(name, " ".join(options), workload or "(shipped KTH-SP2)")
        return 0
    out: Path = args.output
    out.mkdir(parents=True, exist_ok=True)
    if any(CASES[name][1] == HEAD for name in names):
        write_head(out / HEAD, CPH_JOBS)
    lines = []
    for name in names:
        seconds = run_case(out, name)
        print(f"# {name}: {seconds:.1f} s", file=sys.stderr, flush=True)
        for file in RESULT_FILES:
            path = out / name / file
            if path.exists():
                line = f"{digest(path)}  {name}/{file}"
                lines.append(line)
                print(line, flush=True)
    (out / "digests.txt").write_text("\n".join(lines) + "\n")
    if args.compare is None:
        return 0
    differ = []
    for name in names:
        for file in RESULT_FILES:
            mine, theirs = out / name / file, args.compare / name / file
            if mine.exists() != theirs.exists():
                differ.append(f"{name}/{file}: only in {mine if mine.exists() else theirs}")
            elif mine.exists() and content(mine) != content(theirs):
                differ.append(f"{name}/{file}: differs")
    compared = sum((out / n / f).exists() for n in names for f in RESULT_FILES)
    for line in differ:
        print(f"DIFFERENT {line}")
    print(
        f"{compared} files compared with {args.compare}: "
        + (f"{len(differ)} different" if differ else "all identical")
    )
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
