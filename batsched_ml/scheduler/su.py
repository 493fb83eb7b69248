"""The SU runtime predictor (seed 003): clustering, then nearest neighbours, then a regression.

For a submitted job, SU

1. finds its *cluster*: the user's finished jobs are clustered by the Levenshtein distance
   between their ``user_jobname`` strings (k-means++ on the rows of the distance matrix, one
   clustering per user, as the paper does to keep it tractable; the number of clusters, at most
   ``max_clusters``, is the one with the best Calinski-Harabasz score). A string not seen at the
   last clustering joins the cluster of its nearest clustered string; until the user's first
   clustering, all the user's jobs are one cluster; only the ``max_strings`` most frequent
   strings of a user are clustered, the others join their nearest one's cluster;
2. takes the ``n_neighbors`` jobs of that cluster nearest to it in (processors, sin and cos of
   the hour of submission), all three standardised over the cluster (equation 4). A user with no
   finished job yet takes them from every user's recent jobs, as the paper does for new users;
3. fits ``regressor`` (``svr``, ``rf`` or ``linear``) on those neighbours and predicts, times the
   correction factor ``alpha`` (equation 5); capped by the requested time, at least one second,
   as every predictor of batsched-ml (a job never runs past its walltime).

Mapping onto SWF: the job name is the workload's ``name`` field when it has one, else the SWF
executable number; traces without executables (KTH-SP2, HPC2N) give one string per user, so the
clustering has nothing to separate and SU is a per-user nearest-neighbour regression there.
The clustering is redone every ``recluster_every`` seconds of submission time (a week), for the
users whose set of strings changed. The regression target is standardised over the neighbours
(SVR's default ``epsilon`` and ``C`` assume unit scale; on raw seconds SVR would predict a
constant). Deterministic for a given ``random_state``.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from datetime import datetime
from typing import Any

import numpy as np

from batsched_ml import blas_kernel
from batsched_ml.errors import check_integer, check_positive
from batsched_ml.job import Job
from batsched_ml.predict.features import zone_of

DAY = 86_400.0
REGRESSORS = ("svr", "rf", "linear")


class _Rows:
    """A growable float matrix (one row per finished job), amortised O(1) append."""

    def __init__(self, width: int) -> None:
        self.data = np.empty((16, width))
        self.size = 0

    def append(self, row: tuple[float, ...]) -> None:
        if self.size == len(self.data):
            self.data = np.concatenate([self.data, np.empty_like(self.data)])
        self.data[self.size] = row
        self.size += 1

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class _User:
    """One user's finished jobs: strings and (processors, sin, cos, runtime) rows."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.rows = _Rows(4)
        self.string_ids: dict[str, int] = {}  # distinct string -> index, in order of arrival
        self.counts: list[int] = []
        self.string_of_row: list[int] = []
        self.cluster_of: dict[str, int] = {}  # from the last clustering (+ strings joined since)
        self.clustered_strings: list[str] = []
        self.dirty = False


