"""The speed table: what users wait for, measured as whole commands, against its targets.

Each row is one command run from process start to exit (``python -m batsched_ml ...`` with the
code tree on ``PYTHONPATH``, from an empty folder), ``--repeat`` times (default 3); printed per
row: the median wall time (min-max), the child's peak resident memory (``os.wait4``: the largest
of the command and the processes it waited for) and the issue's target, as a markdown table::

    python benchmarks/speed_table.py                                  # every row but the long ones
    python benchmarks/speed_table.py --rows kth hpc2n --repeat 5
    python benchmarks/speed_table.py --compare /tmp/tree_base         # before/after, one run
    python benchmarks/speed_table.py --rows campaign tests            # the long rows (~1 h each)
    python benchmarks/speed_table.py --python                         # and without compiled parts
    python benchmarks/speed_table.py --ci                             # tiny inputs, 1 repetition

``--compare OTHER_TREE`` runs the same commands with another code tree (e.g. ``git archive
89696d3 | tar -x -C /tmp/tree_base``) interleaved with this one (A B A B ...), so both see the
same machine load, and adds that tree's figures, the ratio of the medians (this / other) and
whether the two trees wrote byte-identical result files (``jobs.csv``, ``predictions.csv``,
``classification.csv``, ``summary.json``) for each replay row.

``--python`` runs every row a second time with ``BATSCHED_ML_KERNEL=python`` (no compiled part:
what an install without a C compiler runs), interleaved, and adds its figures and the ratio.

``--ci`` replaces every trace by the shipped KTH-SP2 trace's first jobs and the paper campaign
by a two-run campaign on them, with one repetition: a smoke test of the script and the commands
(``tests/test_speed_table.py``), with no timing assertion.

Rows (``--rows``; ``campaign`` and ``tests`` run only when named):

* ``help``, ``version``: ``batsched-ml --help`` / ``--version``;
* ``kth``, ``hpc2n``: FCFS-EASY replays of KTH-SP2 (the shipped trace, 28,467 jobs) and the full
  HPC2N (202,871 jobs); ``kth-wfp``, ``hpc2n-spf``, ...: the same under each other queue order;
* ``ricc-POLICY``, ``curie-POLICY`` (only when named): the base replays of the two largest traces,
  RICC (447,794 jobs, 8,192 processors) and CEA-Curie (312,826 jobs, 93,312 processors), the cost
  per job as traces and machines grow;
* ``kth-class``, ``hpc2n-class``, ``sdsc-class``: ``--variant classification-idempotent`` on
  KTH-SP2, HPC2N and SDSC-SP2 (54,034 jobs after cleaning, the issue's 56,000-job trace:
  the nearest of ../shared/traces);
* ``campaign``: ``batsched-ml campaign campaigns/paper.toml`` (100 replays) into a fresh folder;
* ``tests``: the README's test command, ``python -m pytest``, in the tree itself.
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from _common import KTH, ROOT, TRACES, kernel_environment

HPC2N_NAME = "HPC2N-2002-2.2-cln"
RICC_NAME = "RICC-2010-2"
CURIE_NAME = "CEA-Curie-2011-2.1-cln"
POLICIES = ("fcfs", "wfp", "spf", "saf")
SDSC_NAME = "SDSC-SP2-1998-4.2-cln"
RESULT_FILES = ("jobs.csv", "predictions.csv", "classification.csv", "summary.json")
CI_JOBS = 1500  # the KTH head replayed by --ci (a few weeks: the classification trains)


@dataclass
class Context:
    """What a row's command needs: where the inputs are, and whether this is the CI version."""

    scratch: Path  # inputs made for this run (the CI trace head, campaign files)
    ci: bool

    def trace(self, name: str) -> Path:
        if self.ci:
            return self.kth_head()
        path = TRACES / f"{name}.swf.gz"
        if not path.exists():
            raise SystemExit(f"missing {path}: the full rows read ../shared/traces (or use --ci)")
        return path

    def kth_head(self) -> Path:
        """The shipped trace's header and first CI_JOBS jobs, written once."""
        head = self.scratch / "kth-head.swf"
        if not head.exists():
            jobs = 0
            with gzip.open(KTH, "rt") as source, head.open("w") as target:
                for line in source:
                    if not line.startswith(";"):
                        jobs += 1
                        if jobs > CI_JOBS:
                            break
                    target.write(line)
        return head

    def campaign(self, out: Path) -> Path:
        """A campaign file for one run: the paper's (or, for --ci, two runs on the KTH head),
        with its output in ``out`` and absolute trace paths."""
        if self.ci:
            traces, trace_dir = [self.kth_head().name.removesuffix(".swf")], self.scratch
            # campaigns read TRACE.swf.gz
            gz = self.scratch / "kth-head.swf.gz"
            if not gz.exists():
                gz.write_bytes(gzip.compress(self.kth_head().read_bytes(), mtime=0))
            body = (
                f"[campaign]\noutput = {str(out)!r}\ntrace_dir = {str(trace_dir)!r}\n"
                f"traces = {traces!r}\npolicies = ['fcfs']\n"
                "variants = ['base', 'classification-idempotent']\n\n[dask]\nworkers = 1\n"
            )
        else:
            import tomllib

            paper = ROOT / "campaigns" / "paper.toml"
            config = tomllib.loads(paper.read_text())["campaign"]
            body = "\n".join(
                [
                    "[campaign]",
                    f"output = {str(out)!r}",
                    f"trace_dir = {str(TRACES)!r}",
                    *(
                        f"{key} = {config[key]!r}"
                        for key in ("traces", "policies", "variants", "seeds")
                    ),
                    "",
                    "[dask]\nworkers = 0\n",
                ]
            )
        path = out.parent / f"{out.name}.toml"
        path.write_text(body)
        return path


