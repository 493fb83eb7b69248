"""Conversion of an SWF trace into a Batsim workload, with documented cleaning rules.

Each kept SWF job becomes one Batsim job with a ``delay`` profile. The rules, applied in this
order (a job is counted under the first rule that drops it; changes are counted independently):

=========================  ====================================================================
rule                       effect
=========================  ====================================================================
``duplicate_job_number``   drop: a later job reusing an SWF job number (Batsim aborts on
                           duplicate ids); the first occurrence is kept
``nonpositive_run_time``   drop: run time <= 0 or unknown (-1); a Batsim ``delay`` must be > 0
``nonpositive_processors`` drop: neither requested nor allocated processors are > 0
``too_many_processors``    drop: more processors than the machine (MaxProcs, else MaxNodes)
``missing_requested_time`` change: requested time unknown (<= 0) -> the largest requested time of
                           the trace (the site's effective limit); if the trace has no requested
                           time at all the job gets no walltime (Batsim's -1)
``walltime_raised``        change: run time >= requested time -> walltime = run time + 1 s
``unsorted_submit_time``   change: jobs are sorted by submission time (stable); counted: the
                           jobs submitted before a job that precedes them in the file
=========================  ====================================================================

Why ``walltime = run time + 1``: Batsim 4.2.1 ends a delay job whose delay is greater than *or
equal to* its walltime as ``COMPLETED_WALLTIME_REACHED`` (see ``shared/batsim-reference``), so a
job that ran exactly to its limit, or past it thanks to the site's grace period, would be recorded
as killed. One second above the run time is the smallest change to the trace (run times are whole
seconds) that lets every kept job complete successfully, as it did on the real machine. The
trace's own requested time is kept per job as ``swf_requested_time`` for predictors that want it.

Processors: the requested number when known (> 0), else the allocated number (CTC-SP2 has no
requested processors). ``subtime`` is relative to the first kept submission; the workload records
the absolute Unix time of ``subtime == 0`` and the trace's time zone so that calendar features can
be computed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from batsched_ml.workload.swf import SwfError, SwfTrace

#: Per-job SWF fields kept in the Batsim job objects (Batsim forwards extra keys untouched).
KEPT_FIELDS: dict[str, str] = {
    "swf_job": "job_number",
    "user": "user_id",
    "group": "group_id",
    "executable": "executable_number",
    "queue": "queue_number",
    "partition": "partition_number",
    "status": "status",
    "swf_requested_time": "requested_time",
}

DROP_RULES = (
    "duplicate_job_number",
    "nonpositive_run_time",
    "nonpositive_processors",
    "too_many_processors",
)
CHANGE_RULES = ("missing_requested_time", "walltime_raised", "unsorted_submit_time")

#: What each drop rule drops, in words (the one-line notices of :func:`report_dropped`).
DROP_RULE_TEXT = {
    "duplicate_job_number": "a later job reusing an SWF job number",
    "nonpositive_run_time": "run time <= 0 or unknown",
    "nonpositive_processors": "no processor count > 0",
    "too_many_processors": "more processors than the machine",
}

#: The largest machine a platform is generated for: well above any real one (the largest trace
#: at hand has 80,640 cores), well below a size whose host list would not fit in memory.
MAX_MACHINE_SIZE = 10_000_000


@dataclass
class CleaningReport:
    """How many jobs each cleaning rule dropped or changed."""

    input_jobs: int
    kept_jobs: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_RULES, 0))
    changed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHANGE_RULES, 0))
    skipped_lines: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_jobs": self.input_jobs,
            "kept_jobs": self.kept_jobs,
            "skipped_lines": self.skipped_lines,
            "dropped": dict(self.dropped),
            "changed": dict(self.changed),
        }

    def lines(self) -> list[str]:
        """A human-readable summary, one rule per line."""
        out = [f"input jobs: {self.input_jobs}, kept: {self.kept_jobs}"]
        if self.skipped_lines:
            out.append(f"  skipped malformed lines (lenient): {self.skipped_lines}")
        out += [f"  dropped {name}: {count}" for name, count in self.dropped.items()]
        out += [f"  changed {name}: {count}" for name, count in self.changed.items()]
        return out


@dataclass
class BatsimWorkload:
    """A Batsim JSON workload plus the platform size it was made for."""

    data: dict[str, Any]
    report: CleaningReport

    @property
    def nb_res(self) -> int:
        return int(self.data["nb_res"])

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.data, separators=(",", ":")) + "\n")


def _number(value: float) -> int | float:
    """JSON-friendly number: whole values as ints so the files stay compact and exact."""
    return int(value) if float(value).is_integer() else float(value)


def _numbers(values: np.ndarray) -> list[int | float]:
    """:func:`_number` of every element of a numeric array, as a list."""
    if values.dtype.kind in "iu":
        return values.tolist()  # Python ints, as int() of each element
    floats = values.astype(np.float64)
    whole = np.isfinite(floats) & (np.floor(floats) == floats)
    if whole.all() and (np.abs(floats) < 2.0**63).all():
        # the usual column, whole numbers only: numpy's int64 of each is int() of it (exact
        # below 2**63), one conversion for the column rather than one call per element
        return floats.astype(np.int64).tolist()
    return [int(v) if w else v for v, w in zip(floats.tolist(), whole.tolist(), strict=True)]


def convert_trace(trace: SwfTrace, *, machine_size: int | None = None) -> BatsimWorkload:
    """Apply the cleaning rules to ``trace`` and build the Batsim workload."""
    jobs = trace.jobs
    report = CleaningReport(input_jobs=len(trace), skipped_lines=len(trace.skipped_lines))
    size = machine_size or trace.header.machine_size
    # a fractional processor count (malformed, but it parses) needs the next whole machine
    processors = np.ceil(
        np.where(
            jobs["requested_processors"] > 0,
            jobs["requested_processors"],
            jobs["allocated_processors"],
        )
    )
    if size is None:
        size = max(1, int(processors.max())) if len(processors) else 1
    if size > MAX_MACHINE_SIZE:
        origin = (
            "its MaxProcs header"
            if machine_size is None and trace.header.machine_size
            else ("its largest job")
        )
        raise SwfError(
            trace.path,
            None,
            f"a machine of {size} processors ({origin}) is beyond {MAX_MACHINE_SIZE:,}; "
            "is the trace right?",
        )

    run_time = jobs["run_time"]
    keep = np.ones(len(trace), dtype=bool)
    masks = {
        "duplicate_job_number": _repeated(jobs["job_number"]),
        "nonpositive_run_time": run_time <= 0,
        "nonpositive_processors": processors <= 0,
        "too_many_processors": processors > size,
    }
    for rule in DROP_RULES:
        hit = masks[rule] & keep
        report.dropped[rule] = int(hit.sum())
        keep &= ~hit

    # the kept rows, in submission order, as indices into the trace's columns: the columns are
    # taken one at a time below (copies of the whole table were the load's peak memory)
    rows = np.flatnonzero(keep)
    submit = jobs["submit_time"][rows]
    order = np.argsort(submit, kind="stable")
    if len(submit) > 1:  # jobs submitted before some job that precedes them in the file
        late = submit[1:] < np.maximum.accumulate(submit)[:-1]
        report.changed["unsorted_submit_time"] = int(late.sum())
    rows = rows[order]

    def kept(name: str) -> np.ndarray:
        """The kept jobs' values of column ``name``, in submission order."""
        return np.asarray(jobs[name][rows])

    requested = kept("requested_time").astype(np.float64)
    known = requested > 0
    walltime = requested.copy()
    report.changed["missing_requested_time"] = int((~known).sum())
    if known.any():
        walltime[~known] = requested[known].max()
    else:
        walltime[:] = -1.0
    delays = kept("run_time").astype(np.float64)
    raise_mask = (walltime > 0) & (delays >= walltime)
    report.changed["walltime_raised"] = int(raise_mask.sum())
    walltime[raise_mask] = delays[raise_mask] + 1.0
    report.kept_jobs = len(rows)
    if not len(rows):  # nothing to simulate: a workload of no jobs is no experiment
        dropped = sum(report.dropped.values())
        raise SwfError(
            trace.path,
            None,
            f"no jobs ({report.input_jobs} read, {dropped} dropped by the cleaning rules, "
            f"{report.skipped_lines} malformed lines skipped)",
        )

    submit_times = kept("submit_time")
    first_submit = float(submit_times[0])
    subtimes = submit_times.astype(np.float64) - first_submit

    # whole columns at once (:func:`_numbers`): the same values as :func:`_number` per job, in
    # a fraction of the time
    delay_numbers = _numbers(delays)
    profiles: dict[str, dict[str, Any]] = {}
    profile_names: list[str] = []
    names: dict[int | float, str] = {}  # one name object per profile, not one per job
    for number in delay_numbers:
        name = names.get(number)  # whole numbers are ints here: 5 and 5.0 do not both occur
        if name is None:
            name = names[number] = f"delay_{number}"
            profiles[name] = {"type": "delay", "delay": number}
        profile_names.append(name)

    ids = [int(v) for v in kept(KEPT_FIELDS["swf_job"]).tolist()]
    others = [
        (key, _numbers(kept(column))) for key, column in KEPT_FIELDS.items() if key != "swf_job"
    ]
    res = processors[rows].astype(np.int64).tolist()
    subtime_numbers = _numbers(subtimes)
    has_walltime = (walltime > 0).tolist()
    walltime_numbers = _numbers(walltime)
    job_list: list[dict[str, Any]]
    if all(has_walltime) and [key for key, _ in others] == list(_OTHER_KEYS):
        # the usual case, one dict display per job (twice as fast as the loop below): the
        # same keys in the same order, the same values
        job_list = [
            {
                "id": job_id,
                "subtime": subtime,
                "res": processors_of_job,
                "profile": profile,
                "walltime": walltime_of_job,
                "user": user,
                "group": group,
                "executable": executable,
                "queue": queue,
                "partition": partition,
                "status": status,
                "swf_requested_time": swf_requested_time,
            }
            for (
                job_id,
                subtime,
                processors_of_job,
                profile,
                walltime_of_job,
                user,
                group,
                executable,
                queue,
                partition,
                status,
                swf_requested_time,
            ) in zip(
                ids,
                subtime_numbers,
                res,
                profile_names,
                walltime_numbers,
                *(values for _, values in others),
                strict=True,
            )
        ]
        return _workload(trace, size, first_submit, report, job_list, profiles)
    job_list = []
    for i in range(len(rows)):
        job: dict[str, Any] = {
            "id": ids[i],
            "subtime": subtime_numbers[i],
            "res": int(res[i]),
            "profile": profile_names[i],
        }
        if has_walltime[i]:
            job["walltime"] = walltime_numbers[i]
        for key, values in others:
            job[key] = values[i]
        job_list.append(job)
    return _workload(trace, size, first_submit, report, job_list, profiles)


_OTHER_KEYS = tuple(key for key in KEPT_FIELDS if key != "swf_job")


def _repeated(values: np.ndarray) -> np.ndarray:
    """Whether each value was seen in an earlier row (its first row is kept)."""
    repeated = np.ones(len(values), dtype=bool)
    repeated[np.unique(values, return_index=True)[1]] = False
    return repeated


def _workload(
    trace: SwfTrace,
    size: int,
    first_submit: float,
    report: CleaningReport,
    job_list: list[dict[str, Any]],
    profiles: dict[str, dict[str, Any]],
) -> BatsimWorkload:
    header = trace.header
    unix_start = header.unix_start_time
    data: dict[str, Any] = {
        "nb_res": int(size),
        "trace": trace.name,
        "unix_start_time": (unix_start + first_submit) if unix_start is not None else None,
        "time_zone_string": header.time_zone_string,
        "time_zone": header.time_zone,
        "cleaning": report.as_dict(),
        "jobs": job_list,
        "profiles": profiles,
    }
    if isinstance(data["unix_start_time"], float):
        data["unix_start_time"] = _number(data["unix_start_time"])
    return BatsimWorkload(data=data, report=report)