class SUPrediction:
    """SU (seed 003): see the module docstring. Plain constructor parameters, as scikit-learn."""

    name = "su"

    def __init__(
        self,
        regressor: str = "svr",
        alpha: float = 1.0,
        n_neighbors: int = 20,
        max_clusters: int = 15,
        max_strings: int = 200,
        recluster_every: float = 7 * DAY,
        history: int = 2_000,
        random_state: int = 0,
        calendar: dict[str, Any] | None = None,
        no_walltime_estimate: float = DAY,
    ) -> None:
        if regressor not in REGRESSORS:
            raise ValueError(f"unknown SU regressor {regressor!r} (choose from svr, rf, linear)")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"SU alpha must be positive, not {alpha}")
        for what, count in (
            ("n_neighbors", n_neighbors),
            ("max_clusters", max_clusters),
            ("max_strings", max_strings),
            ("history", history),
        ):
            check_integer(what, count, 1)
        check_integer("random_state", random_state, 0)
        check_positive("recluster_every", recluster_every)
        check_positive("no_walltime_estimate", no_walltime_estimate)
        self.regressor = regressor
        self.alpha = alpha
        self.n_neighbors = n_neighbors
        self.max_clusters = max_clusters
        self.max_strings = max_strings
        self.recluster_every = recluster_every
        self.history = history
        self.random_state = random_state
        self.no_walltime_estimate = no_walltime_estimate
        self.set_calendar(calendar or {})
        self.users: dict[Any, _User] = {}
        self.recent: deque[tuple[float, float, float, float]] = deque(maxlen=history)
        self.clustered_until = 0.0
        self.clusterings = 0
        self.last_source = ""  # where the last prediction came from: cluster, all, requested

    # --- features --------------------------------------------------------------------------

    @staticmethod
    def job_string(job: Job) -> str:
        name = job.field("name")
        if name is None:
            name = job.field("executable")
        if name is None or name == -1:
            name = ""
        return f"{job.field('user')}_{name}"

    def hour(self, subtime: float) -> float:
        """The hour of day of a submission (fractional), local to the trace when it says where."""
        if self.origin is None:
            return subtime % DAY / 3600.0
        moment = datetime.fromtimestamp(self.origin + subtime, self.zone)
        return moment.hour + moment.minute / 60.0 + moment.second / 3600.0

    def point(self, job: Job) -> tuple[float, float, float]:
        angle = 2.0 * math.pi * self.hour(job.subtime) / 24.0
        return (float(job.res), math.sin(angle), math.cos(angle))

    # --- learning --------------------------------------------------------------------------

    @property
    def needs_calendar(self) -> bool:
        return self.origin is None

    def set_calendar(self, calendar: dict[str, Any]) -> None:
        self.origin = calendar.get("unix_start_time")
        self.zone = zone_of(calendar.get("time_zone_string"), calendar.get("time_zone"))

    def observe(self, job: Job, runtime: float) -> None:
        user = self.users.get(job.field("user"))
        if user is None:
            user = self.users[job.field("user")] = _User()
        string = self.job_string(job)
        index = user.string_ids.get(string)
        if index is None:
            index = user.string_ids[string] = len(user.counts)
            user.counts.append(0)
            user.dirty = True
        user.counts[index] += 1
        user.string_of_row.append(index)
        row = (*self.point(job), float(runtime))
        user.rows.append(row)
        self.recent.append(row)

    def recluster(self, now: float) -> None:
        """Cluster again the users whose strings changed; the next time comes
        ``recluster_every`` after the period ``now`` falls in."""
        periods = (now - self.clustered_until) // self.recluster_every
        self.clustered_until += periods * self.recluster_every
        for user in self.users.values():
            if user.dirty:
                self._cluster(user)
                user.dirty = False
                self.clusterings += 1

    def _cluster(self, user: _User) -> None:
        """Cluster the user's ``max_strings`` most frequent strings (ties: the first seen); the
        others join the cluster of their nearest clustered string. The cap bounds the cost:
        some SDSC-SP2 users run over a thousand distinct executables."""
        ranked = sorted(range(len(user.counts)), key=lambda i: (-user.counts[i], i))
        kept = sorted(ranked[: self.max_strings])
        strings = list(user.string_ids)
        chosen = [strings[i] for i in kept]
        labels = cluster_strings(
            chosen,
            [user.counts[i] for i in kept],
            self.max_clusters,
            random_state=self.random_state,
        )
        user.cluster_of = dict(zip(chosen, labels, strict=True))
        user.clustered_strings = chosen
        rest = [strings[i] for i in ranked[self.max_strings :]]
        if rest:
            from rapidfuzz import process
            from rapidfuzz.distance import Levenshtein

            distances = process.cdist(rest, chosen, scorer=Levenshtein.distance)
            for string, nearest in zip(rest, distances.argmin(axis=1).tolist(), strict=True):
                user.cluster_of[string] = labels[nearest]

    def cluster_for(self, user: _User, string: str) -> int | None:
        cluster = user.cluster_of.get(string)
        if cluster is None and user.clustered_strings:
            from rapidfuzz import process
            from rapidfuzz.distance import Levenshtein

            nearest = process.extractOne(
                string, user.clustered_strings, scorer=Levenshtein.distance
            )
            cluster = user.cluster_of[nearest[0]]
            user.cluster_of[string] = cluster  # stays there until the next clustering
        return cluster

    # --- predicting ------------------------------------------------------------------------

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        requested = job.walltime if job.walltime is not None else self.no_walltime_estimate
        if job.subtime >= self.clustered_until + self.recluster_every:
            self.recluster(job.subtime)
        pool = self.pool(job)
        if pool is None or len(pool) == 0:
            self.last_source = "requested"
            return requested
        predicted = self.alpha * self.regress(pool, self.point(job))
        return max(1.0, min(predicted, requested))

    def pool(self, job: Job) -> np.ndarray | None:
        """The finished jobs the neighbours are looked for in (the last ``history`` of them)."""
        user = self.users.get(job.field("user"))
        if user is None or user.rows.size == 0:
            self.last_source = "all"
            return np.array(self.recent) if self.recent else None
        rows = user.rows.view()
        cluster = self.cluster_for(user, self.job_string(job))
        self.last_source = "cluster"
        if cluster is not None and len(user.cluster_of) > 1:
            cluster_of = user.cluster_of
            strings = list(user.string_ids)
            member = np.fromiter(
                (cluster_of.get(s, -1) == cluster for s in strings), bool, len(strings)
            )
            rows = rows[member[np.asarray(user.string_of_row)]]
            if len(rows) == 0:  # the cluster's jobs are all newer strings: the user's jobs
                rows = user.rows.view()
        return rows[-self.history :]

    def regress(self, pool: np.ndarray, point: tuple[float, float, float]) -> float:
        x = pool[:, :3]
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale == 0] = 1.0
        xs = (x - mean) / scale
        query = (np.asarray(point) - mean) / scale
        distance = np.sqrt(((xs - query) ** 2).sum(axis=1))
        nearest = np.argsort(distance, kind="stable")[: self.n_neighbors]
        xn, yn = xs[nearest], pool[nearest, 3]
        y_mean, y_scale = float(yn.mean()), float(yn.std())
        if y_scale == 0 or len(yn) < 2:
            return y_mean
        from sklearn import config_context  # loaded with the regressor: not on every command

        model = self.make_regressor()
        # the inputs are finite 2-D arrays by construction; scikit-learn's checks of them cost
        # more than the fit on 20 rows. Same result, a quarter less time per fit
        with config_context(assume_finite=True, skip_parameter_validation=True):
            model.fit(xn, (yn - y_mean) / y_scale)
            prediction = model.predict(query.reshape(1, -1))[0]
        return y_mean + y_scale * float(prediction)

    def make_regressor(self) -> Any:
        if self.regressor == "svr":
            from sklearn.svm import SVR

            _check_blas_kernel()
            return SVR()
        if self.regressor == "rf":
            from sklearn.ensemble import RandomForestRegressor

            return RandomForestRegressor(n_estimators=10, random_state=self.random_state)
        from sklearn.linear_model import LinearRegression

        return LinearRegression()


