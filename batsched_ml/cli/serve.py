"""``batsched-ml serve``: the scheduler answering a real Batsim over ZeroMQ."""

from __future__ import annotations

import argparse
from pathlib import Path

from batsched_ml.cli import options


def add_parser(commands: argparse._SubParsersAction) -> None:
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
        type=options.seconds_or_zero,
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
    options.add_scheduler_options(serve)
    options.add_trainer_options(serve)
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
    options.add_force_option(serve)
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batsched_ml.results.runfolder import RunIdentity, claim, workload_record
    from batsched_ml.runs.replaying import make_scheduler
    from batsched_ml.serving.served import ServedRun, expected_jobs, serve_and_record
    from batsched_ml.transport.sockets import bind_rep
    from batsched_ml.transport.v5 import features_for, serve
    from batsched_ml.workload.io import dropped_jobs, load_workload, print_dropped

    calendar = None
    expected = None
    workload: dict = {}
    dropped: dict[str, int] = {}
    read = None
    if args.calendar:
        from batsched_ml.runs.replaying import calendar_of

        loaded = load_workload(args.calendar)
        dropped = dropped_jobs(loaded)
        read = (loaded.get("cleaning") or {}).get("input_jobs")
        calendar = calendar_of(loaded)
        expected = expected_jobs(loaded)
        workload = workload_record(args.calendar)
        del loaded
    config = options.config(args)
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
                with options.trainer_for(
                    args, config, Path(args.output), folder.identity.as_dict()
                ) as trainer:
                    scheduler = make_scheduler(config, calendar=calendar, trainer=trainer)
                    run = ServedRun(scheduler, config.as_dict(), run_id=folder.run_id)
                    run.input_cleaning = dict(dropped)
                    if expected is not None:  # Batsim's workload must be the calendar's
                        run.expected, run.calendar_file = expected, args.calendar
                    served = run

                    def speaking(found: int) -> None:
                        served.protocol = found  # recorded in serve.json
                        print(f"speaking Batsim {found}", flush=True)

                    count = serve_and_record(
                        run,
                        lambda handler: serve(
                            socket,
                            handler,
                            timeout=timeout,
                            on_bound=lambda endpoint: print(f"listening on {endpoint}", flush=True),
                            protocol=args.protocol,
                            features=features_for(config),
                            on_protocol=speaking,
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
    return options.trainer_faults(getattr(getattr(scheduler, "trainer", None), "events", None))
