"""The ``batsched-ml`` command line: a thin layer that wires the modules together.

Every user-facing failure (bad input file, invalid option) ends with one ``batsched-ml: error:``
line on stderr and exit status 2 (a few have their own status: :mod:`batsched_ml.errors` lists
them all), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from batsched_ml import __version__
from batsched_ml.cli_traces import add_parser as add_traces_parser
from batsched_ml.errors import ConfigError, OutputHoldsRun, UserError
from batsched_ml.plugins import Choices
from batsched_ml.predict.params import ForestParams
from batsched_ml.registry import CORRECTIONS, DISPATCHERS, POLICIES, PREDICTORS, VARIANTS
from batsched_ml.workload import shipped

#: What a user can fix, printed as one line with exit 2 (or the error class's own status, see
#: :mod:`batsched_ml.errors`): the project's own error classes (all derive from
#: :class:`~batsched_ml.errors.UserError`) and the system's refusals of a path the user named
#: (missing file, no permission, full disk). Anything else is a bug: traceback,
#: exit 70 (EX_SOFTWARE), and a line asking to report it.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, OSError)
INTERNAL_ERROR = 70
PEER_GONE = 3  # the peer's connection closed while its answer was awaited (errors.PeerGone)
INTERRUPTED, TERMINATED = 130, 143
#: The reader of standard output went away (``batsched-ml ... | head``): the command ends
#: quietly with the status of a process killed by SIGPIPE, 128 + 13, as ``cat`` or ``grep``
#: do, no error line and no traceback.
BROKEN_PIPE = 141


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (so a ``BrokenPipeError``
    came from writing to it, not from another pipe or socket)."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced (tests) or closed
        return False
    if not hasattr(select, "poll"):  # no way to tell: standard output is the likely pipe
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_broken_pipe() -> int:
    """End quietly after the reader of standard output went away: what is still buffered is
    dropped (standard output now writes to /dev/null, so that Python's own flush at exit
    does not print ``Exception ignored ... BrokenPipeError``)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return BROKEN_PIPE


def _exit_code(exc: BaseException) -> int:
    """The exit status of a user error: 2, or the class's own (:mod:`batsched_ml.errors`:
    66 for a missing input, 73 for an output folder that must not be written)."""
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 2


class Terminated(KeyboardInterrupt):
    """SIGTERM (``docker stop``, ``kill``), raised where the program is, like Ctrl-C's
    ``KeyboardInterrupt``: the same clean-up runs (run folders marked ``interrupted``, child
    processes stopped), and the exit code tells the two apart (143, 130)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def _stop_signals():
    """SIGTERM raises :class:`Terminated` while a command runs (only in the main thread: a
    command run from another thread, e.g. in tests, keeps the process's handlers)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: The shipped trace (package data: there in an installed wheel too).
DEFAULT_TRACE = shipped.DEFAULT_TRACE


def _cmd_workload_convert(args: argparse.Namespace) -> int:
    from batsched_ml.workload.convert import convert_trace
    from batsched_ml.workload.io import write_converted
    from batsched_ml.workload.swf import read_swf

    _not_a_run_folder(Path(args.output))
    trace = read_swf(shipped.resolve(args.trace), lenient=args.lenient)
    workload = convert_trace(trace, machine_size=args.machine_size)  # no jobs: nothing written
    output_dir(args.output)
    name = args.name or trace.name
    workload_path, platform_path = write_converted(workload, args.output, name)
    for line in workload.report.lines():
        print(line)
    print(f"wrote {workload_path} ({workload.report.kept_jobs} jobs)")
    print(f"wrote {platform_path} ({workload.nb_res} hosts + master)")
    return 0


#: Files that only a run writes: a folder holding one of them is a run's folder.
RUN_MARKERS = ("run.json", "jobs.csv", "summary.json")


def _not_a_run_folder(out: Path) -> None:
    """Refuse an output folder that holds a run (exit 73): a converted workload written into
    it would mix with the run's files (and a later ``--force`` of the run would refuse the
    folder for holding files no run writes)."""
    found = [name for name in RUN_MARKERS if (out / name).exists()]
    if found:
        raise OutputHoldsRun(
            f"{out} holds a run ({', '.join(found)}): not writing a workload there; choose "
            "another folder for -o"
        )


def _hours(text: str) -> float | None:
    if text.lower() in ("none", "off", "inf"):
        return None
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("the starvation threshold must be positive (or 'none')")
    return value * 3600.0


def _add_forest_options(parser: argparse.ArgumentParser) -> None:
    """The forest set-up, shared by the scheduler's commands and the trainer (they must agree)."""
    parser.add_argument(
        "--trees", type=int, default=ForestParams.n_estimators, help="Random Forest size"
    )
    parser.add_argument(
        "--window",
        type=lambda text: None if text == "all" else int(text),
        default=ForestParams.window,
        metavar="N|all",
        help="train on the N most recent finished jobs (default %(default)s), or 'all'",
    )
    parser.add_argument(
        "--max-samples",
        type=_share_or_all,
        default=ForestParams.max_samples,
        metavar="SHARE|all",
        help="each tree learns from this share of the training set, in (0, 1] (default "
        "%(default)s: within 0.5 point of accuracy on the five paper traces and 2 to 5 times "
        "faster, docs/speed.md), or 'all' (scikit-learn's bootstrap of the whole set, the "
        "paper's)",
    )


def _share_or_all(text: str) -> float | None:
    return None if text == "all" else _share(text)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1]")
    return value


def _add_force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace whole an output folder that holds another run",
    )