@dataclass
class Row:
    label: str
    target: str
    #: (context, output folder) -> the arguments after ``python``
    args: Callable[[Context, Path], list[str]]
    long: bool = False  # only when named in --rows
    in_tree: bool = False  # run from the tree's own folder (pytest), not an empty one
    outputs: bool = False  # a replay: its result files are compared between trees
    targets: tuple[float | None, float | None] = (None, None)  # seconds, MiB
    notes: list[str] = field(default_factory=list)


def _replay(name: str | None, *options: str) -> Callable[[Context, Path], list[str]]:
    def args(ctx: Context, out: Path) -> list[str]:
        trace = [str(ctx.trace(name))] if name else ([str(ctx.kth_head())] if ctx.ci else [])
        return ["-m", "batsched_ml", "replay", *trace, "-q", "-o", str(out), *options]

    return args


CLASS = ("--variant", "classification-idempotent")
ROWS: dict[str, Row] = {
    "help": Row(
        "`batsched-ml --help`",
        "<= 0.3 s",
        lambda ctx, out: ["-m", "batsched_ml", "--help"],
        targets=(0.3, None),
    ),
    "version": Row(
        "`batsched-ml --version`",
        "<= 0.3 s",
        lambda ctx, out: ["-m", "batsched_ml", "--version"],
        targets=(0.3, None),
    ),
    "kth": Row("KTH-SP2 FCFS-EASY", "<= 1 s", _replay(None), outputs=True, targets=(1.0, None)),
    "hpc2n": Row(
        "full HPC2N FCFS-EASY",
        "<= 4 s, <= 400 MiB",
        _replay(HPC2N_NAME),
        outputs=True,
        targets=(4.0, 400.0),
    ),
    "kth-class": Row(
        "KTH-SP2 classification-idempotent",
        "<= 8 s",
        _replay(None, *CLASS),
        outputs=True,
        targets=(8.0, None),
    ),
    "hpc2n-class": Row(
        "full HPC2N classification-idempotent",
        "<= 20 s",
        _replay(HPC2N_NAME, *CLASS),
        outputs=True,
        targets=(20.0, None),
    ),
    "sdsc-class": Row(
        "SDSC-SP2 (54,034 jobs) classification-idempotent",
        "<= 60 s",
        _replay(SDSC_NAME, *CLASS),
        outputs=True,
        targets=(60.0, None),
    ),
    "campaign": Row(
        "paper campaign (campaigns/paper.toml, 100 replays)",
        "<= 10 min",
        lambda ctx, out: ["-m", "batsched_ml", "campaign", str(ctx.campaign(out)), "-q"],
        long=True,
        targets=(600.0, None),
    ),
    "tests": Row(
        "the README's test command (`python -m pytest`)",
        "<= 5 min",
        lambda ctx, out: ["-m", "pytest", "-q", "-p", "no:cacheprovider"],
        long=True,
        in_tree=True,
        targets=(300.0, None),
    ),
}


