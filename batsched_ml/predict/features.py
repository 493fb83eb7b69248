"""Job features for the size classifier (Zrigui et al., JPDC 2022, Table 4), computed online.

For a job submitted at time t, the features are:

* job features: requested time ``p̃`` and requested processors ``q``;
* temporal features, in the trace's own time zone: hour of day, day of week (0 = Monday), day of
  month, month, ISO week of the year, quarter;
* for each category (user, p̃), (user, q) and (user, submission day): the classes (1 small, 0
  large, -1 none) of the previous three jobs of the category, and the share of small jobs in it
  (-1 when the category has no job yet).

Only jobs whose runtime is known count: those that *finished* before t. "Previous" means in
submission order among them; a job's class is fixed when it finishes, with the divider in force
then. Each category keeps a 3-slot list and two counters, so computing a job's features and
recording a finished job both take O(1), never a rescan of the history.

``mode="weekly"`` is the paper's simplification (section 4.2): finished jobs reach the category
state only at the next week boundary, so that features use jobs of previous weeks only.

The requested time is the trace's own (``swf_requested_time``) when the workload carries it, not
the walltime, which the converter may have raised above the run time (and which would leak the
run time into the features); otherwise the walltime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mypy_extensions import mypyc_attr

from batsched_ml.job import Job

FEATURE_NAMES: tuple[str, ...] = (
    "requested_time",
    "requested_processors",
    "hour",
    "day_of_week",
    "day_of_month",
    "month",
    "week",
    "quarter",
    "lag1_user_time",
    "lag2_user_time",
    "lag3_user_time",
    "lag1_user_procs",
    "lag2_user_procs",
    "lag3_user_procs",
    "lag1_user_day",
    "lag2_user_day",
    "lag3_user_day",
    "small_share_user_time",
    "small_share_user_procs",
    "small_share_user_day",
)
MODES = ("online", "weekly")


def requested_time(job: Job) -> float:
    """The user's requested time as the trace gave it (see the module docstring)."""
    value = job.fields.get("swf_requested_time")
    if isinstance(value, int | float) and value > 0:
        return float(value)
    return float(job.walltime) if job.walltime is not None else -1.0


@dataclass(slots=True)
class _Category:
    """The finished jobs of one category: the last three (by submission order) and counts."""

    recent: list[tuple[int, int]] = field(default_factory=list)  # (submission seq, class)
    small: int = 0
    total: int = 0

    def add(self, seq: int, cls: int) -> None:
        self.small += cls
        self.total += 1
        recent = self.recent
        if len(recent) < 3 or seq > recent[0][0]:
            recent.append((seq, cls))
            recent.sort()
            if len(recent) > 3:
                del recent[0]

    def lags(self) -> tuple[float, float, float]:
        """The classes of the last three jobs, newest first, -1 where there is none."""
        recent = self.recent
        n = len(recent)
        if n == 3:
            return float(recent[2][1]), float(recent[1][1]), float(recent[0][1])
        if n == 2:
            return float(recent[1][1]), float(recent[0][1]), -1.0
        if n == 1:
            return float(recent[0][1]), -1.0, -1.0
        return -1.0, -1.0, -1.0

    def share(self) -> float:
        return self.small / self.total if self.total else -1.0


def zone_of(time_zone_string: str | None, offset: int | None) -> tzinfo:
    if time_zone_string:
        try:
            return ZoneInfo(time_zone_string)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    if offset is not None:
        return timezone(timedelta(seconds=offset))
    return UTC


_EMPTY = _Category()  # a category with no finished job (never modified)