_KERNEL_CHECKED: list[bool] = []  # once a process


def _check_blas_kernel() -> None:
    """Warn, once, when OpenBLAS runs another kernel than :mod:`batsched_ml.blas_kernel` chose:
    SVR's dot products, and so SU's predictions, depend on it."""
    if _KERNEL_CHECKED:
        return
    _KERNEL_CHECKED.append(True)
    from threadpoolctl import threadpool_info  # scikit-learn's, loaded with the regressor

    message = blas_kernel.other_kernel_warning(threadpool_info())
    if message is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=2)


def cluster_strings(
    strings: list[str], counts: list[int], max_clusters: int, *, random_state: int = 0
) -> list[int]:
    """Cluster labels for distinct ``strings`` (seen ``counts`` times each): k-means++ on the
    rows of their Levenshtein distance matrix (rapidfuzz), weighted by the counts, with the
    number of clusters in 2..min(max_clusters, n - 1) of best Calinski-Harabasz score. One
    string is one cluster; two strings are two.

    The k-means itself is a few lines of numpy (:func:`kmeans`): scikit-learn's ``KMeans``
    costs 7-20 ms a call in set-up whatever the size, and a weekly clustering tries up to 14
    values of k for each user whose job names changed (0.5 s per user on SDSC-SP2)."""
    n = len(strings)
    if n <= 2:
        return list(range(n))
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    matrix = process.cdist(strings, strings, scorer=Levenshtein.distance).astype(float)
    weights = np.asarray(counts, float)
    best: tuple[float, np.ndarray] | None = None
    for k in range(2, min(max_clusters, n - 1) + 1):
        labels = kmeans(matrix, weights, k, random_state=random_state)
        score = calinski_harabasz(matrix, labels)
        if score is not None and (best is None or score > best[0]):
            best = (score, labels)
    if best is None:
        return [0] * n
    labels_list: list[int] = best[1].tolist()
    return labels_list


