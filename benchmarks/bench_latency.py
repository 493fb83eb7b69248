"""Decision latency over ZeroMQ with about 1,000 jobs queued (issue 4 target: p99 under 5 ms).

The scheduler runs as a separate process (``batsched-ml serve``) on a loopback port; this script
plays Batsim with the embedded simulator on a synthetic overloaded workload (2,500 jobs submitted
at once on 128 machines, so the queue drains from 2,500 to 0 while jobs complete and EASY
backfills). It times each message from send to reply, as Batsim sees it (serialisation both ways,
transport, one scheduling pass), and reports percentiles over the messages sent while 900 to
1,100 jobs were waiting, and over all messages.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time

import numpy as np
import zmq

from batsched_ml.protocol.codec import dump_message, parse_message
from batsched_ml.protocol.events import ExecuteJob, JobSubmitted
from batsched_ml.sim.simulator import BatsimSimulator


def workload(jobs: int, machines: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    out: dict = {"nb_res": machines, "jobs": [], "profiles": {}}
    for i in range(jobs):
        walltime = rng.choice([60, 600, 3600, 4 * 3600, 24 * 3600])
        delay = max(1, int(walltime * rng.random()))
        res = rng.choice([1, 1, 2, 4, 8, 16, 32, 64])
        out["jobs"].append(
            {"id": i, "subtime": 0, "res": res, "profile": f"d{delay}", "walltime": walltime}
        )
        out["profiles"][f"d{delay}"] = {"type": "delay", "delay": delay}
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(policy: str = "fcfs") -> None:
    machines = 128
    sim = BatsimSimulator([workload(2500, machines)], [f"host{i}" for i in range(machines)])
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batsched_ml",
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--policy",
            policy,
            "--timeout",
            "60",
        ],
        stdout=subprocess.DEVNULL,
    )
    context = zmq.Context.instance()
    req = context.socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")
    latencies: list[float] = []
    queued_at_send: list[int] = []
    waiting = 0
    message = sim.start()
    try:
        while message is not None:
            waiting += sum(isinstance(e, JobSubmitted) for e in message.events)
            text = dump_message(message)
            start = time.perf_counter()
            req.send_string(text)
            reply_text = req.recv()
            latencies.append(time.perf_counter() - start)
            queued_at_send.append(waiting)
            reply = parse_message(reply_text)
            waiting -= sum(isinstance(e, ExecuteJob) for e in reply.events)
            message = sim.step(reply)
    finally:
        req.close()
        server.wait(30)
    lat = np.array(latencies[2:]) * 1000  # skip the start (imports, SIMULATION_BEGINS)
    queued = np.array(queued_at_send[2:])
    band = lat[(queued >= 900) & (queued <= 1100)]
    print(
        f"{policy}: {len(lat):,} messages; with 900-1,100 jobs queued ({len(band)} messages): "
        f"p50 {np.percentile(band, 50):.2f} ms, p99 {np.percentile(band, 99):.2f} ms, "
        f"max {band.max():.2f} ms; all messages: p50 {np.percentile(lat, 50):.2f} ms, "
        f"p99 {np.percentile(lat, 99):.2f} ms"
    )


if __name__ == "__main__":
    for name in sys.argv[1:] or ["fcfs", "wfp"]:
        main(name)
