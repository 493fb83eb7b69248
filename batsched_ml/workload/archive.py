"""The Parallel Workloads Archive's logs that the project knows, and a per-user cache of them.

The registry (:data:`TRACES`) gives, for each log, its machine, size, years, the archive's
sub-folder and file name, and the SHA-256 of its **uncompressed** content: a download is kept
only if its content has that checksum, so a mirror that recompressed the files passes too.

:func:`fetch` downloads a log (with `pooch <https://www.fatiando.org/pooch/>`_) into the cache
folder (:func:`cache_dir`: ``BATSCHED_ML_TRACES_DIR``, else ``$XDG_CACHE_HOME/batsched-ml/traces``
or ``~/.cache/batsched-ml/traces``); ``BATSCHED_ML_TRACES_URL`` replaces the archive's address
(:data:`ARCHIVE_URL`) by a mirror's that keeps the archive's layout
(``l_kth_sp2/KTH-SP2-1996-2.1-cln.swf.gz``). :func:`cached` finds a log by its short name
(``KTH-SP2``) or its full name (``KTH-SP2-1996-2.1-cln``, with or without ``.swf.gz``);
:func:`batsched_ml.workload.shipped.resolve` uses it, so a name is accepted wherever a trace's
path is.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from batsched_ml.errors import UserError

#: The Parallel Workloads Archive (Feitelson, Tsafrir, Krakov, JPDC 2014).
ARCHIVE_URL = "https://www.cs.huji.ac.il/labs/parallel/workload/"
URL_VARIABLE = "BATSCHED_ML_TRACES_URL"
DIR_VARIABLE = "BATSCHED_ML_TRACES_DIR"


class TraceError(UserError):
    """A log that cannot be had: unknown name, download failed, content not the archive's."""


class ChecksumError(TraceError, ValueError):
    """A downloaded log whose uncompressed content has another SHA-256 than the registry's."""


class TraceNotFetched(TraceError, FileNotFoundError):
    """A known log that is not in the cache yet (an ``OSError`` too: a missing file)."""


@dataclass(frozen=True)
class Trace:
    name: str  # short name: KTH-SP2
    file: str  # the archive's file name: KTH-SP2-1996-2.1-cln.swf.gz
    folder: str | None  # the archive's sub-folder: l_kth_sp2 (None: not in the archive)
    machine: str
    jobs: int
    years: str
    max_procs: int | None
    sha256: str  # of the uncompressed .swf
    paper: bool = False  # one of the 2022 paper's five traces
    approx_bytes: int | None = None  # the .gz's size, about

    @property
    def stem(self) -> str:
        """The full name: the file name without ``.swf.gz`` (``KTH-SP2-1996-2.1-cln``)."""
        return self.file.removesuffix(".gz").removesuffix(".swf")

    @property
    def fetchable(self) -> bool:
        return self.folder is not None

    def url(self, base: str | None = None) -> str:
        if self.folder is None:
            raise TraceError(not_fetchable(self))
        return f"{(base or base_url()).rstrip('/')}/{self.folder}/{self.file}"