def _add_scheduler_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        default="fcfs",
        choices=Choices(sorted(POLICIES), "policy"),
        help="queue order: "
        + "; ".join(f"{name}: {text}" for name, text in POLICIES.items())
        + "; or a plug-in: an import path package.module:Class or an entry point of group "
        "batsched_ml.policies",
    )
    parser.add_argument(
        "--variant",
        default="base",
        choices=list(VARIANTS),
        help="base: EASY on requested times; classification: small/large queues from weekly "
        "Random Forests; classification-idempotent: plus killing small jobs that outrun the "
        "divider and resubmitting them as large; class-clairvoyant: the true class; "
        "runtime-clairvoyant: EASY on actual runtimes",
    )
    parser.add_argument(
        "--predictor",
        default="requested",
        choices=Choices(list(PREDICTORS), "predictor"),
        help="runtime prediction the scheduler plans with: requested (the user's "
        "estimate), actual (clairvoyant reference), easy++ (mean of the user's last two "
        "runtimes, capped by the requested time; with shortest-job backfilling), fixed (10 "
        "minutes: the start of a correction-only policy), adaboost (AdaBoost regression on "
        "the SWF fields, retrained weekly), profile (the user's last job of a matching "
        "profile, from Galleguillos et al.'s data-driven dispatching on AccaSim), su (the SU "
        "framework: Levenshtein clusters of user and job name, nearest neighbours, SVR). All "
        "but actual are capped by the requested time. Or a plug-in: an import path "
        "package.module:Class or an entry point of group batsched_ml.predictors",
    )
    parser.add_argument(
        "--predictor-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a constructor parameter of the predictor, e.g. alpha=1.5 or regressor=rf for su, "
        "seconds=900 for fixed, n_estimators=100 for adaboost (repeatable)",
    )
    parser.add_argument(
        "--classifier-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the classified variants' classifier (repeatable): threshold=0.6 "
        "(small iff the forest's probability of small exceeds it; 0.5: the forest's vote), "
        "small_order=probability (small jobs by decreasing probability of being small, "
        "rather than by the policy), divider_quantile=0.4 (the divider is this quantile of "
        "the finished runtimes rather than the median; with --trainer inprocess), "
        "threshold_rule=cost (the threshold chosen each week by the expected cost of false "
        "small and false large jobs; cost_weeks=4; kill_budget=0.15 to call at most that share "
        "of the recent jobs small wrongly), drift_retrain=true (retrain within the "
        "week when the last day's error jumps by drift_jump=0.1; with --trainer inprocess), "
        "leaky_features=all|weekly (LEAKY, for explaining the paper's figures only: features "
        "from earlier jobs' true classes, finished or not). See docs/classification.md and "
        "docs/closing-the-gap.md",
    )
    parser.add_argument(
        "--correction",
        default="none",
        choices=list(CORRECTIONS),
        help="walltime correction of a running job that reaches its predicted end: simple "
        "(+1 h, up to 7 days of running) or power (+15 x 2^(i-2) min at the i-th); never past "
        "the requested time",
    )
    parser.add_argument(
        "--dispatcher",
        default="easy",
        choices=list(DISPATCHERS),
        help="easy: EASY backfilling in the --policy order; sjf / ljf: shortest / longest "
        "predicted runtime first, no backfilling; prb: urgency (wait / expected wait of the "
        "job's queue) first, ties by demand, every job that fits starts; cph: a CP-SAT plan "
        "of the 32 most urgent jobs minimising their total wait, then PRB's allocation "
        "(Galleguillos et al.)",
    )
    parser.add_argument(
        "--dispatcher-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the cph dispatcher's planner: window (jobs the CP model "
        "schedules, default 32), budget (CP-SAT deterministic time per decision, default "
        "0.001), wall_limit (a wall-clock cap in seconds per decision, default none: a capped "
        "decision depends on the machine's load, so the run warns), random_state (repeatable)",
    )
    parser.add_argument(
        "--feature-mode",
        default="online",
        choices=["online", "weekly"],
        help="classifier features from every job finished before the submission (online), or "
        "from jobs of previous weeks only (the paper's simplification)",
    )
    _add_forest_options(parser)
    parser.add_argument(
        "--starvation-threshold",
        type=_hours,
        default=72 * 3600.0,
        metavar="HOURS",
        help="jobs waiting longer go to the head of the queue, oldest first (default 72; "
        "'none' disables)",
    )
    parser.add_argument(
        "--no-backfilling",
        action="store_true",
        help="stop each pass at the first job that does not fit (plain list scheduling)",
    )


def _add_trainer_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trainer",
        default="process",
        metavar="process|inprocess|ENDPOINT",
        help="who trains the weekly models of a classified variant: a side trainer process "
        "started and stopped by this command (default; models in OUT/models), this process, or "
        "a trainer already running at ENDPOINT (batsched-ml trainer). Same results either way.",
    )
    parser.add_argument(
        "--trainer-store",
        metavar="DIR",
        help="where the trainer at --trainer ENDPOINT publishes its models (its --store; "
        "default: OUT/models)",
    )
    parser.add_argument(
        "--trainer-deadline",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for a weekly model before going on with the last good one",
    )


