"""The side trainer: its server, its client, the process that runs it and the lifecycle of a
run's trainer. This module itself imports nothing, so that the command line can ask
:func:`needs_nothing` before it imports the rest (ZeroMQ among it)."""

from __future__ import annotations


def needs_nothing(classified: bool, choice: str) -> bool:
    """Whether a run with this trainer ``choice`` (``"inprocess"``, ``"process"`` or an
    endpoint) needs no trainer at all: trained in process, or a run that classifies nothing
    with no trainer of its own (one at an endpoint may still be asked to stop at the end)."""
    return choice == "inprocess" or (choice == "process" and not classified)


#: How long a run waits for a week's model by default (``--trainer-deadline``), in seconds.
DEADLINE = 300.0


def unused_trainer_options(
    classified: bool,
    choice: str,
    store: object | None,
    deadline: float | None,
    stop: bool = False,
) -> str | None:
    """Why ``--trainer-store`` or ``--trainer-deadline`` (given: not ``None``) or
    ``--stop-trainer`` would go unused, or ``None``. The first two set the side trainer's store
    and the wait for its models, and a classified run trained in process has neither (it would
    run without a word about them); a run that classifies nothing is left alone, as the docker
    compose set-up passes them to every variant. ``--stop-trainer`` stops a trainer at an
    endpoint: in process there is none, and a trainer process the run starts is stopped with
    it anyway."""
    if stop and choice in ("inprocess", "process"):
        return (
            "--stop-trainer goes with --trainer ENDPOINT (a running trainer): "
            f"--trainer {choice} leaves none running when the run ends"
        )
    if not classified or choice != "inprocess":
        return None
    given = [
        name
        for name, value in (("--trainer-store", store), ("--trainer-deadline", deadline))
        if value is not None
    ]
    if not given:
        return None
    verb = "go" if len(given) > 1 else "goes"
    return (
        f"{' and '.join(given)} {verb} with a side trainer (--trainer process or ENDPOINT): "
        "--trainer inprocess trains in this process, with no model store and no wait"
    )