for _policy in POLICIES[1:]:
    ROWS[f"kth-{_policy}"] = Row(
        f"KTH-SP2 {_policy.upper()}-EASY",
        "<= 1 s",
        _replay(None, "--policy", _policy),
        outputs=True,
        targets=(1.0, None),
    )
    ROWS[f"hpc2n-{_policy}"] = Row(
        f"full HPC2N {_policy.upper()}-EASY",
        "<= 4 s, <= 400 MiB",
        _replay(HPC2N_NAME, "--policy", _policy),
        outputs=True,
        targets=(4.0, 400.0),
    )
ROWS["hpc2n-plugin"] = Row(
    "full HPC2N, a plug-in order identical to FCFS",
    "<= 1.5 x FCFS",
    _replay(HPC2N_NAME, "--policy", "tests.plugin_parts:ArrivalOrder"),
    outputs=True,
    targets=(None, None),
)
for _policy in POLICIES:
    for _key, _name, _label in (("ricc", RICC_NAME, "RICC"), ("curie", CURIE_NAME, "CEA-Curie")):
        ROWS[f"{_key}-{_policy}"] = Row(
            f"{_label} {_policy.upper()}-EASY",
            "<= 15 s",
            _replay(_name, "--policy", _policy),
            long=True,
            outputs=True,
            targets=(15.0, None),
        )


@dataclass
class Runs:
    seconds: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)
    output: Path | None = None

    def cell(self) -> str:
        if not self.seconds:
            return "-"
        text = _seconds(statistics.median(self.seconds))
        if len(self.seconds) > 1:
            text += f" ({_seconds(min(self.seconds))}-{_seconds(max(self.seconds))})"
        return f"{text} s, {statistics.median(self.peaks):.0f} MiB"


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


@dataclass(frozen=True)
class Side:
    """What runs a row: a code tree and the environment it runs with."""

    tree: Path
    python: bool = False  # BATSCHED_ML_KERNEL=python: no compiled part

    def env(self) -> dict[str, str]:
        return kernel_environment(self.python, PYTHONPATH=str(self.tree))


def compile_bytecode(tree: Path) -> None:
    """Write the byte code of the tree's package, as ``pip install`` does: a command is timed
    as an installed package runs it. Under ``PYTHONDONTWRITEBYTECODE`` (set on some machines) a
    tree would otherwise be compiled from source at every start (0.1 s of KTH-SP2's replay)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(tree / "batsched_ml")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def run_once(command: list[str], side: Side, cwd: Path) -> tuple[float, float]:
    """Wall seconds from spawn to exit, and the child's peak resident memory in MiB."""
    env = side.env()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage
    seconds = time.perf_counter() - started
    error = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if status != 0:
        raise SystemExit(f"failed ({status}) in {cwd}: {' '.join(command)}\n{error[-3000:]}")
    return seconds, usage.ru_maxrss / 1024  # Linux reports KiB


def same_outputs(a: Path, b: Path) -> str:
    names = [n for n in RESULT_FILES if (a / n).exists() or (b / n).exists()]
    differ = [
        n
        for n in names
        if not ((a / n).exists() and (b / n).exists() and filecmp.cmp(a / n, b / n, shallow=False))
    ]
    return "identical" if not differ else "differ: " + ", ".join(differ)


