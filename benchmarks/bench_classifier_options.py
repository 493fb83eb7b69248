"""The runtime cost of each classifier option (``--classifier-option``) per job: whole KTH-SP2
replays (FCFS, classification-idempotent, in-process trainer), each option paired with the
defaults in one run, interleaved round by round so that a busy machine slows both alike.

Usage::

    python benchmarks/bench_classifier_options.py [--repeat 3] [--jobs N] [--policy fcfs]

For each setting: the median wall time of the replay over ``--repeat`` rounds, the median
training time in it (the weekly forests), and the difference from the defaults per job in
microseconds, in all and without the training (what the option costs when classifying and
ordering: ``threshold`` and ``small_order`` read the forest's probabilities instead of its vote,
``divider_quantile`` trains on other labels, so its training time changes as well;
``threshold_rule=cost`` also keeps each finished job's probability and wait and searches 19
thresholds each week (``kill_budget`` counts each threshold's false smalls besides); ``leaky_features`` (LEAKY) reads each job's true runtime at its
submission; ``drift_retrain`` judges each finished job and may train within a week, counted as
training); the guarded variant (``variant=classification-guarded``, on all along on KTH-SP2,
and with ``guard_slowdown=1e9``, off all along) adds the guard's weekly decision over the
finished jobs of the last two weeks. The number of jobs classified small and of kills says what each option changed.
The process's CPU time (all threads) is given too, with its difference per job: less sensitive
to a loaded machine than the wall time. ``--only`` measures the defaults and the settings
whose label holds one of the given texts.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import KTH, need

from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload

SETTINGS: list[dict[str, str]] = [
    {},
    {"threshold": "0.6"},
    {"small_order": "probability"},
    {"threshold": "0.6", "small_order": "probability"},
    {"divider_quantile": "0.4"},
    {"threshold_rule": "cost"},
    {"threshold_rule": "cost", "kill_budget": "0.15"},
    {"threshold": "0.05"},
    {"threshold": "0.0"},
    {"leaky_features": "all"},  # LEAKY: for the study of the paper's figures only
    {"leaky_features": "weekly"},  # LEAKY
    {"drift_retrain": "true"},
    # the guarded variant (``variant`` is not a classifier option: the run's variant), on all
    # along on KTH-SP2 by default; with an unreachable threshold it is off all along (the
    # base's queue, no kills) and still classifies and learns every week
    {"variant": "classification-guarded"},
    {"variant": "classification-guarded", "guard_slowdown": "1e9"},
]


def workload_head(workload: dict, count: int) -> dict:
    """The first ``count`` jobs of a workload, with the profiles they use."""
    jobs = workload["jobs"][:count]
    used = {job["profile"] for job in jobs}
    profiles = {name: p for name, p in workload["profiles"].items() if name in used}
    return {**workload, "jobs": jobs, "profiles": profiles}


def label(options: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items()) or "defaults"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=0, help="the trace's first N jobs (0: all)")
    parser.add_argument("--policy", default="fcfs")
    parser.add_argument("--variant", default="classification-idempotent")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT")
    args = parser.parse_args()
    settings = [
        s for s in SETTINGS if not s or not args.only or any(t in label(s) for t in args.only)
    ]
    workload = load_workload(need(KTH))
    if args.jobs:
        workload = workload_head(workload, args.jobs)
    jobs = len(workload["jobs"])
    walls: dict[str, list[float]] = {label(s): [] for s in settings}
    trains: dict[str, list[float]] = {label(s): [] for s in settings}
    cpus: dict[str, list[float]] = {label(s): [] for s in settings}
    counts: dict[str, tuple[int, int]] = {}
    # warm-up, untimed: scikit-learn's import and the first forest's set-up
    run_replay(
        workload_head(workload, 2000), ReplayConfig(policy=args.policy, variant=args.variant)
    )
    for _round in range(args.repeat):
        for options in settings:
            params = dict(options)
            variant = params.pop("variant", args.variant)
            config = ReplayConfig(policy=args.policy, variant=variant, classifier_params=params)
            started, cpu = time.perf_counter(), time.process_time()
            result = run_replay(workload, config)
            walls[label(options)].append(time.perf_counter() - started)
            cpus[label(options)].append(time.process_time() - cpu)
            scheduler = result.scheduler
            trains[label(options)].append(
                sum(week.train_seconds for week in scheduler.weeks)  # type: ignore[attr-defined]
                + scheduler.classifier.drift_train_seconds  # type: ignore[attr-defined]
            )
            small = sum(r.predicted_small for r in scheduler.records)  # type: ignore[attr-defined]
            counts[label(options)] = (small, scheduler.kill_decisions)  # type: ignore[attr-defined]
    base_wall = statistics.median(walls["defaults"])
    base_rest = base_wall - statistics.median(trains["defaults"])
    base_cpu = statistics.median(cpus["defaults"])
    print(
        f"KTH-SP2 ({jobs:,} jobs), {args.policy} {args.variant}, median of {args.repeat} "
        "interleaved rounds"
    )
    print(
        "| options | wall (s) | training (s) | +µs/job in all | +µs/job without training "
        "| CPU (s) | +µs/job of CPU | small | kills |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for options in settings:
        name = label(options)
        wall = statistics.median(walls[name])
        train = statistics.median(trains[name])
        extra = (wall - base_wall) / jobs * 1e6
        extra_rest = (wall - train - base_rest) / jobs * 1e6
        cpu = statistics.median(cpus[name])
        extra_cpu = (cpu - base_cpu) / jobs * 1e6
        small, kills = counts[name]
        print(
            f"| {name} | {wall:.1f} | {train:.1f} | {extra:+.1f} | {extra_rest:+.1f} | "
            f"{cpu:.1f} | {extra_cpu:+.1f} | {small:,} | {kills:,} |"
        )


if __name__ == "__main__":
    main()