def _cmd_trainer(args: argparse.Namespace) -> int:
    import logging

    from batsched_ml.trainer.server import run_trainer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s trainer %(levelname)s %(message)s")
    store = Path(args.store)
    run_trainer(
        args.socket,
        store,
        Path(args.db) if args.db else store / "history.sqlite",
        ForestParams(
            n_estimators=args.trees,
            window=args.window,
            max_samples=args.max_samples,
            divider_quantile=args.divider_quantile,
        ),
        idle_timeout=args.idle_timeout,
        on_bound=lambda endpoint: print(f"trainer listening on {endpoint}", flush=True),
    )
    return 0


def _key_values(items: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def _config(args: argparse.Namespace):
    from batsched_ml.replaying import ReplayConfig

    return ReplayConfig(
        policy=args.policy,
        variant=args.variant,
        predictor=args.predictor,
        correction=args.correction,
        dispatcher=args.dispatcher,
        predictor_params=_key_values(args.predictor_option, "--predictor-option"),
        dispatcher_params=_key_values(args.dispatcher_option, "--dispatcher-option"),
        classifier_params=_key_values(args.classifier_option, "--classifier-option"),
        starvation_threshold=args.starvation_threshold,
        backfilling=not args.no_backfilling,
        feature_mode=args.feature_mode,
        forest=ForestParams(
            n_estimators=args.trees, window=args.window, max_samples=args.max_samples
        ),
    )


def _cmd_replay(args: argparse.Namespace) -> int:
    from batsched_ml.outputs import write_replay
    from batsched_ml.replaying import run_replay
    from batsched_ml.runfolder import RunIdentity, claim, workload_record
    from batsched_ml.workload.io import load_workload, report_dropped

    started = time.perf_counter()
    path = shipped.resolve(args.workload)
    config = _config(args)
    if args.shake < 0 or args.shake_seconds < 0:
        raise ConfigError("--shake and --shake-seconds take 0 or a positive number")
    shaking = {"seed": args.shake, "seconds": args.shake_seconds} if args.shake else None
    record = workload_record(path, lenient=args.lenient, shaking=shaking)
    identity = RunIdentity("replay", config.as_dict(), record)
    workload = load_workload(path, lenient=args.lenient)  # bad input: nothing written
    if shaking is not None:
        from batsched_ml.workload.shake import shake

        workload = shake(workload, **shaking)
    folder = claim(args.output, identity, force=args.force)
    # said once the run goes ahead (a mistake is one line), recorded in run.json
    folder.notes["input_cleaning"] = report_dropped(workload, path)
    with folder.running():
        label = f"{path.name} {config.policy}"
        with (
            _progress_bar(args.quiet, len(workload["jobs"]), label) as progress,
            trainer_for(args, config, Path(args.output), folder.identity.as_dict()) as trainer,
        ):
            result = run_replay(
                workload, config, progress=progress, zmq_endpoint=args.zmq, trainer=trainer
            )
        del workload  # its job objects are freed before the files are written (peak memory)
        summary = write_replay(result, args.output, run_id=folder.run_id)
    elapsed = time.perf_counter() - started
    print(_summary_table(summary))
    capped = getattr(getattr(result.scheduler, "planner", None), "wall_capped", 0)
    if capped:
        print(
            f"batsched-ml: warning: {capped:,} CPH decision(s) stopped by wall_limit: this run "
            "depends on the machine's load and may not be reproduced (see timing.json)",
            file=sys.stderr,
        )
    if summary.get("skipped_lines"):
        print(f"skipped {summary['skipped_lines']:,} malformed line(s) of {path.name} (--lenient)")
    print(f"wrote {Path(args.output) / 'jobs.csv'} and summary.json in {elapsed:.1f} s")
    return 0


@contextlib.contextmanager
def _progress_bar(quiet: bool, total: int, label: str) -> Iterator[Callable[[int], None] | None]:
    """A bar counting finished jobs, and the callback that moves it; with ``--quiet``, neither
    (``None``: tqdm is not even imported, a few hundredths of a second of a short replay)."""
    if quiet:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="job", desc=label) as bar:

        def progress(done: int) -> None:
            bar.update(done - bar.n)

        yield progress


@contextlib.contextmanager
def trainer_for(args: argparse.Namespace, config, out_dir: Path, run: dict | None = None):
    """The trainer a classified run uses, from its options (:func:`.trainer.lifecycle.trainer`)."""
    from batsched_ml.trainer.lifecycle import trainer

    with trainer(
        config,
        out_dir,
        run,
        choice=getattr(args, "trainer", "inprocess"),
        store=getattr(args, "trainer_store", None),
        deadline=getattr(args, "trainer_deadline", 300.0),
        stop=getattr(args, "stop_trainer", False),
    ) as chosen:
        yield chosen


def _summary_table(summary: dict) -> str:
    from batsched_ml.collect import summary_table

    return summary_table(summary)


def _cmd_report(args: argparse.Namespace) -> int:
    from batsched_ml.report.page import write_report

    page = write_report(args.runs, output_dir(args.output))
    print(f"wrote {page} and the figures next to it")
    return 0


