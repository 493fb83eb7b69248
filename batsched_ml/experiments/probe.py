"""Result probes: what ties a results page to the code that would make its runs again.

A results page quotes runs that take hours of two cores; CI cannot make them again, yet a page
whose runs today's code would no longer reproduce is a silent wrong result. A probe replays one
of the page's settings on a short fixed workload (the first :data:`PROBE_JOBS` jobs of the
shipped KTH-SP2 trace: weeks enough for the weekly forests, the guard and the predictors to act)
and digests every file the run writes but ``timing.json`` (the only wall-clock figures). A
page's probes are stored in ``benchmarks/results/pages/PAGE.json`` with the code that made its
runs; ``tests/test_results_pages.py`` replays them with the current code and fails, naming the page
and the setting, when one differs: the page must then be made again by its campaign.

What a probe does not see: a change that moves results only on other traces or beyond the
slice's weeks. The probe is a tripwire, not a proof; the golden set
(``benchmarks/golden_check.py``) and the reference tests cover whole traces.

``python -m batsched_ml.experiments.probe write PAGE.md --campaign FILE.toml --runs DIR`` (or
``--paper``; ``--campaign`` and ``--runs`` repeated for a page of several campaigns) writes a
page's probes; ``check PAGE.md`` compares them with the current code.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from batsched_ml.experiments import paper
from batsched_ml.experiments.campaign import load_campaign
from batsched_ml.results.outputs import TIMING, Memory, write_replay
from batsched_ml.results.runfolder import COMPLETE, code_identity, read_run
from batsched_ml.runs.pipeline import load
from batsched_ml.runs.replaying import ReplayConfig, config_of_record, run_replay
from batsched_ml.workload.shake import shake
from batsched_ml.workload.shipped import DEFAULT_TRACE

#: The jobs of the probe workload: the first of the shipped KTH-SP2 trace (about eight weeks).
PROBE_JOBS = 3000
#: Fewer jobs for the settings that cost far more a job (CPH solves a schedule at every
#: decision, the SU predictor refits): a probe of each stays within a few seconds.
SLOW_JOBS = {"dispatcher": {"cph": 300}, "predictor": {"su": 1000}}
#: The shaken copy a probe digests when the page has copies (its submission times only).
SHAKE = {"seed": 1, "seconds": 60}
#: The folder of the pages' probes, from the repository's root (data, not a page of the site).
PROBES = "benchmarks/results/pages"


@functools.cache
def _workload_text(size: int = PROBE_JOBS) -> str:
    workload = load(DEFAULT_TRACE)
    jobs = workload["jobs"][:size]
    used = {job["profile"] for job in jobs}
    workload["jobs"] = jobs
    workload["profiles"] = {k: v for k, v in workload["profiles"].items() if k in used}
    return json.dumps(workload)


def probe_workload(size: int = PROBE_JOBS) -> dict[str, Any]:
    """A fresh copy of the probe workload's first ``size`` jobs (a replay may annotate the jobs
    it is given)."""
    loaded: dict[str, Any] = json.loads(_workload_text(size))
    return loaded


def jobs_for(config: ReplayConfig) -> int:
    """How many of the probe workload's jobs ``config``'s probe replays."""
    sizes = [SLOW_JOBS["dispatcher"].get(config.dispatcher, PROBE_JOBS)]
    sizes.append(SLOW_JOBS["predictor"].get(config.predictor, PROBE_JOBS))
    return min(sizes)


def key(config: ReplayConfig) -> str:
    """A setting's canonical text (its ``as_dict``, keys sorted): how a probe is found."""
    return json.dumps(config.as_dict(), sort_keys=True)


def probe(config: ReplayConfig) -> str:
    """The digest of the files a replay of the probe workload under ``config`` writes."""
    files = Memory()
    write_replay(run_replay(probe_workload(jobs_for(config)), config), files)
    digest = hashlib.sha256()
    for name, text in sorted(files.texts.items()):
        if name != TIMING:
            digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def shake_probe() -> str:
    """The digest of the probe workload's shaken copy's submission times."""
    shaken = shake(probe_workload(), **SHAKE)
    times = [(job["id"], job["subtime"]) for job in shaken["jobs"]]
    return hashlib.sha256(json.dumps(times).encode()).hexdigest()


def settings_of_campaign(path: str | Path) -> tuple[list[ReplayConfig], bool]:
    """The distinct settings of a campaign's runs, and whether it has shaken copies."""
    runs = load_campaign(path).runs
    return _distinct(spec.config() for spec in runs), any(spec.copy for spec in runs)


def settings_of_campaigns(paths: Iterable[str | Path]) -> tuple[list[ReplayConfig], bool]:
    """The distinct settings of several campaigns' runs (a page that shows them all), and
    whether any has shaken copies."""
    configs: list[ReplayConfig] = []
    shaken = False
    for path in paths:
        mine, copies = settings_of_campaign(path)
        configs += mine
        shaken = shaken or copies
    return _distinct(configs), shaken


def settings_of_paper() -> list[ReplayConfig]:
    """The settings of the paper's evaluation (``batsched-ml paper-results``)."""
    runs = paper.plan(paper.PAPER_TRACES, paper.POLICIES, paper.VARIANTS)
    return _distinct(spec.config() for spec in runs)


def _distinct(configs: Iterable[ReplayConfig]) -> list[ReplayConfig]:
    return list({key(config): config for config in configs}.values())


def record(
    configs: list[ReplayConfig], *, shaken: bool, source: str, made_by: dict[str, Any]
) -> dict[str, Any]:
    """A page's probes: each setting's digest under the current code, the shaken copy's when
    the page has copies, where the settings come from and the code that made the runs."""
    return {
        "settings_from": source,
        "made_by": made_by,
        "probe_jobs": PROBE_JOBS,
        "shake": shake_probe() if shaken else None,
        "probes": [
            {"config": config.as_dict(), "jobs": jobs_for(config), "digest": probe(config)}
            for config in configs
        ],
    }