#: The logs the project knows (facts: header values, job-line counts and checksums of the
#: archive's cleaned versions).
TRACES: tuple[Trace, ...] = (
    Trace(
        "CTC-SP2",
        "CTC-SP2-1996-3.1-cln.swf.gz",
        "l_ctc_sp2",
        "Cornell Theory Center IBM SP2",
        77_222,
        "1996-1997",
        338,
        "8e33a9b597e1ddda2d2164347bac08c9444e1a2620a7947df52f0a1622ec4cde",
        paper=True,
        approx_bytes=1_406_170,
    ),
    Trace(
        "HPC2N",
        "HPC2N-2002-2.2-cln.swf.gz",
        "l_hpc2n",
        "HPC2N (Umeå) Linux cluster",
        202_871,
        "2002-2006",
        240,
        "77b8993c73ae438385f6c0015708251f52dc316267b03ac19a406fbea2802afa",
        paper=True,
        approx_bytes=2_864_623,
    ),
    Trace(
        "KTH-SP2",
        "KTH-SP2-1996-2.1-cln.swf.gz",
        "l_kth_sp2",
        "KTH (Stockholm) IBM SP2",
        28_476,
        "1996-1997",
        100,
        "fba36494c4e4257f72182e8b629ebb0bcb054b3b82851ef957445bd627adcc87",
        paper=True,
        approx_bytes=387_704,
    ),
    Trace(
        "SDSC-BLUE",
        "SDSC-BLUE-2000-4.2-cln.swf.gz",
        "l_sdsc_blue",
        "SDSC Blue Horizon (IBM SP)",
        243_306,
        "2000-2003",
        1152,
        "13892839f430583231a14bb811fd50a31b5b529eb37faacdbbefb71e73390e3e",
        paper=True,
        approx_bytes=3_867_428,
    ),
    Trace(
        "SDSC-SP2",
        "SDSC-SP2-1998-4.2-cln.swf.gz",
        "l_sdsc_sp2",
        "SDSC IBM SP2",
        59_715,
        "1998-2000",
        128,
        "2bb635f4b5793f52bd49ccb8fd913d95f9c5be6346925162cadcaf0117e28cf2",
        paper=True,
        approx_bytes=1_143_524,
    ),
    Trace(
        "CEA-Curie",
        "CEA-Curie-2011-2.1-cln.swf.gz",
        "l_cea_curie",
        "CEA Curie (Bull)",
        312_826,
        "2011-2012",
        93_312,
        "b732a04aea71e2f154c8feee580be549d0bba1462bc91ec581944cb3dd6d442d",
        approx_bytes=3_429_794,
    ),
    Trace(
        "LANL-CM5",
        "LANL-CM5-1994-4.1-cln.swf.gz",
        "l_lanl_cm5",
        "LANL Thinking Machines CM-5",
        122_060,
        "1994-1996",
        1024,
        "4766a62dabcc7403ec0a55534aff297203e692ddbf6637bd40100a3800f6354a",
        approx_bytes=2_033_501,
    ),
    Trace(
        "LLNL-Atlas",
        "LLNL-Atlas-2006-2.1-cln.swf.gz",
        "l_llnl_atlas",
        "LLNL Atlas Linux cluster",
        43_778,
        "2006-2007",
        9216,
        "8b3aaab739fa0bda8abaccc37c207d0b19d9d147b19e7f47a1641133a56fd07f",
        approx_bytes=468_398,
    ),
    Trace(
        "NASA-iPSC",
        "NASA-iPSC-1993-3.1-cln.swf.gz",
        "l_nasa_ipsc",
        "NASA Ames Intel iPSC/860",
        18_239,
        "1993",
        128,
        "9d997a2c20a7f7b0b6d81638d756ce8b2c524c4f2e9ec78da36001743ca33d76",
        approx_bytes=193_754,
    ),
    Trace(
        "OSC-Clust",
        "OSC-Clust-2000-3.1-cln.swf.gz",
        "l_osc_cluster",
        "Ohio Supercomputer Center Linux cluster",
        36_097,
        "2000-2001",
        178,
        "0ed54b81ccb10b11fbead557af8a37dd135e07e27756f1016c80ebceb7c8f79a",
        approx_bytes=505_558,
    ),
    Trace(
        "SDSC-Par",
        "SDSC-Par-1996-3.1-cln.swf.gz",
        "l_sdsc_par",
        "SDSC Intel Paragon",
        32_135,
        "1995-1996",
        400,
        "fcb46fa6462b7ac460963025749f604f28b2e813101edd082a720842e80a7aa8",
        approx_bytes=468_540,
    ),
    Trace(
        "RICC",
        "RICC-2010-2.swf.gz",
        "l_ricc",
        "RIKEN Integrated Cluster of Clusters",
        447_794,
        "2010",
        8192,
        "986a2a12df85adc3c2a2eb80a31b4ff9a056b92637526ee53fb70637b1bf0518",
        approx_bytes=3_429_074,
    ),
    Trace(
        "lublin_256",
        "lublin_256.swf.gz",
        None,  # synthetic (Lublin-Feitelson model, 256 nodes): not in the archive
        "synthetic, Lublin-Feitelson model (256 nodes)",
        10_000,
        "-",
        None,
        "a394ab3d81179ebcf645a1cbd593a60b6dff7f11a510e1e6285c45f43310c962",
        approx_bytes=102_338,
    ),
)


def paper_traces(registry: Iterable[Trace] | None = None) -> list[Trace]:
    return [trace for trace in (TRACES if registry is None else registry) if trace.paper]


def base_url() -> str:
    """The archive's address, or the mirror's of ``BATSCHED_ML_TRACES_URL``."""
    return os.environ.get(URL_VARIABLE) or ARCHIVE_URL