def kmeans(
    points: np.ndarray, weights: np.ndarray, k: int, *, random_state: int = 0, rounds: int = 100
) -> np.ndarray:
    """Weighted k-means with k-means++ seeding (Arthur and Vassilvitskii, 2007): the first
    centre drawn in proportion to the weights, each next one in proportion to weight x squared
    distance to the nearest centre chosen; then Lloyd's iterations until no label changes."""
    rng = np.random.default_rng(random_state)
    chosen = [int(rng.choice(len(points), p=weights / weights.sum()))]
    nearest = ((points - points[chosen[0]]) ** 2).sum(axis=1)
    for _ in range(1, k):
        mass = weights * nearest
        if mass.sum() == 0:  # fewer distinct points than k
            break
        chosen.append(int(rng.choice(len(points), p=mass / mass.sum())))
        nearest = np.minimum(nearest, ((points - points[chosen[-1]]) ** 2).sum(axis=1))
    centres = points[chosen].copy()
    labels = np.full(len(points), -1)
    distances = np.empty((len(points), len(centres)))
    for _ in range(rounds):
        # one centre at a time: the same sums as a (points x centres x dimensions) broadcast,
        # bit for bit, without its temporary (up to 200 x 15 x 200 floats per round)
        for c, centre in enumerate(centres):
            distances[:, c] = ((points - centre) ** 2).sum(axis=1)
        new = distances.argmin(axis=1)
        if (new == labels).all():
            break
        labels = new
        for c in range(len(centres)):
            members = labels == c
            if members.any():
                w = weights[members]
                centres[c] = (points[members] * w[:, None]).sum(axis=0) / w.sum()
    return labels


def calinski_harabasz(points: np.ndarray, labels: np.ndarray) -> float | None:
    """The Calinski-Harabasz score (equation 3 of seed 003): between- over within-cluster
    dispersion, times (n - k) / (k - 1); ``None`` for fewer than two clusters."""
    clusters = np.unique(labels)
    n, k = len(points), len(clusters)
    if k < 2 or k >= n:
        return None
    centre = points.mean(axis=0)
    between = within = 0.0
    for c in clusters:
        members = points[labels == c]
        mean = members.mean(axis=0)
        between += len(members) * float(((mean - centre) ** 2).sum())
        within += float(((members - mean) ** 2).sum())
    if within == 0:
        return float("inf")
    return between / within * (n - k) / (k - 1)