def differences(recorded: dict[str, Any]) -> list[str]:
    """The settings whose probe the current code no longer reproduces, one line each."""
    if recorded.get("probe_jobs") != PROBE_JOBS:
        return [f"probes of {recorded.get('probe_jobs')} jobs, not {PROBE_JOBS}"]
    out = []
    if recorded.get("shake") is not None and recorded["shake"] != shake_probe():
        out.append("the shaken copies' submission times")
    for entry in recorded["probes"]:
        config = config_of_record(entry["config"])
        if entry.get("jobs") != jobs_for(config) or probe(config) != entry["digest"]:
            out.append(config.title())
    return out


def probes_path(page: str | Path) -> Path:
    """Where a page's probes are: ``benchmarks/results/pages/NAME.json`` for ``docs/NAME.md``."""
    page = Path(page).resolve()
    return page.parent.parent / PROBES / f"{page.stem}.json"


def results_pages(nav: list[Any]) -> list[str]:
    """The pages of the site's Results section (``mkdocs.yml``'s ``nav``) that show runs: all
    but the notes a page includes (``*-notes.md``). The site's hook marks these, and the tests
    require their probes."""
    for entry in nav:
        if isinstance(entry, dict) and "Results" in entry:
            return [
                page
                for item in entry["Results"]
                for page in (item.values() if isinstance(item, dict) else [item])
                if not page.endswith("-notes.md")
            ]
    return []


def provenance(page: str | Path) -> tuple[str, str]:
    """What a results page says of its runs' code, as Markdown to put before and after its
    text (the site's hook, ``docs/hooks/results_provenance.py``): with probes, the version that
    made the runs and that the tests check them against today's code; without, a warning."""
    path = probes_path(page)
    if not path.is_file():
        return (
            '!!! warning "Not checked against the current code"\n'
            "    This page's runs were made by an earlier version of batsched-ml, and no probe "
            "ties them to the current code: some figures may move when its campaign is run "
            "again.\n\n",
            "",
        )
    recorded = json.loads(path.read_text())
    made_by = recorded["made_by"]
    return (
        "",
        f"\n\n---\n\n*The runs of this page were made by batsched-ml {made_by['version']}. "
        f"The test suite replays each of its {len(recorded['probes'])} settings on a probe "
        f"workload (the first {recorded['probe_jobs']:,} jobs of KTH-SP2) and fails when "
        "today's code gives other results than the code that made the runs: "
        "[how results pages are checked](reliability.md#results-pages).*\n",
    )


#: What a page's probes record of the code that made its runs.
MADE_BY = ("version", "source_sha256", "git_commit", "git_dirty")


def current_code() -> dict[str, Any]:
    """The running code, as :data:`MADE_BY` records it."""
    code = code_identity()
    return {k: code.get(k) for k in MADE_BY}


def write_probes(
    page: str | Path,
    configs: list[ReplayConfig],
    *,
    shaken: bool,
    source: str,
    made_by: dict[str, Any],
) -> Path:
    """Write ``page``'s probes, computed by the running code, which must be the code that made
    the page's runs (``made_by``): :class:`ValueError` otherwise."""
    if made_by.get("source_sha256") != code_identity()["source_sha256"]:
        raise ValueError(
            f"{page}: its runs were made by other code than this: run the command with the "
            "code that made them, or make the runs again"
        )
    path = probes_path(page)
    data = record(_distinct(configs), shaken=shaken, source=source, made_by=made_by)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def runs_code(folders: Iterable[Path]) -> dict[str, Any]:
    """The one code that made every run of ``folders`` (their ``run.json``), as recorded;
    :class:`ValueError` when they were made by several, or one is not complete."""
    codes: dict[str, dict[str, Any]] = {}
    for folder in folders:
        run = read_run(folder)
        if run is None or run.get("status") != COMPLETE:
            raise ValueError(f"{folder}: no complete run")
        code = run.get("code") or {}
        codes[str(code.get("source_sha256"))] = code
    if len(codes) != 1:
        raise ValueError(f"the runs were made by {len(codes)} versions of the code, not one")
    code = next(iter(codes.values()))
    return {k: code.get(k) for k in MADE_BY}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m batsched_ml.experiments.probe")
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write a page's probes with the current code")
    write.add_argument("page")
    source = write.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--campaign",
        action="append",
        help="a campaign file whose runs the page shows (repeat it for a page of several)",
    )
    source.add_argument("--paper", action="store_true", help="the paper's evaluation's settings")
    write.add_argument(
        "--runs",
        required=True,
        action="append",
        metavar="DIR",
        help="a folder of the page's runs (every run.json under it; repeat it for several): "
        "they must all have been made by the current code",
    )
    check = commands.add_parser("check", help="compare a page's probes with the current code")
    check.add_argument("page")
    args = parser.parse_args(argv)
    path = probes_path(args.page)
    if args.command == "check":
        missing = differences(json.loads(path.read_text()))
        for line in missing:
            print(f"{args.page}: differs: {line}", file=sys.stderr)
        return 1 if missing else 0
    made_by = runs_code(run.parent for runs in args.runs for run in Path(runs).rglob("run.json"))
    if args.paper:
        configs, shaken, source_name = settings_of_paper(), False, "batsched-ml paper-results"
    else:
        configs, shaken = settings_of_campaigns(args.campaign)
        source_name = ", ".join(Path(campaign).as_posix() for campaign in args.campaign)
    try:
        path = write_probes(args.page, configs, shaken=shaken, source=source_name, made_by=made_by)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"wrote {path}: {len(configs)} settings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