def label_of(tree: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    commit = found.stdout.strip() if found.returncode == 0 else ""
    if commit and (tree / ".git").exists():
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return f"{commit}{'+changes' if dirty else ''}"
    return str(tree)


def measure(
    names: list[str], sides: list[Side], repeat: int, ctx: Context, echo: Callable[[str], None]
) -> dict[str, list[Runs]]:
    results: dict[str, list[Runs]] = {}
    for name in names:
        row = ROWS[name]
        runs = [Runs() for _ in sides]
        results[name] = runs
        for i in range(repeat):
            for side, where in enumerate(sides):
                tree = where.tree
                out = ctx.scratch / f"{name}-{side}-{i}"
                with tempfile.TemporaryDirectory(dir=ctx.scratch) as empty:
                    command = [sys.executable, *row.args(ctx, out)]
                    cwd = tree if row.in_tree else Path(empty)
                    seconds, peak = run_once(command, where, cwd)
                runs[side].seconds.append(seconds)
                runs[side].peaks.append(peak)
                previous = runs[side].output
                if previous is not None:
                    shutil.rmtree(previous, ignore_errors=True)
                runs[side].output = out
                echo(f"  {name} [{side}] run {i + 1}: {seconds:.2f} s, {peak:.0f} MiB")
    return results


def table(
    names: list[str], sides: list[Side], results: dict[str, list[Runs]], repeat: int
) -> list[str]:
    labels = [label_of(side.tree) for side in sides]
    header = ["what", "target", f"this tree ({labels[0]})"]
    if len(sides) > 1:
        if sides[1].python:
            header += ["no compiled part", "ratio (no compiled / compiled)", "result files"]
        else:
            header += [f"other tree ({labels[1]})", "ratio", "result files"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in names:
        row, runs = ROWS[name], results[name]
        cells = [row.label, row.target, runs[0].cell()]
        if len(sides) > 1:
            ratio = statistics.median(runs[0].seconds) / statistics.median(runs[1].seconds)
            if sides[1].python:
                ratio = 1 / ratio
            same = "-"
            if row.outputs and runs[0].output and runs[1].output:
                same = same_outputs(runs[0].output, runs[1].output)
            cells += [runs[1].cell(), f"{ratio:.2f}", same]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"Whole commands, median of {repeat} (min-max), peak RSS of the command "
        f"(`benchmarks/speed_table.py`, {date.today().isoformat()}, {os.cpu_count()} cores)."
    )
    return lines


def write_json(
    path: Path, names: list[str], sides: list[Side], results: dict[str, list[Runs]], repeat: int
) -> None:
    """The figures as data: what ``benchmarks/speed_page.py`` turns into the docs' tables."""
    import json

    rows = []
    for name in names:
        row, runs = ROWS[name], results[name]
        entry: dict[str, object] = {
            "row": name,
            "label": row.label,
            "target": row.target,
            "targets": list(row.targets),
            "seconds": [round(x, 3) for x in runs[0].seconds],
            "peaks": [round(x, 1) for x in runs[0].peaks],
        }
        if len(sides) > 1:
            entry["other_seconds"] = [round(x, 3) for x in runs[1].seconds]
            entry["other_peaks"] = [round(x, 1) for x in runs[1].peaks]
            if row.outputs and runs[0].output and runs[1].output:
                entry["result_files"] = same_outputs(runs[0].output, runs[1].output)
        rows.append(entry)
    data = {
        "date": date.today().isoformat(),
        "cores": os.cpu_count(),
        "repeat": repeat,
        "other": None if len(sides) == 1 else ("python" if sides[1].python else "tree"),
        "rows": rows,
    }
    path.write_text(json.dumps(data, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="rows: " + ", ".join(ROWS),
    )
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), metavar="ROW", help="rows to run")
    parser.add_argument("--repeat", type=int, help="runs per row and tree (default: 3, --ci 1)")
    parser.add_argument("--compare", type=Path, metavar="OTHER_TREE", help="a second code tree")
    parser.add_argument(
        "--python", action="store_true", help="the second side: this tree, no compiled part"
    )
    parser.add_argument("--tree", type=Path, default=ROOT, help="the code tree (default: this)")
    parser.add_argument("--ci", action="store_true", help="tiny inputs, one repetition")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="run in DIR and keep outputs")
    parser.add_argument("-q", "--quiet", action="store_true", help="only the table")
    parser.add_argument(
        "--json", type=Path, metavar="FILE", help="also write the figures (speed_page.py reads it)"
    )
    args = parser.parse_args(argv)
    names = args.rows or [n for n, row in ROWS.items() if not row.long]
    repeat = args.repeat or (1 if args.ci else 3)
    sides = [Side(args.tree.resolve())]
    if args.compare is not None and args.python:
        raise SystemExit("--compare and --python: one second side at a time")
    if args.compare is not None:
        sides.append(Side(args.compare.resolve()))
    if args.python:
        sides.append(Side(args.tree.resolve(), python=True))
    for side in sides:
        if not (side.tree / "batsched_ml" / "__init__.py").exists():
            raise SystemExit(f"{side.tree} holds no batsched_ml package")
        if not args.ci:  # (the smoke test times nothing, and writes only where it runs)
            compile_bytecode(side.tree)

    def echo(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="speed-table-") as tmp:
        scratch = Path(tmp) if args.keep is None else args.keep.resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        ctx = Context(scratch, args.ci)
        results = measure(names, sides, repeat, ctx, echo)
        print("\n".join(table(names, sides, results, repeat)))
        if args.json is not None:
            write_json(args.json, names, sides, results, repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
