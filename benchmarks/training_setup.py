"""Which Random Forest set-up keeps weekly training fast without losing classification quality?

Full replays would let the schedule and the model influence each other; to compare training
set-ups alone, this script fixes the job stream: it replays the trace once with FCFS-EASY (base)
to get every job's finish time, then runs the online feature tracker over submissions and
finishes in time order, exactly as the scheduler does, and for every k-th week trains each
candidate set-up on the jobs finished before the week starts and classifies the jobs submitted
during it. Printed: overall accuracy, precision, recall (paper, Table 5) and training time per
week, for the reference "all history, scikit-learn defaults" and the candidates.

    python training_setup.py [TRACE] [--every K]
"""

from __future__ import annotations

import argparse
import heapq
import time

import numpy as np
from _common import HPC2N, need

from batsched_ml.job import Job
from batsched_ml.predict.features import FeatureTracker
from batsched_ml.predict.forest import ForestParams, train_forest
from batsched_ml.predict.training import WEEK
from batsched_ml.runs.replaying import ReplayConfig, calendar_of, run_replay
from batsched_ml.workload.io import load_workload

CANDIDATES = {
    "all history, sklearn defaults (100 trees)": ForestParams(
        n_estimators=100, max_depth=None, min_samples_leaf=1, window=None
    ),
    "all history, 40 trees, depth 20, leaf 2": ForestParams(window=None, min_samples_leaf=2),
    "window 50k, 40 trees, depth 20, leaf 2": ForestParams(min_samples_leaf=2),
    "window 20k, 40 trees, depth 20, leaf 2": ForestParams(window=20_000, min_samples_leaf=2),
    "window 10k, 30 trees, depth 16, leaf 2": ForestParams(
        n_estimators=30, max_depth=16, window=10_000, min_samples_leaf=2
    ),
    "window 50k, 40 trees, depth 20, leaf 20": ForestParams(max_samples=None),
    "window 50k, 40 trees, depth 20, leaf 20, max_samples 0.5": ForestParams(max_samples=0.5),
    "window 50k, 40 trees, depth 20, leaf 20, max_samples 0.25": ForestParams(max_samples=0.25),
    "window 50k, 40 trees, depth 20, leaf 20, max_samples 0.1": ForestParams(max_samples=0.1),
}


def job_stream(
    workload: dict, mode: str = "online"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Features at submission, runtime, submission time and finish time of every job."""
    result = run_replay(workload, ReplayConfig(policy="fcfs"))
    finish = {}
    for row in result.rows:
        fields = row.split(",")
        finish[fields[0]] = float(fields[10])
    # "submitted" (for explanation only, never in the scheduler): a job's class counts for the
    # features of the jobs submitted after it, finished or not, as an offline pipeline that
    # knows every runtime of the trace would compute them
    leaky = mode == "submitted"
    tracker = FeatureTracker(**calendar_of(workload), mode="online" if leaky else mode)
    jobs = workload["jobs"]
    runtimes = np.array([workload["profiles"][j["profile"]]["delay"] for j in jobs], dtype=float)
    features = np.zeros((len(jobs), 20), dtype=np.float32)
    submit = np.array([j["subtime"] for j in jobs], dtype=float)
    ends = np.array([finish[str(j["id"])] for j in jobs])
    pending: list[tuple[float, int]] = []
    submissions = {}
    finished_runtimes: list[float] = []
    divider = None
    week = -1
    for i, obj in enumerate(jobs):
        t = submit[i]
        while pending and pending[0][0] <= t:
            end, k = heapq.heappop(pending)
            w = int(end // WEEK)
            if w > week:
                week, divider = (
                    w,
                    (float(np.median(finished_runtimes)) if finished_runtimes else None),
                )
            finished_runtimes.append(runtimes[k])
            submission = submissions.pop(k)
            if not leaky:
                tracker.finished(submission, int(divider is not None and runtimes[k] < divider))
        if int(t // WEEK) > week:
            week = int(t // WEEK)
            divider = float(np.median(finished_runtimes)) if finished_runtimes else None
            tracker.new_week()
        job = Job.from_batsim(f"w0!{obj['id']}", obj)
        submission = tracker.submit(job)
        features[i] = submission.features
        submissions[i] = submission
        heapq.heappush(pending, (ends[i], i))
        if leaky:
            tracker.finished(submission, int(divider is not None and runtimes[i] < divider))
    return features, runtimes, submit, ends


def evaluate(features, runtimes, submit, ends, params: ForestParams, every: int):
    weeks = int(submit.max() // WEEK) + 1
    counts = np.zeros(4, dtype=int)  # TS FS TL FL
    train_times = []
    for week in range(1, weeks, every):
        boundary = week * WEEK
        done = np.flatnonzero(ends < boundary)
        if len(done) < params.min_train:
            continue
        done = done[np.argsort(ends[done], kind="stable")]
        divider = float(np.median(runtimes[done]))
        if params.window is not None:
            done = done[-params.window :]
        trained = train_forest(features[done], runtimes[done] < divider, params)
        if trained.predictor is None:
            continue
        train_times.append(trained.train_seconds)
        now = np.flatnonzero((submit >= boundary) & (submit < boundary + WEEK))
        if not len(now):
            continue
        predicted = trained.predictor.predict(features[now])
        actual = runtimes[now] < divider
        counts += [
            int((predicted & actual).sum()),
            int((predicted & ~actual).sum()),
            int((~predicted & ~actual).sum()),
            int((~predicted & actual).sum()),
        ]
    ts, fs, tl, fl = counts
    return (
        (ts + tl) / counts.sum(),
        ts / (ts + fs),
        ts / (ts + fl),
        float(np.mean(train_times)),
        counts.sum(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trace", nargs="?", default=str(HPC2N))
    parser.add_argument("--every", type=int, default=3, help="evaluate every K-th week")
    parser.add_argument("--only", nargs="*", help="candidate names (substrings)")
    args = parser.parse_args()
    workload = load_workload(need(__import__("pathlib").Path(args.trace)))
    started = time.perf_counter()
    stream = job_stream(workload)
    print(
        f"{workload['trace']}: {len(workload['jobs']):,} jobs, stream built in {time.perf_counter() - started:.0f} s; every {args.every} week(s)"
    )
    print(
        f"{'set-up':45} {'accuracy':>9} {'precision':>9} {'recall':>7} {'train s/week':>12} {'jobs':>8}"
    )
    for name, params in CANDIDATES.items():
        if args.only and not any(o in name for o in args.only):
            continue
        acc, prec, rec, seconds, jobs = evaluate(*stream, params, args.every)
        print(f"{name:45} {acc:9.1%} {prec:9.1%} {rec:7.1%} {seconds:12.2f} {jobs:8,}", flush=True)


if __name__ == "__main__":
    main()