def _calendar_fields(moment: datetime) -> tuple[float, ...]:
    """hour, day of week, day of month, month, ISO week, quarter of a local time."""
    return (
        float(moment.hour),
        float(moment.weekday()),
        float(moment.day),
        float(moment.month),
        float(moment.isocalendar()[1]),
        float((moment.month - 1) // 3 + 1),
    )


@dataclass(slots=True)
class Submission:
    """What the tracker remembers of a submitted job until it finishes."""

    seq: int
    #: the categories' keys: ("t", user, p̃), ("q", user, q), ("d", user, day)
    keys: tuple[tuple[str, int, float], tuple[str, int, int], tuple[str, int, int]]
    features: list[float]


@mypyc_attr(allow_interpreted_subclasses=True)
class FeatureTracker:
    """Per-category state and calendar; ``features`` at submission, ``finished`` at the end."""

    def __init__(
        self,
        *,
        unix_start_time: float | None = None,
        time_zone_string: str | None = None,
        time_zone: int | None = None,
        mode: str = "online",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown feature mode {mode!r} (choose from {', '.join(MODES)})")
        self.mode = mode
        self.origin = unix_start_time
        self.zone = zone_of(time_zone_string, time_zone)
        self.categories: dict[tuple, _Category] = {}
        self.pending: list[tuple[Submission, int]] = []
        self._seq = 0

    def calendar(self, subtime: float) -> tuple[float, ...]:
        """hour, day of week, day of month, month, ISO week, quarter of a submission time."""
        if self.origin is None:  # no calendar: count from time 0 as if it were a Monday 00:00
            t = int(subtime)
            day = t // 86_400
            return (
                float(t // 3600 % 24),
                float(day % 7),
                float(day % 30 + 1),
                float(day // 30 % 12 + 1),
                float(day // 7 % 52 + 1),
                float(day // 91 % 4 + 1),
            )
        return _calendar_fields(datetime.fromtimestamp(self.origin + subtime, self.zone))

    def _day(self, subtime: float) -> int:
        if self.origin is None:
            return int(subtime // 86_400)
        return datetime.fromtimestamp(self.origin + subtime, self.zone).toordinal()

    def submit(self, job: Job) -> Submission:
        """The job's features, from the jobs finished so far."""
        user = job.fields.get("user", -1)
        p_req = requested_time(job)
        subtime = job.subtime
        if self.origin is None:
            day, calendar = int(subtime // 86_400), self.calendar(subtime)
        else:  # one conversion for the day and the calendar
            moment = datetime.fromtimestamp(self.origin + subtime, self.zone)
            day, calendar = moment.toordinal(), _calendar_fields(moment)
        keys = (("t", user, p_req), ("q", user, job.res), ("d", user, day))
        features = [p_req, float(job.res), *calendar]
        categories = self.categories
        empty = _EMPTY
        time_category = categories.get(keys[0], empty)
        procs_category = categories.get(keys[1], empty)
        day_category = categories.get(keys[2], empty)
        features.extend(time_category.lags())
        features.extend(procs_category.lags())
        features.extend(day_category.lags())
        features.append(time_category.share())
        features.append(procs_category.share())
        features.append(day_category.share())
        submission = Submission(self._seq, keys, features)
        self._seq += 1
        return submission

    def finished(self, submission: Submission, cls: int) -> None:
        """Record the class (1 small, 0 large) of a finished job."""
        if self.mode == "weekly":
            self.pending.append((submission, cls))
        else:
            self._apply(submission, cls)

    def leak(self, submission: Submission, cls: int, weekly: bool) -> None:
        """LEAKY (the classifier's ``leaky_features``): record the class of a job *at its
        submission*, before it has run, as the paper's offline features do: at once
        (``weekly=False``: the next job of its categories sees it) or at the next week
        boundary (``weekly=True``). No scheduler knows this; for the study of the paper's
        figures only."""
        if weekly:
            self.pending.append((submission, cls))
        else:
            self._apply(submission, cls)

    def new_week(self) -> None:
        """Week boundary: in ``weekly`` mode, the jobs finished last week become visible."""
        for submission, cls in self.pending:
            self._apply(submission, cls)
        self.pending.clear()

    def _apply(self, submission: Submission, cls: int) -> None:
        categories = self.categories
        seq = submission.seq
        for key in submission.keys:  # the keys made at submission, not made again
            category = categories.get(key)
            if category is None:
                category = categories[key] = _Category()
            category.add(seq, cls)
