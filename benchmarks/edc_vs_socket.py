"""Batsim 5's library mode against the socket, on the recorded KTH-SP2 slice (easy_kth2000).

The same frames (the recorded Batsim messages of ``tests/data/batsim5-reference/easy_kth2000``,
2,000 jobs under EASY) answered three ways:

* ``library``: the library (``batsched-ml edc-library``) loaded by the C stand-in of Batsim 5
  (``tests/edc_driver.c``: dlopen, the three symbols), which times its calls;
* ``socket``: ``batsched-ml serve`` in its own process, fed over ZeroMQ by a C client that does
  what Batsim 5 does (``benchmarks/edc_socket_client.c``: a REQ socket, the init frame, each
  message sent and its reply awaited; pyzmq's libzmq), which times its calls;
* ``in-process``: :class:`batsched_ml.serving.edc.LibraryRun` called from Python here, the codec and the
  scheduler with no transport at all (what both modes share).

Every mode's replies are checked against the recorded decisions. Printed per mode: the median
of ``--repeat`` runs (3) of the messages' time (the init and hello excluded) and of the start
(from nothing to the hello: Python started in Batsim's process by ``batsim_edc_init``, or
``serve``'s process started and the init frame answered; in-process: the scheduler built, in a
Python already warm), then the ratios. Wall-clock figures: they vary with the machine's load.

    python benchmarks/edc_vs_socket.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batsched_ml.cli.edc_library import library_path  # noqa: E402
from batsched_ml.serving.edc import LibraryRun  # noqa: E402
from tests.test_batsim5 import messages  # noqa: E402
from tests.test_edc_library import (  # noqa: E402
    batsim_frames,
    compile_driver,
    frames_file,
    run_driver,
)

CLIENT = ROOT / "benchmarks" / "edc_socket_client.c"
CASE = "easy_kth2000"
INIT = '{"starvation_threshold": null}'  # the recording's EDC: EASY, no starvation rule


def library(driver: Path, folder: Path, frames: list[bytes]) -> tuple[float, float]:
    code, stderr, outcome = run_driver(driver, library_path(), INIT, frames, folder)
    assert code == 0, stderr
    assert outcome.replies == messages(CASE, "edc->batsim")
    assert outcome.seconds is not None
    init_s, take_s = outcome.seconds
    return take_s, init_s


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def libzmq() -> Path:
    """pyzmq's own libzmq (the wheel bundles it), for the C client."""
    import glob

    folder = Path(zmq.__file__).resolve().parents[1]
    found = sorted(glob.glob(str(folder / "pyzmq.libs" / "libzmq*.so*")))
    if not found:
        raise SystemExit("no libzmq found beside pyzmq (pyzmq.libs/libzmq*.so*)")
    return Path(found[0])


def over_socket(client: Path, folder: Path, frames: list[bytes]) -> tuple[float, float]:
    port = _free_port()
    begun = time.perf_counter()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batsched_ml",
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--timeout",
            "60",
            "--starvation-threshold",
            "none",
            "--protocol",
            "5",
            "-o",
            str(folder / "served"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdout.readline().startswith("listening on"), "serve did not start"
    listening_s = time.perf_counter() - begun
    replies_path = folder / "socket-replies.bin"
    done = subprocess.run(
        [
            str(client),
            str(libzmq()),
            f"tcp://127.0.0.1:{port}",
            INIT,
            str(frames_file(folder / "frames.bin", frames)),
            str(replies_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    server.communicate(timeout=120)
    assert server.returncode == 0
    data = replies_path.read_bytes()
    assert data[:4] == b"\x02\0\0\0"  # JSON
    replies, pos = [], 4
    while pos < len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        replies.append(json.loads(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    assert replies[1:] == messages(CASE, "edc->batsim")
    hello_s, take_s = (float(x) for x in done.stdout.split())
    return take_s, listening_s + hello_s


def in_process(frames: list[bytes]) -> tuple[float, float]:
    started = time.perf_counter()
    run = LibraryRun(INIT)
    run.hello()
    init_s = time.perf_counter() - started
    started = time.perf_counter()
    replies = [run.take_decisions(frame) for frame in frames]
    take_s = time.perf_counter() - started
    assert [json.loads(r) for r in replies] == messages(CASE, "edc->batsim")
    return take_s, init_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    frames = batsim_frames(CASE)
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        driver = compile_driver(folder)
        client = folder / "edc_socket_client"
        subprocess.run(
            ["cc", "-O2", "-o", str(client), str(CLIENT), "-ldl"], check=True, timeout=120
        )
        for i in range(args.repeat):  # interleaved: a load change hits every mode alike
            run_folder = folder / f"run{i}"
            run_folder.mkdir()
            results.setdefault("library", []).append(library(driver, run_folder, frames))
            results.setdefault("socket", []).append(over_socket(client, run_folder, frames))
            results.setdefault("in-process", []).append(in_process(frames))
    print(f"{CASE}: {len(frames)} Batsim messages, median of {args.repeat} runs (min-max)")
    print(f"{'mode':<12} {'messages s':>18} {'per message us':>15} {'start s':>8}")
    medians = {}
    for mode, runs in results.items():
        takes = [r[0] for r in runs]
        take = statistics.median(takes)
        start = statistics.median(r[1] for r in runs)
        medians[mode] = take
        spread = f"({min(takes):.3f}-{max(takes):.3f})"
        print(
            f"{mode:<12} {take:>6.3f} {spread:>11} {take / len(frames) * 1e6:>15.1f} {start:>8.2f}"
        )
    saved = medians["socket"] - medians["library"]
    print(
        f"socket / library: {medians['socket'] / medians['library']:.2f} "
        f"({saved:.3f} s saved, {saved / len(frames) * 1e6:.0f} us per message); "
        f"library / in-process: {medians['library'] / medians['in-process']:.2f}"
    )


if __name__ == "__main__":
    main()