def _cmd_campaign(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from batsched_ml.campaign import check_inputs, load_campaign, run_campaign

    campaign = load_campaign(args.config)
    if args.scheduler is not None:
        campaign.scheduler = args.scheduler
    if args.workers is not None:
        campaign.workers = args.workers
    check_inputs(campaign)  # every trace there before anything runs or is written
    output_dir(campaign.output)
    with tqdm(total=len(campaign.runs), unit="run", disable=args.quiet) as bar:

        def progress(row: dict, done: int, total: int) -> None:
            bar.update(1)
            bar.set_postfix_str(f"{row['trace']} {row['policy']} {row['variant']} {row['status']}")

        table = run_campaign(campaign, progress=progress)
    counts = table["status"].value_counts().to_dict()
    reasons = table.loc[
        table["rerun_reason"].map(lambda v: v if isinstance(v, str) else "") != "", "rerun_reason"
    ]
    rerun = (
        f" ({len(reasons)} rerun: "
        + ", ".join(f"{n} {why}" for why, n in reasons.value_counts().sort_index().items())
        + ")"
        if len(reasons)
        else ""
    )
    print(
        f"{len(table)} runs: {counts.get('done', 0)} done{rerun}, {counts.get('existing', 0)} "
        f"already there, {counts.get('failed', 0)} failed; wrote "
        f"{campaign.output / 'results.parquet'} and results.csv"
    )
    for row in table[table["status"] == "failed"].to_dict("records"):
        print(f"  failed: {row['trace']} {row['policy']} {row['variant']}: {row['error']}")
    from batsched_ml.campaign import dropped_by_trace
    from batsched_ml.workload.io import print_dropped

    for trace, dropped in dropped_by_trace(table, campaign.output).items():
        print_dropped(dropped, trace)
    return 1 if counts.get("failed") else 0


def _cmd_related_work(args: argparse.Namespace) -> int:
    from batsched_ml.campaign import load_campaign
    from batsched_ml.report.related_work import collect, render, runs_on_page
    from batsched_ml.runfolder import OutputFolderError

    status = 0
    if not args.no_run:
        status = _cmd_campaign(args)
    campaign = load_campaign(args.config)
    table = collect(campaign)
    notes = Path(args.notes)
    page = render(table, campaign, notes.read_text() if notes.is_file() else "")
    out = Path(args.output)
    made = int((table["status"] != "missing").sum())
    held = runs_on_page(out.read_text(), len(table)) if out.is_file() else None
    if held is not None and made < held and not args.force:
        raise OutputFolderError(
            f"{out} holds {held} runs and these runs make {made}: not overwriting it (the runs "
            f"are not here? see {campaign.output}); --force to write it anyway"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    print(f"wrote {out}: {made} of {len(table)} runs")
    return status


def _cmd_collect(args: argparse.Namespace) -> int:
    from batsched_ml.collect import collect, summary_table

    summary = collect(
        args.batsim_jobs,
        args.workload,
        args.scheduler,
        args.output,
        wait=args.wait,
        status_dir=args.status_dir,
        settings=_given_settings(args),
        force=args.force,
    )
    print(summary_table(summary))
    print(f"wrote {Path(args.output) / 'jobs.csv'}, summary.json and report.md")
    return 0


def _cmd_clear(args: argparse.Namespace) -> int:
    from batsched_ml.runfolder import empty_run_folder

    removed = empty_run_folder(args.folder)
    if removed:
        print(f"{args.folder}: removed an earlier run's {', '.join(removed)}")
    else:
        print(f"{args.folder}: empty")
    return 0


def _given_settings(args: argparse.Namespace) -> dict | None:
    """The scheduler settings given on ``collect``'s command line (its scheduler options have
    no default: a setting not given is the served run's), as ReplayConfig fields; ``None``
    when none was given."""
    given = vars(args)
    out: dict = {
        name: given[name]
        for name in (
            "policy",
            "variant",
            "predictor",
            "correction",
            "dispatcher",
            "feature_mode",
            "starvation_threshold",
        )
        if name in given
    }
    for dest, name, option in (
        ("predictor_option", "predictor_params", "--predictor-option"),
        ("dispatcher_option", "dispatcher_params", "--dispatcher-option"),
        ("classifier_option", "classifier_params", "--classifier-option"),
    ):
        if dest in given:
            out[name] = _key_values(given[dest], option)
    if "no_backfilling" in given:
        out["backfilling"] = not given["no_backfilling"]
    forest = {
        name: given[dest]
        for dest, name in (("trees", "n_estimators"), ("window", "window"))
        if dest in given
    }
    if "max_samples" in given:
        forest["max_samples"] = given["max_samples"]
    if forest:
        out["forest"] = forest
    return out or None


def _cmd_serve(args: argparse.Namespace) -> int:
    from batsched_ml.replaying import make_scheduler
    from batsched_ml.runfolder import RunIdentity, claim, workload_record
    from batsched_ml.served import ServedRun, serve_and_record
    from batsched_ml.transport import bind_rep
    from batsched_ml.transport_v5 import features_for, serve
    from batsched_ml.workload.io import dropped_jobs, load_workload, print_dropped

    calendar = None
    workload: dict = {}
    dropped: dict[str, int] = {}
    read = None
    if args.calendar:
        from batsched_ml.replaying import calendar_of

        loaded = load_workload(args.calendar)
        dropped = dropped_jobs(loaded)
        read = (loaded.get("cleaning") or {}).get("input_jobs")
        calendar = calendar_of(loaded)
        workload = workload_record(args.calendar)
        del loaded
    config = _config(args)
    folder = claim(args.output, RunIdentity("serve", config.as_dict(), workload), force=args.force)
    folder.notes["input_cleaning"] = dropped
    timeout = None if args.timeout <= 0 else args.timeout
    run: ServedRun | None = None
    with folder.running():  # run.json: complete, or failed / interrupted with the reason
        try:
            # bound before the trainer starts: a busy endpoint ends the run before anything
            socket = bind_rep(args.socket)
            print_dropped(dropped, args.calendar or "", read if isinstance(read, int) else None)
            try:
                with trainer_for(
                    args, config, Path(args.output), folder.identity.as_dict()
                ) as trainer:
                    scheduler = make_scheduler(config, calendar=calendar, trainer=trainer)
                    run = ServedRun(scheduler, config.as_dict(), run_id=folder.run_id)
                    run.input_cleaning = dict(dropped)
                    count = serve_and_record(
                        run,
                        lambda handler: serve(
                            socket,
                            handler,
                            timeout=timeout,
                            on_bound=lambda endpoint: print(f"listening on {endpoint}", flush=True),
                            protocol=args.protocol,
                            features=features_for(config),
                            on_protocol=lambda found: print(f"speaking Batsim {found}", flush=True),
                        ),
                        args.output,
                    )
            finally:
                socket.close()
        except Exception:
            if run is None or not run.started:
                # a start that failed (a busy endpoint, a Batsim of another protocol, a first
                # message refused): nothing that looks like a run, run.json says why
                folder.clear_outputs()
            raise
        finally:
            if run is not None and run.input_cleaning:
                folder.notes["input_cleaning"] = run.input_cleaning
    print(
        f"simulation ended after {count} messages: {len(scheduler.rejected)} job(s) rejected; "
        f"wrote {Path(args.output) / 'decisions.csv'} and serve.json",
        flush=True,
    )
    return 0


def _cmd_batsim(args: argparse.Namespace) -> int:
    from batsched_ml.sim import jobs_csv
    from batsched_ml.sim.simulator import BatsimSimulator
    from batsched_ml.transport import run_batsim_peer
    from batsched_ml.workload.io import load_workload, report_dropped
    from batsched_ml.workload.platform import compute_host_names

    workloads = [load_workload(path) for path in args.workload]
    hosts = compute_host_names(args.platform)
    sim = BatsimSimulator(
        workloads,
        hosts,
        dynamic_jobs=args.enable_dynamic_jobs,
        acknowledge_dynamic_jobs=args.acknowledge_dynamic_jobs,
        profile_reuse=args.enable_profile_reuse,
        forward_profiles=args.forward_profiles_on_submission,
        workload_paths=[str(Path(p).resolve()) for p in args.workload],
    )
    timeout = None if args.timeout <= 0 else args.timeout
    out = Path(args.export + "_jobs.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, workload in zip(args.workload, workloads, strict=True):
        report_dropped(workload, path)
    try:
        count = run_batsim_peer(sim, args.socket_endpoint, timeout=timeout)
    except BaseException:
        # the jobs finished so far, under a name no reader takes for a whole run's table
        partial = Path(args.export + "_jobs.partial.csv")
        jobs_csv.write_jobs_csv(partial, sim.rows)
        print(f"batsched-ml: the run stopped early; {len(sim.rows)} job(s) in {partial}")
        raise
    jobs_csv.write_jobs_csv(out, sim.rows)
    print(json.dumps({"messages": count, "jobs": len(sim.rows), "jobs_csv": str(out)}))
    return 0


def _cmd_paper_results(args: argparse.Namespace) -> int:
    from batsched_ml import paper

    traces = args.traces or list(paper.PAPER_TRACES)
    runs = paper.plan(traces, args.policies or paper.POLICIES, args.variants or paper.VARIANTS)
    if args.no_run:  # the page from the runs already there, every one of them complete
        summaries = paper.load(Path(args.runs), runs)
        absent = [r.folder(Path(args.runs)) for r in runs if r not in summaries]
        if absent:
            raise paper.RunsMissing(
                f"{len(absent)} of {len(runs)} run(s) missing or not complete in {args.runs} "
                f"(first: {absent[0]}); {args.output} not written (run without --no-run)"
            )
        return _write_page(args.output, paper.report(summaries, traces))
    trace_dir = Path(args.trace_dir)
    from batsched_ml.workload.archive import check_fetched

    check_fetched(traces, trace_dir)  # a log not downloaded: one line saying how to fetch it
    missing = [t for t in traces if not shipped.resolve(t, trace_dir).exists()]
    if missing:
        raise FileNotFoundError(f"no {', '.join(missing)} in {trace_dir}")
    failed = paper.run_all(runs, trace_dir, Path(args.runs), workers=args.workers)
    if failed:  # the page would mix missing cells with figures: not written
        for line in failed:
            print(f"  failed: {line}", file=sys.stderr)
        print(
            f"batsched-ml: {len(failed)} of {len(runs)} replay(s) failed; {args.output} not "
            "written (the runs done are kept: run the command again once fixed)",
            file=sys.stderr,
        )
        return 1
    return _write_page(args.output, paper.report(paper.load(Path(args.runs), runs), traces))


def _write_page(output: str, text: str) -> int:
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


class _HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default when it has one that its help does not already state."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if (
            text is None
            or "default" in text
            or action.default in (None, False, argparse.SUPPRESS)
            or action.required
            or not action.option_strings
        ):
            return text
        return text + " (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage block, sometimes ten lines, is one ``--help``
    away; the line names it), and the defaults in ``--help``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file=None) -> None:
        """argparse's, except that a reader of ``--help`` gone away is not ignored: the command
        line ends as any command whose reader went away (exit 141)."""
        if message:
            try:
                (file or sys.stderr).write(message)
            except BrokenPipeError:
                raise
            except (AttributeError, OSError):
                pass

    def error(self, message: str) -> NoReturn:
        line = f"batsched-ml: error: {message} (see: {self.prog} --help)"
        print(line, file=sys.stderr)
        raise UsageError(line)