def cache_dir() -> Path:
    """The per-user folder of downloaded logs: ``BATSCHED_ML_TRACES_DIR``, else the platform's
    cache folder (Linux: ``$XDG_CACHE_HOME`` or ``~/.cache``) + ``batsched-ml/traces``."""
    chosen = os.environ.get(DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    if sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        root = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return root / "batsched-ml" / "traces"


def find(name: str, registry: Iterable[Trace] | None = None) -> Trace | None:
    """The log that ``name`` names (short or full name, with or without ``.swf``/``.swf.gz``,
    any case), or ``None``."""
    key = name.lower().removesuffix(".gz").removesuffix(".swf")
    for trace in TRACES if registry is None else registry:
        if key in (trace.name.lower(), trace.stem.lower()):
            return trace
    return None


def lookup(name: str, registry: Iterable[Trace] | None = None) -> Trace:
    """:func:`find`, or a :class:`TraceError` listing the names known."""
    registry = TRACES if registry is None else tuple(registry)
    trace = find(name, registry)
    if trace is None:
        known = ", ".join(t.name for t in registry)
        raise TraceError(f"unknown trace {name!r} (known: {known}; see batsched-ml traces list)")
    return trace


def fetch_hint(trace: Trace) -> str:
    """One line saying how to get ``trace``."""
    if not trace.fetchable:
        return not_fetchable(trace)
    return f"{trace.name} ({trace.stem}) is not downloaded: batsched-ml traces fetch {trace.name}"


def not_fetchable(trace: Trace) -> str:
    return (
        f"{trace.name} is {trace.machine}, not in the Parallel Workloads Archive: put "
        f"{trace.file} into {cache_dir()} yourself"
    )


def cached(name: str, registry: Iterable[Trace] | None = None) -> Path | None:
    """The cached file of the log ``name`` names; ``None`` if ``name`` names no known log and
    no file of the cache; :class:`TraceNotFetched` (one line saying how to fetch it) for a
    known log not downloaded yet."""
    trace = find(name, registry)
    folder = cache_dir()
    if trace is None:
        for candidate in (name, f"{name}.gz", f"{name}.swf.gz"):
            if candidate and (folder / candidate).is_file():
                return folder / candidate
        return None
    path = folder / trace.file
    if path.is_file():
        return path
    raise TraceNotFetched(fetch_hint(trace))


def content_sha256(path: str | Path) -> str:
    """The SHA-256 of a gzipped file's uncompressed content (of the file itself if it is not
    gzipped); :class:`ChecksumError` if the gzip stream is damaged."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as raw:
        magic = raw.read(2)
    try:
        with (gzip.open if magic == b"\x1f\x8b" else open)(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise ChecksumError(f"{Path(path).name}: not a readable gzip file ({exc})") from None
    return digest.hexdigest()


@contextlib.contextmanager
def _quiet_pooch() -> Iterator[None]:
    """Pooch's own log lines (where it downloads to, the file's hash) stay off the terminal:
    the command says what it does itself."""
    import pooch

    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("WARNING")
    try:
        yield
    finally:
        logger.setLevel(level)


def fetch(
    trace: Trace, *, base: str | None = None, folder: Path | None = None, progress: bool = True
) -> tuple[Path, bool]:
    """Download ``trace`` into the cache unless it is there; return its path and whether it
    was downloaded now. The file is kept only if its uncompressed content has the registry's
    SHA-256 (:class:`ChecksumError` otherwise, and nothing is left behind)."""
    import pooch
    import requests

    folder = cache_dir() if folder is None else folder
    target = folder / trace.file
    if target.is_file():
        return target, False
    url = trace.url(base)
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f"{trace.file}.{os.getpid()}.part"  # a fetch of its own per process
    part.unlink(missing_ok=True)
    bar = None
    if progress:
        from tqdm import tqdm

        # a total from the start: pooch asks the bar's truth, which a bar without one refuses
        bar = tqdm(desc=trace.name, total=1, unit="B", unit_scale=True, unit_divisor=1024)
    try:
        with _quiet_pooch():
            pooch.retrieve(
                url,
                known_hash=None,
                fname=part.name,
                path=folder,
                downloader=pooch.HTTPDownloader(
                    progressbar=False if bar is None else bar, timeout=60
                ),
            )
    except requests.RequestException as exc:
        part.unlink(missing_ok=True)
        raise TraceError(f"{trace.name}: cannot download {url}: {_reason(exc)}") from None
    finally:
        if bar is not None:
            bar.close()
    try:
        got = content_sha256(part)
    except ChecksumError as exc:
        part.unlink(missing_ok=True)
        raise ChecksumError(f"{trace.name}: {url} is {exc}: not kept") from None
    if got != trace.sha256:
        part.unlink(missing_ok=True)
        raise ChecksumError(
            f"{trace.name}: the content of {url} has SHA-256 {got[:16]}..., not the archive's "
            f"{trace.sha256[:16]}...: not kept"
        )
    os.replace(part, target)
    return target, True


def _reason(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if response is not None and getattr(response, "status_code", None):
        return f"HTTP {response.status_code} {response.reason or ''}".strip()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024**2:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024**2:.1f} MiB"