class UsageError(SystemExit):
    """A command line argparse refused (exit code 2); ``line`` is the error printed."""

    def __init__(self, line: str) -> None:
        super().__init__(2)
        self.line = line


def output_dir(path: str | Path) -> Path:
    """Create ``path`` and check that it takes files, before hours of work go into it."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OSError(
            f"cannot write into the output directory {out}: {exc.strerror or exc}"
        ) from None
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="batsched-ml",
        description="Batsim scheduling with online job-size classification.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    workload = commands.add_parser("workload", help="work with SWF traces and Batsim workloads")
    workload_commands = workload.add_subparsers(dest="workload_command", required=True)
    convert = workload_commands.add_parser(
        "convert",
        help="convert an SWF trace into a Batsim workload JSON and platform XML",
        description="Convert an SWF trace (plain or .gz) into DIR/NAME.json and "
        "DIR/NAME_platform.xml, printing how many jobs each cleaning rule dropped or changed.",
    )
    convert.add_argument("trace", help="SWF file, plain or gzipped")
    convert.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    convert.add_argument("--name", help="base name of the output files (default: the trace's)")
    convert.add_argument(
        "--machine-size",
        type=int,
        metavar="N",
        help="processors of the machine (default: the header's MaxProcs, else MaxNodes)",
    )
    convert.add_argument(
        "--lenient",
        action="store_true",
        help="skip and count malformed lines instead of stopping at the first",
    )
    convert.set_defaults(handler=_cmd_workload_convert)
    add_traces_parser(commands)

    replay = commands.add_parser(
        "replay",
        help="replay a trace in the embedded simulator and write jobs.csv and summary.json",
        description="Replay an SWF trace (converted on the fly) or a Batsim workload JSON in the "
        "embedded Batsim-compatible simulator; write DIR/jobs.csv (Batsim's format) and "
        "DIR/summary.json, and print a summary.",
    )
    replay.add_argument(
        "workload",
        nargs="?",
        help="SWF trace (.swf, .swf.gz) or Batsim workload (.json); default: the shipped KTH-SP2",
    )
    replay.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="the run's folder: new or empty, or holding this same run (run again)",
    )
    _add_force_option(replay)
    _add_scheduler_options(replay)
    replay.add_argument(
        "--zmq",
        metavar="ENDPOINT",
        help="serve the scheduler over ZeroMQ on this endpoint (e.g. tcp://127.0.0.1:*) "
        "instead of in process; same results",
    )
    _add_trainer_options(replay)
    replay.add_argument("--lenient", action="store_true", help="skip malformed SWF lines")
    replay.add_argument(
        "--shake",
        type=int,
        default=0,
        metavar="SEED",
        help="replay a shaken copy of the trace (Tsafrir et al.'s input shaking): each job's "
        "submission moves by a random whole number of seconds, seeded; 0 (default): the trace",
    )
    replay.add_argument(
        "--shake-seconds",
        type=int,
        default=60,
        metavar="S",
        help="the largest move of a shaken copy, either way (default %(default)s s)",
    )
    replay.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    replay.set_defaults(handler=_cmd_replay)

    serve = commands.add_parser(
        "serve",
        help="answer a real Batsim (4.2.1 or 5) over ZeroMQ",
        description="Bind a ZeroMQ REP socket and schedule for the Batsim that connects to it "
        "(batsim -s ENDPOINT) until the simulation ends; exit 0 then.",
    )
    serve.add_argument(
        "--socket",
        default="tcp://127.0.0.1:28000",
        help="where to listen for Batsim (default: tcp://127.0.0.1:28000, this machine only; "
        "tcp://*:28000 listens on every interface, as the docker compose set-up does)",
    )
    serve.add_argument(
        "--protocol",
        choices=("auto", "4", "5"),
        default="auto",
        help="Batsim 4's or Batsim 5's protocol; auto (default): told by Batsim's first message",
    )
    serve.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="give up if Batsim says nothing for this long (default 600; 0 waits forever)",
    )
    serve.add_argument(
        "--calendar",
        metavar="WORKLOAD",
        help="workload (JSON or SWF) whose start time and time zone date the jobs for the "
        "classifier's calendar features; Batsim does not forward them (alternatively, pass "
        "them as JSON in batsim --sched-cfg)",
    )
    _add_scheduler_options(serve)
    _add_trainer_options(serve)
    serve.add_argument(
        "--stop-trainer",
        action="store_true",
        help="ask the trainer at --trainer ENDPOINT to stop when the simulation ends (a "
        "trainer dedicated to this run, as in the docker compose set-up; a trainer obeys only "
        "the run that owns it, the first to greet it)",
    )
    serve.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="the run's folder: decisions.csv, serve.json (status complete or partial, and "
        "why), run.json and the side trainer's models",
    )
    _add_force_option(serve)
    serve.set_defaults(handler=_cmd_serve)

    trainer = commands.add_parser(
        "trainer",
        help="the side trainer: stores finished jobs, trains and publishes weekly models",
        description="Serve weekly training requests over ZeroMQ; models go to STORE (skops files "
        "and manifest.json), the finished-job history to an SQLite database.",
    )
    trainer.add_argument(
        "--socket",
        default="tcp://127.0.0.1:28100",
        help="where to listen for the scheduler (default: tcp://127.0.0.1:28100, this machine "
        "only; tcp://*:28100 listens on every interface, as the docker compose set-up does). "
        "Only the run that owns the trainer (the first to greet it) can stop it",
    )
    trainer.add_argument(
        "--store", default="models", metavar="DIR", help="model store (relative to here)"
    )
    trainer.add_argument(
        "--db", metavar="FILE", help="history database (default STORE/history.sqlite)"
    )
    _add_forest_options(trainer)
    trainer.add_argument(
        "--divider-quantile",
        type=float,
        default=ForestParams.divider_quantile,
        metavar="Q",
        help="the divider: this quantile of the finished runtimes (default %(default)s, the "
        "median); the runs it trains for must ask the same (--classifier-option "
        "divider_quantile=Q)",
    )
    trainer.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help="stop after this long without a request (default: never)",
    )
    trainer.set_defaults(handler=_cmd_trainer)

    batsim = commands.add_parser(
        "batsim",
        help="the embedded simulator as a Batsim peer over ZeroMQ (stand-in for real Batsim)",
        description="Play Batsim's side of the protocol over ZeroMQ with the embedded simulator; "
        "options follow Batsim 4.2.1's command line. Writes PREFIX_jobs.csv.",
    )
    batsim.add_argument("-p", "--platform", required=True, help="SimGrid platform XML")
    batsim.add_argument(
        "-w", "--workload", required=True, action="append", help="workload JSON or SWF"
    )
    batsim.add_argument(
        "-e",
        "--export",
        default="out",
        metavar="PREFIX",
        help="write PREFIX_jobs.csv, as Batsim does",
    )
    batsim.add_argument(
        "-s",
        "--socket-endpoint",
        default="tcp://localhost:28000",
        metavar="ENDPOINT",
        help="the scheduler to connect to",
    )
    batsim.add_argument("--enable-dynamic-jobs", action="store_true")
    batsim.add_argument("--acknowledge-dynamic-jobs", action="store_true")
    batsim.add_argument("--enable-profile-reuse", action="store_true")
    batsim.add_argument("--forward-profiles-on-submission", action="store_true")
    batsim.add_argument(
        "--timeout", type=float, default=600.0, metavar="SECONDS", help="0 waits forever"
    )
    batsim.set_defaults(handler=_cmd_batsim)

    collect = commands.add_parser(
        "collect",
        help="check a served run and write its job table, summary and report",
        description="Wait for the scheduler's serve.json and Batsim's _jobs.csv, check the run "
        "is whole (status complete, every workload job finished exactly once), and write "
        "OUT/jobs.csv, OUT/summary.json and OUT/report.md, as a replay does. The settings and "
        "the calendar are those serve recorded; the scheduler options given here are checked "
        "against them (a folder holding another run is refused).",
    )
    collect.add_argument("--batsim-jobs", required=True, metavar="CSV", help="Batsim's _jobs.csv")
    collect.add_argument("--workload", required=True, help="the workload Batsim ran (JSON or SWF)")
    collect.add_argument(
        "--scheduler", required=True, metavar="DIR", help="the output folder of `serve`"
    )
    collect.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="the collected run's folder"
    )
    _add_force_option(collect)
    first = len(collect._actions)
    _add_scheduler_options(collect)
    for action in collect._actions[first:]:  # not given: the served run's (no default)
        action.default = argparse.SUPPRESS
        if action.help:
            for phrase, instead in (
                (" (default %(default)s)", ""),
                ("(default %(default)s: ", "("),
            ):
                action.help = action.help.replace(phrase, instead)
            action.help += " (default: the served run's; given: checked against it)"
    collect.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for the run to end (default: it has ended)",
    )
    collect.add_argument(
        "--status-dir",
        metavar="DIR",
        help="where the other services write their BATSCHED_ML_STATUS_FILE: stop waiting, "
        "with the reason, as soon as one of them failed",
    )
    collect.set_defaults(handler=_cmd_collect)

    clear = commands.add_parser(
        "clear",
        help="empty a run folder (the docker compose set-up's first step)",
        description="Create FOLDER if needed, check it can be written, and remove a run's "
        "files from it (run.json and what runs write, whichever run they belong to). A folder "
        "holding anything else is refused and left as it is. The docker compose set-up runs "
        "it on OUT_DIR before anything else, so that a failed `up` never leaves an earlier "
        "run's results there.",
    )
    clear.add_argument("folder", metavar="FOLDER")
    clear.set_defaults(handler=_cmd_clear)

    report = commands.add_parser(
        "report",
        help="figures (PNG) and one self-contained HTML page from run folders",
        description="Read every run (summary.json and jobs.csv) under RUN_DIR..., and write the "
        "paper's figures per trace as PNG, index.html (figures inlined, summary tables) and "
        "summary.csv into OUT.",
    )
    report.add_argument(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="a run folder (replay, collect), a campaign's output folder, or a folder holding "
        "run folders at any depth",
    )
    report.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder for index.html and figures"
    )
    report.set_defaults(handler=_cmd_report)

    campaign = commands.add_parser(
        "campaign",
        help="run traces x policies x variants (x seeds) as Dask tasks, resumable",
        description="Expand CONFIG.toml (see campaigns/paper.toml) into replays and run them on "
        "a local Dask cluster sized to the machine, or on the cluster at --scheduler. Runs "
        "already done are skipped; a failing run is recorded and the others go on. Writes "
        "OUTPUT/results.parquet and results.csv (exit 1 if a run failed).",
    )
    campaign.add_argument("config", metavar="CONFIG.toml")
    campaign.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask cluster")
    campaign.add_argument("--workers", type=int, metavar="N", help="local Dask workers")
    campaign.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    campaign.set_defaults(handler=_cmd_campaign)

    related = commands.add_parser(
        "related-work",
        help="run the related work's predictors x dispatchers and write docs/related-work.md",
        description="Run the runs of CAMPAIGN.toml not made yet (as `campaign` does), then "
        "write the page of prediction quality, mean bounded slowdown and wait per predictor x "
        "dispatcher and correction, the classification beside them, and the comparison with "
        "the papers' published figures. NOTES, hand-written analysis, is included after the "
        "comparison.",
    )
    related.add_argument(
        "config",
        nargs="?",
        default=str(Path(__file__).resolve().parents[1] / "campaigns" / "related-work.toml"),
        metavar="CAMPAIGN.toml",
        help="default: campaigns/related-work.toml",
    )
    related.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PAGE.md",
        help="the page to write (the repository's: docs/related-work.md); a page holding more "
        "runs than the new one is kept unless --force",
    )
    related.add_argument(
        "--force", action="store_true", help="write the page even with fewer runs than it holds"
    )
    related.add_argument(
        "--notes",
        default="docs/related-work-notes.md",
        help="Markdown included in the page, if the file exists",
    )
    related.add_argument(
        "--no-run", action="store_true", help="write the page from the runs already made"
    )
    related.add_argument("--workers", type=int, metavar="N", help="local Dask workers")
    related.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    related.set_defaults(handler=_cmd_related_work, scheduler=None)

    results = commands.add_parser(
        "paper-results",
        help="run the paper's evaluation (traces x policies x variants) and write docs/results.md",
        description="Replay every trace x policy x variant (resumable: finished runs are kept in "
        "--runs), then write the comparison with Zrigui et al. (JPDC 2022).",
    )
    results.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PAGE.md",
        help="the page to write (the repository's: docs/results.md)",
    )
    results.add_argument(
        "--runs", required=True, metavar="DIR", help="where the replays are kept (e.g. runs/paper)"
    )
    results.add_argument(
        "--trace-dir",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "traces"),
        help="where the paper's traces are (the read-only ../shared beside the checkout)",
    )
    results.add_argument("--traces", nargs="*", help="default: the paper's five traces at hand")
    results.add_argument("--policies", nargs="*", choices=sorted(POLICIES))
    results.add_argument("--variants", nargs="*", choices=list(VARIANTS))
    results.add_argument("--workers", type=int, default=2, help="replays run in parallel")
    results.add_argument(
        "--no-run",
        action="store_true",
        help="write the page from the runs already in --runs (all must be complete; the runs "
        "are taken as they are, whichever code made them)",
    )
    results.set_defaults(handler=_cmd_paper_results)
    return parser


def _run(argv: Sequence[str] | None) -> tuple[int, str | None]:
    """Run a command; return its exit code and the error line it printed (if any)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return 2, exc.line
    except SystemExit as exc:  # --help, --version
        code = exc.code if isinstance(exc.code, int) else 0
        try:
            sys.stdout.flush()  # `--help | head`: found here rather than in Python's exit
        except BrokenPipeError:
            return _quiet_broken_pipe(), None
        return code, None
    except BrokenPipeError:  # --help | head, the help longer than the pipe's buffer
        if not _stdout_gone():
            raise
        return _quiet_broken_pipe(), None
    from batsched_ml.errors import PeerGone, TransportError

    try:
        with _stop_signals():
            code = int(args.handler(args))
            # what is still buffered goes now: a reader gone away is found here, in the
            # handling below, rather than by Python's flush at exit (exit 120 and a message)
            sys.stdout.flush()
            return code, None
    except PeerGone as exc:  # a peer whose connection closed while we waited for it: exit 3
        message = f"batsched-ml: error: {exc}"
        print(message, file=sys.stderr)
        return PEER_GONE, message
    except TransportError as exc:  # a peer that went silent or away: exit 1
        message = f"batsched-ml: error: {exc}"
        print(message, file=sys.stderr)
        return 1, message
    except BrokenPipeError as exc:
        if _stdout_gone():  # `batsched-ml ... | head`: the reader has what it wanted
            return _quiet_broken_pipe(), None
        message = f"batsched-ml: error: {exc}"  # another pipe: a system refusal, as below
        print(message, file=sys.stderr)
        return _exit_code(exc), message
    except USER_ERRORS as exc:
        message = f"batsched-ml: error: {exc}"
        print(message, file=sys.stderr)
        return _exit_code(exc), message
    except KeyboardInterrupt as exc:
        print("batsched-ml: interrupted", file=sys.stderr)
        return (TERMINATED if isinstance(exc, Terminated) else INTERRUPTED), "interrupted"
    except Exception as exc:
        import traceback

        traceback.print_exc()
        message = (
            f"batsched-ml: internal error: {type(exc).__name__}: {exc} -- a bug in batsched-ml; "
            "please report it with the traceback above"
        )
        print(message, file=sys.stderr)
        return INTERNAL_ERROR, message


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. With ``BATSCHED_ML_STATUS_FILE`` set, the exit code and the error line
    are also written there as JSON when the command ends: in the docker compose set-up, the
    ``experiment`` service reads them to fail at once, with the reason, when another service
    failed (:mod:`batsched_ml.status`; not written when a later ``up`` has reset the folder)."""
    from batsched_ml.status import begin, record_exit

    status_file, token = begin()
    code: int = 1
    error: str | None = "crashed (see its output)"
    try:
        code, error = _run(argv)
        if error is None and code != 0:
            error = f"exit code {code}"
        return code
    finally:
        if status_file:
            command = list(sys.argv[1:] if argv is None else argv)[:2]
            record = {"command": command, "exit_code": code, "error": error}
            record_exit(status_file, record, token)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
